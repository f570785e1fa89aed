//! The Cluster API Operator installs our release from its ConfigMap: the real operator v0.23.1
//! (`../shared/tools/capi-operator`, the generation CozyStack runs next to CAPI v1.10) on the real
//! kube-apiserver.
//!
//! The operator first needs a Ready CoreProvider: CAPI v1.10.2's core components from the offline
//! repository of `../shared/tools/clusterctl`, delivered the same way (a gzip-compressed
//! ConfigMap). Then an `InfrastructureProvider` named `proxmox`:
//! * pointing at the v0.11.0 ConfigMap, it is refused with the operator's own reason
//!   (`CAPIVersionIncompatibility`: this operator generation installs only v1beta1-contract
//!   series);
//! * switched to v0.10.0, it is installed (`ProviderInstalled`) and becomes `Ready`, and every
//!   object of our components — Deployment, CRDs, RBAC, Service, webhook configurations, cert-manager
//!   Issuer and Certificate — exists with what the components say of it.
//!
//! What is stubbed, as the other tests against the bare control plane do: there is no
//! kube-controller-manager, so the test writes the `Available` condition on the Deployments the
//! operator created (what the deployment controller does once the pods run: the operator's
//! `Ready` mirrors it); there is no cert-manager, so its two CRDs are the schema-less stubs of
//! `../shared/tools/clusterctl/cert-manager-stub-crds.yaml` (nothing issues certificates).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod release_support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use capmox::packaging::release::{self, Image, ReleaseOptions};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use release_support::*;
use serde_json::{Value, json};
use testenv::TestEnv;

const CAPI: &str = "v1.10.2";

/// Kills the operator (by its handle) when the test ends.
struct Operator(Child, PathBuf);

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.1).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!(
                "--- operator log, last lines ---\n{}",
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

fn provider_api(client: &kube::Client, ns: &str, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("operator.cluster.x-k8s.io", "v1alpha2", kind);
    let plural = format!("{}s", kind.to_lowercase());
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, &plural),
    )
}

/// The condition `kind` of a provider, as `(status, reason, message)`.
fn condition(p: &DynamicObject, kind: &str) -> Option<(String, String, String)> {
    let v = serde_json::to_value(p).ok()?;
    let c = v["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)?
        .clone();
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
    Some((s("status"), s("reason"), s("message")))
}

/// A components ConfigMap of provider `name` (type `ty`) the way the operator reads a compressed one.
fn config_map(ns: &str, name: &str, ty: &str, version: &str, metadata: &str, components: &str) -> ConfigMap {
    let gz = release::gzip(components.as_bytes()).unwrap();
    serde_json::from_value(json!({
        "metadata": {"name": version, "namespace": ns,
                     "labels": {"provider.cluster.x-k8s.io/name": name, "provider.cluster.x-k8s.io/type": ty,
                                "provider.cluster.x-k8s.io/version": version},
                     "annotations": {release::COMPRESSED_ANNOTATION: "true"}},
        "data": {"metadata": metadata},
        "binaryData": {"components": base64_encode(&gz)},
    }))
    .unwrap()
}

fn base64_encode(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// Writes `Available=True` on the Deployment `name` (what the deployment controller would do).
async fn deployment_available(client: &kube::Client, ns: &str, name: &str) {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let d = testenv::wait_for(
        120,
        &format!("the operator to create Deployment {ns}/{name}"),
        || {
            let api = api.clone();
            async move { api.get_opt(name).await.ok().flatten() }
        },
    )
    .await;
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let replicas = d.spec.and_then(|s| s.replicas).unwrap_or(1);
    let status = json!({"status": {
        "observedGeneration": d.metadata.generation, "replicas": replicas, "readyReplicas": replicas,
        "availableReplicas": replicas, "updatedReplicas": replicas,
        "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                        "message": "stubbed by the test: no kube-controller-manager",
                        "lastUpdateTime": now, "lastTransitionTime": now}]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
}

/// Waits until the provider's condition `kind` has `status` (and `reason`, when given).
async fn wait_condition(
    client: &kube::Client,
    ns: &str,
    kind: &str,
    name: &str,
    cond: &str,
    status: &str,
    reason: Option<&str>,
) -> (String, String, String) {
    let api = provider_api(client, ns, kind);
    testenv::wait_for(120, &format!("{kind} {name}: {cond}={status} {reason:?}"), || {
        let api = api.clone();
        async move {
            let p = api.get_opt(name).await.ok().flatten()?;
            let c = condition(&p, cond)?;
            (c.0 == status && reason.is_none_or(|r| c.1 == r)).then_some(c)
        }
    })
    .await
}

/// Containment: every field of `want` is in `got` with the same value (numbers by value).
fn missing(got: &Value, want: &Value, path: &str, out: &mut Vec<String>) {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            for (k, wv) in w {
                match g.get(k) {
                    Some(gv) => missing(gv, wv, &format!("{path}.{k}"), out),
                    None if wv.is_null() => {}
                    None => out.push(format!("{path}.{k} is missing")),
                }
            }
        }
        (Value::Array(g), Value::Array(w)) if g.len() == w.len() => {
            for (i, (gv, wv)) in g.iter().zip(w).enumerate() {
                missing(gv, wv, &format!("{path}[{i}]"), out);
            }
        }
        (Value::Number(g), Value::Number(w)) if g.as_f64() == w.as_f64() => {}
        (g, w) if g == w => {}
        (g, w) => out.push(format!("{path}: {g} instead of {w}")),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_operator_installs_the_v1beta1_series_and_refuses_the_v1beta2_one() {
    if !kubectl_present() {
        eprintln!("skipped: kubectl not found on PATH");
        return;
    }
    let (Some(setup), Some(crds), Some(core_dir), Some(stub)) = (
        shared("tools/capi-operator/setup.sh"),
        shared("tools/capi-operator/crd-v0.23.1"),
        shared(&format!("tools/clusterctl/repo-{CAPI}/cluster-api/{CAPI}")),
        shared("tools/clusterctl/cert-manager-stub-crds.yaml"),
    ) else {
        return;
    };
    if testenv::real::binaries_from_env().is_none() {
        eprintln!("skipped: needs the real kube-apiserver (KUBEBUILDER_ASSETS; make test-real)");
        return;
    }
    let unpacked = Command::new(&setup).arg("v0.23.1").output().unwrap();
    if !unpacked.status.success() {
        eprintln!("skipped: {}", String::from_utf8_lossy(&unpacked.stderr).trim());
        return;
    }
    let binary = String::from_utf8(unpacked.stdout).unwrap().trim().to_owned();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let kc = env.kubeconfig_path().to_owned();
    let run = |args: &[&str]| {
        let (ok, out, err) = tokio::task::block_in_place(|| kubectl(Some(&kc), args, None));
        assert!(ok, "kubectl {args:?}: {err}{out}");
        out
    };
    run(&["apply", "--server-side", "-f", crds.to_str().unwrap()]);
    run(&["apply", "-f", stub.to_str().unwrap()]);
    for ns in ["capi-system", "capmox-system"] {
        let n: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &n)
            .await
            .unwrap();
    }

    // Our two series, as `make release` writes them.
    let out = tempfile::tempdir().unwrap();
    for version in ["v0.10.0", "v0.11.0"] {
        release::write_release(&ReleaseOptions {
            repo: repo(),
            out: out.path().join(version),
            version: version.into(),
            image: Image::parse(&format!("ghcr.io/capmox-rs/capmox-rs:{version}")).unwrap(),
            kubectl: "kubectl".into(),
        })
        .unwrap();
        let file = out
            .path()
            .join(version)
            .join(format!("operator-components-{version}.yaml"));
        run(&["apply", "--server-side", "-f", file.to_str().unwrap()]);
    }

    // The operator.
    let certs = testenv::certs::generate().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tls.crt"), &certs.serving_pem).unwrap();
    std::fs::write(dir.path().join("tls.key"), &certs.serving_key_pem).unwrap();
    let log = dir.path().join("operator.log");
    let _operator = Operator(
        Command::new(&binary)
            .arg(format!("--kubeconfig={}", kc.display()))
            .arg("--leader-elect=false")
            .arg(format!("--webhook-port={}", free_port()))
            .arg(format!("--webhook-cert-dir={}", dir.path().display()))
            .arg(format!("--health-addr=127.0.0.1:{}", free_port()))
            .arg(format!("--diagnostics-address=127.0.0.1:{}", free_port()))
            .arg("--insecure-diagnostics")
            .arg("--profiler-address=")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
        log,
    );

    // CAPI core first (the operator installs nothing else before a Ready CoreProvider).
    let core = config_map(
        "capi-system",
        "cluster-api",
        "core",
        CAPI,
        &std::fs::read_to_string(core_dir.join("metadata.yaml")).unwrap(),
        &std::fs::read_to_string(core_dir.join("core-components.yaml")).unwrap(),
    );
    Api::<ConfigMap>::namespaced(client.clone(), "capi-system")
        .create(&PostParams::default(), &core)
        .await
        .unwrap();
    let provider = |kind: &str, name: &str, ns: &str, version: &str, selector: Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "operator.cluster.x-k8s.io/v1alpha2", "kind": kind,
            "metadata": {"name": name, "namespace": ns},
            "spec": {"version": version, "fetchConfig": {"selector": {"matchLabels": selector}}},
        }))
        .unwrap()
    };
    provider_api(&client, "capi-system", "CoreProvider")
        .create(
            &PostParams::default(),
            &provider(
                "CoreProvider",
                "cluster-api",
                "capi-system",
                CAPI,
                json!({"provider.cluster.x-k8s.io/name": "cluster-api"}),
            ),
        )
        .await
        .unwrap();
    deployment_available(&client, "capi-system", "capi-controller-manager").await;
    wait_condition(
        &client,
        "capi-system",
        "CoreProvider",
        "cluster-api",
        "Ready",
        "True",
        None,
    )
    .await;

    // v0.11.0: contract v1beta2, which this operator generation does not install.
    // The selector names the version: this operator refuses a selector matching several
    // ConfigMaps ("multiple ConfigMaps match selector … only one is allowed").
    let selector = |v: &str| {
        json!({"provider.cluster.x-k8s.io/name": "proxmox", "provider.cluster.x-k8s.io/type": "infrastructure",
               "provider.cluster.x-k8s.io/version": v})
    };
    let infra = provider_api(&client, "capmox-system", "InfrastructureProvider");
    infra
        .create(
            &PostParams::default(),
            &provider(
                "InfrastructureProvider",
                "proxmox",
                "capmox-system",
                "v0.11.0",
                selector("v0.11.0"),
            ),
        )
        .await
        .unwrap();
    let (_, reason, message) = wait_condition(
        &client,
        "capmox-system",
        "InfrastructureProvider",
        "proxmox",
        "ProviderInstalled",
        "False",
        Some("CAPIVersionIncompatibility"),
    )
    .await;
    assert!(
        message.contains("only compatible with v1beta1 providers, detected v1beta2"),
        "{reason}: {message}"
    );
    eprintln!("operator v0.23.1 refuses v0.11.0: {reason}: {message}");

    // v0.10.0: contract v1beta1, installed and Ready.
    infra
        .patch(
            "proxmox",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"version": "v0.10.0",
                "fetchConfig": {"selector": {"matchLabels": selector("v0.10.0")}}}})),
        )
        .await
        .unwrap();
    wait_condition(
        &client,
        "capmox-system",
        "InfrastructureProvider",
        "proxmox",
        "ProviderInstalled",
        "True",
        None,
    )
    .await;
    deployment_available(&client, "capmox-system", "capmox-controller-manager").await;
    wait_condition(
        &client,
        "capmox-system",
        "InfrastructureProvider",
        "proxmox",
        "Ready",
        "True",
        None,
    )
    .await;
    let p = infra.get("proxmox").await.unwrap();
    let p = serde_json::to_value(&p).unwrap();
    assert_eq!(p["status"]["installedVersion"], "v0.10.0", "{p}");
    assert_eq!(p["status"]["contract"], "v1beta1", "{p}");

    // Every object of the components, as they define it.
    let text = std::fs::read_to_string(out.path().join("v0.10.0/infrastructure-components.yaml")).unwrap();
    let components = capmox::packaging::envsubst::process(&text, &|_| None).unwrap();
    let docs = documents(&components);
    let file = out.path().join("substituted.yaml");
    std::fs::write(&file, &components).unwrap();
    let got: Value =
        serde_json::from_str(&run(&["get", "-f", file.to_str().unwrap(), "-o", "json"])).unwrap();
    let items = got["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), docs.len(), "every object of the components exists");
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let mut wrong = Vec::new();
    for (want, have) in docs.iter().zip(&items) {
        let id = format!(
            "{} {}",
            want["kind"].as_str().unwrap(),
            want["metadata"]["name"].as_str().unwrap()
        );
        *kinds
            .entry(want["kind"].as_str().unwrap().to_owned())
            .or_default() += 1;
        assert_eq!(have["metadata"]["name"], want["metadata"]["name"], "{id}");
        let mut body = want.clone();
        let o = body.as_object_mut().unwrap();
        o.remove("apiVersion");
        o.remove("status");
        let meta = o.remove("metadata").unwrap();
        if want["kind"] == "Namespace" {
            // The user creates the provider's namespace before the InfrastructureProvider in it
            // (README); the operator leaves an existing namespace as it is.
            continue;
        }
        if let Some(Value::Object(string_data)) = o.remove("stringData") {
            // Write-only: the API server keeps it as `data`.
            let data: serde_json::Map<String, Value> = string_data
                .into_iter()
                .map(|(k, v)| (k, Value::from(base64_encode(v.as_str().unwrap_or("").as_bytes()))))
                .collect();
            o.insert("data".into(), Value::Object(data));
        }
        missing(have, &body, &id, &mut wrong);
        missing(
            &have["metadata"]["labels"],
            &meta["labels"],
            &format!("{id} labels"),
            &mut wrong,
        );
        missing(
            &have["metadata"]["annotations"],
            &meta["annotations"],
            &format!("{id} annotations"),
            &mut wrong,
        );
    }
    assert!(
        wrong.is_empty(),
        "installed objects differ from the components:\n{}",
        wrong.join("\n")
    );
    for kind in [
        "Deployment",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "ServiceAccount",
        "Service",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "Issuer",
        "Certificate",
    ] {
        assert!(
            kinds.contains_key(kind),
            "the components have no {kind}: {kinds:?}"
        );
    }
    eprintln!(
        "operator v0.23.1 installed v0.10.0 (Ready); installed objects match the components: {kinds:?}"
    );
}
