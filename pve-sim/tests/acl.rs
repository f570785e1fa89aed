//! Privileges per user and token: ACL entries, built-in and custom roles per version, the
//! schema's permission checks and the handlers' own (storage, bridge, mapping, pool).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use pve_sim::{PveVersion, Scenario, SimConfig};
use serde_json::json;

const TOKEN: &str = "capmox@pve!capi";
const USER: &str = "capmox@pve";

/// A simulator of `version` where the token's user is `PVEAdmin` on `/` (so a privilege-separated
/// token has exactly what its own entries give it).
async fn start(version: PveVersion) -> common::Sim {
    let sim = common::start(SimConfig {
        pve_version: Some(version),
        ..SimConfig::default()
    })
    .await;
    let st = sim.server.state();
    st.set_acl(USER, "/", "Administrator", true).unwrap();
    sim
}

#[tokio::test]
async fn without_acl_entries_every_user_may_do_everything() {
    let sim = common::start_default().await;
    assert!(!sim.server.state().with(|c| c.access.enforced));
    assert_eq!(sim.get("/nodes/pve1/qemu/100/config").await.status, 200);
    assert_eq!(sim.get("/cluster/status").await.status, 200);
}

/// 8.4 checks `VM.Monitor` on every agent call; 9.1 `VM.GuestAgent.Unrestricted` for exec and
/// `VM.GuestAgent.Audit` (or Unrestricted) for the informational calls. A custom role written for
/// 8.x keeps only what the version knows (PVE ignores unknown privileges in `user.cfg`).
#[tokio::test]
async fn agent_privileges_per_version() {
    for version in PveVersion::ALL {
        let sim = start(version).await;
        let st = sim.server.state();
        st.define_role("Capmox8", &["VM.Audit", "VM.Monitor", "VM.PowerMgmt"]);
        st.set_acl(TOKEN, "/vms", "Capmox8", true).unwrap();
        sim.server.state().set_power(100, pve_sim::PowerState::Running);
        let exec = sim
            .post("/nodes/pve1/qemu/100/agent/exec", json!({"command": ["true"]}))
            .await;
        let ping = sim.post("/nodes/pve1/qemu/100/agent/ping", json!({})).await;
        let ifaces = sim.get("/nodes/pve1/qemu/100/agent/network-get-interfaces").await;
        if version.is_9() {
            assert_eq!(exec.status, 403, "{}", exec.body);
            assert_eq!(
                exec.json["message"],
                "Permission check failed (/vms/100, VM.GuestAgent.Unrestricted)\n"
            );
            assert_eq!(
                ping.json["message"],
                "Permission check failed (/vms/100, VM.GuestAgent.Audit|VM.GuestAgent.Unrestricted)\n"
            );
            assert_eq!(ifaces.status, 403);
            // The 9.x way: VM.GuestAgent.Audit for reads, Unrestricted for exec.
            st.define_role("Capmox9", &["VM.Audit", "VM.GuestAgent.Audit"]);
            st.set_acl(TOKEN, "/vms", "Capmox9", true).unwrap();
            assert_eq!(
                sim.post("/nodes/pve1/qemu/100/agent/ping", json!({}))
                    .await
                    .status,
                200
            );
            let exec = sim
                .post("/nodes/pve1/qemu/100/agent/exec", json!({"command": ["true"]}))
                .await;
            assert_eq!(exec.status, 403);
        } else {
            assert_eq!(exec.status, 200, "{}", exec.body);
            assert_eq!(ping.status, 200, "{}", ping.body);
            assert_eq!(ifaces.status, 200, "{}", ifaces.body);
            assert!(st.privileges(TOKEN, "/vms/100").contains("VM.Monitor"));
        }
    }
}

/// The 403 on the wire: reason phrase and JSON body as PVE's `raise_perm_exc`.
#[tokio::test]
async fn forbidden_on_the_wire() {
    let sim = common::start(SimConfig {
        tls: false,
        ..SimConfig::default()
    })
    .await;
    let st = sim.server.state();
    st.set_acl(USER, "/", "Administrator", true).unwrap();
    st.set_acl(TOKEN, "/", "PVEAuditor", true).unwrap();
    let request = format!(
        "POST /api2/json/nodes/pve1/qemu/100/status/start HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        sim.auth
    );
    let raw = common::raw_http(sim.server.addr(), &request).await;
    assert!(
        raw.starts_with("HTTP/1.1 403 Permission check failed (/vms/100, VM.PowerMgmt)\r\n"),
        "{raw}"
    );
    assert!(
        raw.ends_with("{\"data\":null,\"message\":\"Permission check failed (/vms/100, VM.PowerMgmt)\\n\"}"),
        "{raw}"
    );
}

/// Lists show only what the token may audit; `/cluster/resources` drops what it may not see.
#[tokio::test]
async fn lists_are_filtered() {
    let sim = start(PveVersion::V8_4).await;
    let st = sim.server.state();
    st.set_acl(TOKEN, "/vms/100", "PVEAuditor", false).unwrap();
    let res = sim.get("/cluster/resources?type=vm").await.json["data"].clone();
    let ids: Vec<_> = res
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["vmid"].clone())
        .collect();
    assert_eq!(ids, vec![json!(100)]);
    let qemu = sim.get("/nodes/pve2/qemu").await.json["data"].clone();
    assert_eq!(qemu, json!([]));
    assert_eq!(sim.get("/nodes/pve1/storage").await.json["data"], json!([]));
    let nodes = sim.get("/nodes").await.json["data"].clone();
    assert!(nodes[0].get("maxmem").is_none(), "no Sys.Audit: {}", nodes[0]);
    assert_eq!(sim.get("/cluster/status").await.status, 403);
    // Not propagated: nothing below /vms/100, nothing beside it.
    assert_eq!(sim.get("/nodes/pve2/qemu/101/config").await.status, 403);
}

/// A clone needs `VM.Clone` on the source, `VM.Allocate` on the new VM or the pool, and
/// `Datastore.AllocateSpace` on the storage of every disk; the pool's ACLs count for its VMs.
#[tokio::test]
async fn clone_checks_and_pool_acls() {
    let scenario = Scenario {
        pools: vec!["capi".into()],
        ..Scenario::default()
    };
    let sim = common::start(SimConfig {
        scenario,
        ..SimConfig::default()
    })
    .await;
    let st = sim.server.state();
    st.set_acl(USER, "/", "Administrator", true).unwrap();
    st.set_acl(TOKEN, "/vms/100", "PVETemplateUser", false).unwrap();
    let r = sim
        .post("/nodes/pve1/qemu/100/clone", json!({"newid": 200, "name": "c"}))
        .await;
    assert_eq!(r.json["message"], "Permission check failed\n", "{}", r.body);
    st.set_acl(TOKEN, "/pool/capi", "PVEVMAdmin", true).unwrap();
    let r = sim
        .post(
            "/nodes/pve1/qemu/100/clone",
            json!({"newid": 200, "name": "c", "pool": "capi"}),
        )
        .await;
    assert_eq!(
        r.json["message"], "Permission check failed (/storage/local-lvm, Datastore.AllocateSpace)\n",
        "{}",
        r.body
    );
    st.set_acl(TOKEN, "/storage/local-lvm", "PVEDatastoreUser", false)
        .unwrap();
    let r = sim
        .post(
            "/nodes/pve1/qemu/100/clone",
            json!({"newid": 200, "name": "c", "pool": "capi"}),
        )
        .await;
    assert_eq!(
        r.json["message"], "Permission check failed (/sdn/zones/localnetwork/vmbr0, SDN.Use)\n",
        "the template's net0 bridge: {}",
        r.body
    );
    st.set_acl(TOKEN, "/sdn/zones/localnetwork/vmbr0", "PVESDNUser", false)
        .unwrap();
    let r = sim
        .post(
            "/nodes/pve1/qemu/100/clone",
            json!({"newid": 200, "name": "c", "pool": "capi"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(sim.wait_task(r.json["data"].as_str().unwrap()).await, "OK");
    // The pool's PVEVMAdmin counts for the new member VM.
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/200/status/start", json!({}))
            .await,
        "OK"
    );
    // ... but not for a VM outside the pool.
    let r = sim.post("/nodes/pve1/qemu/100/status/start", json!({})).await;
    assert_eq!(r.status, 403);
}

/// Config keys need their `VM.Config.*` privilege, a bridge `SDN.Use`, a mapping `Mapping.Use`.
#[tokio::test]
async fn config_keys_bridges_and_mappings() {
    let sim = start(PveVersion::V9_1).await;
    let st = sim.server.state();
    st.set_acl_enforced(false);
    sim.clone_vm(160, "cfg").await;
    st.set_acl_enforced(true);
    st.add_pci_mapping("gpu", &["pve1"]);
    st.define_role("NetOnly", &["VM.Config.Network"]);
    st.set_acl(TOKEN, "/vms/160", "NetOnly", false).unwrap();
    let r = sim.put("/nodes/pve1/qemu/160/config", json!({"cores": 4})).await;
    assert_eq!(
        r.json["message"],
        "Permission check failed (/vms/160, VM.Config.CPU)\n"
    );
    let r = sim
        .put(
            "/nodes/pve1/qemu/160/config",
            json!({"net1": "virtio,bridge=vmbr1"}),
        )
        .await;
    assert_eq!(
        r.json["message"],
        "Permission check failed (/sdn/zones/localnetwork/vmbr1, SDN.Use)\n"
    );
    st.set_acl(TOKEN, "/sdn/zones/localnetwork/vmbr1", "PVESDNUser", true)
        .unwrap();
    let r = sim
        .put(
            "/nodes/pve1/qemu/160/config",
            json!({"net1": "virtio,bridge=vmbr1,tag=20"}),
        )
        .await;
    assert_eq!(r.status, 200, "a bridge ACL propagates to its VLANs: {}", r.body);
    st.define_role("Hw", &["VM.Config.HWType"]);
    st.set_acl(TOKEN, "/vms/160", "Hw", false).unwrap();
    let r = sim
        .put("/nodes/pve1/qemu/160/config", json!({"hostpci0": "mapping=gpu"}))
        .await;
    assert_eq!(
        r.json["message"],
        "Permission check failed (/mapping/pci/gpu, Mapping.Use)\n"
    );
    let r = sim
        .put("/nodes/pve1/qemu/160/config", json!({"hostpci0": "0000:01:00.0"}))
        .await;
    assert_eq!(
        r.json["message"],
        "only root can set 'hostpci0' config for non-mapped devices\n"
    );
    st.set_acl(TOKEN, "/mapping/pci/gpu", "PVEMappingUser", false)
        .unwrap();
    let r = sim
        .put("/nodes/pve1/qemu/160/config", json!({"hostpci0": "mapping=gpu"}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = sim
        .put("/nodes/pve1/qemu/160/config", json!({"args": "-x"}))
        .await;
    assert_eq!(r.json["message"], "only root can set 'args' config\n");
}

/// A privilege-separated token has only what both it and its user have; `privsep: false` gives
/// it the user's privileges.
#[tokio::test]
async fn token_privilege_separation() {
    let sim = common::start_default().await;
    let st = sim.server.state();
    st.set_acl(USER, "/", "PVEAuditor", true).unwrap();
    st.set_acl(TOKEN, "/", "PVEVMAdmin", true).unwrap();
    assert_eq!(
        sim.post("/nodes/pve1/qemu/100/status/start", json!({}))
            .await
            .status,
        403
    );
    assert_eq!(sim.get("/nodes/pve1/qemu/100/config").await.status, 200);
    st.clear_acl(USER);
    st.set_acl(USER, "/", "PVEVMAdmin", true).unwrap();
    st.clear_acl(TOKEN);
    assert_eq!(
        sim.get("/nodes/pve1/qemu/100/config").await.status,
        403,
        "token without entries"
    );
    st.set_token_privsep(TOKEN, false);
    assert_eq!(sim.get("/nodes/pve1/qemu/100/config").await.status, 200);
}

/// ACLs from a scenario file, for a ticket user as well as a token; root@pam may always do all.
#[tokio::test]
async fn scenario_acls_and_ticket_users() {
    let yaml = r#"
roles:
  Reader: [VM.Audit, Sys.Audit]
acl:
  - {path: /, role: Reader, user: capmox@pve}
  - {path: /vms, role: PVEVMUser, token: "capmox@pve!capi", propagate: true}
"#;
    let parsed = Scenario::from_yaml(yaml).unwrap();
    let scenario = Scenario {
        roles: parsed.roles,
        acl: parsed.acl,
        ..Scenario::default()
    };
    let sim = common::start(SimConfig {
        scenario,
        ..SimConfig::default()
    })
    .await;
    // The token: PVEVMUser ∩ Reader = VM.Audit.
    assert_eq!(sim.get("/nodes/pve1/qemu/100/config").await.status, 200);
    assert_eq!(
        sim.post("/nodes/pve1/qemu/100/status/start", json!({}))
            .await
            .status,
        403
    );
    // The user with a ticket.
    let login = sim
        .client
        .post(format!("{}/access/ticket", sim.base))
        .form(&[("username", USER), ("password", "capmox-password")])
        .send()
        .await
        .unwrap();
    let t: serde_json::Value = login.json().await.unwrap();
    let cookie = format!("PVEAuthCookie={}", t["data"]["ticket"].as_str().unwrap());
    let r = sim
        .client
        .get(format!("{}/cluster/status", sim.base))
        .header("Cookie", &cookie)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    assert_eq!(status, 200, "{}", r.text().await.unwrap());
    let r = sim
        .client
        .get(format!("{}/nodes/pve1/storage", sim.base))
        .header("Cookie", &cookie)
        .send()
        .await
        .unwrap();
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["data"], json!([]), "no Datastore privilege");
    // root@pam's ticket is not limited.
    let root = sim.server.password().to_string();
    let login = sim
        .client
        .post(format!("{}/access/ticket", sim.base))
        .form(&[("username", "root@pam"), ("password", root.as_str())])
        .send()
        .await
        .unwrap();
    let t: serde_json::Value = login.json().await.unwrap();
    let r = sim
        .client
        .get(format!("{}/nodes/pve1/storage", sim.base))
        .header(
            "Cookie",
            format!("PVEAuthCookie={}", t["data"]["ticket"].as_str().unwrap()),
        )
        .send()
        .await
        .unwrap();
    let body: serde_json::Value = r.json().await.unwrap();
    assert!(!body["data"].as_array().unwrap().is_empty());
    assert!(Scenario::from_yaml("acl:\n  - {path: /, role: Nope, user: a@pve}\n").is_ok());
    let bad = SimConfig {
        scenario: Scenario::from_yaml("acl:\n  - {path: /, role: Nope, user: a@pve}\n").unwrap(),
        ..SimConfig::default()
    };
    let err = pve_sim::SimServer::start(bad).await.unwrap_err();
    assert!(err.to_string().contains("role 'Nope' does not exist"), "{err}");
}
