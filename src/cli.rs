//! Command line of the `capmox` manager.
//!
//! Accepts capmox's flags and environment unchanged (the released Deployment passes
//! `--leader-elect --feature-gates=ClusterTopology=false --diagnostics-address=:8443
//! --insecure-diagnostics=false --v=0`). Go-style boolean flags work both bare (`--leader-elect`)
//! and with a value (`--leader-elect=false`); durations use Go syntax (`15s`, `1m30s`, `200ms`);
//! a flag given twice takes the last value, as with Go's `flag` package.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use clap::{ArgAction, Parser, ValueEnum};

use crate::proxmox::Secret;

/// The capmox-rs manager: runs the ProxmoxCluster (and later ProxmoxMachine) controllers.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "capmox",
    version,
    about,
    long_about = None,
    args_override_self = true,
    after_help = "Secrets: PROXMOX_SECRET (API token secret) and PROXMOX_PASSWORD (ticket authentication) \
                  are read from the environment (hidden flags --proxmox-secret/--proxmox-password exist) \
                  and never logged. The global Proxmox client is built only when PROXMOX_URL and \
                  PROXMOX_TOKEN+PROXMOX_SECRET (or PROXMOX_USERNAME+PROXMOX_PASSWORD) are all set."
)]
pub struct Cli {
    /// A tool instead of the manager (none: run the manager).
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Enable leader election (Lease `controller-leader-elect-capmox`); only the leader reconciles.
    #[arg(long, env = "CAPMOX_LEADER_ELECT", action = ArgAction::Set, num_args = 0..=1,
          default_value_t = false, default_missing_value = "true")]
    pub leader_elect: bool,

    /// How long non-leaders wait after the last observed renewal before taking over.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub leader_elect_lease_duration: Duration,

    /// How long the leader keeps retrying to renew before giving up leadership.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub leader_elect_renew_deadline: Duration,

    /// Interval between leader election attempts and renewals.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub leader_elect_retry_period: Duration,

    /// Namespace of the leader Lease (default: `POD_NAMESPACE`, the in-cluster service account
    /// namespace, or `default`).
    #[arg(long, env = "POD_NAMESPACE")]
    pub leader_election_namespace: Option<String>,

    /// Address of the health probes (`/healthz`, `/readyz`); `0` disables them.
    #[arg(long, env = "CAPMOX_HEALTH_PROBE_BIND_ADDRESS", default_value = ":8081")]
    pub health_probe_bind_address: String,

    /// Address serving Prometheus metrics at `/metrics`: HTTPS with authentication (TokenReview)
    /// and authorization (SubjectAccessReview, `get` on `/metrics`) unless
    /// `--insecure-diagnostics`; `0` disables it.
    #[arg(
        long,
        visible_alias = "metrics-bind-address",
        env = "CAPMOX_DIAGNOSTICS_ADDRESS",
        default_value = ":8443"
    )]
    pub diagnostics_address: String,

    /// Serve the diagnostics address over plain HTTP without authentication or authorization.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value_t = false,
          default_missing_value = "true")]
    pub insecure_diagnostics: bool,

    /// Directory with the diagnostics server's certificate `tls.crt` and key `tls.key` (re-read
    /// when they change); empty: a self-signed certificate generated at start. Ignored with
    /// `--insecure-diagnostics`.
    #[arg(
        long,
        visible_alias = "diagnostics-cert-dir",
        env = "CAPMOX_METRICS_CERT_PATH"
    )]
    pub metrics_cert_path: Option<std::path::PathBuf>,

    /// Skip TLS verification of the global Proxmox client (env `PROXMOX_INSECURE`, default true like capmox).
    #[arg(long, env = "PROXMOX_INSECURE", action = ArgAction::Set, num_args = 0..=1,
          default_value = "true", default_missing_value = "true", value_parser = parse_lenient_bool)]
    pub proxmox_insecure: bool,

    /// PEM file with CA certificates trusted by the global Proxmox client.
    #[arg(long, env = "PROXMOX_ROOT_CERT_FILE")]
    pub proxmox_root_cert_file: Option<std::path::PathBuf>,

    /// URL of the global Proxmox API (e.g. `https://pve.example:8006`).
    #[arg(long, env = "PROXMOX_URL", hide_env_values = true)]
    pub proxmox_url: Option<String>,

    /// API token id of the global Proxmox client (`user@realm!name`).
    #[arg(long, env = "PROXMOX_TOKEN", hide_env_values = true)]
    pub proxmox_token: Option<String>,

    /// API token secret of the global Proxmox client (prefer the environment variable).
    #[arg(long, env = "PROXMOX_SECRET", hide_env_values = true, hide = true,
          value_parser = parse_secret)]
    pub proxmox_secret: Option<Secret>,

    /// User name (`user@realm`) for ticket authentication of the global Proxmox client.
    #[arg(long, env = "PROXMOX_USERNAME", hide_env_values = true)]
    pub proxmox_username: Option<String>,

    /// Password for ticket authentication (prefer the environment variable).
    #[arg(long, env = "PROXMOX_PASSWORD", hide_env_values = true, hide = true,
          value_parser = parse_secret)]
    pub proxmox_password: Option<Secret>,

    /// klog verbosity: 0-1 info, 2-4 debug, 5+ trace.
    #[arg(long = "v", short = 'v', default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=10))]
    pub verbosity: u8,

    /// Log filter overriding `--v` (tracing `EnvFilter` syntax, e.g. `debug,kube=info`; also `RUST_LOG`).
    #[arg(long, env = "RUST_LOG")]
    pub log_level: Option<String>,

    /// Log output format.
    #[arg(long, env = "CAPMOX_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Only watch objects in these namespaces (comma-separated or repeated; default: all
    /// namespaces). Each namespace is watched on its own, so a namespaced Role in each is enough.
    #[arg(long, env = "CAPMOX_WATCH_NAMESPACE", value_delimiter = ',', action = ArgAction::Append)]
    pub namespace: Vec<String>,

    /// Only reconcile objects labelled `cluster.x-k8s.io/watch-filter=<value>` (CAPI's sharding
    /// convention: several managers split one management cluster by label value); empty: all.
    #[arg(long, env = "CAPMOX_WATCH_FILTER", default_value = "", value_parser = parse_label_value)]
    pub watch_filter: String,

    /// The minimum interval at which every watched object is reconciled again, changed or not
    /// (CAPI's flag; `0` turns the resync off).
    #[arg(long, env = "CAPMOX_SYNC_PERIOD", default_value = "10m", value_parser = parse_duration)]
    pub sync_period: Duration,

    /// Feature gates, `Name=bool,...` (accepted and logged; `ClusterTopology` is recorded).
    #[arg(long, default_value = "", value_parser = parse_feature_gates)]
    pub feature_gates: FeatureGates,

    /// Serve the conversion and admission webhooks over HTTPS on every replica (capmox's
    /// default). `false` serves nothing on the webhook port.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value_t = true,
          default_missing_value = "true", value_parser = parse_go_bool)]
    pub enable_webhooks: bool,

    /// Objects of one kind reconciled at the same time, for both controllers (capmox-rs's flag).
    /// `--proxmoxmachine-concurrency` and `--proxmoxcluster-concurrency` take precedence for their
    /// controller; without any of the three each controller runs 10 reconciles at once (capmox's
    /// default).
    #[arg(long, env = "CAPMOX_CONCURRENCY", value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: Option<u16>,

    /// ProxmoxMachines reconciled at the same time (capmox's flag; default `--concurrency`, else 10).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub proxmoxmachine_concurrency: Option<u16>,

    /// ProxmoxClusters reconciled at the same time (capmox's flag; default `--concurrency`, else 10).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub proxmoxcluster_concurrency: Option<u16>,

    /// Port of the webhook server (HTTPS).
    #[arg(long, env = "CAPMOX_WEBHOOK_PORT", default_value_t = crate::webhooks::DEFAULT_PORT)]
    pub webhook_port: u16,

    /// Address the webhook server binds (empty: all interfaces; e.g. `127.0.0.1` when the API
    /// server runs on the same host).
    #[arg(long, env = "CAPMOX_WEBHOOK_HOST", default_value = "")]
    pub webhook_host: String,

    /// Directory holding the webhook serving certificate `tls.crt` and key `tls.key`; they are
    /// re-read when they change (cert-manager rotation), no restart needed.
    #[arg(long, env = "CAPMOX_WEBHOOK_CERT_DIR", default_value = crate::webhooks::DEFAULT_CERT_DIR)]
    pub webhook_cert_dir: std::path::PathBuf,

    /// Minimum TLS version of the webhook and (secure) diagnostics servers: VersionTLS12 or
    /// VersionTLS13.
    #[arg(long, default_value = "VersionTLS12", value_parser = parse_tls_min_version)]
    pub tls_min_version: crate::webhooks::TlsVersion,

    /// Comma-separated TLS 1.2 cipher suites of the webhook and (secure) diagnostics servers,
    /// Go/IANA names (e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256); empty: rustls' defaults. TLS 1.3
    /// suites are not configurable (as in Go); suites rustls lacks (CBC, RC4, 3DES, RSA key
    /// exchange) are skipped with a warning.
    #[arg(long, value_delimiter = ',', value_parser = parse_tls_cipher_suite)]
    pub tls_cipher_suites: Vec<String>,

    /// How long to wait for the capmox CRDs to be served at startup.
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub crd_wait_timeout: Duration,

    /// How long after boot a VM's QEMU guest agent may take to answer before its machine fails
    /// (capmox waits 5 s per reconcile and retries forever; #506).
    #[arg(long, env = "CAPMOX_GUEST_AGENT_TIMEOUT", default_value = "10m", value_parser = parse_duration)]
    pub guest_agent_timeout: Duration,

    /// How long a machine waits before it retries a step whose Proxmox task failed, or a failed
    /// stop or destroy (`status.retryAfter`; capmox requeues after one minute).
    #[arg(long, env = "CAPMOX_RETRY_DELAY", default_value = "1m", value_parser = parse_duration)]
    pub retry_delay: Duration,

    /// How long after boot `cloud-init status` may keep reporting `running` before the machine fails.
    #[arg(long, env = "CAPMOX_CLOUD_INIT_TIMEOUT", default_value = "30m", value_parser = parse_duration)]
    pub cloud_init_timeout: Duration,
}

/// Tools of the `capmox` binary besides the manager.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// Convert v1alpha1 manifests and cluster templates to v1alpha2, and the Cluster API v1beta1
    /// objects beside them to v1beta2 (capmox's `clusterctl capmox-convert`; also run as
    /// `clusterctl-capmox-convert`).
    Convert(crate::convert::ConvertArgs),
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Parsed `--feature-gates`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureGates(pub BTreeMap<String, bool>);

impl FeatureGates {
    /// Whether `name` is explicitly enabled.
    pub fn enabled(&self, name: &str) -> bool {
        self.0.get(name).copied().unwrap_or(false)
    }
}

/// Parses `Name=true,Other=false`.
pub fn parse_feature_gates(s: &str) -> Result<FeatureGates, String> {
    let mut gates = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = part
            .split_once('=')
            .ok_or_else(|| format!("feature gate '{part}' is not of the form Name=true|false"))?;
        let name = name.trim();
        if name.is_empty() {
            return Err(format!("feature gate '{part}' has an empty name"));
        }
        gates.insert(name.to_owned(), parse_go_bool(value.trim())?);
    }
    Ok(FeatureGates(gates))
}

/// Parses a boolean the way Go's `strconv.ParseBool` does.
pub fn parse_go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        other => Err(format!("'{other}' is not a boolean")),
    }
}

/// Parses a boolean leniently: Go's forms plus `yes`/`no`, `y`/`n`, `on`/`off` in any case
/// (used for `PROXMOX_INSECURE`, which users write in many ways).
pub fn parse_lenient_bool(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "t" | "true" | "yes" | "y" | "on" => Ok(true),
        "0" | "f" | "false" | "no" | "n" | "off" => Ok(false),
        _ => Err(format!("'{s}' is not a boolean")),
    }
}

fn parse_tls_min_version(s: &str) -> Result<crate::webhooks::TlsVersion, String> {
    crate::webhooks::tls::parse_tls_version(s)
}

fn parse_tls_cipher_suite(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        return Ok(String::new());
    }
    crate::webhooks::tls::parse_cipher_suite(s)
}

/// Checks a Kubernetes label value: at most 63 characters, alphanumerics with `-`, `_` and `.`
/// inside; empty is allowed.
pub fn parse_label_value(s: &str) -> Result<String, String> {
    let inner_ok = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let ends_ok = |c: Option<char>| c.is_none_or(|c| c.is_ascii_alphanumeric());
    if s.len() > 63 || !inner_ok || !ends_ok(s.chars().next()) || !ends_ok(s.chars().last()) {
        return Err(format!(
            "'{s}' is not a label value (at most 63 characters: letters, digits, '-', '_', '.', starting and ending with a letter or digit)"
        ));
    }
    Ok(s.to_owned())
}

fn parse_secret(s: &str) -> Result<Secret, String> {
    Ok(Secret::new(s))
}

pub use crate::duration::parse_duration;

/// Parses a Go-style listen address: `:8081`, `0.0.0.0:8081`, `127.0.0.1:0`, `[::1]:8080`,
/// `localhost:9000`. Returns `None` for `0` or an empty string (disabled).
pub fn parse_bind_address(s: &str) -> Result<Option<SocketAddr>, String> {
    let s = s.trim();
    if s.is_empty() || s == "0" {
        return Ok(None);
    }
    if let Some(port) = s.strip_prefix(':') {
        let port: u16 = port
            .parse()
            .map_err(|_| format!("invalid port in address '{s}'"))?;
        return Ok(Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port)));
    }
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(Some(addr));
    }
    s.to_socket_addrs()
        .map_err(|e| format!("invalid address '{s}': {e}"))?
        .next()
        .map(Some)
        .ok_or_else(|| format!("address '{s}' resolves to nothing"))
}

/// Reconcile concurrency when no flag sets it (capmox's `--proxmox*-concurrency` default).
pub const DEFAULT_CONCURRENCY: u16 = 10;

impl Cli {
    /// Reconcile concurrency of the ProxmoxMachine controller: `--proxmoxmachine-concurrency`,
    /// else `--concurrency`, else [`DEFAULT_CONCURRENCY`].
    pub fn machine_concurrency(&self) -> u16 {
        self.proxmoxmachine_concurrency
            .or(self.concurrency)
            .unwrap_or(DEFAULT_CONCURRENCY)
    }

    /// Reconcile concurrency of the ProxmoxCluster controller: `--proxmoxcluster-concurrency`,
    /// else `--concurrency`, else [`DEFAULT_CONCURRENCY`].
    pub fn cluster_concurrency(&self) -> u16 {
        self.proxmoxcluster_concurrency
            .or(self.concurrency)
            .unwrap_or(DEFAULT_CONCURRENCY)
    }

    /// Whether the global Proxmox credentials are completely configured (URL plus token+secret or
    /// username+password, all non-empty).
    pub fn global_proxmox_configured(&self) -> bool {
        let set = |v: &Option<String>| v.as_deref().is_some_and(|v| !v.is_empty());
        let set_secret = |v: &Option<Secret>| v.as_ref().is_some_and(|v| !v.is_empty());
        set(&self.proxmox_url)
            && ((set(&self.proxmox_token) && set_secret(&self.proxmox_secret))
                || (set(&self.proxmox_username) && set_secret(&self.proxmox_password)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn concurrency_precedence() {
        let parse = |args: &[&str]| Cli::try_parse_from([&["capmox"], args].concat()).unwrap();
        let none = parse(&[]);
        assert_eq!((none.machine_concurrency(), none.cluster_concurrency()), (10, 10));
        let ours = parse(&["--concurrency=3"]);
        assert_eq!((ours.machine_concurrency(), ours.cluster_concurrency()), (3, 3));
        let capmox = parse(&[
            "--concurrency=3",
            "--proxmoxmachine-concurrency=20",
            "--proxmoxcluster-concurrency=2",
        ]);
        assert_eq!(
            (capmox.machine_concurrency(), capmox.cluster_concurrency()),
            (20, 2)
        );
        assert_eq!(
            parse(&["--proxmoxcluster-concurrency=5"]).machine_concurrency(),
            10
        );
        assert!(Cli::try_parse_from(["capmox", "--proxmoxmachine-concurrency=0"]).is_err());
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("200ms"), Ok(Duration::from_millis(200)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("15").is_err());
        assert!(parse_duration("15x").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("s").is_err());
    }

    #[test]
    fn bind_addresses() {
        assert_eq!(
            parse_bind_address(":8081"),
            Ok(Some("0.0.0.0:8081".parse().unwrap()))
        );
        assert_eq!(
            parse_bind_address("127.0.0.1:0"),
            Ok(Some("127.0.0.1:0".parse().unwrap()))
        );
        assert_eq!(
            parse_bind_address("[::1]:9"),
            Ok(Some("[::1]:9".parse().unwrap()))
        );
        assert_eq!(parse_bind_address("0"), Ok(None));
        assert_eq!(parse_bind_address(""), Ok(None));
        assert!(parse_bind_address(":x").is_err());
    }

    #[test]
    fn feature_gates_and_bools() {
        let g = parse_feature_gates("ClusterTopology=true, Other=false").unwrap();
        assert!(g.enabled("ClusterTopology"));
        assert!(!g.enabled("Other"));
        assert!(!g.enabled("Missing"));
        assert_eq!(parse_feature_gates(""), Ok(FeatureGates::default()));
        assert!(parse_feature_gates("ClusterTopology").is_err());
        assert!(parse_feature_gates("=true").is_err());
        assert!(parse_feature_gates("A=maybe").is_err());
        assert_eq!(parse_go_bool("T"), Ok(true));
        assert_eq!(parse_go_bool("0"), Ok(false));
        assert!(parse_go_bool("yes").is_err());
        assert_eq!(parse_lenient_bool("Yes"), Ok(true));
        assert_eq!(parse_lenient_bool(" off "), Ok(false));
        assert!(parse_lenient_bool("maybe").is_err());
    }
}
