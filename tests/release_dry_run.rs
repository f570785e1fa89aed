//! The API server judges the release manifests: `kubectl apply --server-side --dry-run=server`
//! (strict field validation) against the test control plane — in-tree, or the real
//! kube-apiserver with `KUBEBUILDER_ASSETS` — with our CRDs, CAPI v1.13.4's and the in-cluster
//! IPAM provider's from `../shared`, and permissive CRDs for the kinds none of those provide
//! (kubeadm/Talos/Kamaji control planes and bootstrap configs, cert-manager, ServiceMonitor).
//!
//! Judged: the rendered components, every cluster-template flavor substituted the way clusterctl
//! does, the ClusterClasses, and what `capmox convert` makes of capmox's v1alpha1 samples and of
//! a v1alpha1/v1beta1-era cluster template. The in-tree server has no Deployments, Services or
//! RBAC; those kinds are only judged by the real kube-apiserver (one line says which were left).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod release_support;

use std::path::Path;

use capmox::packaging::envsubst;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use release_support::*;
use serde_json::Value;
use testenv::TestEnv;

const NS: &str = "release-test";

struct Judge {
    env: TestEnv,
}

impl Judge {
    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        tokio::task::block_in_place(|| kubectl(Some(self.env.kubeconfig_path()), args, stdin))
    }

    /// Server-side dry-run apply of `docs` (namespaced ones into `NS` unless they say otherwise).
    fn dry_run(&self, what: &str, docs: &[Value]) {
        let (docs, skipped) = judgeable(&in_namespace(docs), self.env.is_real());
        if !skipped.is_empty() {
            eprintln!(
                "{what}: judged by the real kube-apiserver only: {}",
                skipped.join(", ")
            );
        }
        let (ok, out, err) = self.kubectl(
            &[
                "apply",
                "--server-side",
                "--dry-run=server",
                "--field-manager=release-test",
                // The test installed our CRDs itself (another field manager, no conversion
                // webhook); the released ones take them over, as an install over them would.
                "--force-conflicts",
                "-f",
                "-",
            ],
            Some(&to_yaml_stream(&docs)),
        );
        assert!(ok, "{what}: the API server refused it:\n{err}\n{out}");
        assert_eq!(out.lines().count(), docs.len(), "{what}: {out}");
    }

    /// Like [`Judge::dry_run`] but expects a refusal mentioning `message`.
    fn refused(&self, what: &str, docs: &[Value], message: &str) {
        let (ok, out, err) = self.kubectl(
            &[
                "apply",
                "--server-side",
                "--dry-run=server",
                "--field-manager=release-test",
                "-f",
                "-",
            ],
            Some(&to_yaml_stream(&in_namespace(docs))),
        );
        assert!(!ok, "{what}: accepted:\n{out}");
        assert!(err.contains(message), "{what}: {err}");
    }
}

/// Puts namespaced objects without a namespace into `NS`, as clusterctl does with the target
/// namespace.
fn in_namespace(docs: &[Value]) -> Vec<Value> {
    const CLUSTER_SCOPED: [&str; 7] = [
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "GlobalInClusterIPPool",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ];
    docs.iter()
        .cloned()
        .map(|mut d| {
            if !CLUSTER_SCOPED.contains(&d["kind"].as_str().unwrap_or(""))
                && d["metadata"]["namespace"].is_null()
            {
                d["metadata"]["namespace"] = Value::from(NS);
            }
            d
        })
        .collect()
}

fn crd(v: Value) -> CustomResourceDefinition {
    serde_json::from_value(v).unwrap()
}

/// Our CRDs, CAPI's and the IPAM provider's, and permissive ones for everything else.
async fn install_crds(env: &TestEnv) {
    env.install_crds(capmox_api::crd::all().unwrap()).await.unwrap();
    let mut permissive = vec![
        crd(permissive_crd(
            "controlplane.cluster.x-k8s.io",
            "KubeadmControlPlane",
            &["v1beta2", "v1beta1"],
            true,
        )),
        crd(permissive_crd(
            "controlplane.cluster.x-k8s.io",
            "KubeadmControlPlaneTemplate",
            &["v1beta2", "v1beta1"],
            true,
        )),
        crd(permissive_crd(
            "controlplane.cluster.x-k8s.io",
            "TalosControlPlane",
            &["v1alpha3"],
            true,
        )),
        crd(permissive_crd(
            "controlplane.cluster.x-k8s.io",
            "KamajiControlPlane",
            // Kamaji >= v0.20 (CAPI v1beta2) serves only v1alpha2: what templates/ writes.
            &["v1alpha2"],
            true,
        )),
        crd(permissive_crd(
            "bootstrap.cluster.x-k8s.io",
            "KubeadmConfigTemplate",
            &["v1beta2", "v1beta1"],
            true,
        )),
        crd(permissive_crd(
            "bootstrap.cluster.x-k8s.io",
            "TalosConfigTemplate",
            &["v1alpha3"],
            true,
        )),
        crd(permissive_crd("cert-manager.io", "Certificate", &["v1"], true)),
        crd(permissive_crd("cert-manager.io", "Issuer", &["v1"], true)),
        crd(permissive_crd(
            "monitoring.coreos.com",
            "ServiceMonitor",
            &["v1"],
            true,
        )),
    ];
    match shared("tools/capi/crd-v1.13.4") {
        Some(dir) => {
            env.install_crds_from_path(&dir).await.unwrap();
        }
        None => {
            for kind in [
                "Cluster",
                "MachineDeployment",
                "MachineHealthCheck",
                "ClusterClass",
            ] {
                permissive.push(crd(permissive_crd("cluster.x-k8s.io", kind, &["v1beta2"], true)));
            }
            permissive.push(crd(permissive_crd(
                "addons.cluster.x-k8s.io",
                "ClusterResourceSet",
                &["v1beta2"],
                true,
            )));
        }
    }
    match shared("compat/ipam-in-cluster") {
        Some(dir) => {
            env.install_crds_from_path(&dir).await.unwrap();
        }
        None => permissive.push(crd(permissive_crd(
            "ipam.cluster.x-k8s.io",
            "GlobalInClusterIPPool",
            &["v1alpha2"],
            false,
        ))),
    }
    env.install_crds(permissive).await.unwrap();
}

async fn judge() -> Option<Judge> {
    if !kubectl_present() {
        eprintln!("skipped: kubectl not found on PATH");
        return None;
    }
    let env = TestEnv::start().await.unwrap();
    install_crds(&env).await;
    let j = Judge { env };
    for ns in [NS, "capmox-system"] {
        let (ok, out, err) = j.kubectl(&["create", "namespace", ns], None);
        assert!(ok, "{out}{err}");
    }
    Some(j)
}

fn substituted(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    let values = template_values(NS);
    let out = envsubst::process_with(&text, &values).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    documents(&out)
}

#[tokio::test(flavor = "multi_thread")]
async fn components_templates_and_cluster_classes_are_accepted() {
    let Some(j) = judge().await else { return };

    // The components as clusterctl installs them (defaults only), and with the optional monitor.
    let components = kustomize(&repo().join("config/default"));
    let components = envsubst::process(&components, &|_| None).unwrap();
    let docs = documents(&components);
    let (crds, rest): (Vec<Value>, Vec<Value>) = docs
        .into_iter()
        .partition(|d| d["kind"] == "CustomResourceDefinition");
    // The four Cluster API kinds, ProxmoxVirtualMachine, its images, snapshots, restores and clones.
    assert_eq!(crds.len(), 9);
    j.dry_run("infrastructure-components.yaml (CRDs)", &crds);
    j.dry_run("infrastructure-components.yaml", &rest);
    // config/prometheus enabled the documented way (uncommenting `- ../prometheus`).
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&repo().join("config"), &dir.path().join("config"));
    let k = dir.path().join("config/default/kustomization.yaml");
    let text = std::fs::read_to_string(&k)
        .unwrap()
        .replace("# - ../prometheus", "- ../prometheus");
    std::fs::write(&k, text).unwrap();
    let with_monitor = documents(&kustomize(&dir.path().join("config/default")));
    let monitor: Vec<Value> = with_monitor
        .into_iter()
        .filter(|d| d["kind"] == "ServiceMonitor")
        .collect();
    assert_eq!(monitor.len(), 1);
    assert_eq!(
        monitor[0]["metadata"]["name"],
        "capmox-controller-manager-metrics-monitor"
    );
    let endpoint = &monitor[0]["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], "https");
    assert_eq!(endpoint["scheme"], "https");
    assert_eq!(
        endpoint["bearerTokenFile"],
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    );
    assert_eq!(endpoint["tlsConfig"]["insecureSkipVerify"], true);
    j.dry_run("config/prometheus", &monitor);

    // Every flavor, substituted the way clusterctl does.
    let templates = capmox::packaging::release::template_files(&repo()).unwrap();
    let mut flavors = 0;
    for t in &templates {
        let name = t.file_name().unwrap().to_string_lossy().into_owned();
        let docs = if name.starts_with("clusterclass-") {
            documents(&std::fs::read_to_string(t).unwrap())
        } else {
            flavors += 1;
            substituted(t)
        };
        assert!(docs.len() >= 3, "{name}");
        j.dry_run(&name, &docs);
    }
    assert_eq!(flavors, 12);
}

#[tokio::test(flavor = "multi_thread")]
async fn cluster_class_machine_templates_pass_our_rules_unlike_capmoxs() {
    let Some(j) = judge().await else { return };
    let ours = documents(
        &std::fs::read_to_string(repo().join("templates/clusterclass-proxmox-clusterclass-v0.2.1.yaml"))
            .unwrap(),
    );
    let pmts: Vec<Value> = ours
        .into_iter()
        .filter(|d| d["kind"] == "ProxmoxMachineTemplate")
        .collect();
    assert_eq!(pmts.len(), 3);
    j.dry_run("our ClusterClass machine templates", &pmts);
    let Some(capmox) = shared("compat/capmox-v0.9/templates/cluster-class.yaml") else {
        return;
    };
    let text = envsubst::process(&std::fs::read_to_string(capmox).unwrap(), &|n| {
        (n == "BRIDGE").then(|| "vmbr0".into())
    })
    .unwrap();
    let theirs: Vec<Value> = documents(&text)
        .into_iter()
        .filter(|d| d["kind"] == "ProxmoxMachineTemplate")
        .collect();
    assert_eq!(theirs.len(), 3);
    for pmt in &theirs {
        j.refused(
            "capmox's ClusterClass machine template",
            std::slice::from_ref(pmt),
            "Must specify either templateID or templateSelector",
        );
    }
}

/// A cluster template as capmox v0.7 users wrote them, converted. (capmox's v1alpha1 samples are
/// kubebuilder placeholders without a spec, which no version of the CRD accepts; they are
/// round-tripped below instead.)
#[tokio::test(flavor = "multi_thread")]
async fn converted_manifests_are_accepted() {
    let Some(j) = judge().await else { return };
    let era = std::fs::read_to_string(repo().join("tests/testdata/v1alpha1-cluster-template.yaml")).unwrap();
    let converted = capmox::convert::convert_text(&era, "v1alpha1-cluster-template.yaml").unwrap();
    assert!(converted.warnings.is_empty(), "{:?}", converted.warnings);
    let values = template_values(NS);
    let docs = documents(&envsubst::process_with(&converted.output, &values).unwrap());
    assert!(docs.iter().all(|d| {
        let v = d["apiVersion"].as_str().unwrap();
        !v.ends_with("/v1alpha1") && !v.ends_with("/v1beta1")
    }));
    j.dry_run("converted v1alpha1-era cluster template", &docs);
}

/// `capmox convert` round-trips capmox's v1alpha1 samples: the v1alpha2 it writes is what the API
/// server's conversion makes of them, and converting that back gives the sample again, except
/// for what the converter reported as not representable.
#[test]
fn convert_round_trips_capmoxs_v1alpha1_samples() {
    let Some(samples) = shared("compat/capmox-v0.9/samples") else {
        return;
    };
    let mut n = 0;
    for e in std::fs::read_dir(samples).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("infrastructure_v1alpha1_") {
            continue;
        }
        n += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        let original = drop_nulls(documents(&text).remove(0));
        let out = capmox::convert::convert_text(&text, &name).unwrap();
        let converted = documents(&out.output).remove(0);
        let mut by_server =
            capmox_api::conversion::convert_value(original.clone(), capmox_api::v1alpha2::API_VERSION)
                .unwrap();
        if let Some(a) = by_server
            .pointer_mut("/metadata/annotations")
            .and_then(Value::as_object_mut)
        {
            a.remove("cluster.x-k8s.io/conversion-data");
            if a.is_empty() {
                by_server["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .remove("annotations");
            }
        }
        assert_eq!(drop_nulls(converted.clone()), drop_nulls(by_server), "{name}");
        let back = drop_nulls(
            capmox_api::conversion::convert_value(converted, capmox_api::v1alpha1::API_VERSION).unwrap(),
        );
        if back != original {
            // Only what the warnings name may differ.
            let w = out.warnings.join("\n");
            assert!(
                w.contains("v1alpha2 cannot express"),
                "{name}: {back} != {original}; warnings: {w}"
            );
            let mut without = back.clone();
            without.as_object_mut().unwrap().remove("spec");
            let mut orig = original.clone();
            orig.as_object_mut().unwrap().remove("spec");
            assert_eq!(without, orig, "{name}: differs outside spec");
        }
        // Converting the output again changes nothing.
        assert_eq!(
            capmox::convert::convert_text(&out.output, &name).unwrap().output,
            out.output
        );
    }
    assert_eq!(n, 3);
}

/// capmox's own v1alpha2 objects, down-converted to v1alpha1 and written as a manifest, come out
/// of `capmox convert` exactly as the API server's conversion would serve them in v1alpha2.
#[test]
fn convert_matches_the_object_conversion_on_capmoxs_templates() {
    let Some(dir) = shared("compat/capmox-v0.9/templates") else {
        return;
    };
    let strip = |mut v: Value| {
        if let Some(a) = v
            .pointer_mut("/metadata/annotations")
            .and_then(Value::as_object_mut)
        {
            a.remove("cluster.x-k8s.io/conversion-data");
        }
        drop_nulls(v)
    };
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("cluster-template") {
            continue;
        }
        let values = template_values(NS);
        let text = envsubst::process_with(&std::fs::read_to_string(&path).unwrap(), &values).unwrap();
        // Untouched when already current.
        assert_eq!(
            capmox::convert::convert_text(&text, &name).unwrap().output,
            text,
            "{name}"
        );
        for doc in documents(&text) {
            if doc["apiVersion"] != capmox_api::v1alpha2::API_VERSION {
                continue;
            }
            let down =
                strip(capmox_api::conversion::convert_value(doc, capmox_api::v1alpha1::API_VERSION).unwrap());
            let want = strip(
                capmox_api::conversion::convert_value(down.clone(), capmox_api::v1alpha2::API_VERSION)
                    .unwrap(),
            );
            let manifest = format!("---\n{}\n", serde_json::to_string(&down).unwrap());
            let out = capmox::convert::convert_text(&manifest, &name).unwrap();
            assert_eq!(drop_nulls(documents(&out.output).remove(0)), want, "{name}");
            n += 1;
        }
    }
    assert!(n >= 30, "{n}");
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Drops nulls, empty objects and empty lists (what the API server treats as absent).
fn drop_nulls(v: Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, v)| (k, drop_nulls(v)))
                .filter(|(_, v)| {
                    !v.is_null()
                        && v.as_object().is_none_or(|o| !o.is_empty())
                        && v.as_array().is_none_or(|a| !a.is_empty())
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(drop_nulls).collect()),
        other => other,
    }
}
