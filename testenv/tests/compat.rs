//! Installs capmox v0.9, CAPI v1.12 and in-cluster IPAM CRDs from `../shared/compat` and applies
//! capmox's v1alpha2 samples, checking the defaults the API server fills in.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

fn ar_for(obj: &Value, plural: &str) -> ApiResource {
    let av = obj["apiVersion"].as_str().unwrap();
    let (group, version) = av.split_once('/').unwrap();
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: av.into(),
        kind: obj["kind"].as_str().unwrap().into(),
        plural: plural.into(),
    }
}

#[tokio::test]
async fn capmox_capi_ipam_crds_and_samples() {
    let capmox = common::compat("capmox-v0.9/crd");
    if !capmox.is_dir() {
        eprintln!("skipped: ../shared/compat/capmox-v0.9/crd not found");
        return;
    }
    let env = common::env().await;
    let c = env.client();
    let mut names = Vec::new();
    for dir in ["capmox-v0.9/crd", "capi-v1.12", "ipam-in-cluster"] {
        let installed = env.install_crds_from_path(common::compat(dir)).await.unwrap();
        assert!(!installed.is_empty(), "no CRDs in {dir}");
        names.extend(installed.into_iter().map(|c| c.metadata.name.unwrap()));
    }
    for n in [
        "proxmoxclusters.infrastructure.cluster.x-k8s.io",
        "proxmoxmachines.infrastructure.cluster.x-k8s.io",
        "clusters.cluster.x-k8s.io",
        "machines.cluster.x-k8s.io",
        "ipaddressclaims.ipam.cluster.x-k8s.io",
        "inclusterippools.ipam.cluster.x-k8s.io",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} not installed");
    }
    let ns = common::namespace(&c).await;
    let samples = common::compat("capmox-v0.9/samples");
    let mut files: Vec<_> = std::fs::read_dir(&samples)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().unwrap().to_string_lossy().contains("v1alpha2"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let mut applied = Vec::new();
    let mut rejected_machine = false;
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for doc in testenv::crds::parse_documents(&text, &f.display().to_string()).unwrap() {
            let kind = doc["kind"].as_str().unwrap().to_lowercase();
            let api: Api<DynamicObject> =
                Api::namespaced_with(c.clone(), &ns, &ar_for(&doc, &format!("{kind}s")));
            let name = doc["metadata"]["name"].as_str().unwrap().to_string();
            match api
                .patch(&name, &PatchParams::apply("compat-test"), &Patch::Apply(&doc))
                .await
            {
                Ok(out) => applied.push((kind, serde_json::to_value(&out).unwrap())),
                // The scaffolded ProxmoxMachine sample has an empty `spec:` (null). Server-side apply
                // keeps the null (it is not pruned as in a create), so kube-apiserver rejects it as
                // a type error, and says the CEL rules it skipped were not checked.
                Err(kube::Error::Api(e)) if kind == "proxmoxmachine" => {
                    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
                    let causes = e.details.unwrap().causes;
                    let has = |field: &str, reason: &str, message: &str| {
                        causes
                            .iter()
                            .any(|c| c.field == field && c.reason == reason && c.message == message)
                    };
                    assert!(
                        has(
                            "spec",
                            "FieldValueTypeInvalid",
                            "Invalid value: \"null\": spec in body must be of type object: \"null\""
                        ),
                        "{causes:?}"
                    );
                    assert!(
                        has(
                            "<nil>",
                            "FieldValueInvalid",
                            "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"
                        ),
                        "{causes:?}"
                    );
                    rejected_machine = true;
                }
                Err(e) => panic!("applying {}: {e}", f.display()),
            }
        }
    }
    let cluster = &applied.iter().find(|(k, _)| k == "proxmoxcluster").unwrap().1;
    // Defaults from the v1alpha2 schema, as kube-apiserver fills them in.
    assert_eq!(cluster["spec"]["ipv4Config"]["prefix"], 24);
    assert_eq!(cluster["spec"]["ipv4Config"]["metric"], 100, "{cluster:#}");
    assert_eq!(
        cluster["spec"]["externalManagedControlPlane"], false,
        "{cluster:#}"
    );
    assert_eq!(cluster["spec"]["dnsServers"], json!(["8.8.8.8", "8.8.4.4"]));
    assert_eq!(
        cluster["metadata"]["labels"]["app.kubernetes.io/name"],
        "proxmoxcluster"
    );
    assert!(
        rejected_machine,
        "the ProxmoxMachine sample was expected to be rejected"
    );
    // The same kind with a minimal valid spec is accepted.
    let pm = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2", "kind": "ProxmoxMachine"});
    let api: Api<DynamicObject> = Api::namespaced_with(c.clone(), &ns, &ar_for(&pm, "proxmoxmachines"));
    let m = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2", "kind": "ProxmoxMachine",
        "metadata": {"name": "m"}, "spec": {"sourceNode": "pve1", "templateID": 100,
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0"}]}}});
    let out = api
        .patch("m", &PatchParams::apply("compat-test"), &Patch::Apply(&m))
        .await;
    let out = serde_json::to_value(out.unwrap()).unwrap();
    assert_eq!(out["spec"]["full"], true, "{out:#}");
    assert_eq!(
        out["spec"]["network"]["networkDevices"][0]["model"], "virtio",
        "{out:#}"
    );
    assert_eq!(out["metadata"]["generation"], 1);
}
