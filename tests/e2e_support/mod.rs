//! Support for the end-to-end test with the real Cluster API core manager (`tests/e2e_capi.rs`):
//! child processes with their logs, free ports, where `../shared` is.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod capi;
pub mod checks;
pub mod kamaji;
pub mod moving;
pub mod objects;
pub mod provider;
pub mod rig;
pub mod scenario;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// `../shared` beside the repository (or `CAPMOX_SHARED_DIR`).
pub fn shared_dir() -> PathBuf {
    std::env::var_os("CAPMOX_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"))
}

/// A free loopback port.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process writing stdout and stderr to `<logs>/<name>.log`; killed (by its handle) on
/// drop. When the test fails, the end of its log is printed.
pub struct Process {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Process {
    /// Spawns `cmd` with its output going to `<logs>/<name>.log`.
    pub fn spawn(name: &'static str, mut cmd: Command, logs: &Path) -> Self {
        let log = logs.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Self { name, child, log }
    }

    /// `Some(description)` when the process has exited.
    pub fn exited(&mut self) -> Option<String> {
        let status = self.child.try_wait().ok()??;
        Some(format!("{} exited with {status}:\n{}", self.name, self.tail(40)))
    }

    /// The log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `n` lines of the log.
    pub fn tail(&self, n: usize) -> String {
        let text = self.log();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "--- last lines of {} ({}) ---\n{}",
                self.name,
                self.log.display(),
                self.tail(60)
            );
        }
    }
}
