//! The command line accepts capmox's Deployment arguments unchanged, maps flags to manager
//! options, and never shows secrets.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::time::Duration;

use capmox::cli::{Cli, LogFormat};
use capmox::manager::{ManagerError, global_proxmox_config, options_from_cli};
use clap::{CommandFactory, Parser};

const SECRET: &str = "0f1e2d3c-secret-value-4b5a";
const PASSWORD: &str = "hunter2-password-value";

fn parse(args: &[&str]) -> Cli {
    let mut all = vec!["capmox"];
    all.extend_from_slice(args);
    Cli::try_parse_from(all).unwrap()
}

#[test]
fn command_debug_assert() {
    Cli::command().debug_assert();
}

#[test]
fn capmox_deployment_args_parse_unchanged() {
    let cli = parse(&[
        "--leader-elect",
        "--feature-gates=ClusterTopology=false",
        "--diagnostics-address=:8443",
        "--insecure-diagnostics=false",
        "--v=0",
    ]);
    assert!(cli.leader_elect);
    assert!(!cli.feature_gates.enabled("ClusterTopology"));
    assert_eq!(cli.feature_gates.0.get("ClusterTopology"), Some(&false));
    assert_eq!(cli.diagnostics_address, ":8443");
    assert!(!cli.insecure_diagnostics);
    assert_eq!(cli.verbosity, 0);
    // capmox defaults.
    assert_eq!(cli.health_probe_bind_address, ":8081");
    assert_eq!(cli.leader_elect_lease_duration, Duration::from_secs(15));
    assert_eq!(cli.leader_elect_renew_deadline, Duration::from_secs(10));
    assert_eq!(cli.leader_elect_retry_period, Duration::from_secs(2));
    assert!(cli.enable_webhooks);
    // capmox's per-controller defaults (10 each) unless a flag says otherwise.
    assert_eq!(cli.concurrency, None);
    assert_eq!((cli.machine_concurrency(), cli.cluster_concurrency()), (10, 10));
    assert_eq!(cli.log_format, LogFormat::Text);

    let opts = options_from_cli(&cli).unwrap();
    let le = opts.leader_election.expect("leader election enabled");
    assert_eq!(le.name, "controller-leader-elect-capmox");
    assert!(le.identity.contains('_'), "{}", le.identity);
    assert_eq!(le.timing.lease_duration, Duration::from_secs(15));
    assert_eq!(opts.health_addr, Some("0.0.0.0:8081".parse().unwrap()));
    assert_eq!(opts.metrics_addr, Some("0.0.0.0:8443".parse().unwrap()));
}

#[test]
fn cluster_topology_true_and_go_style_values() {
    let cli = parse(&[
        "--feature-gates=ClusterTopology=true,MachinePool=false",
        "--leader-elect=false",
        "--v=5",
        "--metrics-bind-address=127.0.0.1:9090",
        "--leader-elect-lease-duration=1m",
        "--leader-elect-renew-deadline=30s",
        "--leader-elect-retry-period=500ms",
        "--leader-election-namespace=capmox-system",
        "--enable-webhooks=false",
        "--log-format=json",
        "--namespace=team-a",
        "--concurrency=4",
    ]);
    assert!(cli.feature_gates.enabled("ClusterTopology"));
    assert!(!cli.leader_elect);
    assert_eq!(cli.verbosity, 5);
    assert_eq!(cli.diagnostics_address, "127.0.0.1:9090");
    assert_eq!(cli.leader_elect_lease_duration, Duration::from_secs(60));
    assert_eq!(cli.leader_elect_retry_period, Duration::from_millis(500));
    assert!(!cli.enable_webhooks);
    assert_eq!(cli.log_format, LogFormat::Json);
    let opts = options_from_cli(&cli).unwrap();
    assert!(opts.leader_election.is_none());
    assert_eq!(opts.settings.namespace.as_deref(), Some("team-a"));
    assert_eq!(opts.settings.concurrency, 4);
    assert_eq!(
        (
            opts.settings.machine_concurrency(),
            opts.settings.cluster_concurrency()
        ),
        (4, 4)
    );
    assert!(opts.feature_gates.enabled("ClusterTopology"));

    assert_eq!(parse(&["-v=3"]).verbosity, 3);
    assert_eq!(parse(&["--v", "2"]).verbosity, 2);
    // Go's flag package lets a repeated flag override the earlier one.
    assert_eq!(parse(&["--v=1", "--v=4"]).verbosity, 4);

    let with_le = parse(&["--leader-elect=true", "--leader-election-namespace=capmox-system"]);
    assert_eq!(
        options_from_cli(&with_le)
            .unwrap()
            .leader_election
            .unwrap()
            .namespace,
        "capmox-system"
    );
}

#[test]
fn invalid_values_are_rejected() {
    for args in [
        vec!["capmox", "--v=11"],
        vec!["capmox", "--leader-elect-lease-duration=15"],
        vec!["capmox", "--feature-gates=ClusterTopology"],
        vec!["capmox", "--concurrency=0"],
        vec!["capmox", "--log-format=xml"],
        vec!["capmox", "--leader-elect=maybe"],
    ] {
        assert!(Cli::try_parse_from(&args).is_err(), "{args:?} must fail");
    }
    let bad_timing = parse(&["--leader-elect", "--leader-elect-lease-duration=5s"]);
    assert!(matches!(
        options_from_cli(&bad_timing),
        Err(ManagerError::Config(_))
    ));
    let bad_addr = parse(&["--health-probe-bind-address=:notaport"]);
    assert!(matches!(
        options_from_cli(&bad_addr),
        Err(ManagerError::Config(_))
    ));
    let disabled = parse(&["--health-probe-bind-address=0", "--diagnostics-address=0"]);
    let opts = options_from_cli(&disabled).unwrap();
    assert_eq!((opts.health_addr, opts.metrics_addr), (None, None));
}

#[test]
fn secrets_never_show_in_debug() {
    let cli = parse(&[
        "--proxmox-url=https://pve.example:8006",
        "--proxmox-token=capmox@pve!capi",
        &format!("--proxmox-secret={SECRET}"),
        "--proxmox-username=root@pam",
        &format!("--proxmox-password={PASSWORD}"),
    ]);
    assert!(cli.global_proxmox_configured());
    let debug = format!("{cli:?} {cli:#?}");
    assert!(!debug.contains(SECRET), "{debug}");
    assert!(!debug.contains(PASSWORD), "{debug}");
    assert!(debug.contains("capmox@pve!capi"));

    let opts = options_from_cli(&cli).unwrap();
    let debug = format!("{opts:?}");
    assert!(!debug.contains(SECRET) && !debug.contains(PASSWORD), "{debug}");
    // Help output never prints env values either.
    let help = Cli::command().render_long_help().to_string();
    assert!(!help.contains(SECRET));
}

#[test]
fn global_client_needs_url_and_complete_credentials() {
    let none = parse(&[]);
    assert!(global_proxmox_config(&none).unwrap().is_none());
    let url_only = parse(&[
        "--proxmox-url=https://pve:8006",
        "--proxmox-token=capmox@pve!capi",
    ]);
    assert!(!url_only.global_proxmox_configured());
    assert!(global_proxmox_config(&url_only).unwrap().is_none());
    let empty_secret = parse(&[
        "--proxmox-url=https://pve:8006",
        "--proxmox-token=capmox@pve!capi",
        "--proxmox-secret=",
    ]);
    assert!(global_proxmox_config(&empty_secret).unwrap().is_none());

    let token = parse(&[
        "--proxmox-url=https://pve:8006",
        "--proxmox-token=capmox@pve!capi",
        "--proxmox-secret=s",
    ]);
    let cfg = global_proxmox_config(&token).unwrap().unwrap();
    assert_eq!(cfg.url, "https://pve:8006");
    assert!(matches!(
        cfg.credentials,
        capmox::proxmox::Credentials::Token { .. }
    ));
    // PROXMOX_INSECURE defaults to true like capmox.
    assert!(matches!(cfg.tls, capmox::proxmox::TlsVerification::Insecure));

    let password = parse(&[
        "--proxmox-url=https://pve:8006",
        "--proxmox-username=root@pam",
        "--proxmox-password=p",
        "--proxmox-insecure=false",
    ]);
    let cfg = global_proxmox_config(&password).unwrap().unwrap();
    assert!(matches!(
        cfg.credentials,
        capmox::proxmox::Credentials::Password { .. }
    ));
    assert!(matches!(cfg.tls, capmox::proxmox::TlsVerification::Verify));
}

#[test]
fn root_cert_file_is_read_when_verifying() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ca.pem");
    std::fs::write(
        &path,
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let base = [
        "--proxmox-url=https://pve:8006",
        "--proxmox-token=capmox@pve!capi",
        "--proxmox-secret=s",
        "--proxmox-insecure=false",
    ];
    let mut args = base.to_vec();
    let file_arg = format!("--proxmox-root-cert-file={}", path.display());
    args.push(&file_arg);
    let cfg = global_proxmox_config(&parse(&args)).unwrap().unwrap();
    assert!(
        matches!(cfg.tls, capmox::proxmox::TlsVerification::VerifyWithCa(ref pem) if pem.contains("MIIB"))
    );

    let mut missing = base.to_vec();
    missing.push("--proxmox-root-cert-file=/nonexistent/ca.pem");
    assert!(matches!(
        global_proxmox_config(&parse(&missing)),
        Err(ManagerError::Proxmox(_))
    ));
}

#[test]
fn webhook_flags_default_like_capmox_and_map_to_options() {
    use capmox::manager::webhook_options;
    use capmox::webhooks::TlsVersion;
    let cli = parse(&[]);
    assert!(cli.enable_webhooks);
    let w = options_from_cli(&cli)
        .unwrap()
        .webhooks
        .expect("webhooks on by default");
    assert_eq!(w.addr, "0.0.0.0:9443".parse().unwrap());
    assert_eq!(
        w.cert_dir,
        std::path::PathBuf::from("/tmp/k8s-webhook-server/serving-certs")
    );
    assert_eq!(
        (w.cert_name.as_str(), w.key_name.as_str()),
        ("tls.crt", "tls.key")
    );
    assert_eq!(w.tls.min_version, TlsVersion::Tls12);
    assert!(w.tls.cipher_suites.is_empty());

    let cli = parse(&[
        "--webhook-host=127.0.0.1",
        "--webhook-port=19443",
        "--webhook-cert-dir=/certs",
        "--tls-min-version=VersionTLS12",
        "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    ]);
    let w = webhook_options(&cli).unwrap();
    assert_eq!(w.addr, "127.0.0.1:19443".parse().unwrap());
    assert_eq!(w.cert_dir, std::path::PathBuf::from("/certs"));
    assert_eq!(w.tls.cipher_suites.len(), 2);
    let v6 = webhook_options(&parse(&["--webhook-host=::1", "--webhook-port=1"])).unwrap();
    assert_eq!(v6.addr, "[::1]:1".parse().unwrap());

    assert!(!parse(&["--enable-webhooks=false"]).enable_webhooks);
    assert!(
        options_from_cli(&parse(&["--enable-webhooks=false"]))
            .unwrap()
            .webhooks
            .is_none()
    );

    // Bad values are refused with clear errors.
    let err = Cli::try_parse_from(["capmox", "--tls-min-version=VersionTLS11"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("VersionTLS11 is not supported"), "{err}");
    let err = Cli::try_parse_from(["capmox", "--tls-cipher-suites=TLS_FOO"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown cipher suite \"TLS_FOO\""), "{err}");
    let err = options_from_cli(&parse(&[
        "--tls-min-version=VersionTLS13",
        "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    ]))
    .unwrap_err();
    assert!(
        matches!(err, ManagerError::Config(ref m) if m.contains("VersionTLS13")),
        "{err}"
    );
}

#[test]
fn sharding_flags_map_to_watch_scope() {
    // Default: every namespace, no filter, CAPI's 10-minute resync.
    let opts = options_from_cli(&parse(&[])).unwrap();
    assert_eq!(opts.settings.watched_namespaces(), vec![None]);
    assert_eq!(opts.settings.watch_filter, None);
    assert_eq!(opts.settings.sync_period, Some(Duration::from_secs(600)));

    // Several namespaces, comma-separated and repeated, deduplicated in order.
    let cli = parse(&[
        "--namespace=team-a,team-b",
        "--namespace",
        "team-c",
        "--namespace=team-a",
        "--watch-filter=shard-1",
        "--sync-period=15m",
    ]);
    let opts = options_from_cli(&cli).unwrap();
    let ns = |v: &[&str]| v.iter().map(|n| Some((*n).to_owned())).collect::<Vec<_>>();
    assert_eq!(
        opts.settings.watched_namespaces(),
        ns(&["team-a", "team-b", "team-c"])
    );
    assert_eq!(opts.settings.namespace.as_deref(), Some("team-a"));
    assert_eq!(opts.settings.watch_filter.as_deref(), Some("shard-1"));
    assert_eq!(opts.settings.sync_period, Some(Duration::from_secs(900)));

    // One namespace keeps the single-namespace form; `--sync-period=0` turns the resync off;
    // an empty filter is no filter (clusterctl's `${WATCH_FILTER:=""}` style).
    let opts = options_from_cli(&parse(&[
        "--namespace=team-a",
        "--sync-period=0",
        "--watch-filter=",
    ]))
    .unwrap();
    assert_eq!(opts.settings.watched_namespaces(), ns(&["team-a"]));
    assert!(opts.settings.namespaces.is_empty());
    assert_eq!(opts.settings.sync_period, None);
    assert_eq!(opts.settings.watch_filter, None);

    for bad in [
        "--watch-filter=not valid",
        "--watch-filter=-a",
        "--sync-period=10",
    ] {
        assert!(Cli::try_parse_from(["capmox", bad]).is_err(), "{bad} accepted");
    }
    let long = format!("--watch-filter={}", "a".repeat(64));
    assert!(Cli::try_parse_from(["capmox", long.as_str()]).is_err());
}
