//! Swapping an installed capmox for capmox-rs by changing only the image keeps capmox v0.9's own
//! RBAC (`../shared/compat/capmox-v0.9/config/rbac/`: the manager ClusterRole and the
//! leader-election Role). The `capmox` binary runs as capmox's ServiceAccount under exactly those
//! roles against the real kube-apiserver (the in-tree server does not enforce RBAC) and pve-sim:
//! it leads, provisions and deletes a machine, publishes its Events (core `v1`, which capmox's
//! role allows, since `events.k8s.io` is refused), and every controller either works or turns
//! itself off with one line — the ProxmoxMachineTemplate controller, which may not list
//! templates, says so once instead of retrying a refused watch.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod machine_support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Event, Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, ListParams, PostParams};
use machine_support::*;
use serde_json::json;

const SYSTEM_NS: &str = "capmox-system";
const SA: &str = "capmox-controller-manager";

fn shared_dir() -> PathBuf {
    std::env::var_os("CAPMOX_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The manager process, killed on drop.
struct Manager(Child);

impl Drop for Manager {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// capmox's roles, bound to capmox's ServiceAccount as its kustomize config binds them (names
/// prefixed `capmox-`, the Role in the manager's namespace).
async fn install_capmox_rbac(client: &kube::Client, rbac: &std::path::Path) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": SYSTEM_NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": SA, "namespace": SYSTEM_NS}})).unwrap();
    Api::<ServiceAccount>::namespaced(client.clone(), SYSTEM_NS)
        .create(&PostParams::default(), &sa)
        .await
        .unwrap();
    let read = |f: &str| std::fs::read_to_string(rbac.join(f)).unwrap();
    let mut role: ClusterRole = serde_saphyr::from_str(&read("role.yaml")).unwrap();
    role.metadata.name = Some("capmox-manager-role".into());
    Api::<ClusterRole>::all(client.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let mut le: Role = serde_saphyr::from_str(&read("leader_election_role.yaml")).unwrap();
    le.metadata.name = Some("capmox-leader-election-role".into());
    le.metadata.namespace = Some(SYSTEM_NS.into());
    Api::<Role>::namespaced(client.clone(), SYSTEM_NS)
        .create(&PostParams::default(), &le)
        .await
        .unwrap();
    let subject = json!([{"kind": "ServiceAccount", "name": SA, "namespace": SYSTEM_NS}]);
    let crb: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "capmox-manager-rolebinding"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "capmox-manager-role"},
        "subjects": subject,
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &crb)
        .await
        .unwrap();
    let rb: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "capmox-leader-election-rolebinding", "namespace": SYSTEM_NS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "capmox-leader-election-role"},
        "subjects": subject,
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), SYSTEM_NS)
        .create(&PostParams::default(), &rb)
        .await
        .unwrap();
}

/// A kubeconfig for capmox's ServiceAccount (a token from a TokenRequest).
async fn service_account_kubeconfig(h: &Harness, dir: &std::path::Path) -> PathBuf {
    let req: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 3600}})).unwrap();
    let token = Api::<ServiceAccount>::namespaced(h.client.clone(), SYSTEM_NS)
        .create_token_request(SA, &PostParams::default(), &req)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let ca = &h.env.real().unwrap().ca_pem;
    let path = dir.join("kubeconfig");
    std::fs::write(&path, testenv::kubeconfig::render(h.env.server_url(), ca, &token)).unwrap();
    path
}

fn warnings(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.contains(" WARN ")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manager_under_capmox_v0_9_roles_provisions_deletes_and_publishes_events() {
    if testenv::real::binaries_from_env().is_none() {
        eprintln!("skipped: RBAC needs the real kube-apiserver (KUBEBUILDER_ASSETS; make test-real)");
        return;
    }
    let rbac = shared_dir().join("compat/capmox-v0.9/config/rbac");
    if !rbac.join("role.yaml").exists() {
        eprintln!("skipped: {} not found (capmox v0.9's RBAC)", rbac.display());
        return;
    }
    let mut h = Harness::start_without_gc().await;
    h.kill_controllers().await;
    install_capmox_rbac(&h.client, &rbac).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = service_account_kubeconfig(&h, dir.path()).await;
    let log_path = dir.path().join("capmox.log");
    let child = Command::new(env!("CARGO_BIN_EXE_capmox"))
        .arg("--leader-elect")
        .arg(format!("--health-probe-bind-address=127.0.0.1:{}", free_port()))
        .arg(format!("--diagnostics-address=127.0.0.1:{}", free_port()))
        .arg("--enable-webhooks=false")
        .env("KUBECONFIG", &kubeconfig)
        .env("POD_NAMESPACE", SYSTEM_NS)
        .env("PROXMOX_URL", h.sim.url())
        .env("PROXMOX_TOKEN", h.sim.token_id())
        .env("PROXMOX_SECRET", h.sim.token_secret())
        .env("RUST_LOG", "info")
        .env_remove("PROXMOX_INSECURE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let mut manager = Manager(child);
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();

    let started = std::time::Instant::now();
    h.create_cluster("swap", json!({})).await;
    // The binary waits for tasks and guests at production pace: a linked clone (looked at after
    // seconds, not the 20 s a full one takes) and no guest checks (not what is tested here).
    let spec = json!({"full": false, "checks": {"skipQemuGuestAgent": true}});
    h.create_machine("swap", "swap-m", false, Some((CLOUD_CONFIG, None)), spec)
        .await;
    h.wait_pm("swap-m", 90, "provisioned under capmox's role", |pm| {
        pm.is_provisioned()
    })
    .await;
    eprintln!("provisioned after {:.1} s", started.elapsed().as_secs_f64());
    h.delete_machine("swap-m", 90).await;
    eprintln!("deleted after {:.1} s", started.elapsed().as_secs_f64());
    let (vms, isos, ipam) = h.leftovers().await;
    assert!(
        vms.is_empty() && isos.is_empty() && ipam == 0,
        "left: {vms:?} {isos:?} {ipam}"
    );
    assert!(
        manager.0.try_wait().unwrap().is_none(),
        "the manager runs: {}",
        log()
    );

    // Events reached the API (as core v1 Events: events.k8s.io is not in capmox's role).
    let events = Api::<Event>::namespaced(h.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let about = |reason: &str| {
        events.iter().any(|e| {
            e.reason.as_deref() == Some(reason) && e.involved_object.name.as_deref() == Some("swap-m")
        })
    };
    assert!(
        about("Provisioned") && about("Deleted"),
        "events: {:?}",
        events.iter().map(|e| &e.reason).collect::<Vec<_>>()
    );

    // One line each for what the role does not allow, and no loop of refusals.
    let text = log();
    let warned = warnings(&text);
    let template = warned
        .iter()
        .filter(|l| l.contains("ProxmoxMachineTemplate controller turned off"))
        .count();
    assert_eq!(template, 1, "one line for the template controller:\n{text}");
    assert!(
        warned.iter().filter(|l| l.contains("events.k8s.io")).count() <= 1,
        "{text}"
    );
    let refused: Vec<&&str> = warned.iter().filter(|l| l.contains("forbidden")).collect();
    assert!(
        refused.len() <= 2,
        "one line per refusal (templates, events.k8s.io):\n{}",
        warned.join("\n")
    );
    assert!(
        !warned.iter().any(|l| l.contains("kube_runtime")),
        "no refused watch retried behind the scenes:\n{}",
        warned.join("\n")
    );
    drop(manager);
    h.stop().await;
}
