//! `make demo-vm` with pve-sim's instant profile: the VM runs with its address, is paused,
//! resumed, resized, snapshotted, changed, restored and cloned, an image served on loopback
//! becomes a template a second VM runs from, and nothing is left after the deletions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_vm_walks_one_vm_and_leaks_nothing() {
    let mut out = Vec::new();
    let result = capmox_demo::vm::run_vm(true, &mut out).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    println!("{text}");
    let report = result.unwrap_or_else(|e| panic!("demo failed: {e}\n{text}"));
    assert_eq!(report.ips, ["10.40.0.10"], "{text}");
    assert!(report.vmid.is_some() && report.node.is_some(), "{text}");
    assert!(report.clean(), "{text}");
    for phase in ["Running", "Paused"] {
        assert!(text.contains(&format!("demo-db: {phase}")), "{text}");
    }
    assert!(
        text.contains("demo-db: rolled back, 4096 MiB, running; SpecDrift: memory"),
        "{text}"
    );
    assert!(
        text.contains("demo-db-copy: Succeeded, a second running VM"),
        "{text}"
    );
    for line in [
        "demo-noble: Ready, template VMID",
        "demo-web: Running, VMID",
        "deleted demo-web and demo-noble (its template with it)",
    ] {
        assert!(text.contains(line), "{line}: {text}");
    }
}
