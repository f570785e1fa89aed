//! `make demo` as a new user runs it with its output to a file: the `capmox-demo` binary
//! (`--instant --verbose`, stdout and stderr not a terminal) provisions and deletes its cluster,
//! and its log is plain text (no ANSI colour codes) without a WARN or ERROR line — except those
//! caused by the faults the demo scenario injects on purpose (pve-sim's storage lock contention).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::Duration;

/// Messages of the faults `pve-sim/scenarios/demo.yaml` injects (Proxmox's own wording).
const INJECTED: &[&str] = &["can't lock file"];

fn is_warning(line: &str) -> bool {
    line.split_whitespace()
        .take(3)
        .any(|w| w == "WARN" || w == "ERROR")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_log_is_plain_and_has_no_unexpected_warnings() {
    if std::env::var_os("KUBEBUILDER_ASSETS").is_some() {
        // The demo always runs on the in-tree control plane: `make test` already ran this.
        eprintln!("skipped: the demo ignores KUBEBUILDER_ASSETS; its log is checked by make test");
        return;
    }
    let output = tokio::time::timeout(
        Duration::from_secs(240),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_capmox-demo"))
            .args(["--instant", "--verbose"])
            .env_remove("RUST_LOG")
            .env_remove("NO_COLOR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the demo finished in time")
    .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(output.status.success(), "demo failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("Leak report"), "{stdout}");
    assert!(
        stderr.lines().any(|l| l.contains(" INFO ")),
        "--verbose shows the manager's log:\n{stderr}"
    );
    for (what, text) in [("stdout", &stdout), ("stderr", &stderr)] {
        assert!(
            !text.contains('\u{1b}'),
            "{what} carries ANSI escape codes:\n{text:?}"
        );
    }
    let unexpected: Vec<&str> = stderr
        .lines()
        .filter(|l| is_warning(l) && !INJECTED.iter().any(|i| l.contains(i)))
        .collect();
    assert!(
        unexpected.is_empty(),
        "WARN/ERROR lines that are not injected faults:\n{}",
        unexpected.join("\n")
    );
}
