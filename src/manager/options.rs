//! [`ManagerOptions`] and their construction from the command line.

use std::net::SocketAddr;
use std::time::Duration;

use super::ManagerError;
use crate::cli::{Cli, FeatureGates, parse_bind_address};
use crate::context::ControllerSettings;
use crate::leader::{LeaderConfig, Timing, default_namespace};
use crate::proxmox;

/// Everything the manager needs besides the Kubernetes client.
#[derive(Debug, Clone)]
pub struct ManagerOptions {
    /// Watch scope and concurrency of the controllers.
    pub settings: ControllerSettings,
    /// Leader election (`None`: controllers start at once).
    pub leader_election: Option<LeaderConfig>,
    /// Health probe address (`None`: disabled; port 0: any free port).
    pub health_addr: Option<SocketAddr>,
    /// Metrics address (`None`: disabled; port 0: any free port).
    pub metrics_addr: Option<SocketAddr>,
    /// Global Proxmox client configuration (`None`: per-cluster credentials only).
    pub proxmox: Option<proxmox::ClientConfig>,
    /// How long to wait for the capmox CRDs at startup.
    pub crd_wait_timeout: Duration,
    /// Parsed feature gates (logged; `ClusterTopology` is recorded).
    pub feature_gates: FeatureGates,
}

impl Default for ManagerOptions {
    fn default() -> Self {
        Self {
            settings: ControllerSettings {
                namespace: None,
                concurrency: crate::cli::DEFAULT_CONCURRENCY,
                ..ControllerSettings::default()
            },
            leader_election: None,
            health_addr: None,
            metrics_addr: None,
            proxmox: None,
            crd_wait_timeout: Duration::from_secs(120),
            feature_gates: FeatureGates::default(),
        }
    }
}

/// Builds [`ManagerOptions`] from the command line (reads `--proxmox-root-cert-file`).
pub fn options_from_cli(cli: &Cli) -> Result<ManagerOptions, ManagerError> {
    let health_addr = parse_bind_address(&cli.health_probe_bind_address)
        .map_err(|e| ManagerError::Config(format!("--health-probe-bind-address: {e}")))?;
    let metrics_addr = parse_bind_address(&cli.diagnostics_address)
        .map_err(|e| ManagerError::Config(format!("--diagnostics-address: {e}")))?;
    let leader_election = cli.leader_elect.then(|| {
        LeaderConfig::new(
            default_namespace(cli.leader_election_namespace.as_deref()),
            Timing {
                lease_duration: cli.leader_elect_lease_duration,
                renew_deadline: cli.leader_elect_renew_deadline,
                retry_period: cli.leader_elect_retry_period,
            },
        )
    });
    if let Some(le) = &leader_election {
        le.timing.validate().map_err(ManagerError::Config)?;
    }
    if !cli.insecure_diagnostics {
        tracing::info!(
            "metrics are served over plain HTTP without authentication (--insecure-diagnostics=false is accepted for compatibility); restrict access with a NetworkPolicy"
        );
    }
    if cli.enable_webhooks {
        tracing::info!("--enable-webhooks: admission webhooks are not served by this version");
    }
    Ok(ManagerOptions {
        settings: ControllerSettings {
            namespace: cli.namespace.clone().filter(|n| !n.is_empty()),
            concurrency: cli.concurrency.unwrap_or(crate::cli::DEFAULT_CONCURRENCY),
            machine: crate::machine::MachineSettings {
                concurrency: Some(cli.machine_concurrency()),
                agent_timeout: cli.guest_agent_timeout,
                cloud_init_timeout: cli.cloud_init_timeout,
                retry_delay: cli.retry_delay,
                ..crate::machine::MachineSettings::default()
            },
            cluster: crate::cluster::ClusterSettings {
                concurrency: Some(cli.cluster_concurrency()),
                ..crate::cluster::ClusterSettings::default()
            },
        },
        leader_election,
        health_addr,
        metrics_addr,
        proxmox: global_proxmox_config(cli)?,
        crd_wait_timeout: cli.crd_wait_timeout,
        feature_gates: cli.feature_gates.clone(),
    })
}

/// The global Proxmox client configuration when URL and credentials are all set (token wins
/// over username/password), else `None`.
pub fn global_proxmox_config(cli: &Cli) -> Result<Option<proxmox::ClientConfig>, ManagerError> {
    if !cli.global_proxmox_configured() {
        if cli.proxmox_url.as_deref().is_some_and(|u| !u.is_empty()) {
            tracing::warn!(
                "PROXMOX_URL is set but credentials are incomplete; no global Proxmox client, each ProxmoxCluster needs spec.credentialsRef"
            );
        }
        return Ok(None);
    }
    let (Some(url), Some(creds)) = (cli.proxmox_url.clone(), global_credentials(cli)) else {
        return Ok(None);
    };
    let mut config = proxmox::ClientConfig::new(url, creds);
    if cli.proxmox_insecure {
        if cli.proxmox_root_cert_file.is_some() {
            tracing::warn!(
                "--proxmox-insecure is set: --proxmox-root-cert-file is ignored (capmox behaviour)"
            );
        }
        config = config.insecure();
    } else if let Some(path) = &cli.proxmox_root_cert_file {
        let pem = std::fs::read_to_string(path).map_err(|e| {
            ManagerError::Proxmox(format!(
                "reading --proxmox-root-cert-file {}: {e}",
                path.display()
            ))
        })?;
        config = config.with_ca_pem(pem);
    }
    Ok(Some(config))
}

fn global_credentials(cli: &Cli) -> Option<proxmox::Credentials> {
    let nonempty = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
    let secret = |v: &Option<proxmox::Secret>| v.clone().filter(|v| !v.is_empty());
    match (nonempty(&cli.proxmox_token), secret(&cli.proxmox_secret)) {
        (Some(token), Some(s)) => Some(proxmox::Credentials::token(token, s)),
        _ => match (nonempty(&cli.proxmox_username), secret(&cli.proxmox_password)) {
            (Some(user), Some(p)) => Some(proxmox::Credentials::password(user, p)),
            _ => None,
        },
    }
}
