//! `capmox-demo-vm` (`make demo-vm`): one standalone VM on a simulated Proxmox VE, see
//! `capmox_demo::vm`.

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

/// capmox-rs creates, pauses, resumes, resizes, snapshots, restores, clones and deletes one
/// ProxmoxVirtualMachine, and runs a second one from a disk image it serves on loopback.
#[derive(Debug, Parser)]
#[command(name = "capmox-demo-vm", version)]
struct Args {
    /// Use pve-sim's instant latency profile instead of realistic latencies.
    #[arg(long)]
    instant: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("off,capmox=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match capmox_demo::vm::run_vm(args.instant, std::io::stdout()).await {
        Ok(r) if r.clean() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("demo failed: {e}");
            ExitCode::FAILURE
        }
    }
}
