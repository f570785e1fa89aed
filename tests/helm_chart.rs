//! The Helm chart `charts/capmox-rs`, judged by the real helm v3.21.4 of `../shared/tools/helm`
//! and the API server:
//!
//! * its generated templates are what `make chart` makes of `config/` now (drift);
//! * its default values render exactly the objects of the clusterctl components (kustomize
//!   `config/default` with clusterctl's defaults substituted), in the release namespace, less the
//!   Namespace (Helm's `--create-namespace`) and the CRDs' `helm.sh/resource-policy: keep`;
//! * `helm lint` and `helm template` with several value sets, each rendering accepted by a
//!   server-side dry-run (`kubectl apply --server-side --dry-run=server`);
//! * against the real kube-apiserver (`KUBEBUILDER_ASSETS`): `helm install` creates the objects,
//!   `helm upgrade` changes them, `helm uninstall` removes them (and keeps the CRDs).
//!
//! Without helm, kubectl or the real API server the parts that need them skip with one line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod release_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use capmox::packaging::{chart, envsubst};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use release_support::*;
use serde_json::{Value, json};
use testenv::TestEnv;

const NS: &str = "capmox-system";

fn chart_dir() -> PathBuf {
    repo().join("charts/capmox-rs")
}

/// The helm binary of `../shared/tools/helm` (unpacked by its setup script), or `None` with one
/// line saying what is missing.
fn helm() -> Option<PathBuf> {
    let setup = shared_dir().join("tools/helm/setup.sh");
    if !setup.exists() {
        eprintln!("skipped: ../shared/tools/helm/setup.sh not found (the real helm v3.21.4)");
        return None;
    }
    let out = Command::new(&setup).arg("v3.21.4").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Some(PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()))
}

fn run_helm(helm: &Path, args: &[&str], kubeconfig: Option<&Path>) -> (bool, String, String) {
    let mut cmd = Command::new(helm);
    if let Some(k) = kubeconfig {
        cmd.env("KUBECONFIG", k);
    }
    let cache = std::env::temp_dir().join(format!("capmox-helm-{}", std::process::id()));
    let out = cmd
        .args(args)
        .env("HELM_CACHE_HOME", cache.join("cache"))
        .env("HELM_CONFIG_HOME", cache.join("config"))
        .env("HELM_DATA_HOME", cache.join("data"))
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `helm template` of the chart with `values` (a values file's content) into `NS`.
fn template(helm: &Path, values: &str) -> Vec<Value> {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), values).unwrap();
    let chart = chart_dir();
    let (ok, out, err) = run_helm(
        helm,
        &[
            "template",
            "capmox",
            chart.to_str().unwrap(),
            "--namespace",
            NS,
            "-f",
            file.path().to_str().unwrap(),
        ],
        None,
    );
    assert!(ok, "helm template failed: {err}");
    documents(&out)
}

fn key(d: &Value) -> String {
    format!(
        "{}/{}",
        d["kind"].as_str().unwrap_or(""),
        d["metadata"]["name"].as_str().unwrap_or("")
    )
}

#[test]
fn generated_templates_are_current() {
    if !kubectl_present() {
        eprintln!("skipped: kubectl not found (its kustomize renders config/)");
        return;
    }
    let want = chart::generate(
        &kustomize(&repo().join("config/default")),
        &kustomize(&repo().join("config/optional")),
    )
    .unwrap();
    for (rel, text) in &want {
        let have = std::fs::read_to_string(chart_dir().join(rel)).unwrap_or_default();
        assert!(
            have == *text,
            "charts/capmox-rs/{rel} is out of date: run `make chart`"
        );
    }
    // No stale generated template is left behind.
    for entry in std::fs::read_dir(chart_dir().join("templates")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let rel = format!("templates/{}", path.file_name().unwrap().to_string_lossy());
        assert!(
            !text.starts_with(chart::GENERATED_HEADER) || want.contains_key(&rel),
            "{rel} is generated but no longer made by `make chart`: remove it"
        );
    }
}

#[test]
fn default_values_render_the_components() {
    let Some(helm) = helm() else { return };
    if !kubectl_present() {
        eprintln!("skipped: kubectl not found (its kustomize renders config/default)");
        return;
    }
    let components = envsubst::process(&kustomize(&repo().join("config/default")), &|_| None).unwrap();
    let want: BTreeMap<String, Value> = documents(&components)
        .into_iter()
        .filter(|d| d["kind"] != "Namespace")
        .map(|d| (key(&d), d))
        .collect();
    let have: BTreeMap<String, Value> = template(&helm, "{}")
        .into_iter()
        .map(|mut d| {
            if let Some(a) = d["metadata"]
                .get_mut("annotations")
                .and_then(Value::as_object_mut)
            {
                a.remove("helm.sh/resource-policy");
            }
            (key(&d), d)
        })
        .collect();
    assert_eq!(
        have.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "the chart's default objects"
    );
    for (k, w) in &want {
        pretty_assertions::assert_eq!(&have[k], w, "{k}");
    }
}

/// Value sets the chart is judged with (name, values file).
fn value_sets() -> Vec<(&'static str, String)> {
    let ca = base64_pem();
    vec![
        ("defaults", "{}".to_owned()),
        (
            "operations",
            r#"
replicaCount: 2
image: {repository: registry.example/capmox-rs, tag: v0.11.0, pullPolicy: Always}
credentials: {url: "https://pve.example:8006", token: "capmox@pve!capi", secret: "s3cr3t"}
metrics: {port: 8080, secure: true, readers: [{kind: ServiceAccount, name: prometheus-k8s, namespace: monitoring}]}
serviceMonitor: {enabled: true}
networkPolicy: {enabled: true}
watchFilter: shard-a
watchNamespaces: [team-a, team-b]
syncPeriod: 15m
concurrency: 20
logLevel: 2
featureGates: {clusterTopology: true}
extraArgs: ["--guest-agent-timeout=15m"]
podAnnotations: {example.com/owner: platform}
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: node-role.kubernetes.io/control-plane, effect: NoSchedule}]
vmKinds: {enabled: true}
"#
            .to_owned(),
        ),
        (
            "provided-certificate",
            format!(
                r#"
webhooks:
  certManager: {{enabled: false}}
  certificate: {{secretName: capmox-webhook-tls, caBundle: {ca}}}
credentials: {{create: false, existingSecret: pve-credentials}}
leaderElection: {{enabled: false}}
metrics: {{secure: false}}
crds: {{keep: false}}
"#
            ),
        ),
        ("without-crds", "crds: {install: false}\n".to_owned()),
    ]
}

/// A base64 PEM for `caBundle` (the API server only checks that it is base64).
fn base64_pem() -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .encode("-----BEGIN CERTIFICATE-----\nMIIBAA==\n-----END CERTIFICATE-----\n")
}

#[test]
fn lint_passes_for_every_value_set_and_a_missing_certificate_is_a_clear_error() {
    let Some(helm) = helm() else { return };
    let chart = chart_dir();
    for (name, values) in value_sets() {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &values).unwrap();
        let (ok, out, err) = run_helm(
            &helm,
            &[
                "lint",
                "--strict",
                chart.to_str().unwrap(),
                "-f",
                file.path().to_str().unwrap(),
            ],
            None,
        );
        assert!(ok, "helm lint {name}: {out}\n{err}");
    }
    let (ok, _, err) = run_helm(
        &helm,
        &[
            "template",
            "x",
            chart.to_str().unwrap(),
            "--set",
            "webhooks.certManager.enabled=false",
        ],
        None,
    );
    assert!(!ok && err.contains("webhooks.certificate."), "{err}");
}

#[test]
fn value_sets_render_what_they_say() {
    let Some(helm) = helm() else { return };
    let sets: BTreeMap<_, _> = value_sets().into_iter().collect();
    let docs = template(&helm, &sets["operations"]);
    let d = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    assert_eq!(d["spec"]["replicas"], 2);
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], "registry.example/capmox-rs:v0.11.0");
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        args,
        [
            "--leader-elect",
            "--feature-gates=ClusterTopology=true",
            "--diagnostics-address=:8080",
            "--insecure-diagnostics=false",
            "--v=2",
            "--watch-filter=shard-a",
            "--namespace=team-a,team-b",
            "--sync-period=15m",
            "--concurrency=20",
            "--guest-agent-timeout=15m",
        ]
    );
    // Every manager argument parses.
    let mut argv = vec!["capmox"];
    argv.extend(args.iter().copied());
    <capmox::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
    assert_eq!(
        d["spec"]["template"]["spec"]["nodeSelector"]["kubernetes.io/os"],
        "linux"
    );
    assert_eq!(
        d["spec"]["template"]["metadata"]["annotations"]["example.com/owner"],
        "platform"
    );
    for kind in ["ServiceMonitor", "NetworkPolicy", "ClusterRoleBinding"] {
        assert!(docs.iter().any(|d| d["kind"] == kind), "{kind} rendered");
    }
    let secret = docs.iter().find(|d| d["kind"] == "Secret").unwrap();
    assert_eq!(secret["stringData"]["url"], "https://pve.example:8006");

    let docs = template(&helm, &sets["provided-certificate"]);
    assert!(
        !docs
            .iter()
            .any(|d| d["kind"] == "Certificate" || d["kind"] == "Secret")
    );
    let d = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["volumes"][0]["secret"]["secretName"], "capmox-webhook-tls");
    assert_eq!(
        pod["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"]["name"],
        "pve-credentials"
    );
    assert!(
        !pod["containers"][0]["args"]
            .as_array()
            .unwrap()
            .contains(&json!("--leader-elect"))
    );
    for d in docs.iter().filter(|d| d["kind"] == "CustomResourceDefinition") {
        assert!(
            d["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"].is_string(),
            "{}",
            key(d)
        );
        assert!(
            d["metadata"]["annotations"]
                .as_object()
                .is_none_or(|a| a.is_empty()),
            "{}",
            key(d)
        );
    }
    let v = docs
        .iter()
        .find(|d| d["kind"] == "ValidatingWebhookConfiguration")
        .unwrap();
    assert!(v["webhooks"][0]["clientConfig"]["caBundle"].is_string());

    let docs = template(&helm, &sets["without-crds"]);
    assert!(!docs.iter().any(|d| d["kind"] == "CustomResourceDefinition"));
}

fn crd(v: Value) -> CustomResourceDefinition {
    serde_json::from_value(v).unwrap()
}

/// The CRDs of other projects the rendered objects use (cert-manager, Prometheus operator).
async fn foreign_crds(env: &TestEnv) {
    env.install_crds(vec![
        crd(permissive_crd("cert-manager.io", "Certificate", &["v1"], true)),
        crd(permissive_crd("cert-manager.io", "Issuer", &["v1"], true)),
        crd(permissive_crd(
            "monitoring.coreos.com",
            "ServiceMonitor",
            &["v1"],
            true,
        )),
    ])
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renderings_pass_a_server_side_dry_run() {
    let Some(helm) = helm() else { return };
    if !kubectl_present() {
        eprintln!("skipped: kubectl not found (it sends the renderings to the API server)");
        return;
    }
    let env = TestEnv::start().await.unwrap();
    foreign_crds(&env).await;
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}});
    let kc = env.kubeconfig_path().to_owned();
    let (ok, _, err) = tokio::task::block_in_place(|| {
        kubectl(Some(&kc), &["apply", "-f", "-"], Some(&to_yaml_stream(&[ns])))
    });
    assert!(ok, "{err}");
    for (name, values) in value_sets() {
        let (docs, skipped) = judgeable(&template(&helm, &values), env.is_real());
        if !skipped.is_empty() {
            eprintln!(
                "{name}: judged by the real kube-apiserver only: {}",
                skipped.join(", ")
            );
        }
        let (ok, out, err) = tokio::task::block_in_place(|| {
            kubectl(
                Some(&kc),
                &[
                    "apply",
                    "--server-side",
                    "--dry-run=server",
                    "--field-manager=helm-test",
                    "-f",
                    "-",
                ],
                Some(&to_yaml_stream(&docs)),
            )
        });
        assert!(ok, "{name}: the API server refused it:\n{err}\n{out}");
        assert_eq!(out.lines().count(), docs.len(), "{name}: {out}");
    }
}

/// `kubectl get <what> -o json` (None when it does not exist).
fn get(kc: &Path, what: &[&str]) -> Option<Value> {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-o", "json"]);
    let (ok, out, _) = kubectl(Some(kc), &args, None);
    ok.then(|| serde_json::from_str(&out).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_upgrade_uninstall_on_the_real_api_server() {
    let Some(helm) = helm() else { return };
    if !kubectl_present() {
        eprintln!("skipped: kubectl not found");
        return;
    }
    let env = TestEnv::start().await.unwrap();
    if !env.is_real() {
        eprintln!("skipped: helm install needs the real kube-apiserver (KUBEBUILDER_ASSETS, make test-real)");
        return;
    }
    foreign_crds(&env).await;
    let kc = env.kubeconfig_path().to_owned();
    let chart = chart_dir();
    let chart = chart.to_str().unwrap();
    let helm_run = |args: &[&str]| {
        let (ok, out, err) = tokio::task::block_in_place(|| run_helm(&helm, args, Some(&kc)));
        assert!(ok, "helm {args:?}: {err}\n{out}");
        out
    };
    let deployment = ["deployment", "capmox-controller-manager", "-n", NS];

    helm_run(&[
        "install",
        "capmox",
        chart,
        "--namespace",
        NS,
        "--create-namespace",
    ]);
    let d = tokio::task::block_in_place(|| get(&kc, &deployment)).expect("the Deployment was created");
    assert_eq!(d["spec"]["replicas"], 1);
    assert_eq!(
        d["metadata"]["annotations"]["meta.helm.sh/release-name"],
        "capmox"
    );
    for what in [
        ["crd", "proxmoxmachines.infrastructure.cluster.x-k8s.io"],
        ["clusterrole", "capmox-manager-role"],
        [
            "validatingwebhookconfiguration",
            "capmox-validating-webhook-configuration",
        ],
    ] {
        assert!(
            tokio::task::block_in_place(|| get(&kc, &what)).is_some(),
            "{what:?} created"
        );
    }
    assert!(
        tokio::task::block_in_place(|| get(&kc, &["certificate", "capmox-serving-cert", "-n", NS])).is_some()
    );

    helm_run(&[
        "upgrade",
        "capmox",
        chart,
        "--namespace",
        NS,
        "--set",
        "replicaCount=2",
        "--set",
        "watchFilter=shard-a",
        "--set",
        "serviceMonitor.enabled=true",
    ]);
    let d = tokio::task::block_in_place(|| get(&kc, &deployment)).unwrap();
    assert_eq!(d["spec"]["replicas"], 2);
    let args = d["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap();
    assert!(args.contains(&json!("--watch-filter=shard-a")), "{args:?}");
    assert!(
        tokio::task::block_in_place(|| get(
            &kc,
            &[
                "servicemonitor",
                "capmox-controller-manager-metrics-monitor",
                "-n",
                NS
            ]
        ))
        .is_some()
    );

    helm_run(&["uninstall", "capmox", "--namespace", NS, "--wait"]);
    for what in [
        &deployment[..],
        &["clusterrole", "capmox-manager-role"],
        &[
            "validatingwebhookconfiguration",
            "capmox-validating-webhook-configuration",
        ],
        &["certificate", "capmox-serving-cert", "-n", NS],
    ] {
        assert!(
            tokio::task::block_in_place(|| get(&kc, what)).is_none(),
            "{what:?} removed"
        );
    }
    // The CRDs stay (crds.keep): deleting them would delete every Proxmox object.
    assert!(
        tokio::task::block_in_place(|| get(&kc, &["crd", "proxmoxmachines.infrastructure.cluster.x-k8s.io"]))
            .is_some()
    );
}
