//! `capmox-chaos` (`make chaos`): see `capmox_bench::chaos`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use capmox_bench::Profile;
use capmox_bench::chaos::{ChaosOptions, run_chaos};
use clap::Parser;
use tracing_subscriber::EnvFilter;

/// Drives machines through create → provisioned → delete under Proxmox faults and SIGKILLs of
/// the manager, then checks that nothing was duplicated or leaked.
#[derive(Debug, Parser)]
#[command(name = "capmox-chaos", version)]
struct Args {
    /// Machines.
    #[arg(long, default_value_t = 200)]
    machines: usize,
    /// Waves the machines are created in (each wave is deleted while the next is created).
    #[arg(long, default_value_t = 4)]
    waves: usize,
    /// Share of the manager's Proxmox requests that meet a fault (0.10 = 10 %).
    #[arg(long, default_value_t = 0.10)]
    fault_rate: f64,
    /// SIGKILLs of the manager (each followed by a restart).
    #[arg(long, default_value_t = 3)]
    kills: usize,
    /// Seed of the faults and the kill plan.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// pve-sim latency profile (`instant` or `realistic`).
    #[arg(long, default_value = "instant", value_parser = Profile::parse)]
    profile: Profile,
    /// The `capmox` binary (default: `capmox` next to this binary).
    #[arg(long)]
    manager_bin: Option<PathBuf>,
    /// Extra manager argument (repeatable), e.g. `--manager-arg=--concurrency=10`.
    #[arg(long = "manager-arg", allow_hyphen_values = true)]
    manager_args: Vec<String>,
    /// Use the in-tree API server even when KUBEBUILDER_ASSETS names kube-apiserver and etcd.
    #[arg(long)]
    in_tree: bool,
    /// Time limit of one step, seconds.
    #[arg(long, default_value_t = 900)]
    step_timeout_secs: u64,
    /// Keep the manager log in this folder.
    #[arg(long)]
    keep: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("off"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
    let bin = args
        .manager_bin
        .clone()
        .or_else(|| std::env::current_exe().ok().map(|p| p.with_file_name("capmox")));
    let Some(manager_bin) = bin.filter(|b| b.is_file()) else {
        eprintln!(
            "capmox-chaos: no capmox binary next to this one; build it (cargo build --release --bin capmox) or pass --manager-bin"
        );
        return ExitCode::from(2);
    };
    let opts = ChaosOptions {
        machines: args.machines,
        waves: args.waves,
        fault_rate: args.fault_rate,
        kills: args.kills,
        seed: args.seed,
        profile: args.profile,
        manager_args: args.manager_args,
        in_tree: args.in_tree,
        step_timeout: Duration::from_secs(args.step_timeout_secs),
        keep: args.keep,
        progress: true,
        ..ChaosOptions::new(manager_bin)
    };
    match run_chaos(&opts).await {
        Ok(report) => {
            if args.json {
                match serde_json::to_string_pretty(&report) {
                    Ok(j) => println!("{j}"),
                    Err(e) => eprintln!("capmox-chaos: {e}"),
                }
            } else {
                print!("{report}");
            }
            if report.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("capmox-chaos: {e}");
            ExitCode::from(2)
        }
    }
}
