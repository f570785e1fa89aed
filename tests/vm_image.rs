//! ProxmoxVMImage against pve-sim and the test control plane (in-tree, or the real
//! kube-apiserver with `KUBEBUILDER_ASSETS`): an image served on loopback becomes a template
//! (download with its checksum → VM with the disk imported → template, the file removed), a
//! ProxmoxVirtualMachine naming it waits for it and then clones it; a second image of the same
//! name and checksum reuses the template; a checksum mismatch fails and leaves nothing; bad
//! input gets an admission error or a clear condition. A ProxmoxMachine naming an image
//! (`spec.imageRef`) waits for it (nothing made in Proxmox while it is missing), then clones its
//! template and is provisioned; `imageRef` beside another template source is refused by the API
//! server's CEL rules.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod image_support;
mod machine_support;
mod vm_support;

use capmox_api::vm::{ImagePhase, VmPhase};
use image_support::*;
use serde_json::json;
use vm_support::fast_settings;

const DOWNLOAD: &str = "POST /nodes/{node}/storage/{storage}/download-url";

fn vm_reason(p: &capmox_api::vm::ProxmoxVirtualMachine) -> Option<(String, String)> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.reason.clone(), c.message.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_becomes_a_template_that_a_vm_clones_and_a_second_image_reuses() {
    let ih = ImageHarness::start(fast_settings()).await;
    let st = ih.h.sim.state();
    // The file server holds the download until the VM was seen waiting for the image.
    ih.files.hold_after(100);
    ih.create("noble", ih.spec()).await.unwrap();
    ih.wait_phase("noble", ImagePhase::Downloading, 60).await;
    ih.h.create(
        "web",
        json!({"imageRef": {"name": "noble"}, "memoryMiB": 1024,
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0"}]}}),
    )
    .await;
    let waiting =
        ih.h.wait("web", 60, "waiting for its image", |p| {
            vm_reason(p).is_some_and(|(r, _)| r == "WaitingForImage")
        })
        .await;
    assert!(
        vm_reason(&waiting).unwrap().1.contains("ProxmoxVMImage noble"),
        "{waiting:?}"
    );
    assert_eq!(waiting.status.unwrap().phase, Some(VmPhase::Pending));
    ih.files.release();

    let img = ih.wait_phase("noble", ImagePhase::Ready, 60).await;
    let status = img.status.clone().unwrap();
    let vmid = u32::try_from(status.template_vmid.unwrap()).unwrap();
    assert_eq!(status.node.as_deref(), Some("pve1"));
    assert_eq!(status.progress, Some(100));
    assert_eq!(ready(&img).unwrap().1, "TemplateReady");
    assert_eq!(ih.templates_named("noble-tmpl"), [vmid]);
    let vm = st.vm(vmid).unwrap();
    assert!(
        vm.config["tags"].contains("capmox-image_sha256-"),
        "{:?}",
        vm.config
    );
    assert!(
        vm.config["scsi0"].starts_with(&format!("local-lvm:base-{vmid}-disk-0")),
        "{:?}",
        vm.config
    );
    assert!(vm.config["scsi0"].ends_with("size=2G"), "{:?}", vm.config);
    assert!(
        ih.import_files().is_empty(),
        "the downloaded file is removed once the template exists"
    );
    assert_eq!(st.request_count(DOWNLOAD), 1);

    // The VM clones the image's template and runs.
    let web = ih.h.wait_phase("web", VmPhase::Running, 60).await;
    let web_vmid = u32::try_from(web.status.unwrap().vmid.unwrap()).unwrap();
    assert!(st.vm(web_vmid).unwrap().config["scsi0"].contains(&format!("vm-{web_vmid}-disk-0")));
    assert_eq!(
        st.clone_history().last().map(|(v, _)| *v),
        Some(web_vmid),
        "the VM is a clone"
    );

    // A second image of the same name and checksum takes the template over: no download.
    ih.create("noble-again", ih.spec()).await.unwrap();
    let again = ih.wait_phase("noble-again", ImagePhase::Ready, 60).await;
    let s = again.status.unwrap();
    assert_eq!(s.template_vmid, Some(i64::from(vmid)));
    assert_eq!(s.templates.unwrap()[0].reused, Some(true));
    assert_eq!(
        st.request_count(DOWNLOAD),
        1,
        "a reused template downloads nothing"
    );

    // Deleting the image that reused the template leaves it; deleting its maker removes it.
    ih.images()
        .delete("noble-again", &Default::default())
        .await
        .unwrap();
    ih.wait_gone("noble-again", 60).await;
    assert_eq!(ih.templates_named("noble-tmpl"), [vmid]);
    ih.h.pvms().delete("web", &Default::default()).await.unwrap();
    ih.h.wait_gone("web", 60).await;
    ih.images().delete("noble", &Default::default()).await.unwrap();
    ih.wait_gone("noble", 60).await;
    assert!(
        ih.templates_named("noble-tmpl").is_empty(),
        "the template went with its image"
    );
    assert!(st.leftovers().is_empty(), "{:?}", st.leftovers());
    ih.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checksum_mismatch_fails_and_leaves_nothing_in_proxmox() {
    let ih = ImageHarness::start(fast_settings()).await;
    let st = ih.h.sim.state();
    let mut spec = ih.spec();
    spec["checksum"] = json!("0".repeat(64));
    ih.create("bad", spec).await.unwrap();
    let img = ih.wait_phase("bad", ImagePhase::Failed, 60).await;
    let (status, reason, message) = ready(&img).unwrap();
    assert_eq!((status.as_str(), reason.as_str()), ("False", "ChecksumMismatch"));
    assert!(message.contains("checksum mismatch: got '"), "{message}");
    assert!(ih.templates_named("noble-tmpl").is_empty());
    assert!(
        st.leftovers().is_empty(),
        "nothing half-made: {:?}",
        st.leftovers()
    );
    // It stays failed (no retry loop) until the spec changes: a fixed checksum then succeeds.
    let downloads = st.request_count(DOWNLOAD);
    let mut fixed = ih.spec();
    fixed["templateName"] = json!("fixed-tmpl");
    ih.images()
        .patch(
            "bad",
            &Default::default(),
            &kube::api::Patch::Merge(&json!({"spec": fixed})),
        )
        .await
        .unwrap();
    ih.wait_phase("bad", ImagePhase::Ready, 60).await;
    assert_eq!(st.request_count(DOWNLOAD), downloads + 1);
    assert_eq!(ih.templates_named("fixed-tmpl").len(), 1);
    ih.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_an_admission_error_or_a_clear_condition() {
    let ih = ImageHarness::start(fast_settings()).await;
    let st = ih.h.sim.state();
    // Refused by the API server.
    for (what, patch, expect) in [
        (
            "a URL that is not http(s)",
            json!({"url": "ftp://example.com/noble.qcow2"}),
            "url",
        ),
        (
            "a checksum without its algorithm",
            json!({"checksumAlgorithm": null}),
            "checksum and checksumAlgorithm go together",
        ),
        (
            "node and nodes",
            json!({"nodes": ["pve2"]}),
            "set exactly one of node and nodes",
        ),
    ] {
        let mut spec = ih.spec();
        if let (Some(s), Some(p)) = (spec.as_object_mut(), patch.as_object()) {
            for (k, v) in p {
                if v.is_null() {
                    s.remove(k);
                } else {
                    s.insert(k.clone(), v.clone());
                }
            }
        }
        let err = ih.create("refused", spec).await.expect_err(what).to_string();
        assert!(err.contains(expect), "{what}: {err}");
    }
    // A storage that cannot take the download: Proxmox's words in the condition, nothing made.
    let mut spec = ih.spec();
    spec["storage"] = json!("local-lvm");
    ih.create("no-import", spec).await.unwrap();
    let img = ih.wait_phase("no-import", ImagePhase::Failed, 60).await;
    let (_, reason, message) = ready(&img).unwrap();
    assert_eq!(reason, "DownloadFailed");
    assert!(message.contains("not a file based storage"), "{message}");
    let mut spec = ih.spec();
    spec["storage"] = json!("shared");
    ih.create("no-import-content", spec).await.unwrap();
    let img = ih.wait_phase("no-import-content", ImagePhase::Failed, 60).await;
    assert!(
        ready(&img)
            .unwrap()
            .2
            .contains("is not configured for content-type 'import'"),
        "{img:?}"
    );
    // A VM naming an image that does not exist waits with a clear reason.
    ih.h.create("orphan", json!({"imageRef": {"name": "nope"}})).await;
    let p =
        ih.h.wait("orphan", 60, "waiting for a missing image", |p| {
            vm_reason(p).is_some_and(|(r, m)| r == "WaitingForImage" && m.contains("does not exist"))
        })
        .await;
    assert_eq!(p.status.unwrap().phase, Some(VmPhase::Pending));
    assert!(st.non_template_vmids().is_empty() && ih.import_files().is_empty());
    ih.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxmox_machine_clones_an_image_and_waits_for_a_missing_one() {
    use capmox_api::v1alpha2::{MESSAGE_MACHINE_IMAGE_REF_ALONE, ProxmoxMachine};
    use machine_support as ms;

    let h = ms::Harness::start_with(sim_config(), ms::fast_machine_settings()).await;
    let st = h.sim.state();
    h.env
        .install_crds(vec![capmox_api::crd::proxmox_vm_images().unwrap()])
        .await
        .unwrap();
    let images_controller = tokio::spawn(capmox::controllers::vm_image::run(
        h.context(),
        std::future::pending::<()>(),
    ));
    let files = pve_sim::fileserver::FileServer::start().await.unwrap();
    files.put("noble.qcow2", image_bytes());
    let images = kube::Api::<capmox_api::vm::ProxmoxVMImage>::namespaced(h.client.clone(), ms::NS);
    let image: capmox_api::vm::ProxmoxVMImage = serde_json::from_value(json!({
        "apiVersion": capmox_api::vm::API_VERSION, "kind": capmox_api::vm::IMAGE_KIND,
        "metadata": {"name": "noble", "namespace": ms::NS},
        "spec": {"url": files.url("noble.qcow2"), "node": "pve1", "storage": "local",
            "checksum": sha256(&image_bytes()), "checksumAlgorithm": "sha256",
            "templateName": "noble-tmpl", "hardware": {"diskStorage": "local-lvm"}}
    }))
    .unwrap();
    images.create(&Default::default(), &image).await.unwrap();
    h.create_cluster("c1", json!({})).await;
    // The machine spec names the image instead of a template.
    let by_image = |name: &str| json!({"imageRef": {"name": name}, "templateID": null, "sourceNode": null, "full": false});

    // imageRef beside templateID (with sourceNode) or templateSelector: refused, in v1alpha2
    // and in v1alpha1, with the rule's message.
    let v1 = json!({"imageRef": {"name": "noble"}});
    for (version, extra) in [
        ("v1alpha2", json!({"templateID": 100, "sourceNode": "pve1"})),
        ("v1alpha2", json!({"templateSelector": {"matchTags": ["a"]}})),
        ("v1alpha1", json!({"templateID": 100, "sourceNode": "pve1"})),
    ] {
        let mut full = if version == "v1alpha1" {
            v1.clone()
        } else {
            let mut s = ms::default_machine_spec();
            ms::merge(&mut s, by_image("noble"));
            s
        };
        ms::merge(&mut full, extra.clone());
        let obj: kube::api::DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("infrastructure.cluster.x-k8s.io/{version}"), "kind": "ProxmoxMachine",
            "metadata": {"name": "both", "namespace": ms::NS}, "spec": full
        }))
        .unwrap();
        let (group, kind) = ("infrastructure.cluster.x-k8s.io", "ProxmoxMachine");
        let ar = kube::discovery::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(group, version, kind),
            "proxmoxmachines",
        );
        let api = kube::Api::<kube::api::DynamicObject>::namespaced_with(h.client.clone(), ms::NS, &ar);
        let err = api
            .create(&Default::default(), &obj)
            .await
            .expect_err("imageRef with another template source")
            .to_string();
        assert!(
            err.contains(MESSAGE_MACHINE_IMAGE_REF_ALONE),
            "{version} {extra}: {err}"
        );
    }

    // A machine naming an image that does not exist waits, with nothing made in Proxmox.
    let orphan = h
        .create_machine(
            "c1",
            "orphan",
            false,
            Some((ms::CLOUD_CONFIG, None)),
            by_image("nope"),
        )
        .await;
    assert_eq!(orphan.spec.image_ref.as_ref().unwrap().name, "nope");
    let waiting = h
        .wait_pm("orphan", 60, "waiting for a missing image", |pm| {
            pm.condition("VirtualMachineProvisioned")
                .is_some_and(|c| c.reason == "WaitingForImage" && c.message.contains("does not exist"))
        })
        .await;
    assert_eq!(waiting.spec.virtual_machine_id, None);

    // A machine naming the image clones its template once it is Ready.
    h.create_machine(
        "c1",
        "m1",
        false,
        Some((ms::CLOUD_CONFIG, None)),
        by_image("noble"),
    )
    .await;
    let img = testenv::wait::wait_for(60, "image noble Ready", || async {
        let img = images.get_opt("noble").await.ok().flatten()?;
        (img.status.as_ref()?.phase == Some(ImagePhase::Ready)).then_some(img)
    })
    .await;
    let template = u32::try_from(img.status.unwrap().template_vmid.unwrap()).unwrap();
    let m1: ProxmoxMachine = h.wait_provisioned("m1", 120).await;
    assert!(
        m1.spec
            .provider_id
            .as_deref()
            .is_some_and(|p| p.starts_with("proxmox://")),
        "{:?}",
        m1.spec
    );
    let vmid = u32::try_from(m1.spec.virtual_machine_id.unwrap()).unwrap();
    assert_eq!(
        st.with(|c| c.vms[&vmid].linked_base),
        Some(template),
        "a linked clone of the image's template"
    );
    // Only m1's VM exists: the orphan still waits and made nothing.
    assert_eq!(st.non_template_vmids(), [vmid]);
    let orphan = h.pms().get("orphan").await.unwrap();
    assert_eq!(ms::reason_of(&orphan).as_deref(), Some("WaitingForImage"));
    images_controller.abort();
    let _ = images_controller.await;
    h.stop().await;
}
