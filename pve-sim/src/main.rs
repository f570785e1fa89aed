//! `pve-sim` binary: serve a scenario and print how to connect.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use pve_sim::{Profile, PveVersion, Scenario, SimConfig, SimServer};

/// A faithful Proxmox VE API simulator.
#[derive(Debug, Parser)]
#[command(name = "pve-sim", version, about)]
struct Args {
    /// Scenario file (YAML). Without it the built-in default scenario is served.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Listen address.
    #[arg(long, default_value = "127.0.0.1:8006")]
    listen: SocketAddr,
    /// Serve plain HTTP instead of HTTPS.
    #[arg(long)]
    http: bool,
    /// Proxmox VE release to play (overrides the scenario's `version`).
    #[arg(long, value_parser = ["8.4", "9.1"])]
    pve_version: Option<String>,
    /// Latency profile (overrides the scenario's).
    #[arg(long, value_parser = ["instant", "realistic"])]
    profile: Option<String>,
    /// Write every request as a JSON line to this file (secrets redacted).
    #[arg(long)]
    request_log: Option<PathBuf>,
    /// Seed for generated MACs, UUIDs, secrets and fault injection.
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
    /// Write the CA certificate (PEM) to this file.
    #[arg(long)]
    ca_out: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    match run(Args::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pve-sim: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut scenario = match &args.scenario {
        Some(path) => Scenario::from_file(path)?,
        None => Scenario::default(),
    };
    match args.profile.as_deref() {
        Some("realistic") => scenario.latency.profile = Profile::Realistic,
        Some("instant") => scenario.latency.profile = Profile::Instant,
        _ => {}
    }
    let config = SimConfig {
        scenario,
        tls: !args.http,
        bind: args.listen,
        request_log: args.request_log.clone(),
        seed: args.seed,
        pve_version: args
            .pve_version
            .as_deref()
            .map(str::parse::<PveVersion>)
            .transpose()?,
    };
    let sim = SimServer::start(config).await?;
    if let (Some(path), Some(pem)) = (&args.ca_out, sim.ca_pem()) {
        std::fs::write(path, pem)?;
    }
    let insecure = if args.http { "" } else { "-k " };
    let version = sim.state().with(|c| c.version);
    println!("pve-sim listening on {}", sim.url());
    println!("Proxmox VE:   {version}");
    println!("API base:     {}/api2/json", sim.url());
    println!("token id:     {}", sim.token_id());
    println!("token secret: {}", sim.token_secret());
    println!("user:         {} (password: {})", sim.user(), sim.password());
    println!(
        "try:          curl {insecure}-H 'Authorization: PVEAPIToken={}={}' {}/api2/json/cluster/resources",
        sim.token_id(),
        sim.token_secret(),
        sim.url()
    );
    tokio::signal::ctrl_c().await?;
    sim.shutdown().await;
    Ok(())
}
