//! `clusterctl move` with the real clusterctl between two management clusters that manage the same
//! Proxmox (one pve-sim): each a real kube-apiserver with the real CAPI core manager (v1.13.4)
//! and our manager, as [`super::rig`] starts them.
//!
//! A cluster — a ProxmoxCluster with a `credentialsRef` Secret, a control-plane and a worker
//! Machine with their ProxmoxMachines and bootstrap Secrets — is provisioned in the source; its
//! "workload cluster" is the source's own API server (the `<cluster>-kubeconfig` Secret points
//! there, and the test registers a Node per Machine with its provider ID), so CAPI sets every
//! Machine's `nodeRef` and initializes the control plane: what `clusterctl move` requires. The
//! CRDs carry the label `clusterctl init` puts on what it installs (the only part of `init` the
//! test plays: `move` discovers kinds by it; CAIP's pool CRD also gets its `move-hierarchy`).
//!
//! Then `clusterctl move --namespace … --to-kubeconfig …`. Checked: the source namespace is
//! empty, the credentials Secret moved with its `clusterctl.cluster.x-k8s.io/move` label; in the
//! target every machine becomes provisioned again on the same VM (same VMID, providerID and
//! address) with its Machine's node, and Proxmox saw not one write from the move on (every VM
//! exactly once); deleting the Cluster in the target leaves no VM, ISO, claim or Proxmox object.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::checks::{self, api};
use super::objects::Capi;
use super::rig::Rig;
use super::shared_dir;

const NS: &str = "move-demo";
const CLUSTER: &str = "move-demo";
const CAPI_AV: &str = "cluster.x-k8s.io/v1beta2";
const INFRA_AV: &str = "infrastructure.cluster.x-k8s.io/v1alpha2";
const IPAM_AV: &str = "ipam.cluster.x-k8s.io/v1beta2";
const POOL_AV: &str = "ipam.cluster.x-k8s.io/v1alpha2";
const CREDENTIALS: &str = "move-demo-proxmox";
/// The machines: name, control plane.
const MACHINES: [(&str, bool); 2] = [("move-demo-cp-0", true), ("move-demo-w-0", false)];

/// The real clusterctl of `capi`'s release, or `None` after one line saying what is missing.
pub fn clusterctl(capi: Capi) -> Option<PathBuf> {
    let setup = shared_dir().join("tools/clusterctl/setup.sh");
    if !setup.exists() {
        eprintln!("skipped: {} not found (the real clusterctl)", setup.display());
        return None;
    }
    let out = Command::new(&setup).arg(capi.release).output().ok()?;
    if !out.status.success() {
        eprintln!("skipped: {}", String::from_utf8_lossy(&out.stderr).trim());
        return None;
    }
    Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// Polls `f` every 250 ms for up to `secs` seconds; `None` on timeout.
async fn poll<T, F, Fut>(secs: u64, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn get(client: &kube::Client, av: &str, kind: &str, name: &str) -> Option<Value> {
    let o = api(client, NS, av, kind).get_opt(name).await.ok()??;
    serde_json::to_value(o).ok()
}

async fn list(client: &kube::Client, av: &str, kind: &str) -> Vec<Value> {
    api(client, NS, av, kind)
        .list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter_map(|o| serde_json::to_value(o).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// What `clusterctl init` labels the components it installs with (and CAIP's pool CRDs'
/// `move-hierarchy`): the Cluster API, IPAM and Proxmox CRDs of `client`'s control plane.
async fn label_crds(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds.list(&ListParams::default()).await.unwrap().items {
        if !crd.spec.group.ends_with("cluster.x-k8s.io") {
            continue;
        }
        let mut labels = json!({"clusterctl.cluster.x-k8s.io": ""});
        if crd.spec.names.kind.ends_with("InClusterIPPool") {
            labels["clusterctl.cluster.x-k8s.io/move-hierarchy"] = json!("");
        }
        let name = crd.metadata.name.clone().unwrap_or_default();
        crds.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": labels}})),
        )
        .await
        .unwrap();
    }
}

async fn create(client: &kube::Client, obj: Value) -> Value {
    let created = checks::create(client, &obj)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    serde_json::to_value(created).unwrap()
}

/// The source's objects; the workload cluster's kubeconfig is the source API server's own.
async fn create_cluster(rig: &Rig) {
    let client = &rig.client;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let labels = json!({"cluster.x-k8s.io/cluster-name": CLUSTER});
    let kubeconfig = std::fs::read_to_string(rig.env.kubeconfig_path()).unwrap();
    create(
        client,
        json!({"apiVersion": "v1", "kind": "Secret", "type": "cluster.x-k8s.io/secret",
        "metadata": {"name": format!("{CLUSTER}-kubeconfig"), "namespace": NS, "labels": labels},
        "stringData": {"value": kubeconfig}}),
    )
    .await;
    create(
        client,
        json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": CREDENTIALS, "namespace": NS},
        "stringData": {"url": rig.sim.url(), "token": rig.sim.token_id(), "secret": rig.sim.token_secret()}}),
    )
    .await;
    create(client, json!({"apiVersion": CAPI_AV, "kind": "Cluster",
        "metadata": {"name": CLUSTER, "namespace": NS, "labels": labels},
        "spec": {"clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}},
                 "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ProxmoxCluster", "name": CLUSTER}}}))
    .await;
    create(
        client,
        json!({"apiVersion": INFRA_AV, "kind": "ProxmoxCluster",
        "metadata": {"name": CLUSTER, "namespace": NS, "labels": labels},
        "spec": {"controlPlaneEndpoint": {"host": "10.30.0.5", "port": 6443},
                 "ipv4Config": {"addresses": ["10.30.0.10-10.30.0.50"], "prefix": 24, "gateway": "10.30.0.1"},
                 "dnsServers": ["10.30.0.1"], "credentialsRef": {"name": CREDENTIALS}}}),
    )
    .await;
    for (name, cp) in MACHINES {
        let mut mlabels = labels.clone();
        if cp {
            mlabels["cluster.x-k8s.io/control-plane"] = json!("");
        }
        // A linked clone and no guest checks: the manager waits at production pace.
        create(client, json!({"apiVersion": INFRA_AV, "kind": "ProxmoxMachine",
            "metadata": {"name": name, "namespace": NS, "labels": mlabels},
            "spec": {"sourceNode": "pve1", "templateID": 100, "full": false, "numSockets": 1, "numCores": 2,
                     "memoryMiB": 2048, "checks": {"skipQemuGuestAgent": true},
                     "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "model": "virtio", "defaultIPv4": true}]}}}))
        .await;
        let bootstrap = format!("{name}-bootstrap");
        let machine = create(client, json!({"apiVersion": CAPI_AV, "kind": "Machine",
            "metadata": {"name": name, "namespace": NS, "labels": mlabels,
                         "annotations": {"machine.cluster.x-k8s.io/exclude-node-draining": "",
                                         "machine.cluster.x-k8s.io/exclude-wait-for-node-volume-detach": ""}},
            "spec": {"clusterName": CLUSTER, "version": "v1.33.0", "bootstrap": {"dataSecretName": bootstrap},
                     "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ProxmoxMachine", "name": name}}}))
        .await;
        // Owned by its Machine, as a bootstrap provider's Secret is (through its config): moved with it.
        create(
            client,
            json!({"apiVersion": "v1", "kind": "Secret", "type": "cluster.x-k8s.io/secret",
            "metadata": {"name": bootstrap, "namespace": NS, "labels": labels,
                         "ownerReferences": [{"apiVersion": CAPI_AV, "kind": "Machine", "name": name,
                                              "uid": machine["metadata"]["uid"]}]},
            "stringData": {"value": format!("#cloud-config\nhostname: {name}\n"), "format": "cloud-config"}}),
        )
        .await;
    }
}

/// One machine as it must survive the move.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Kept {
    vmid: i64,
    provider_id: String,
    address: String,
}

fn kept(pm: &Value) -> Option<Kept> {
    let address = pm["status"]["addresses"]
        .as_array()?
        .iter()
        .find(|a| a["type"] == "InternalIP")?["address"]
        .as_str()?
        .to_owned();
    Some(Kept {
        vmid: pm["spec"]["virtualMachineID"].as_i64()?,
        provider_id: pm["spec"]["providerID"].as_str()?.to_owned(),
        address,
    })
}

fn provisioned(pm: &Value) -> bool {
    pm["status"]["initialization"]["provisioned"] == true
}

/// Every machine provisioned with its node registered and its Machine's `nodeRef`, the control
/// plane initialized, no ISO left or attached: the machines as kept, or `None` while not there yet.
async fn settled(client: &kube::Client, sim: &pve_sim::SimServer) -> Option<BTreeMap<String, Kept>> {
    let cluster = get(client, CAPI_AV, "Cluster", CLUSTER).await?;
    let infrastructure = cluster["status"]["initialization"]["infrastructureProvisioned"] == true;
    let initialized = infrastructure
        && cluster["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "ControlPlaneInitialized" && c["status"] == "True");
    // The bootstrap ISOs deleted and detached from the VMs (the last writes of a provisioning).
    let detached = sim.state().with(|c| {
        c.vms.values().filter(|vm| !vm.is_template()).all(|vm| {
            let has = |k: &str, what: &str| vm.config.get(k).is_some_and(|v| v.contains(what));
            !has("ide0", "user-data-") && !has("tags", "cloud-init")
        })
    });
    if !initialized || !detached || !checks::isos(sim).is_empty() {
        return None;
    }
    let mut out = BTreeMap::new();
    for (name, _) in MACHINES {
        let pm = get(client, INFRA_AV, "ProxmoxMachine", name).await?;
        let m = get(client, CAPI_AV, "Machine", name).await?;
        if !provisioned(&pm) || m["status"]["nodeRef"]["name"].as_str().is_none() {
            return None;
        }
        out.insert(name.to_owned(), kept(&pm)?);
    }
    Some(out)
}

/// Registers a Node per Machine in the "workload cluster" (the source's API server) with the
/// Machine's provider ID, once CAPI copied it.
async fn register_nodes(rig: &Rig) -> Result<(), String> {
    for (name, _) in MACHINES {
        let provider_id = poll(120, || async {
            let m = get(&rig.client, CAPI_AV, "Machine", name).await?;
            m["spec"]["providerID"].as_str().map(str::to_owned)
        })
        .await
        .ok_or_else(|| format!("Machine {name} got no providerID within 120 s"))?;
        let node: Node =
            serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"providerID": provider_id}}))
                .unwrap();
        Api::<Node>::all(rig.client.clone())
            .create(&PostParams::default(), &node)
            .await
            .map_err(|e| format!("registering Node {name}: {e}"))?;
    }
    Ok(())
}

/// Proxmox requests that change something (no read, no guest agent) since `before`.
fn writes_since(sim: &pve_sim::SimServer, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    sim.state()
        .request_counts()
        .into_iter()
        .filter(|(k, _)| !k.starts_with("GET ") && !k.contains("/agent/"))
        .filter_map(|(k, v)| {
            let d = v - before.get(&k).copied().unwrap_or(0);
            (d > 0).then_some((k, d))
        })
        .collect()
}

fn run_move(bin: &Path, source: &Path, target: &Path, home: &Path) -> Result<String, String> {
    let out = Command::new(bin)
        .args(["move", "--namespace", NS, "--kubeconfig"])
        .arg(source)
        .arg("--to-kubeconfig")
        .arg(target)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("CLUSTERCTL_DISABLE_VERSIONCHECK", "true")
        .output()
        .map_err(|e| format!("running clusterctl move: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("clusterctl move failed: {text}"))
    }
}

/// What is left of the cluster in a control plane: `kind/name` of every object of these kinds
/// in the namespace, and with `secrets` the cluster's Secrets.
async fn leftovers(client: &kube::Client, secrets: bool) -> Vec<String> {
    let mut out = Vec::new();
    for (av, kind) in [
        (CAPI_AV, "Cluster"),
        (CAPI_AV, "Machine"),
        (INFRA_AV, "ProxmoxCluster"),
        (INFRA_AV, "ProxmoxMachine"),
        (IPAM_AV, "IPAddressClaim"),
        (IPAM_AV, "IPAddress"),
        (POOL_AV, "InClusterIPPool"),
    ] {
        out.extend(
            checks::names(client, NS, av, kind)
                .await
                .into_iter()
                .map(|n| format!("{kind}/{n}")),
        );
    }
    let api: Api<Secret> = Api::namespaced(client.clone(), NS);
    if !secrets {
        return out;
    }
    if let Ok(l) = api.list(&ListParams::default()).await {
        out.extend(
            l.items
                .into_iter()
                .filter_map(|s| s.metadata.name)
                .filter(|n| n.starts_with(CLUSTER))
                .map(|n| format!("Secret/{n}")),
        );
    }
    out
}

/// The whole move; the failed checks.
pub async fn clusterctl_move(rig: &Rig, capi: Capi, bin: &Path) -> Vec<String> {
    let started = Instant::now();
    let mut failures = Vec::new();
    let target = rig.start_target(capi).await;
    label_crds(&rig.client).await;
    label_crds(&target.client).await;
    eprintln!("e2e move: target up ({:.1} s)", started.elapsed().as_secs_f64());

    create_cluster(rig).await;
    if let Err(e) = register_nodes(rig).await {
        target.stop().await;
        return vec![e];
    }
    let Some(before) = poll(180, || settled(&rig.client, &rig.sim)).await else {
        let pms = list(&rig.client, INFRA_AV, "ProxmoxMachine").await;
        target.stop().await;
        return vec![format!(
            "the source cluster did not settle within 180 s (machines provisioned, nodes joined, ISOs gone): {pms:?}"
        )];
    };
    let vms = checks::vms(&rig.sim, "");
    let counts = rig.sim.state().request_counts();
    eprintln!(
        "e2e move: source settled with {before:?} on VMs {vms:?} ({:.1} s)",
        started.elapsed().as_secs_f64()
    );

    let home = rig.logs.path().join("clusterctl-home");
    std::fs::create_dir_all(&home).unwrap();
    // clusterctl refuses to start while it reads anything as still provisioning (its own view of
    // the Machines and the Cluster may lag the one above by a moment): that refusal moved
    // nothing, and is retried for a while.
    let mut moved = Err(String::new());
    for _ in 0..10 {
        moved = tokio::task::block_in_place(|| {
            run_move(
                bin,
                rig.env.kubeconfig_path(),
                target.env.kubeconfig_path(),
                &home,
            )
        });
        match &moved {
            Err(e) if e.contains("cannot start the move operation") => {
                eprintln!("e2e move: clusterctl refused to start, again in 3 s: {e}");
                tokio::time::sleep(Duration::from_secs(3)).await;
            }
            _ => break,
        }
    }
    match moved {
        Ok(text) => eprintln!(
            "e2e move: clusterctl move done ({:.1} s): {}",
            started.elapsed().as_secs_f64(),
            text.lines().last().unwrap_or_default()
        ),
        Err(e) => {
            target.stop().await;
            return vec![e];
        }
    }

    let left = leftovers(&rig.client, true).await;
    if !left.is_empty() {
        failures.push(format!("left in the source after the move: {left:?}"));
    }
    match poll(180, || settled(&target.client, &rig.sim)).await {
        Some(after) if after == before => {}
        Some(after) => failures.push(format!(
            "machines changed in the move: before {before:?}, after {after:?}"
        )),
        None => failures.push(format!(
            "the target did not settle within 180 s: {:?}",
            list(&target.client, INFRA_AV, "ProxmoxMachine").await
        )),
    }
    eprintln!(
        "e2e move: target settled ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    if checks::vms(&rig.sim, "") != vms {
        failures.push(format!(
            "VMs changed: before {vms:?}, after {:?}",
            checks::vms(&rig.sim, "")
        ));
    }
    let writes = writes_since(&rig.sim, &counts);
    if !writes.is_empty() {
        failures.push(format!("Proxmox writes since the move: {writes:?}"));
    }
    let secret = Api::<Secret>::namespaced(target.client.clone(), NS)
        .get_opt(CREDENTIALS)
        .await
        .ok()
        .flatten();
    let labelled = secret.as_ref().is_some_and(|s| {
        s.metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key("clusterctl.cluster.x-k8s.io/move"))
    });
    if !labelled {
        failures.push(format!("the credentials Secret in the target: {secret:?}"));
    }

    // Deleting the cluster in the target leaves nothing (no garbage collector: played).
    api(&target.client, NS, CAPI_AV, "Cluster")
        .delete(CLUSTER, &DeleteParams::background())
        .await
        .unwrap();
    let kinds: Vec<(String, &str)> = vec![
        (INFRA_AV.into(), "ProxmoxMachine"),
        (IPAM_AV.into(), "IPAddressClaim"),
        (IPAM_AV.into(), "IPAddress"),
        (POOL_AV.into(), "InClusterIPPool"),
        ("v1".into(), "Secret"),
    ];
    let gone = poll(180, || async {
        checks::collect_garbage(&target.client, NS, &kinds).await;
        (leftovers(&target.client, false).await.is_empty()
            && checks::vms(&rig.sim, "").is_empty()
            && checks::isos(&rig.sim).is_empty())
        .then_some(())
    })
    .await;
    if gone.is_none() {
        failures.push(format!(
            "180 s after deleting the Cluster in the target: left {:?}, VMs {:?}, ISOs {:?}",
            leftovers(&target.client, false).await,
            checks::vms(&rig.sim, ""),
            checks::isos(&rig.sim)
        ));
    } else {
        eprintln!(
            "e2e move: deleted in the target, nothing left ({:.1} s)",
            started.elapsed().as_secs_f64()
        );
    }
    target.stop().await;
    failures
}
