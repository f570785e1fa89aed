//! `capmox-bench` (`make bench`): see the library docs of `capmox_bench`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use capmox_bench::{BenchOptions, ManagerMode, Profile, parse_runs};
use clap::Parser;
use tracing_subscriber::EnvFilter;

/// Provisions, rests, restarts and deletes N machines on pve-sim and prints what it cost.
#[derive(Debug, Parser)]
#[command(name = "capmox-bench", version)]
struct Args {
    /// Runs: machine counts, each optionally with `@realistic` or `@instant`.
    #[arg(long, default_value = "1,10,100,1000@instant")]
    machines: String,
    /// Standalone-VM runs (ProxmoxVirtualMachines, no Cluster API): VM counts, each optionally
    /// with `@realistic` or `@instant`; empty for none.
    #[arg(long, default_value = "10")]
    vms: String,
    /// How many VMs of each standalone-VM run get a snapshot with memory, its restore and a
    /// linked clone (with one image import); 0 for none.
    #[arg(long, default_value_t = 3)]
    vm_ops: usize,
    /// Latency profile of runs without `@profile`.
    #[arg(long, default_value = "realistic", value_parser = Profile::parse)]
    profile: Profile,
    /// The `capmox` binary to run (default: `capmox` next to this binary).
    #[arg(long)]
    manager_bin: Option<PathBuf>,
    /// Run the manager inside this process (no RSS or CPU figures).
    #[arg(long)]
    in_process: bool,
    /// Extra manager argument (repeatable), e.g. `--manager-arg=--concurrency=10`.
    #[arg(long = "manager-arg", allow_hyphen_values = true)]
    manager_args: Vec<String>,
    /// Seconds at rest after provisioning over which requests are counted.
    #[arg(long, default_value_t = 60)]
    rest_secs: u64,
    /// Seconds after a manager restart over which requests are counted.
    #[arg(long, default_value_t = 60)]
    restart_secs: u64,
    /// Use the in-tree API server even when KUBEBUILDER_ASSETS names kube-apiserver and etcd.
    #[arg(long)]
    in_tree: bool,
    /// Time limit of the provisioning and the deletion phase, seconds (default: from the floor).
    #[arg(long)]
    timeout_secs: Option<u64>,
    /// Keep the manager logs, the audit log and pve-sim's request log (`pve-requests.jsonl`) in
    /// this folder.
    #[arg(long)]
    keep: Option<PathBuf>,
    /// Print the reports as JSON instead of the table.
    #[arg(long)]
    json: bool,
    /// Write the reports as JSON to this file as well.
    #[arg(long)]
    json_out: Option<PathBuf>,
    /// Run nothing: print the table of reports saved with `--json`/`--json-out` (repeatable).
    #[arg(long)]
    from_json: Vec<PathBuf>,
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
    if !args.from_json.is_empty() {
        let mut reports: Vec<capmox_bench::RunReport> = Vec::new();
        for path in &args.from_json {
            let parsed = std::fs::read_to_string(path)
                .map_err(|e| e.to_string())
                .and_then(|t| {
                    serde_json::from_str::<Vec<capmox_bench::RunReport>>(&t).map_err(|e| e.to_string())
                });
            match parsed {
                Ok(r) => reports.extend(r),
                Err(e) => {
                    eprintln!("capmox-bench: {}: {e}", path.display());
                    return ExitCode::from(2);
                }
            }
        }
        println!("{}", capmox_bench::table(&reports));
        return ExitCode::SUCCESS;
    }
    let runs = match parse_runs(&args.machines, args.profile) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("capmox-bench: --machines: {e}");
            return ExitCode::from(2);
        }
    };
    let vm_runs = match parse_runs(&args.vms, args.profile) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("capmox-bench: --vms: {e}");
            return ExitCode::from(2);
        }
    };
    let manager = if args.in_process {
        ManagerMode::InProcess
    } else {
        let bin = args
            .manager_bin
            .clone()
            .or_else(|| std::env::current_exe().ok().map(|p| p.with_file_name("capmox")));
        match bin.filter(|b| b.is_file()) {
            Some(b) => ManagerMode::Process(b),
            None => {
                eprintln!(
                    "capmox-bench: no capmox binary next to this one; build it (cargo build --release --bin capmox), pass --manager-bin or use --in-process"
                );
                return ExitCode::from(2);
            }
        }
    };
    let opts = BenchOptions {
        manager,
        manager_args: args.manager_args,
        rest_window: Duration::from_secs(args.rest_secs),
        restart_window: Duration::from_secs(args.restart_secs),
        in_tree: args.in_tree,
        timeout: args.timeout_secs.map(Duration::from_secs),
        keep: args.keep,
        progress: true,
        vm_ops: args.vm_ops,
    };
    let mut reports = Vec::new();
    let mut failed = false;
    for spec in runs {
        match capmox_bench::run_one(&opts, spec).await {
            Ok(r) => {
                failed |= !r.errors.is_empty();
                reports.push(r);
            }
            Err(e) => {
                eprintln!("capmox-bench: the {}-machine run failed: {e}", spec.machines);
                failed = true;
            }
        }
    }
    let mut vm_reports = Vec::new();
    for spec in vm_runs {
        match capmox_bench::vms::run_vms(&opts, spec.machines, spec.profile).await {
            Ok(r) => {
                failed |= !r.errors.is_empty();
                vm_reports.push(r);
            }
            Err(e) => {
                eprintln!("capmox-bench: the {}-VM run failed: {e}", spec.machines);
                failed = true;
            }
        }
    }
    let json = serde_json::to_string_pretty(&reports).unwrap_or_default();
    if let Some(path) = &args.json_out
        && let Err(e) = std::fs::write(path, &json)
    {
        eprintln!("capmox-bench: writing {}: {e}", path.display());
    }
    if args.json {
        println!("{json}");
    } else {
        println!("{}", capmox_bench::table(&reports));
        if !vm_reports.is_empty() {
            println!("{}", capmox_bench::vms::vm_table(&vm_reports));
        }
        println!("{}", machine_line());
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The machine the bench ran on: CPU model and count, memory.
fn machine_line() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown CPU", |(_, m)| m.trim())
        .to_owned();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or_else(String::new, |kb| {
            format!(", {:.0} GiB RAM", kb as f64 / 1048576.0)
        });
    format!("ran on {cpus} CPU(s) ({model}){mem}")
}
