//! Issue 24 item 4: the least privileges a capmox-rs token needs, on Proxmox VE 8.4 and 9.1
//! (pve-sim checks every request against the schema's `permissions` of the version it plays and
//! against qemu-server's in-handler checks). A token holding exactly the role provisions a
//! machine, sees its node join (the bootstrap ISO removed) and deletes it without a trace; for
//! every privilege of the role, a token without that one privilege gets a condition (or, for the
//! ISO cleanup of a provisioned machine, a Warning event) naming it — never a hang or a hot
//! retry loop — and its machine goes on once the privilege is granted. Runs on the in-tree and
//! the real API server. The roles here are the ones the README lists.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod machine_support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, PostParams};
use machine_support::*;
use serde_json::json;

/// Privileges every version needs.
pub const COMMON: &[&str] = &[
    "Datastore.Allocate",
    "Datastore.AllocateSpace",
    "Datastore.AllocateTemplate",
    "Datastore.Audit",
    "SDN.Use",
    "VM.Allocate",
    "VM.Audit",
    "VM.Clone",
    "VM.Config.CDROM",
    "VM.Config.CPU",
    "VM.Config.Disk",
    "VM.Config.Memory",
    "VM.Config.Network",
    "VM.Config.Options",
    "VM.PowerMgmt",
];
/// The guest agent on 8.4.
const AGENT_8: &[&str] = &["VM.Monitor"];
/// The guest agent on 9.x: `exec` needs Unrestricted, which also covers what Audit allows.
const AGENT_9: &[&str] = &["VM.GuestAgent.Unrestricted"];

fn suffix(p: &str) -> String {
    p.to_ascii_lowercase().replace('.', "-")
}

/// A credentials Secret for `token_id`.
async fn credentials(h: &Harness, name: &str, token_id: &str, token_secret: &str) {
    let data: BTreeMap<String, k8s_openapi::ByteString> = [
        ("url", h.sim.url()),
        ("token", token_id.to_owned()),
        ("secret", token_secret.to_owned()),
        ("insecure", "false".to_owned()),
        ("root_ca", h.sim.ca_pem().unwrap()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), k8s_openapi::ByteString(v.into_bytes())))
    .collect();
    let mut secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": NS}})).unwrap();
    secret.data = Some(data);
    Api::<Secret>::namespaced(h.client.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

/// Whether `text` names privilege `p` (not merely a longer one it is the prefix of).
fn names(text: &str, p: &str) -> bool {
    text.match_indices(p).any(|(i, _)| {
        !text[i + p.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '.')
    })
}

/// Whether `p` is named by the machine's condition, its ProxmoxCluster's conditions or a Warning
/// event of the machine.
async fn named(h: &Harness, name: &str, p: &str) -> bool {
    let pm = h.pms().get_opt(name).await.unwrap();
    let in_condition = pm
        .as_ref()
        .and_then(|pm| pm.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| names(&c.message, p)));
    let pc = h.pcs().get_opt(&format!("c-{name}")).await.unwrap();
    let in_cluster = pc
        .as_ref()
        .and_then(|pc| pc.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| names(&c.message, p)));
    let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(h.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap();
    let in_event = events.items.iter().any(|e| {
        e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
            && e.note.as_deref().is_some_and(|n| names(n, p))
    });
    in_condition || in_cluster || in_event
}

async fn least_privilege(version: pve_sim::PveVersion, agent: &[&str]) {
    let sim = pve_sim::SimConfig {
        pve_version: Some(version),
        ..Default::default()
    };
    let mut settings = fast_machine_settings();
    settings.concurrency = Some(32);
    let h = Harness::start_with_secret_credentials(sim, settings).await;
    let st = h.sim.state();
    let role: Vec<&str> = COMMON.iter().chain(agent).copied().collect();
    st.define_role("CapmoxRS", &role);
    // The user may do everything; each token only what its own role allows (privilege
    // separation: the token's ACLs intersected with the user's).
    st.set_acl("capmox@pve", "/", "Administrator", true).unwrap();
    let mut machines: Vec<(String, Option<&str>)> = vec![("full".to_owned(), None)];
    machines.extend(role.iter().map(|p| (format!("no-{}", suffix(p)), Some(*p))));
    for (name, without) in &machines {
        let token = format!("capmox@pve!{name}");
        let role_name = format!("CapmoxRS-{name}");
        let privs: Vec<&str> = role.iter().copied().filter(|p| Some(*p) != *without).collect();
        st.define_role(&role_name, &privs);
        st.set_token(&token, &format!("secret-{name}"));
        st.set_acl(&token, "/", &role_name, true).unwrap();
        credentials(&h, &format!("pve-{name}"), &token, &format!("secret-{name}")).await;
        h.create_cluster(
            &format!("c-{name}"),
            json!({"credentialsRef": {"name": format!("pve-{name}")}}),
        )
        .await;
        // A larger boot disk, more memory and another VLAN than the template's: every config
        // privilege is used.
        h.create_machine(
            &format!("c-{name}"),
            name,
            false,
            Some((CLOUD_CONFIG, Some("cloud-config"))),
            json!({
                "memoryMiB": 4096,
                "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 30}},
                "network": {"networkDevices": [
                    {"name": "net0", "bridge": "vmbr0", "model": "virtio", "defaultIPv4": true, "vlan": 10}
                ]},
            }),
        )
        .await;
    }
    // Exactly the role: provisioned, the ISO removed after the node joined, deleted cleanly.
    let full = h.wait_provisioned("full", 120).await;
    let iso = format!("user-data-{}.iso", full.spec.virtual_machine_id.unwrap());
    testenv::wait_for(120, "the bootstrap ISO removed after the node joined", || async {
        (!st.file_volumes().iter().any(|v| v.volid.contains(&iso))).then_some(())
    })
    .await;
    for (name, without) in &machines {
        let Some(p) = without else { continue };
        testenv::wait_for(180, &format!("{name}: {p} named"), || async {
            named(&h, name, p).await.then_some(())
        })
        .await;
        // Granted: the machine goes on.
        st.set_acl(&format!("capmox@pve!{name}"), "/", "CapmoxRS", true)
            .unwrap();
    }
    for (name, _) in &machines {
        h.delete_machine(name, 180).await;
    }
    let (vms, isos, ipam) = h.settled_leftovers().await;
    assert!(
        vms.is_empty() && isos.is_empty() && ipam == 0,
        "{vms:?} {isos:?} {ipam}"
    );
    h.stop().await;
}

/// On the release the simulator plays (`PVE_SIM_VERSION`: 8.4 in `make test`, 9.1 in
/// `make test-real`), with that release's role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_privileges() {
    let version: pve_sim::PveVersion = std::env::var(pve_sim::VERSION_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_default();
    let agent = if version.is_9() { AGENT_9 } else { AGENT_8 };
    least_privilege(version, agent).await;
}
