//! `make demo` end to end with pve-sim's instant profile: three machines provisioned with
//! distinct VMIDs and addresses and capmox providerIDs, and nothing left after the deletion.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use capmox_demo::{DemoOptions, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_provisions_three_machines_and_leaks_nothing() {
    let opts = DemoOptions {
        profile_instant: true,
        provision_timeout: Duration::from_secs(90),
        ..DemoOptions::default()
    };
    let mut out = Vec::new();
    let result = run(opts, &mut out).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    println!("{text}");
    let report = result.unwrap_or_else(|e| panic!("demo failed: {e}\n{text}"));

    assert_eq!(report.machines.len(), 3, "{text}");
    let names: Vec<&str> = report.machines.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["demo-cp-0", "demo-worker-0", "demo-worker-1"]);

    let vmids: BTreeSet<i64> = report
        .machines
        .iter()
        .map(|m| m.vmid.expect("VMID set"))
        .collect();
    assert_eq!(vmids.len(), 3, "distinct VMIDs: {vmids:?}");
    let ips: BTreeSet<&str> = report
        .machines
        .iter()
        .flat_map(|m| m.ips.iter().map(String::as_str))
        .collect();
    assert_eq!(ips.len(), 3, "one distinct IP per machine: {ips:?}");
    for ip in &ips {
        let ip: std::net::Ipv4Addr = ip.parse().unwrap();
        let last = ip.octets()[3];
        assert!(
            ip.octets()[..3] == [192, 168, 100] && (10..=50).contains(&last),
            "{ip} from the pool"
        );
    }
    for m in &report.machines {
        assert!(
            m.node
                .as_deref()
                .is_some_and(|n| ["pve1", "pve2", "pve3"].contains(&n)),
            "{m:?}"
        );
        let id = m.provider_id.as_deref().expect("providerID set");
        let uuid = id
            .strip_prefix("proxmox://")
            .unwrap_or_else(|| panic!("{id} is a proxmox:// id"));
        uuid::Uuid::parse_str(uuid).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(uuid.len(), 36);
    }

    assert!(report.clean(), "leaks: {:?}\n{text}", report.leaks);
    assert!(text.contains("Leak report"));
    assert!(
        text.contains("demo-cp-0       - -> "),
        "progress lines printed:\n{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_that_does_not_finish_in_time_is_a_clear_error() {
    let opts = DemoOptions {
        profile_instant: true,
        provision_timeout: Duration::ZERO,
        ..DemoOptions::default()
    };
    let mut out = Vec::new();
    let err = run(opts, &mut out)
        .await
        .expect_err("a zero timeout cannot be met");
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            capmox_demo::DemoError::Timeout {
                step: "the machines to be provisioned",
                ..
            }
        ),
        "{msg}"
    );
    assert!(
        msg.starts_with("timed out after 0ns waiting for the machines to be provisioned; last state: "),
        "{msg}"
    );
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("created 3 Machines"), "{text}");
}
