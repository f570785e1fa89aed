//! The capmox manager binary.

use std::process::ExitCode;

use clap::Parser;

use capmox::cli::{Cli, Command};
use capmox::manager::{self, Manager};

#[tokio::main]
async fn main() -> ExitCode {
    // One rustls provider for the whole process, before any TLS client exists.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Installed as `clusterctl-capmox-convert`, the binary is clusterctl's `capmox-convert` plugin.
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let invoked_as = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .map(|n| n.to_string_lossy().into_owned());
    if invoked_as.as_deref() == Some("clusterctl-capmox-convert") {
        args.insert(1, "convert".into());
    }
    // Installed as `kubectl-pvm`, it is the kubectl plugin `kubectl pvm start|stop|… NAME`.
    if invoked_as.as_deref() == Some("kubectl-pvm") {
        args.insert(1, "vm".into());
    }
    let cli = Cli::parse_from(capmox::convert::normalize_args(args));
    if let Some(Command::Convert(convert)) = &cli.command {
        return match capmox::convert::run(convert) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if let Some(Command::Vm(vm)) = &cli.command {
        return match capmox::vmctl::main(vm).await {
            Ok(message) => {
                println!("{message}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if let Err(e) = capmox::telemetry::init(cli.verbosity, cli.log_level.as_deref(), cli.log_format) {
        eprintln!("capmox: {e}");
        return ExitCode::from(2);
    }
    match run(cli).await {
        Ok(()) => {
            tracing::info!("manager stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!(error = %e, "manager failed");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let options = manager::options_from_cli(&cli)?;
    let client = capmox::user_agent::kube_client().await?;
    let manager = Manager::new(client, options).await?;
    manager.run(shutdown_signal()).await?;
    Ok(())
}

/// Completes on SIGTERM or SIGINT (Ctrl-C).
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("SIGINT received, shutting down"),
        () = term => tracing::info!("SIGTERM received, shutting down"),
    }
}
