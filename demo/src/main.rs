//! `capmox-demo` (`make demo`): see the library docs of `capmox_demo`.

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

/// capmox-rs provisions and deletes a three-machine cluster on a simulated Proxmox VE.
#[derive(Debug, Parser)]
#[command(name = "capmox-demo", version)]
struct Args {
    /// Use pve-sim's instant latency profile instead of realistic latencies.
    #[arg(long)]
    instant: bool,
    /// Show the manager's and the stand-ins' logs (info level) on stderr.
    #[arg(long)]
    verbose: bool,
    /// Reconcile concurrency of the manager's controllers.
    #[arg(long, default_value_t = 4)]
    concurrency: u16,
}

#[tokio::main]
async fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    let default = if args.verbose {
        "warn,capmox=info,capmox_standins=info"
    } else {
        "off,capmox=warn"
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    // Colour only on a terminal: a log written to a file or a pipe stays plain text.
    let ansi = {
        use std::io::IsTerminal;
        capmox::telemetry::ansi_colours(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        )
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .init();

    let opts = capmox_demo::DemoOptions {
        profile_instant: args.instant,
        concurrency: args.concurrency,
        ..capmox_demo::DemoOptions::default()
    };
    match capmox_demo::run(opts, std::io::stdout()).await {
        Ok(report) if report.clean() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("demo failed: {e}");
            ExitCode::FAILURE
        }
    }
}
