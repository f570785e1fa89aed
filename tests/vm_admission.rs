//! Bad ProxmoxVirtualMachines are refused at admission, on the in-tree and the real API server,
//! with the manager's webhook server registered by URL: the CRD's schema and CEL refuse what they
//! can say (two template sources, an unknown run strategy, a VMID outside `vmIDRange`, a malformed
//! MAC, less than 64 MiB, a shrinking disk), the webhook what only it can (an IPv6 address that
//! does not parse, deleting a protected VM's object). Nothing refused reaches the store.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod webhook_support;

use capmox_api::webhook::registration::vm_admission_configuration;
use capmox_api::webhook::vm::VM_WEBHOOK_NAME;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn pvm(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": capmox_api::vm::API_VERSION, "kind": capmox_api::vm::KIND,
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap()
}

fn refusal(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("expected the API server's refusal, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_refused_at_admission() {
    let env = testenv::TestEnv::start().await.unwrap();
    let c = env.client();
    let hooks = webhook_support::start().await;
    env.install_crds(vec![capmox_api::crd::proxmox_virtual_machines().unwrap()])
        .await
        .unwrap();
    Api::<ValidatingWebhookConfiguration>::all(c.clone())
        .create(
            &PostParams::default(),
            &vm_admission_configuration(&hooks.base_url, hooks.ca_pem.as_bytes()),
        )
        .await
        .unwrap();
    let ns = webhook_support::namespace(&c, "vm-admission").await;
    let ar = ApiResource {
        group: capmox_api::vm::GROUP.into(),
        version: capmox_api::vm::VERSION.into(),
        api_version: capmox_api::vm::API_VERSION.into(),
        kind: capmox_api::vm::KIND.into(),
        plural: capmox_api::vm::PLURAL.into(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(c.clone(), &ns, &ar);
    // The API server takes the configuration in eventually: wait until the webhook refuses.
    let webhook_only = json!({"templateID": 100, "network": {"networkDevices": [
        {"name": "net0", "ipv6Addresses": ["fd00::zz/64"]}]}});
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    testenv::wait::wait_for(30, "the webhook to take effect", || {
        let api = api.clone();
        let obj = pvm("probe", webhook_only.clone());
        let dry = dry.clone();
        async move {
            match api.create(&dry, &obj).await {
                Err(kube::Error::Api(s)) if s.message.contains(VM_WEBHOOK_NAME) => Some(()),
                _ => None,
            }
        }
    })
    .await;
    let base = json!({"templateID": 100, "sourceNode": "pve1"});
    let with = |extra: Value| {
        let mut s = base.clone();
        if let (Some(b), Value::Object(e)) = (s.as_object_mut(), extra) {
            b.extend(e);
        }
        s
    };
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "two template sources",
            with(json!({"templateSelector": {"matchTags": ["ubuntu"]}})),
            "set at most one of templateID, templateSelector, templateName and imageRef",
        ),
        (
            "unknown run strategy",
            with(json!({"runStrategy": "Sometimes"})),
            "Sometimes",
        ),
        (
            "VMID outside vmIDRange",
            with(json!({"vmid": 5000, "vmIDRange": {"start": 100, "end": 200}})),
            "vmid must lie within vmIDRange",
        ),
        (
            "malformed MAC",
            with(json!({"network": {"networkDevices": [{"name": "net0", "macAddress": "BC-24-11"}]}})),
            "macAddress",
        ),
        ("memory below 64 MiB", with(json!({"memoryMiB": 32})), "memoryMiB"),
        (
            "adopt without a VMID",
            json!({"adopt": true}),
            "adopt: true with vmid",
        ),
        (
            "no template",
            json!({}),
            "set templateID, templateSelector, templateName or imageRef",
        ),
        (
            "an IPv6 address that does not parse",
            webhook_only.clone(),
            "not an address with a prefix length",
        ),
    ];
    for (case, spec, want) in cases {
        let (code, message) = refusal(
            api.create(&PostParams::default(), &pvm("bad", spec))
                .await
                .unwrap_err(),
        );
        assert_eq!(code, 422, "{case}: {message}");
        assert!(message.contains(want), "{case}: {message}");
        assert!(
            api.get_opt("bad").await.unwrap().is_none(),
            "{case}: nothing stored"
        );
    }

    // Disks only grow; the VMID stays.
    let spec = with(json!({"vmid": 300, "protection": true,
        "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 30},
                  "additionalVolumes": [{"disk": "scsi1", "sizeGb": 10}]}}));
    api.create(&PostParams::default(), &pvm("db", spec))
        .await
        .unwrap();
    let patch = |v: Value| {
        let api = api.clone();
        async move { api.patch("db", &PatchParams::default(), &Patch::Merge(&v)).await }
    };
    for (case, p, want) in [
        (
            "boot volume shrink",
            json!({"spec": {"disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20}}}}),
            "disks cannot shrink",
        ),
        (
            "data disk shrink",
            json!({"spec": {"disks": {"additionalVolumes": [{"disk": "scsi1", "sizeGb": 5}]}}}),
            "disks cannot shrink",
        ),
        (
            "VMID change",
            json!({"spec": {"vmid": 301}}),
            "vmid cannot be changed",
        ),
    ] {
        let (code, message) = refusal(patch(p).await.unwrap_err());
        assert_eq!(code, 422, "{case}: {message}");
        assert!(message.contains(want), "{case}: {message}");
    }
    patch(json!({"spec": {"disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 40}}}}))
        .await
        .expect("a disk may grow");

    // A protected VM's object cannot be deleted until protection is off.
    let (code, message) = refusal(api.delete("db", &DeleteParams::default()).await.unwrap_err());
    assert_eq!(code, 403, "{message}");
    assert!(
        message.contains("is protected (spec.protection: true)") && message.contains(VM_WEBHOOK_NAME),
        "{message}"
    );
    assert!(api.get_opt("db").await.unwrap().is_some());
    patch(json!({"spec": {"protection": false}})).await.unwrap();
    api.delete("db", &DeleteParams::default()).await.unwrap();
    drop(hooks);
}
