//! CozyStack's tenant node group on the real CAPI v1.10.2, with Kamaji's control plane played by
//! the test.
//!
//! The objects are shaped like CozyStack's `kubernetes` app renders them for a node group
//! (`cluster.x-k8s.io/v1beta1`, refs with `apiVersion` and `namespace`), on the Proxmox kinds in
//! `v1alpha1`: a Cluster whose `controlPlaneRef` is a `KamajiControlPlane`
//! (`controlplane.cluster.x-k8s.io/v1alpha1`, Kamaji ≤ v0.19) and whose ProxmoxCluster has
//! `externalManagedControlPlane: true` and no endpoint; a ProxmoxMachineTemplate named with a
//! content hash; a MachineDeployment without `replicas` (the autoscaler annotations give the
//! size), a bootstrap Secret with only `value` (what the Talos bootstrap provider writes), and a
//! MachineHealthCheck.
//!
//! The KamajiControlPlane CRD is a schema-less stand-in with the contract label; the test does
//! what Kamaji's CAPI provider v0.19 does (clastix/cluster-api-control-plane-provider-kamaji,
//! `controllers/kamajicontrolplane_controller.go` and `…_cluster_patch.go`): once the Cluster
//! owns the KamajiControlPlane it writes the tenant's endpoint into `spec.controlPlaneEndpoint`,
//! merge-patches the same `{host, port}` into the ProxmoxCluster's spec (through the ref's
//! apiVersion), waits for `Cluster.spec.controlPlaneEndpoint.host` and
//! `Cluster.status.infrastructureReady`, sets `status.initialized`, writes the `<cluster>-kubeconfig`
//! and `<cluster>-ca` Secrets, then `status.ready` with the replica counts and `version`.
//!
//! Checked: our ProxmoxCluster takes the endpoint and becomes ready so CAPI copies it to the
//! Cluster (the deadlock Kamaji relies on the infrastructure cluster to break), the control plane
//! counts as initialized, the MachineDeployment's two Machines are `Provisioned` with our provider
//! IDs on two VMs, the endpoint Kamaji wrote is still there unchanged, and deleting the Cluster
//! leaves no VM.

use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::capi::phase;
use super::checks::{self, api};
use super::rig::Rig;

const NS: &str = "tenant-kamaji";
const CLUSTER: &str = "kubernetes-demo";
const KCP_AV: &str = "controlplane.cluster.x-k8s.io/v1alpha1";
const CAPI_AV: &str = "cluster.x-k8s.io/v1beta1";
const INFRA_AV: &str = "infrastructure.cluster.x-k8s.io/v1alpha1";
/// The tenant API server's address as Kamaji publishes it behind an ingress (host:443).
const ENDPOINT_HOST: &str = "kubernetes-demo.tenant.example.org";
const ENDPOINT_PORT: i64 = 443;
/// CozyStack names worker templates `<release>-<group>-<hash>`.
const TEMPLATE: &str = "kubernetes-demo-md0-5f7c9d2a1b";
const MD: &str = "kubernetes-demo-md0";

/// The stand-in CRD of `KamajiControlPlane` v1alpha1 (Kamaji ≤ v0.19), with the contract label
/// CAPI v1.10 resolves the reference by.
fn kamaji_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "kamajicontrolplanes.controlplane.cluster.x-k8s.io",
                     "labels": {"cluster.x-k8s.io/v1beta1": "v1alpha1"}},
        "spec": {"group": "controlplane.cluster.x-k8s.io", "scope": "Namespaced",
                 "names": {"kind": "KamajiControlPlane", "listKind": "KamajiControlPlaneList",
                           "plural": "kamajicontrolplanes", "singular": "kamajicontrolplane"},
                 "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                               "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object",
                                          "x-kubernetes-preserve-unknown-fields": true}}}]},
    }))
    .unwrap()
}

fn labels() -> Value {
    json!({"cluster.x-k8s.io/cluster-name": CLUSTER})
}

/// The tenant's objects, in the order CozyStack's chart renders them.
fn objects() -> Vec<Value> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    vec![
        json!({"apiVersion": INFRA_AV, "kind": "ProxmoxCluster",
               "metadata": {"name": CLUSTER, "namespace": NS, "labels": labels()},
               "spec": {"externalManagedControlPlane": true,
                        "allowedNodes": ["pve1", "pve2", "pve3"],
                        "dnsServers": ["10.30.0.1"],
                        "ipv4Config": {"addresses": ["10.30.0.10-10.30.0.50"], "prefix": 24, "gateway": "10.30.0.1"}}}),
        json!({"apiVersion": KCP_AV, "kind": "KamajiControlPlane",
               "metadata": {"name": CLUSTER, "namespace": NS, "labels": labels(),
                            "annotations": {"kamaji.clastix.io/kubeconfig-secret-key": "super-admin.svc"}},
               "spec": {"replicas": 2, "version": "1.32.4", "dataStoreName": "default",
                        "addons": {"coreDNS": {}, "konnectivity": {}},
                        "kubelet": {"cgroupfs": "systemd", "preferredAddressTypes": ["InternalIP", "ExternalIP"]},
                        "network": {"serviceType": "ClusterIP",
                                    "ingress": {"hostname": format!("{ENDPOINT_HOST}:{ENDPOINT_PORT}"),
                                                "className": "tenant-root"}}}}),
        json!({"apiVersion": CAPI_AV, "kind": "Cluster",
               "metadata": {"name": CLUSTER, "namespace": NS, "labels": labels()},
               "spec": {"clusterNetwork": {"pods": {"cidrBlocks": ["10.243.0.0/16"]}},
                        "controlPlaneRef": {"apiVersion": KCP_AV, "kind": "KamajiControlPlane",
                                            "name": CLUSTER, "namespace": NS},
                        "infrastructureRef": {"apiVersion": INFRA_AV, "kind": "ProxmoxCluster",
                                              "name": CLUSTER, "namespace": NS}}}),
        json!({"apiVersion": INFRA_AV, "kind": "ProxmoxMachineTemplate",
               "metadata": {"name": TEMPLATE, "namespace": NS, "labels": labels()},
               "spec": {"template": {"spec": {
                   "sourceNode": "pve2", "templateID": 101, "full": true, "format": "qcow2",
                   "numSockets": 1, "numCores": 2, "memoryMiB": 2048,
                   "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20}},
                   "network": {"default": {"bridge": "vmbr0", "model": "virtio"}},
                   "checks": {"skipQemuGuestAgent": true, "skipCloudInitStatus": true},
                   "metadataSettings": {"providerIDInjection": true}}}}}),
        // What the Talos bootstrap provider writes: `value` only, no `format`.
        json!({"apiVersion": "v1", "kind": "Secret", "type": "cluster.x-k8s.io/secret",
               "metadata": {"name": format!("{MD}-bootstrap"), "namespace": NS, "labels": labels()},
               "data": {"value": b64("version: v1alpha1\nmachine:\n  type: worker\n")}}),
        json!({"apiVersion": CAPI_AV, "kind": "MachineDeployment",
               "metadata": {"name": MD, "namespace": NS, "labels": labels(),
                            "annotations": {
                                "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "2",
                                "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "3",
                                "capacity.cluster-autoscaler.kubernetes.io/memory": "2048Mi",
                                "capacity.cluster-autoscaler.kubernetes.io/cpu": "2"}},
               "spec": {"clusterName": CLUSTER,
                        "selector": {"matchLabels": {"cluster.x-k8s.io/cluster-name": CLUSTER,
                                                     "cluster.x-k8s.io/deployment-name": MD}},
                        "template": {"metadata": {"labels": {"cluster.x-k8s.io/cluster-name": CLUSTER,
                                                             "cluster.x-k8s.io/deployment-name": MD}},
                                     "spec": {"clusterName": CLUSTER, "version": "v1.32.4",
                                              "bootstrap": {"dataSecretName": format!("{MD}-bootstrap")},
                                              "infrastructureRef": {"apiVersion": INFRA_AV,
                                                                    "kind": "ProxmoxMachineTemplate",
                                                                    "name": TEMPLATE, "namespace": NS}}}}}),
        json!({"apiVersion": CAPI_AV, "kind": "MachineHealthCheck",
               "metadata": {"name": MD, "namespace": NS, "labels": labels()},
               "spec": {"clusterName": CLUSTER, "maxUnhealthy": "100%", "nodeStartupTimeout": "30m",
                        "selector": {"matchLabels": {"cluster.x-k8s.io/cluster-name": CLUSTER,
                                                     "cluster.x-k8s.io/deployment-name": MD}},
                        "unhealthyConditions": [
                            {"type": "Ready", "status": "Unknown", "timeout": "300s"},
                            {"type": "Ready", "status": "False", "timeout": "300s"}]}}),
    ]
}

async fn get(client: &kube::Client, av: &str, kind: &str, name: &str) -> Option<Value> {
    let o = api(client, NS, av, kind).get_opt(name).await.ok()??;
    serde_json::to_value(o).ok()
}

/// Polls `f` every 200 ms for up to `secs` seconds.
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
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One line per object, for failure messages.
async fn state(client: &kube::Client) -> String {
    let mut s = String::new();
    if let Some(c) = get(client, CAPI_AV, "Cluster", CLUSTER).await {
        s += &format!(
            "\n  Cluster: endpoint {}, infrastructureReady {}, controlPlaneReady {}, conditions {}",
            c["spec"]["controlPlaneEndpoint"],
            c["status"]["infrastructureReady"],
            c["status"]["controlPlaneReady"],
            c["status"]["conditions"]
        );
    }
    if let Some(p) = get(client, INFRA_AV, "ProxmoxCluster", CLUSTER).await {
        s += &format!(
            "\n  ProxmoxCluster: endpoint {}, ready {}, conditions {}",
            p["spec"]["controlPlaneEndpoint"], p["status"]["ready"], p["status"]["conditions"]
        );
    }
    for kind in ["MachineSet", "Machine"] {
        let list = api(client, NS, CAPI_AV, kind).list(&ListParams::default()).await;
        for o in list.map(|l| l.items).unwrap_or_default() {
            let v = serde_json::to_value(o).unwrap_or_default();
            s += &format!(
                "\n  {kind} {}: phase {:?}, providerID {}, conditions {}",
                v["metadata"]["name"],
                phase(&v),
                v["spec"]["providerID"],
                v["status"]["conditions"]
            );
        }
    }
    s
}

/// Runs the tenant; the failed checks.
pub async fn tenant_node_group(rig: &Rig) -> Vec<String> {
    let client = &rig.client;
    let started = Instant::now();
    let mut failures = Vec::new();
    rig.env.install_crds(vec![kamaji_crd()]).await.unwrap();
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    for obj in objects() {
        if let Err(e) = checks::create(client, &obj).await {
            return vec![e];
        }
    }
    eprintln!(
        "e2e kamaji: created the tenant's Cluster, KamajiControlPlane, ProxmoxCluster, template, MachineDeployment and MachineHealthCheck"
    );

    // Kamaji: wait for the Cluster's ownership, then publish the endpoint.
    let kcps = api(client, NS, KCP_AV, "KamajiControlPlane");
    let owned = poll(120, || async {
        let k = get(client, KCP_AV, "KamajiControlPlane", CLUSTER).await?;
        k["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|o| o.iter().any(|r| r["kind"] == "Cluster"))
            .then_some(())
    })
    .await;
    if owned.is_none() {
        return vec![format!(
            "CAPI did not take ownership of the KamajiControlPlane within 120 s:{}",
            state(client).await
        )];
    }
    let endpoint = json!({"host": ENDPOINT_HOST, "port": ENDPOINT_PORT});
    kcps.patch(
        CLUSTER,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"controlPlaneEndpoint": endpoint}})),
    )
    .await
    .unwrap();
    let cluster = get(client, CAPI_AV, "Cluster", CLUSTER).await.unwrap_or_default();
    let infra_av = cluster["spec"]["infrastructureRef"]["apiVersion"]
        .as_str()
        .unwrap_or(INFRA_AV)
        .to_owned();
    api(client, NS, &infra_av, "ProxmoxCluster")
        .patch(
            CLUSTER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"controlPlaneEndpoint": endpoint}})),
        )
        .await
        .unwrap();
    eprintln!(
        "e2e kamaji: Kamaji (played) wrote the endpoint {ENDPOINT_HOST}:{ENDPOINT_PORT} into the KamajiControlPlane and the ProxmoxCluster ({infra_av})"
    );

    // Kamaji waits for the Cluster's endpoint and infrastructure: that is CAPI's and ours.
    let ready = poll(120, || async {
        let c = get(client, CAPI_AV, "Cluster", CLUSTER).await?;
        (c["spec"]["controlPlaneEndpoint"]["host"] == ENDPOINT_HOST
            && c["spec"]["controlPlaneEndpoint"]["port"] == ENDPOINT_PORT
            && c["status"]["infrastructureReady"] == true)
            .then_some(())
    })
    .await;
    if ready.is_none() {
        return vec![format!(
            "within 120 s the Cluster did not get the endpoint from the ProxmoxCluster with its infrastructure ready:{}",
            state(client).await
        )];
    }
    eprintln!(
        "e2e kamaji: ProxmoxCluster ready, CAPI copied the endpoint to the Cluster ({:.1} s)",
        started.elapsed().as_secs_f64()
    );

    // Kamaji: initialized, the Secrets CAPI expects, ready.
    kcps.patch_status(
        CLUSTER,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"initialized": true}})),
    )
    .await
    .unwrap();
    let kubeconfig = std::fs::read_to_string(rig.env.kubeconfig_path()).unwrap();
    for (suffix, data) in [
        ("kubeconfig", json!({"value": kubeconfig})),
        ("ca", json!({"tls.crt": rig.certs.ca_pem, "tls.key": "stand-in"})),
    ] {
        let s: Secret = serde_json::from_value(json!({
            "metadata": {"name": format!("{CLUSTER}-{suffix}"), "namespace": NS,
                         "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER, "kamaji.clastix.io/component": "capi"}},
            "type": "cluster.x-k8s.io/secret",
            "stringData": data,
        }))
        .unwrap();
        Api::<Secret>::namespaced(client.clone(), NS)
            .create(&PostParams::default(), &s)
            .await
            .unwrap();
    }
    kcps.patch_status(
        CLUSTER,
        &PatchParams::default(),
        &Patch::Merge(
            json!({"status": {"initialized": true, "ready": true, "replicas": 2, "readyReplicas": 2,
                                        "updatedReplicas": 2, "unavailableReplicas": 0, "version": "v1.32.4",
                                        "selector": format!("cluster.x-k8s.io/cluster-name={CLUSTER}")}}),
        ),
    )
    .await
    .unwrap();

    // The node group.
    let machines = poll(240, || async {
        let c = get(client, CAPI_AV, "Cluster", CLUSTER).await?;
        let list = api(client, NS, CAPI_AV, "Machine")
            .list(&ListParams::default())
            .await
            .ok()?;
        let ms: Vec<Value> = list
            .items
            .into_iter()
            .map(|m| serde_json::to_value(m).unwrap_or_default())
            .collect();
        let all = ms.len() == 2
            && ms.iter().all(|m| {
                phase(m) == "Provisioned"
                    && m["spec"]["providerID"]
                        .as_str()
                        .is_some_and(|p| p.starts_with("proxmox://"))
            });
        (c["status"]["controlPlaneReady"] == true && all).then_some(ms)
    })
    .await;
    let Some(machines) = machines else {
        return vec![format!(
            "within 240 s the control plane was not ready on the Cluster or the MachineDeployment's 2 Machines not Provisioned:{}",
            state(client).await
        )];
    };
    let vms = checks::vms(&rig.sim, &format!("{MD}-"));
    if vms.len() != 2 {
        failures.push(format!("pve-sim has VMs {vms:?}, expected the node group's 2"));
    }
    for m in &machines {
        let infra = m["spec"]["infrastructureRef"]["name"]
            .as_str()
            .unwrap_or_default();
        match get(client, INFRA_AV, "ProxmoxMachine", infra).await {
            Some(pm)
                if pm["spec"]["providerID"] == m["spec"]["providerID"] && pm["status"]["ready"] == true => {}
            other => failures.push(format!(
                "Machine {}: its ProxmoxMachine (v1alpha1) is {other:?}",
                m["metadata"]["name"]
            )),
        }
    }
    for av in [INFRA_AV, "infrastructure.cluster.x-k8s.io/v1alpha2"] {
        let pc = get(client, av, "ProxmoxCluster", CLUSTER)
            .await
            .unwrap_or_default();
        if pc["spec"]["controlPlaneEndpoint"] != endpoint {
            failures.push(format!(
                "the endpoint Kamaji wrote changed (read as {av}): {}",
                pc["spec"]["controlPlaneEndpoint"]
            ));
        }
    }
    eprintln!(
        "e2e kamaji: control plane ready, node group of 2 Provisioned on VMs {vms:?} ({:.1} s)",
        started.elapsed().as_secs_f64()
    );

    // Deleting the tenant leaves nothing in Proxmox.
    api(client, NS, CAPI_AV, "Cluster")
        .delete(CLUSTER, &DeleteParams::background())
        .await
        .unwrap();
    let kinds: Vec<(String, &str)> = vec![
        (CAPI_AV.into(), "MachineDeployment"),
        (CAPI_AV.into(), "MachineSet"),
        (CAPI_AV.into(), "Machine"),
        (CAPI_AV.into(), "MachineHealthCheck"),
        (INFRA_AV.into(), "ProxmoxMachineTemplate"),
        (INFRA_AV.into(), "ProxmoxMachine"),
        (INFRA_AV.into(), "ProxmoxCluster"),
        (KCP_AV.into(), "KamajiControlPlane"),
        ("ipam.cluster.x-k8s.io/v1alpha2".into(), "InClusterIPPool"),
        ("ipam.cluster.x-k8s.io/v1beta1".into(), "IPAddressClaim"),
    ];
    let gone = poll(240, || async {
        checks::collect_garbage(client, NS, &kinds).await;
        let cluster_gone = get(client, CAPI_AV, "Cluster", CLUSTER).await.is_none();
        (cluster_gone && checks::vms(&rig.sim, &format!("{MD}-")).is_empty()).then_some(())
    })
    .await;
    if gone.is_none() {
        failures.push(format!(
            "240 s after deleting the Cluster: VMs {:?}:{}",
            checks::vms(&rig.sim, &format!("{MD}-")),
            state(client).await
        ));
    } else {
        eprintln!(
            "e2e kamaji: tenant deleted, no VM left ({:.1} s)",
            started.elapsed().as_secs_f64()
        );
    }
    failures
}
