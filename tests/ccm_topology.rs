//! The real Proxmox cloud controller manager (sergelogvinov's, v0.13.1 from
//! `../shared/tools/proxmox-ccm`, `features.provider: capmox`, what CozyStack runs on its Proxmox
//! nodes) initialises the Node of a machine our controllers provisioned on pve-sim, on the real
//! kube-apiserver — and agrees with us about where it runs.
//!
//! The machine is provisioned by the controllers (in-process, as the other machine tests run
//! them); its NoCloud meta-data is read from the bootstrap ISO while the guest agent is held back.
//! The kubelet's `--node-labels` are the `proxmox-labels` flavor's, rendered by cloud-init's own
//! jinja renderer (`cloud-init devel render`) against that meta-data, as on the node. The Node is
//! created as the kubelet registers it with `--cloud-provider=external` and `--node-ip`: name =
//! the VM's name, `systemUUID` = the VM's SMBIOS uuid, `providerID` = `proxmox://<uuid>` (the
//! flavors' kubelet argument), the `node.cloudprovider.kubernetes.io/uninitialized` taint and the
//! `alpha.kubernetes.io/provided-node-ip` annotation (there is no kubelet here).
//!
//! Checked once the CCM took the taint off: it found the VM (providerID kept), and its
//! `topology.kubernetes.io/region` and `/zone` are exactly the labels the kubelet set from our
//! meta-data (no label fight: the kubelet re-asserts its `--node-labels` on every start), zone =
//! the Proxmox node the VM runs on, region = the Proxmox cluster's name; the instance type is
//! the machine's vCPUs and memory; the addresses are our ProxmoxMachine's. Real kube-apiserver
//! only (the in-tree server has no Nodes).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod machine_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use machine_support::*;
use pve_sim::{EndpointFault, FaultSpec};
use serde_json::{Value, json};

const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// Kills the CCM (by its handle) when the test ends; prints its log's end on failure.
struct Ccm(Child, std::path::PathBuf);

impl Drop for Ccm {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.1).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!(
                "--- CCM log, last lines ---\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The agent answers "not running": the machine waits with its bootstrap ISO attached.
fn agent_held_back() -> FaultSpec {
    FaultSpec {
        endpoints: [
            "GET /nodes/{node}/qemu/{vmid}/agent/get-osinfo",
            "POST /nodes/{node}/qemu/{vmid}/agent/exec",
            "GET /nodes/{node}/qemu/{vmid}/agent/exec-status",
        ]
        .into_iter()
        .map(|ep| EndpointFault {
            endpoint: ep.to_owned(),
            error_rate: 1.0,
            status: 500,
            message: "QEMU guest agent is not running".to_owned(),
            ..Default::default()
        })
        .collect(),
        ..FaultSpec::default()
    }
}

/// The `proxmox-labels` flavor's kubelet `node-labels` (its worker KubeadmConfigTemplate).
fn flavor_node_labels() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/cluster-template-proxmox-labels.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    // Any value for clusterctl's variables: none is in the kubelet arguments.
    let text = capmox::packaging::envsubst::process(&text, &|_| Some("1".into())).unwrap();
    let docs = capmox::packaging::release::documents(&text).unwrap();
    let kct = docs
        .iter()
        .find(|d| d["kind"] == "KubeadmConfigTemplate")
        .expect("a KubeadmConfigTemplate");
    kct["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "node-labels")
        .and_then(|a| a["value"].as_str())
        .expect("a node-labels argument")
        .to_owned()
}

/// Renders `template` (cloud-init jinja) against `meta` the way cloud-init does on the node;
/// without cloud-init, a plain substitution of `{{ ds.meta_data.KEY }}` (one line says so).
fn render(template: &str, meta: &BTreeMap<String, String>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let ud = dir.path().join("user-data");
    std::fs::write(&ud, format!("## template: jinja\n{template}\n")).unwrap();
    let data = dir.path().join("instance-data.json");
    std::fs::write(&data, json!({"ds": {"meta_data": meta}, "v1": {}}).to_string()).unwrap();
    match Command::new("cloud-init")
        .args(["devel", "render"])
        .arg(&ud)
        .arg("-i")
        .arg(&data)
        .output()
    {
        Ok(o) if o.status.success() => String::from_utf8(o.stdout).unwrap().trim().to_owned(),
        Ok(o) => panic!("cloud-init devel render: {}", String::from_utf8_lossy(&o.stderr)),
        Err(_) => {
            eprintln!("cloud-init not found: the flavor's jinja is rendered by a plain substitution");
            let mut out = template.to_owned();
            for (k, v) in meta {
                out = out.replace(&format!("{{{{ ds.meta_data.{k} }}}}"), v);
            }
            out
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxmox_ccm_initialises_our_node_with_the_labels_we_set() {
    let Some(setup) = Some(shared_path("tools/proxmox-ccm/setup.sh")).filter(|p| p.exists()) else {
        eprintln!("skipped: ../shared/tools/proxmox-ccm/setup.sh not found (the real Proxmox CCM)");
        return;
    };
    if testenv::real::binaries_from_env().is_none() {
        eprintln!(
            "skipped: needs the real kube-apiserver (KUBEBUILDER_ASSETS; make test-real): the in-tree server has no Nodes"
        );
        return;
    }
    let unpacked = Command::new(&setup).arg("v0.13.1").output().unwrap();
    if !unpacked.status.success() {
        eprintln!("skipped: {}", String::from_utf8_lossy(&unpacked.stderr).trim());
        return;
    }
    let ccm_binary = String::from_utf8(unpacked.stdout).unwrap().trim().to_owned();

    // A machine provisioned by our controllers; its meta-data read from the ISO on the way.
    let h = Harness::start_with(pve_sim::SimConfig::default(), fast_machine_settings()).await;
    h.sim.state().set_faults(agent_held_back());
    h.create_cluster("ccm", json!({})).await;
    let name = "ccm-worker-0";
    h.create_machine(
        "ccm",
        name,
        false,
        Some((CLOUD_CONFIG, Some("cloud-config"))),
        json!({"numSockets": 2, "numCores": 3, "memoryMiB": 6144}),
    )
    .await;
    let waiting = h
        .wait_pm(name, 90, "waiting for the guest agent", |pm| {
            reason_of(pm).as_deref() == Some("WaitingForCloudInit")
        })
        .await;
    let vmid = u32::try_from(waiting.spec.virtual_machine_id.unwrap()).unwrap();
    let iso = {
        let st = h.sim.state();
        let vol = st
            .file_volumes()
            .into_iter()
            .find(|v| v.volid.ends_with(&format!("user-data-{vmid}.iso")))
            .expect("the bootstrap ISO");
        st.volume_bytes(&st.vm(vmid).unwrap().node, &vol.volid).unwrap()
    };
    let meta_text = pve_sim::iso::read_file(&iso, "meta-data").expect("meta-data on the ISO");
    let meta: BTreeMap<String, String> = serde_saphyr::from_str(&meta_text).unwrap();
    h.sim.state().set_faults(FaultSpec::default());
    let pm = h.wait_provisioned(name, 90).await;
    let vm = h.sim.state().vm(vmid).unwrap();
    let uuid = meta["instance-id"].clone();
    let cluster_name = h.sim.state().with(|c| c.name.clone());
    assert_eq!(
        meta["zone"], vm.node,
        "meta-data zone is the Proxmox node:\n{meta_text}"
    );
    assert_eq!(meta["proxmox_node"], vm.node, "{meta_text}");
    assert_eq!(
        meta["region"], cluster_name,
        "meta-data region is the Proxmox cluster:\n{meta_text}"
    );
    assert_eq!(meta["network_zone"], "default", "{meta_text}");
    assert_eq!(
        pm.spec.provider_id.as_deref(),
        Some(format!("proxmox://{uuid}").as_str())
    );

    // The kubelet's labels, from the flavor and the meta-data.
    let rendered = render(&flavor_node_labels(), &meta);
    let kubelet_labels: BTreeMap<String, String> = rendered
        .split(',')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or_else(|| panic!("{rendered}"));
            (k.to_owned(), v.to_owned())
        })
        .collect();
    assert_eq!(
        kubelet_labels["topology.kubernetes.io/zone"], vm.node,
        "{rendered}"
    );
    assert_eq!(
        kubelet_labels["topology.kubernetes.io/region"], cluster_name,
        "{rendered}"
    );
    assert_eq!(
        kubelet_labels["node.kubernetes.io/network-zone"], "default",
        "{rendered}"
    );
    let addresses: Vec<Value> = serde_json::to_value(&pm.status.as_ref().unwrap().addresses)
        .unwrap()
        .as_array()
        .cloned()
        .unwrap_or_default();
    let internal_ip = addresses
        .iter()
        .find(|a| a["type"] == "InternalIP")
        .and_then(|a| a["address"].as_str())
        .expect("an InternalIP on the ProxmoxMachine")
        .to_owned();

    // The Node as the kubelet registers it.
    let mut labels = kubelet_labels.clone();
    labels.insert("kubernetes.io/hostname".into(), name.into());
    labels.insert("kubernetes.io/os".into(), "linux".into());
    labels.insert("kubernetes.io/arch".into(), "amd64".into());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels,
                     "annotations": {"alpha.kubernetes.io/provided-node-ip": internal_ip}},
        "spec": {"providerID": format!("proxmox://{uuid}"),
                 "taints": [{"key": UNINITIALIZED, "value": "true", "effect": "NoSchedule"}]},
    }))
    .unwrap();
    let nodes: Api<Node> = Api::all(h.client.clone());
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let status = json!({"status": {"nodeInfo": {
        "systemUUID": uuid, "machineID": "", "bootID": "", "kernelVersion": "6.8.0", "osImage": "Ubuntu 24.04",
        "containerRuntimeVersion": "containerd://1.7.0", "kubeletVersion": "v1.33.0", "kubeProxyVersion": "",
        "operatingSystem": "linux", "architecture": "amd64"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "stand-in",
                        "lastHeartbeatTime": chrono::Utc::now().to_rfc3339(),
                        "lastTransitionTime": chrono::Utc::now().to_rfc3339()}]}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();

    // The CCM, as CozyStack configures it: capmox provider IDs, region = the Proxmox cluster name.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cloud-config.yaml");
    std::fs::write(
        &config,
        format!(
            "features:\n  provider: capmox\nclusters:\n  - url: {}/api2/json\n    insecure: true\n    token_id: \"{}\"\n    token_secret: \"{}\"\n    region: {cluster_name}\n",
            h.sim.url(),
            h.sim.token_id(),
            h.sim.token_secret()
        ),
    )
    .unwrap();
    let log = dir.path().join("ccm.log");
    let _ccm = Ccm(
        Command::new(&ccm_binary)
            .arg(format!("--kubeconfig={}", h.env.kubeconfig_path().display()))
            .arg(format!("--cloud-config={}", config.display()))
            .arg("--controllers=cloud-node,cloud-node-lifecycle")
            .arg("--leader-elect=false")
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={}", free_port()))
            .arg(format!("--cert-dir={}", dir.path().display()))
            .arg("--authorization-always-allow-paths=/healthz,/livez,/readyz,/metrics")
            .arg("--v=4")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
        log,
    );
    // The taint goes with the labels; the addresses follow in a status update of their own.
    let initialised = testenv::wait_for(
        90,
        "the CCM to initialise the Node (taint removed, addresses set)",
        || {
            let nodes = nodes.clone();
            async move {
                let n = nodes.get(name).await.ok()?;
                let tainted = n
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED));
                let addressed = n
                    .status
                    .as_ref()
                    .and_then(|s| s.addresses.as_ref())
                    .is_some_and(|a| !a.is_empty());
                (!tainted && addressed).then_some(n)
            }
        },
    )
    .await;

    let got = initialised.labels();
    assert_eq!(
        initialised.spec.as_ref().unwrap().provider_id.as_deref(),
        Some(format!("proxmox://{uuid}").as_str()),
        "the CCM keeps our provider ID"
    );
    for (k, v) in &kubelet_labels {
        assert_eq!(
            got.get(k),
            Some(v),
            "{k}: the kubelet's value was changed: {got:?}"
        );
    }
    assert_eq!(got["topology.kubernetes.io/zone"], vm.node, "{got:?}");
    assert_eq!(got["topology.kubernetes.io/region"], cluster_name, "{got:?}");
    assert_eq!(got["topology.proxmox.sinextra.dev/zone"], vm.node, "{got:?}");
    assert_eq!(
        got["topology.proxmox.sinextra.dev/region"], cluster_name,
        "{got:?}"
    );
    // 2 sockets × 3 cores, 6 GiB: what the machine spec asked for.
    assert_eq!(got["node.kubernetes.io/instance-type"], "6VCPU-6GB", "{got:?}");
    let node_addresses: Vec<(String, String)> = initialised
        .status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|a| (a.type_, a.address))
        .collect();
    assert!(
        node_addresses.contains(&("InternalIP".into(), internal_ip.clone()))
            && node_addresses.contains(&("Hostname".into(), name.into())),
        "Node addresses {node_addresses:?}, ProxmoxMachine addresses {addresses:?}"
    );
    for (ty, addr) in &node_addresses {
        assert!(
            addresses
                .iter()
                .any(|a| a["type"] == ty.as_str() && a["address"] == addr.as_str())
                || (ty == "Hostname" && addr == name),
            "the CCM reports {ty} {addr}, which the ProxmoxMachine does not: {addresses:?}"
        );
    }
    eprintln!(
        "Proxmox CCM v0.13.1 initialised {name}: region {cluster_name}, zone {}, instance type {}, addresses {node_addresses:?}",
        vm.node, got["node.kubernetes.io/instance-type"]
    );
    drop(_ccm);
    h.stop().await;
}

fn shared_path(rel: &str) -> std::path::PathBuf {
    std::env::var_os("CAPMOX_SHARED_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"))
        .join(rel)
}
