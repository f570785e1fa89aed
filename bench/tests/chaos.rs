//! A small chaos soak runs in `make test`: 20 machines in two waves, 10 % Proxmox faults, one
//! SIGKILL of the manager process. `make chaos` runs the full configuration.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use capmox_bench::chaos::{ChaosOptions, run_chaos};

/// The `capmox` binary cargo built beside this test (`target/<profile>/capmox`), if any.
fn manager_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CAPMOX_BIN") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let profile_dir = exe.parent()?.parent()?;
    Some(profile_dir.join("capmox")).filter(|p| p.is_file())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_machines_survive_faults_and_a_kill_without_leaks() {
    let Some(bin) = manager_bin() else {
        eprintln!(
            "skipped: no capmox binary beside the test (build it: cargo build --bin capmox; make test does)"
        );
        return;
    };
    let opts = ChaosOptions {
        machines: 20,
        waves: 2,
        kills: 1,
        seed: 7,
        step_timeout: Duration::from_secs(300),
        // Failed tasks are retried after 5 s instead of a minute, so the soak fits `make test`.
        manager_args: vec!["--retry-delay=5s".to_owned()],
        progress: true,
        ..ChaosOptions::new(bin)
    };
    let report = run_chaos(&opts).await.unwrap();
    eprint!("{report}");
    assert!(report.passed(), "{:#?}", report.problems());
    assert_eq!(report.kills.len(), 1);
    assert_eq!((report.provisioned, report.deleted), (20, 20));
    assert_eq!(report.vms_cloned, 20, "one VM per machine");
    assert!(report.orphaned_vms.is_empty() && report.leaked_isos.is_empty());
}
