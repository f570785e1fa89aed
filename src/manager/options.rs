//! [`ManagerOptions`] and their construction from the command line.

use std::net::SocketAddr;
use std::time::Duration;

use super::ManagerError;
use crate::cli::{Cli, FeatureGates, parse_bind_address};
use crate::context::ControllerSettings;
use crate::diagnostics::{MetricsSecurity, SecureOptions};
use crate::leader::{LeaderConfig, Timing, default_namespace};
use crate::proxmox;
use crate::webhooks::{TlsSettings, WebhookOptions};

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
    /// How the metrics address is served: HTTPS with TokenReview/SubjectAccessReview (the
    /// command line's default, like capmox) or plain HTTP (`--insecure-diagnostics`, and the
    /// default of these options for in-process use).
    pub metrics_security: MetricsSecurity,
    /// Global Proxmox client configuration (`None`: per-cluster credentials only).
    pub proxmox: Option<proxmox::ClientConfig>,
    /// How long to wait for the capmox CRDs at startup.
    pub crd_wait_timeout: Duration,
    /// Parsed feature gates (logged; `ClusterTopology` is recorded).
    pub feature_gates: FeatureGates,
    /// The webhook server (`None`: webhooks disabled, nothing listens on the webhook port).
    pub webhooks: Option<WebhookOptions>,
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
            metrics_security: MetricsSecurity::Insecure,
            proxmox: None,
            crd_wait_timeout: Duration::from_secs(120),
            feature_gates: FeatureGates::default(),
            webhooks: None,
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
    let metrics_security = metrics_security(cli)?;
    let webhooks = if cli.enable_webhooks {
        Some(webhook_options(cli)?)
    } else {
        tracing::info!("--enable-webhooks=false: no conversion or admission webhooks are served");
        None
    };
    let mut namespaces: Vec<String> = Vec::new();
    for ns in cli.namespace.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        if !namespaces.iter().any(|n| n == ns) {
            namespaces.push(ns.to_owned());
        }
    }
    Ok(ManagerOptions {
        settings: ControllerSettings {
            namespace: namespaces.first().cloned(),
            namespaces: if namespaces.len() > 1 {
                namespaces
            } else {
                Vec::new()
            },
            watch_filter: Some(cli.watch_filter.clone()).filter(|f| !f.is_empty()),
            sync_period: Some(cli.sync_period).filter(|d| !d.is_zero()),
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
        metrics_security,
        proxmox: global_proxmox_config(cli)?,
        crd_wait_timeout: cli.crd_wait_timeout,
        feature_gates: cli.feature_gates.clone(),
        webhooks,
    })
}

/// `--tls-min-version` and `--tls-cipher-suites`, checked.
fn tls_settings(cli: &Cli) -> Result<TlsSettings, ManagerError> {
    let tls = TlsSettings {
        min_version: cli.tls_min_version,
        cipher_suites: cli
            .tls_cipher_suites
            .iter()
            .filter(|s| !s.is_empty())
            .cloned()
            .collect(),
    };
    tls.provider()
        .map_err(|e| ManagerError::Config(format!("--tls-cipher-suites: {e}")))?;
    Ok(tls)
}

/// How the diagnostics address is served, from `--insecure-diagnostics`, `--metrics-cert-path`
/// and the `--tls-*` flags.
pub fn metrics_security(cli: &Cli) -> Result<MetricsSecurity, ManagerError> {
    if cli.insecure_diagnostics {
        tracing::warn!(
            "--insecure-diagnostics: metrics are served over plain HTTP without authentication; restrict access with a NetworkPolicy"
        );
        return Ok(MetricsSecurity::Insecure);
    }
    Ok(MetricsSecurity::Secure(SecureOptions {
        tls: tls_settings(cli)?,
        cert_dir: cli
            .metrics_cert_path
            .clone()
            .filter(|p| !p.as_os_str().is_empty()),
        ..SecureOptions::default()
    }))
}

/// The webhook server options from `--webhook-*` and `--tls-*` (checks the TLS settings).
pub fn webhook_options(cli: &Cli) -> Result<WebhookOptions, ManagerError> {
    let host = cli.webhook_host.trim();
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    let addr = parse_bind_address(&format!("{host}:{}", cli.webhook_port))
        .map_err(|e| ManagerError::Config(format!("--webhook-host/--webhook-port: {e}")))?
        .ok_or_else(|| ManagerError::Config("--webhook-host/--webhook-port: no address".into()))?;
    let mut opts = WebhookOptions::new(addr, cli.webhook_cert_dir.clone());
    opts.tls = tls_settings(cli)?;
    Ok(opts)
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
        tracing::warn!(
            url = %proxmox::path::redact_userinfo(&config.url),
            "TLS certificate verification of the global Proxmox client is disabled (PROXMOX_INSECURE defaults to true, as in capmox); set PROXMOX_INSECURE=false and --proxmox-root-cert-file to verify the server"
        );
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
