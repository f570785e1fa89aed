//! Crash safety of the ProxmoxVMImage controller against pve-sim: one image's import — VMID,
//! download, VM created from the file, template, file removed — with the controller killed
//! between any two of its Proxmox calls (pve-sim's request gate holds request `k + 1`, the
//! controller is aborted, the held request discarded so it never reaches Proxmox), then
//! restarted. Each run must end with exactly one template of the image's name, no other VM and
//! no downloaded file left; deleting the image then leaves nothing. The sweep runs `k = 1, 2, …`
//! until a run finishes before the gate closes, so every position is covered.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod image_support;
mod vm_support;

use std::time::{Duration, Instant};

use capmox_api::vm::ImagePhase;
use image_support::*;
use serde_json::json;

fn crash_settings() -> capmox::vm::Settings {
    capmox::vm::Settings {
        task_poll_initial: Duration::from_millis(10),
        task_poll_max: Duration::from_millis(100),
        resync: Duration::from_secs(30),
        ..vm_support::fast_settings()
    }
}

async fn phase_is(ih: &ImageHarness, name: &str, phase: ImagePhase) -> bool {
    ih.images()
        .get_opt(name)
        .await
        .unwrap()
        .is_some_and(|i| i.status.and_then(|s| s.phase) == Some(phase))
}

/// Waits until a request is blocked at the gate (`true`) or the image is Ready with nothing
/// blocked (`false`).
async fn blocked_or_ready(ih: &ImageHarness, name: &str) -> bool {
    let st = ih.h.sim.state();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if st.blocked_requests() > 0 {
            return true;
        }
        if phase_is(ih, name, ImagePhase::Ready).await {
            return st.blocked_requests() > 0;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for a blocked request or {name} Ready"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn wait_true<F, Fut>(secs: u64, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_survives_a_crash_between_any_two_proxmox_calls() {
    let mut ih = ImageHarness::start(crash_settings()).await;
    let st = ih.h.sim.state();
    let base_spec = ih.spec();
    let spec = |n: u64| {
        let mut s = base_spec.clone();
        s["templateName"] = json!(format!("tmpl-{n}"));
        s
    };
    let before = st.request_total();
    ih.create("base", spec(0)).await.unwrap();
    ih.wait_phase("base", ImagePhase::Ready, 60).await;
    let baseline = st.request_total() - before;
    eprintln!("baseline: {baseline} Proxmox requests to Ready");

    let mut k = 0;
    loop {
        k += 1;
        assert!(k <= 3 * baseline + 20, "the sweep does not end (k = {k})");
        let name = format!("i{k}");
        let what = format!("crash at {k}");
        st.gate_after(k);
        ih.create(&name, spec(k)).await.unwrap();
        let crashed = blocked_or_ready(&ih, &name).await;
        if crashed {
            ih.kill_images().await;
            st.discard_blocked();
            st.open_gate();
            ih.start_images();
        } else {
            st.open_gate();
        }
        let img = ih.wait_phase(&name, ImagePhase::Ready, 60).await;
        let vmid = u32::try_from(img.status.unwrap().template_vmid.unwrap()).unwrap();
        assert_eq!(
            ih.templates_named(&format!("tmpl-{k}")),
            [vmid],
            "{what}: one template"
        );
        assert!(
            st.non_template_vmids().is_empty(),
            "{what}: no other VM: {:?}",
            st.non_template_vmids()
        );
        wait_true(30, &format!("no file left ({what})"), || async {
            ih.import_files().is_empty()
        })
        .await;
        // Deleting it leaves nothing of it.
        ih.images().delete(&name, &Default::default()).await.unwrap();
        ih.wait_gone(&name, 60).await;
        assert!(
            ih.templates_named(&format!("tmpl-{k}")).is_empty(),
            "{what}: template deleted"
        );
        if !crashed {
            break;
        }
    }
    eprintln!("image crash sweep: covered gate positions 1..={k} (baseline {baseline})");
    assert!(k >= 5, "the sweep covered only {k} positions");
    assert!(st.running_tasks() == 0 && ih.import_files().is_empty());
    ih.stop().await;
}
