//! The bench keeps working: two machines on the instant profile, the manager in-process, short
//! windows. Seconds are not asserted (they depend on the machine); request counts are, as
//! budgets: they are deterministic enough and what the bench exists to keep low.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use capmox_bench::{BenchOptions, ManagerMode, Profile, RunSpec};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instant_machines_within_the_request_budgets() {
    let opts = BenchOptions {
        manager: ManagerMode::InProcess,
        rest_window: Duration::from_secs(3),
        restart_window: Duration::from_secs(3),
        timeout: Some(Duration::from_secs(120)),
        ..BenchOptions::default()
    };
    let spec = RunSpec {
        machines: 2,
        profile: Profile::Instant,
    };
    let r = capmox_bench::run_one(&opts, spec).await.unwrap();
    let table = capmox_bench::table(std::slice::from_ref(&r));
    eprintln!("{table}");
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!((r.vms_cloned, r.vms_after_provisioning), (2, 2), "{table}");
    assert!(
        r.provision.proxmox_total() > 0 && r.provision.kube_total() > 0,
        "{table}"
    );
}
