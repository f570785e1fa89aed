//! Secrets never leak: the `capmox` binary runs two full machine lifecycles (create →
//! provisioned → delete) with every log filter at `trace` — first with a credentials Secret (API
//! token), then with global ticket credentials (password, tickets, CSRF tokens) — and no token
//! secret, password, ticket, CSRF token, Kubernetes bearer token or bootstrap data appears in its
//! logs, in Events, in the ProxmoxCluster/ProxmoxMachine objects (conditions included) or in the
//! metrics. A second test checks the `Debug` output of our types that hold secrets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use capmox_api::capi::v1beta2::{Cluster, Machine};
use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxMachine};
use capmox_standins::capi::objects;
use capmox_standins::{CapiStandIn, InClusterIpamStandIn};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use testenv::wait_for;

const NS: &str = "leaks";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The manager process with the most verbose logging, stderr to `log`.
fn manager(env: &testenv::TestEnv, log: &Path, metrics_port: u16, proxmox: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_capmox"));
    cmd.args([
        "--log-level=trace",
        "--v=10",
        "--enable-webhooks=false",
        "--health-probe-bind-address=0",
    ])
    .arg(format!("--diagnostics-address=127.0.0.1:{metrics_port}"))
    .env("KUBECONFIG", env.kubeconfig_path())
    .env("POD_NAMESPACE", "default")
    .env("NO_COLOR", "1");
    for var in [
        "RUST_LOG",
        "PROXMOX_URL",
        "PROXMOX_TOKEN",
        "PROXMOX_SECRET",
        "PROXMOX_USERNAME",
        "PROXMOX_PASSWORD",
        "PROXMOX_INSECURE",
        "PROXMOX_ROOT_CERT_FILE",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in proxmox {
        cmd.env(k, v);
    }
    cmd.stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

fn stop(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    for _ in 0..300 {
        if child.try_wait().unwrap().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn credentials_secret(name: &str, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Default::default()
    }
}

/// Creates a Cluster + ProxmoxCluster and one Machine + ProxmoxMachine with bootstrap data, waits
/// until it is provisioned, deletes it and waits until it and its VM are gone. Returns the
/// provisioned ProxmoxMachine as JSON.
async fn lifecycle(
    client: &kube::Client,
    sim: &pve_sim::SimServer,
    name: &str,
    credentials: Option<&str>,
    bootstrap: &str,
) -> String {
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), NS);
    let cluster = clusters
        .create(&PostParams::default(), &objects::cluster(NS, name, name))
        .await
        .unwrap();
    let mut spec = json!({
        "dnsServers": ["10.0.0.1"],
        "ipv4Config": {"addresses": ["10.10.10.10-10.10.10.50"], "prefix": 24, "gateway": "10.10.10.1"},
        "controlPlaneEndpoint": {"host": "10.10.10.5", "port": 6443},
    });
    if let Some(secret) = credentials {
        spec["credentialsRef"] = json!({"name": secret});
    }
    let mut pc: ProxmoxCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2", "kind": "ProxmoxCluster",
        "metadata": {"name": name, "namespace": NS}, "spec": spec,
    }))
    .unwrap();
    objects::set_cluster_owner(&mut pc.metadata, &cluster);
    Api::<ProxmoxCluster>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pc)
        .await
        .unwrap();

    let machine_name = format!("{name}-cp-0");
    let secret_name = format!("{machine_name}-bootstrap");
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(
            &PostParams::default(),
            &objects::bootstrap_secret(NS, &secret_name, bootstrap, Some("cloud-config")),
        )
        .await
        .unwrap();
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let machine = machines
        .create(
            &PostParams::default(),
            &objects::machine(
                NS,
                &machine_name,
                name,
                true,
                Some(&secret_name),
                &machine_name,
                "v1.33.0",
            ),
        )
        .await
        .unwrap();
    let mut pm: ProxmoxMachine = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2", "kind": "ProxmoxMachine",
        "metadata": {"name": machine_name, "namespace": NS},
        "spec": {
            "sourceNode": "pve1", "templateID": 100, "numSockets": 1, "numCores": 2, "memoryMiB": 2048,
            "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20}},
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "model": "virtio", "defaultIPv4": true}]},
        },
    }))
    .unwrap();
    objects::set_machine_owner(&mut pm.metadata, &machine);
    let pms: Api<ProxmoxMachine> = Api::namespaced(client.clone(), NS);
    pms.create(&PostParams::default(), &pm).await.unwrap();
    let provisioned = wait_for(120, &format!("{machine_name} provisioned"), || {
        let pms = pms.clone();
        let machine_name = machine_name.clone();
        async move {
            let pm = pms.get_opt(&machine_name).await.ok()??;
            pm.is_provisioned().then_some(pm)
        }
    })
    .await;
    let json = serde_json::to_string(&provisioned).unwrap();
    let status = provisioned.status.unwrap();
    assert_eq!(status.bootstrap_data_provided, Some(true));
    let vmid = u32::try_from(provisioned.spec.virtual_machine_id.unwrap()).unwrap();
    assert!(sim.state().vm(vmid).is_some());

    machines
        .delete(&machine_name, &DeleteParams::default())
        .await
        .unwrap();
    wait_for(120, &format!("{machine_name} deleted with its VM"), || {
        let pms = pms.clone();
        let machine_name = machine_name.clone();
        async move {
            let gone = pms.get_opt(&machine_name).await.ok()?.is_none();
            (gone && sim.state().vm(vmid).is_none()).then_some(())
        }
    })
    .await;
    json
}

/// Everything visible outside the process that could carry a secret: the log, Events (both
/// APIs), our objects (status and conditions included) and the metrics.
async fn exposed(client: &kube::Client, log: &Path, metrics_port: u16, token: &str) -> Vec<(String, String)> {
    let mut out = vec![("log".to_owned(), std::fs::read_to_string(log).unwrap())];
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), NS);
    let list = core.list(&ListParams::default()).await.unwrap();
    assert!(!list.items.is_empty(), "no events recorded");
    out.push(("events".to_owned(), serde_json::to_string(&list).unwrap()));
    let pcs = Api::<ProxmoxCluster>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap();
    out.push(("ProxmoxClusters".to_owned(), serde_json::to_string(&pcs).unwrap()));
    let metrics = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
        .get(format!("https://127.0.0.1:{metrics_port}/metrics"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), 200);
    out.push(("metrics".to_owned(), metrics.text().await.unwrap()));
    out
}

fn assert_absent(exposed: &[(String, String)], secrets: &[(&str, String)]) {
    for (what, text) in exposed {
        for (name, secret) in secrets {
            assert!(secret.len() >= 8, "{name} is too short to search for");
            if let Some(at) = text.find(secret.as_str()) {
                let from = text[..at].rfind('\n').map_or(0, |i| i + 1);
                let to = text[at..].find('\n').map_or(text.len(), |i| at + i);
                panic!("{name} leaked into the {what}:\n{}", &text[from..to]);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn no_secret_in_logs_events_objects_or_metrics_at_trace_level() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    if Command::new("kill").arg("-l").output().is_err() {
        eprintln!("skipped: `kill` command not found");
        return;
    }
    let env = testenv::TestEnv::start().await.unwrap();
    let client = env.client();
    let mut crds = capmox_api::crd::all().unwrap();
    crds.extend(capmox_standins::crds::all().unwrap());
    env.install_crds(crds).await.unwrap();
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let sim = pve_sim::SimServer::start(pve_sim::SimConfig::default())
        .await
        .unwrap();
    let ca = sim.ca_pem().unwrap();
    let standins = [
        InClusterIpamStandIn::spawn(client.clone(), Some(NS.into())),
        CapiStandIn::spawn(client.clone(), Some(NS.into())),
    ];
    let dir = tempfile::tempdir().unwrap();
    let keep = std::env::var_os("CAPMOX_KEEP_LEAK_LOGS").map(std::path::PathBuf::from);
    let marker = format!("join-token-{:016x}", rand::random::<u64>());
    let bootstrap = format!(
        "#cloud-config\nwrite_files:\n  - path: /etc/kubernetes/join\n    content: {marker}\nruncmd:\n  - kubeadm join --token {marker}\n"
    );
    let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &bootstrap);

    // 1. API token from a credentials Secret (no global client).
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(
            &PostParams::default(),
            &credentials_secret(
                "pve-creds",
                &[
                    ("url", &sim.url()),
                    ("token", sim.token_id()),
                    ("secret", sim.token_secret()),
                    ("insecure", "false"),
                    ("root_ca", &ca),
                ],
            ),
        )
        .await
        .unwrap();
    let log_a = dir.path().join("token.log");
    let port_a = free_port();
    let child = manager(&env, &log_a, port_a, &[]);
    let pm_a = lifecycle(&client, &sim, "tok", Some("pve-creds"), &bootstrap).await;
    let mut seen_a = exposed(&client, &log_a, port_a, env.admin_token()).await;
    seen_a.push(("the provisioned ProxmoxMachine".to_owned(), pm_a));
    stop(child);

    // 2. Global ticket credentials: password login, tickets and CSRF tokens.
    let ca_file = dir.path().join("pve-ca.pem");
    std::fs::write(&ca_file, &ca).unwrap();
    let log_b = dir.path().join("ticket.log");
    let port_b = free_port();
    let ca_path = ca_file.display().to_string();
    let child = manager(
        &env,
        &log_b,
        port_b,
        &[
            ("PROXMOX_URL", &sim.url()),
            ("PROXMOX_USERNAME", sim.user()),
            ("PROXMOX_PASSWORD", sim.password()),
            ("PROXMOX_INSECURE", "false"),
            ("PROXMOX_ROOT_CERT_FILE", &ca_path),
        ],
    );
    let pm_b = lifecycle(&client, &sim, "tik", None, &bootstrap).await;
    let mut seen_b = exposed(&client, &log_b, port_b, env.admin_token()).await;
    seen_b.push(("the provisioned ProxmoxMachine".to_owned(), pm_b));
    stop(child);
    for s in standins {
        s.stop().await;
    }

    let tickets: Vec<(String, String)> = sim.state().with(|c| {
        c.tickets
            .iter()
            .map(|(t, info)| (t.clone(), info.csrf.clone()))
            .collect()
    });
    assert!(!tickets.is_empty(), "the ticket run logged in");
    let mut secrets: Vec<(&str, String)> = vec![
        ("the API token secret", sim.token_secret().to_owned()),
        ("the password", sim.password().to_owned()),
        ("the Kubernetes bearer token", env.admin_token().to_owned()),
        ("the bootstrap data", marker.clone()),
        ("the bootstrap data (base64)", b64[..40].to_owned()),
        (
            "the API token secret (base64, as in the Secret)",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, sim.token_secret())[..16]
                .to_owned(),
        ),
    ];
    for (ticket, csrf) in &tickets {
        secrets.push(("a ticket", ticket.clone()));
        // The signature part of a ticket is its secret part.
        if let Some((_, sig)) = ticket.rsplit_once("::") {
            secrets.push(("a ticket signature", sig.to_owned()));
        }
        secrets.push(("a CSRF token", csrf.clone()));
    }
    for seen in [&seen_a, &seen_b] {
        // The logs really are at trace level and cover the lifecycle.
        let log = &seen[0].1;
        assert!(log.contains("TRACE"), "not a trace log");
        assert!(log.contains("proxmox request"), "no Proxmox requests logged");
        assert_absent(seen, &secrets);
    }
    if let Some(to) = keep {
        for f in ["token.log", "ticket.log"] {
            std::fs::copy(dir.path().join(f), to.join(f)).unwrap();
        }
    }
    sim.shutdown().await;
}

#[test]
fn debug_output_of_our_types_hides_secrets() {
    use capmox::proxmox::{Client, ClientConfig, Credentials, Secret as PveSecret, Ticket};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let token_secret = "3f1d2c4b-token-secret-value";
    let password = "correct-horse-battery-staple";
    let ticket = "PVE:root@pam:6560B2F1::c2lnbmF0dXJlLXNlY3JldA==";
    let csrf = "6560B2F1:csrf-secret-value";
    let bootstrap = "#cloud-config\nruncmd: [echo bootstrap-secret-value]\n";
    let secrets = [
        token_secret,
        password,
        ticket,
        "c2lnbmF0dXJlLXNlY3JldA",
        csrf,
        "bootstrap-secret-value",
    ];

    let mut out = Vec::new();
    let token_cfg = ClientConfig::new(
        "https://pve:8006",
        Credentials::token("capmox@pve!capi", token_secret),
    );
    let pw_cfg =
        ClientConfig::new("https://pve:8006", Credentials::password("root@pam", password)).insecure();
    out.push(format!("{token_cfg:?} {pw_cfg:?} {token_cfg:#?}"));
    out.push(format!(
        "{:?} {:?}",
        Client::new(token_cfg.clone()).unwrap(),
        Client::new(pw_cfg.clone()).unwrap()
    ));
    let t = Ticket {
        ticket: PveSecret::new(ticket),
        csrf: PveSecret::new(csrf),
        username: "root@pam".into(),
        obtained: std::time::Instant::now(),
    };
    out.push(format!("{t:?} {t:#?}"));
    let data: BTreeMap<String, ByteString> = [
        ("url", "https://pve:8006"),
        ("token", "capmox@pve!capi"),
        ("secret", token_secret),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
    .collect();
    let creds = capmox::credentials::parse_secret_data("ns/creds", &data).unwrap();
    out.push(format!("{creds:?} {:?}", creds.client_config()));
    let clients = capmox::credentials::ProxmoxClients::new(
        Some(Client::new(pw_cfg).unwrap()),
        std::sync::Arc::new(capmox::proxmox::NoopObserver),
    );
    out.push(format!("{clients:?}"));
    // The command line and the manager options built from it.
    let cli = <capmox::cli::Cli as clap::Parser>::parse_from([
        "capmox",
        "--proxmox-url=https://pve:8006",
        "--proxmox-username=root@pam",
        &format!("--proxmox-password={password}"),
        "--proxmox-token=capmox@pve!capi",
        &format!("--proxmox-secret={token_secret}"),
    ]);
    out.push(format!("{cli:?}"));
    let opts = capmox::manager::options_from_cli(&cli).unwrap();
    out.push(format!("{opts:?} {opts:#?}"));
    // Errors.
    let bad = capmox::credentials::parse_secret_data(
        "ns/creds",
        &[("url", "https://pve"), ("secret", token_secret)]
            .iter()
            .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
            .collect(),
    )
    .unwrap_err();
    out.push(format!("{bad:?} {bad}"));
    let header_err = Client::new(ClientConfig::new(
        "https://pve:8006",
        Credentials::token("capmox@pve!capi", format!("{token_secret}\n")),
    ));
    out.push(format!("{:?}", header_err.map(|_| ())));
    // A password in the URL is refused, and never printed.
    let in_url = ClientConfig::new(
        format!("https://root:{password}@pve:8006"),
        Credentials::token("capmox@pve!capi", token_secret),
    );
    out.push(format!("{in_url:?}"));
    out.push(format!("{:?}", Client::new(in_url).map(|_| ())));
    let mut with_userinfo = data.clone();
    with_userinfo.insert(
        "url".into(),
        ByteString(format!("https://root:{password}@pve:8006").into_bytes()),
    );
    let creds = capmox::credentials::parse_secret_data("ns/creds", &with_userinfo).unwrap();
    out.push(format!("{creds:?}"));
    let built =
        capmox::credentials::ProxmoxClients::new(None, std::sync::Arc::new(capmox::proxmox::NoopObserver))
            .for_secret(&Secret {
                metadata: kube::api::ObjectMeta {
                    name: Some("creds".into()),
                    namespace: Some("ns".into()),
                    ..Default::default()
                },
                data: Some(with_userinfo),
                ..Default::default()
            });
    let err = built.map(|_| ()).unwrap_err();
    out.push(format!("{err:?} {err}"));
    // Bootstrap data.
    let data = capmox::bootstrap::BootstrapData::from_secret(Some(bootstrap.as_bytes()), None).unwrap();
    out.push(format!("{data:?}"));
    let files = capmox::bootstrap::NoCloudFiles {
        user_data: bootstrap.as_bytes().to_vec(),
        ..Default::default()
    };
    out.push(format!("{files:?}"));

    for text in &out {
        for s in secrets {
            assert!(!text.contains(s), "{s:?} shown in {text}");
        }
    }
}
