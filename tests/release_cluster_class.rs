//! Cluster API's own ClusterClass webhook judges our ClusterClasses: the real core manager v1.13.4
//! from `../shared/tools/capi` (ClusterTopology on) serves its webhooks to the real kube-apiserver,
//! which calls them on a server-side dry-run. That checks what the CRD schema cannot: variable
//! schemas, patch definitions and their `enabledIf` templates. CAPI v1.10.2's webhook does the
//! same for the v1beta1 ClusterClasses the v0.10.x release ships. Only with the real kube-apiserver
//! (`KUBEBUILDER_ASSETS`): the in-tree server calls no admission webhooks.
//!
//! Then CAPI's topology controller builds a Cluster from `proxmox-clusterclass-v0.2.1`: the
//! ProxmoxCluster and the control plane's ProxmoxMachineTemplate it creates — the class's
//! templates with the patches applied to the Cluster's variables — pass our CRD rules and carry
//! the variables' values.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod release_support;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};

use base64::Engine;
use release_support::*;
use serde_json::{Value, json};
use testenv::TestEnv;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Stops the manager (by its process handle) when the test ends, however it ends; keeps its
/// certificate folder until then.
struct Manager(Child, #[allow(dead_code)] tempfile::TempDir);

impl Drop for Manager {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The real CAPI core manager of `version` serving its webhooks to the real kube-apiserver with
/// CAPI's CRDs of that release; `None` after one line saying what is missing.
async fn start_capi(version: &str) -> Option<(TestEnv, Manager)> {
    if !kubectl_present() {
        eprintln!("skipped: kubectl not found on PATH");
        return None;
    }
    let (Some(setup), Some(crds), Some(webhooks)) = (
        shared("tools/capi/setup.sh"),
        shared(&format!("tools/capi/crd-{version}")),
        shared(&format!("tools/capi/webhook-{version}/manifests.yaml")),
    ) else {
        return None;
    };
    let env = TestEnv::start().await.unwrap();
    if !env.is_real() {
        eprintln!(
            "skipped: needs the real kube-apiserver (KUBEBUILDER_ASSETS); the in-tree server calls no webhooks"
        );
        return None;
    }
    let unpacked = Command::new(&setup).arg(version).output().unwrap();
    if !unpacked.status.success() {
        eprintln!("skipped: {}", String::from_utf8_lossy(&unpacked.stderr).trim());
        return None;
    }
    let binary = String::from_utf8(unpacked.stdout).unwrap().trim().to_owned();
    env.install_crds_from_path(&crds).await.unwrap();

    let certs = testenv::certs::generate().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tls.crt"), &certs.serving_pem).unwrap();
    std::fs::write(dir.path().join("tls.key"), &certs.serving_key_pem).unwrap();
    let port = free_port();
    let log = std::fs::File::create(dir.path().join("capi-manager.log")).unwrap();
    let manager = Manager(
        Command::new(&binary)
            .arg("--kubeconfig")
            .arg(env.kubeconfig_path())
            .arg("--leader-elect=false")
            .arg("--webhook-cert-dir")
            .arg(dir.path())
            .arg(format!("--webhook-port={port}"))
            .arg(format!("--health-addr=127.0.0.1:{}", free_port()))
            .arg(format!("--diagnostics-address=127.0.0.1:{}", free_port()))
            .arg("--insecure-diagnostics")
            .arg("--feature-gates=ClusterTopology=true")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
        dir,
    );
    testenv::wait_for(120, "the CAPI webhook server", || async move {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
            .map(|_| ())
    })
    .await;

    // CAPI's webhook configurations, pointed at the manager.
    let ca = base64::engine::general_purpose::STANDARD.encode(&certs.ca_pem);
    let mut configs = documents(&std::fs::read_to_string(&webhooks).unwrap());
    for c in &mut configs {
        for w in c["webhooks"].as_array_mut().unwrap() {
            let path = w["clientConfig"]["service"]["path"].as_str().unwrap().to_owned();
            w["clientConfig"] = json!({"url": format!("https://127.0.0.1:{port}{path}"), "caBundle": ca});
        }
    }
    let kc = env.kubeconfig_path().to_owned();
    let (ok, out, err) = tokio::task::block_in_place(|| {
        kubectl(Some(&kc), &["apply", "-f", "-"], Some(&to_yaml_stream(&configs)))
    });
    assert!(ok, "{out}{err}");
    let (ok, out, err) =
        tokio::task::block_in_place(|| kubectl(Some(&kc), &["create", "namespace", "classes"], None));
    assert!(ok, "{out}{err}");
    Some((env, manager))
}

/// Runs kubectl against `env`.
fn run_in(env: &TestEnv, args: &[&str], stdin: Option<String>) -> (bool, String, String) {
    tokio::task::block_in_place(|| kubectl(Some(env.kubeconfig_path()), args, stdin.as_deref()))
}

/// CAPI's webhook judges each ClusterClass of `files` (`(name, text)`): a broken patch condition
/// is refused (the webhook is in the loop), the class as written is accepted.
fn judge_classes(env: &TestEnv, files: &[(String, String)]) -> usize {
    let dry_run = |docs: Vec<Value>| {
        run_in(
            env,
            &[
                "apply",
                "--server-side",
                "--dry-run=server",
                "--field-manager=release-test",
                "-n",
                "classes",
                "-f",
                "-",
            ],
            Some(to_yaml_stream(&docs)),
        )
    };
    let mut checked = 0;
    for (name, text) in files {
        let classes: Vec<Value> = documents(text)
            .into_iter()
            .filter(|d| d["kind"] == "ClusterClass")
            .collect();
        assert_eq!(classes.len(), 1, "{name}");
        let mut broken = classes[0].clone();
        broken["spec"]["patches"][0]["enabledIf"] = Value::from("{{ if .allowedNodes }}true{{ end ");
        let (ok, _, err) = dry_run(vec![broken]);
        assert!(!ok && err.contains("enabledIf"), "{name}: {err}");
        let (ok, out, err) = dry_run(classes);
        assert!(ok, "{name}: CAPI's webhook refused it:\n{err}{out}");
        checked += 1;
    }
    checked
}

/// The ClusterClass files of `templates/`, as a series of `contract` ships them.
fn class_files(contract: &str) -> Vec<(String, String)> {
    capmox::packaging::release::template_files(&repo())
        .unwrap()
        .into_iter()
        .filter_map(|t| {
            let name = t.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("clusterclass-").then(|| {
                let text = std::fs::read_to_string(&t).unwrap();
                let text = capmox::packaging::release::template_for_contract(&text, &name, contract).unwrap();
                (name, text)
            })
        })
        .collect()
}

/// CAPI v1.10.2's own ClusterClass webhook judges the v1beta1 ClusterClasses the v0.10.x release
/// ships (made from `templates/` by the converter run in reverse).
#[tokio::test(flavor = "multi_thread")]
async fn capi_v1_10s_cluster_class_webhook_accepts_our_v1beta1_cluster_classes() {
    let Some((env, _manager)) = start_capi("v1.10.2").await else {
        return;
    };
    assert_eq!(judge_classes(&env, &class_files("v1beta1")), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn capis_cluster_class_webhook_accepts_our_cluster_classes() {
    let Some((env, _manager)) = start_capi("v1.13.4").await else {
        return;
    };
    assert_eq!(judge_classes(&env, &class_files("v1beta2")), 3);
    let kc = env.kubeconfig_path().to_owned();
    let run = |args: &[&str], stdin: Option<String>| {
        let kc = kc.clone();
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        tokio::task::block_in_place(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            kubectl(Some(&kc), &args, stdin.as_deref())
        })
    };

    // A Cluster of the class, reconciled by CAPI's topology controller.
    let mut crds = capmox_api::crd::all().unwrap();
    let contract = |mut v: Value| {
        v["metadata"]["labels"] = json!({"cluster.x-k8s.io/v1beta2": "v1beta2"});
        serde_json::from_value(v).unwrap()
    };
    crds.push(contract(permissive_crd(
        "controlplane.cluster.x-k8s.io",
        "KubeadmControlPlane",
        &["v1beta2"],
        true,
    )));
    crds.push(contract(permissive_crd(
        "controlplane.cluster.x-k8s.io",
        "KubeadmControlPlaneTemplate",
        &["v1beta2"],
        true,
    )));
    crds.push(contract(permissive_crd(
        "bootstrap.cluster.x-k8s.io",
        "KubeadmConfigTemplate",
        &["v1beta2"],
        true,
    )));
    env.install_crds(crds).await.unwrap();
    let class = documents(
        &std::fs::read_to_string(repo().join("templates/clusterclass-proxmox-clusterclass-v0.2.1.yaml"))
            .unwrap(),
    );
    let (ok, out, err) = run(
        &["apply", "--server-side", "-n", "classes", "-f", "-"],
        Some(to_yaml_stream(&class)),
    );
    assert!(ok, "{out}{err}");
    let machine = |ty: &str, source: Value| {
        let mut m = json!({"machineType": ty, "numSockets": 2, "numCores": 4, "memoryMiB": 8192,
            "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 50}},
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr7", "model": "virtio"}]}});
        m.as_object_mut()
            .unwrap()
            .extend(source.as_object().unwrap().clone());
        m
    };
    let cluster = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "topo", "namespace": "classes"},
        "spec": {
            "clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}},
            "topology": {
                "classRef": {"name": "proxmox-clusterclass-v0.2.1"},
                "version": "v1.33.1",
                "controlPlane": {"replicas": 1},
                "variables": [
                    {"name": "controlPlaneEndpoint", "value": {"host": "10.10.10.9", "port": 6443}},
                    {"name": "dnsServers", "value": ["10.10.10.53"]},
                    {"name": "ipv4Config", "value": {"addresses": ["10.10.10.10-10.10.10.50"], "prefix": 24, "gateway": "10.10.10.1"}},
                    {"name": "cloneSpec", "value": {
                        "sshAuthorizedKeys": ["ssh-ed25519 AAAAC3Nza a@example", "ssh-ed25519 AAAAC3Nzb b@example"],
                        "machineSpec": [
                            machine("controlPlane", json!({"sourceNode": "pve1", "templateID": 100})),
                            machine("worker", json!({"templateSelector": {"matchTags": ["k8s"]}})),
                            machine("loadBalancer", json!({"sourceNode": "pve2", "templateID": 101})),
                        ]}},
                ],
            },
        },
    });
    let (ok, out, err) = run(
        &["apply", "--server-side", "-f", "-"],
        Some(to_yaml_stream(&[cluster])),
    );
    assert!(ok, "{out}{err}");
    let get = |kind: &str| {
        let (ok, out, _) = run(
            &[
                "get",
                kind,
                "-n",
                "classes",
                "-l",
                "cluster.x-k8s.io/cluster-name=topo",
                "-o",
                "json",
            ],
            None,
        );
        let items = if ok {
            serde_json::from_str::<Value>(&out).unwrap()["items"].clone()
        } else {
            Value::Null
        };
        items.as_array().cloned().unwrap_or_default()
    };
    let pmt = testenv::wait_for(
        120,
        "the control plane's ProxmoxMachineTemplate from the topology",
        || {
            let items = get("proxmoxmachinetemplates.infrastructure.cluster.x-k8s.io");
            async move { items.into_iter().next() }
        },
    )
    .await;
    let spec = &pmt["spec"]["template"]["spec"];
    assert_eq!(spec["sourceNode"], "pve1", "{pmt}");
    assert_eq!(spec["templateID"], 100, "{pmt}");
    assert!(
        spec["templateSelector"].is_null(),
        "the placeholder selector is gone: {pmt}"
    );
    assert_eq!(spec["numSockets"], 2, "{pmt}");
    assert_eq!(spec["memoryMiB"], 8192, "{pmt}");
    assert_eq!(spec["disks"]["bootVolume"]["sizeGb"], 50, "{pmt}");
    assert_eq!(spec["network"]["networkDevices"][0]["bridge"], "vmbr7", "{pmt}");
    let pc = testenv::wait_for(60, "the ProxmoxCluster from the topology", || {
        let items = get("proxmoxclusters.infrastructure.cluster.x-k8s.io");
        async move { items.into_iter().next() }
    })
    .await;
    assert_eq!(pc["spec"]["controlPlaneEndpoint"]["host"], "10.10.10.9", "{pc}");
    assert_eq!(pc["spec"]["dnsServers"][0], "10.10.10.53", "{pc}");
    assert_eq!(pc["spec"]["ipv4Config"]["gateway"], "10.10.10.1", "{pc}");
    let kcp = testenv::wait_for(60, "the KubeadmControlPlane from the topology", || {
        let items = get("kubeadmcontrolplanes.controlplane.cluster.x-k8s.io");
        async move { items.into_iter().next() }
    })
    .await;
    let users = &kcp["spec"]["kubeadmConfigSpec"]["users"][0];
    assert_eq!(
        users["sshAuthorizedKeys"].as_array().map(Vec::len),
        Some(2),
        "{kcp}"
    );
    let files: Vec<&str> = kcp["spec"]["kubeadmConfigSpec"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(
        files.contains(&"/etc/kubernetes/manifests/kube-vip.yaml"),
        "{files:?}"
    );
}
