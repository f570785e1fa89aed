//! Issue 14 items 1 and 3 end to end against pve-sim: additional data disks
//! (`spec.disks.additionalVolumes`, capmox #504) and Proxmox HA (`spec.ha`, capmox #216). Each
//! machine goes create → provisioned → delete → nothing left (no VM, no disk volume, no HA
//! resource). The disk test loses the answer of the config write that allocates the disks
//! (pve-sim's `drop_after_rate`): the disks must still exist exactly once. Runs on the in-tree and
//! the real API server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod machine_support;

use machine_support::*;
use pve_sim::{EndpointFault, FaultSpec};
use serde_json::json;

const CONFIG_POST: &str = "POST /nodes/{node}/qemu/{vmid}/config";

fn config_of(h: &Harness, vmid: u32) -> std::collections::BTreeMap<String, String> {
    h.sim
        .state()
        .with(|c| c.vms.get(&vmid).map(|vm| vm.config.clone()).unwrap_or_default())
}

/// Disk image volumes of `vmid` on every storage of pve1 (shared ones included).
fn images_of(h: &Harness, vmid: u32) -> Vec<String> {
    let mut out: Vec<String> = ["local-lvm", "shared"]
        .iter()
        .flat_map(|s| {
            let prefix = format!("{s}:vm-{vmid}-");
            h.sim.state().with(|c| {
                c.vms
                    .values()
                    .flat_map(|vm| {
                        vm.config
                            .values()
                            .chain(vm.pending.values())
                            .cloned()
                            .collect::<Vec<_>>()
                    })
                    .filter_map(|v| v.split(',').next().map(str::to_owned))
                    .filter(|f| f.starts_with(&prefix))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn additional_volumes_are_created_once_and_destroyed_with_the_vm() {
    let h = Harness::start_with(pve_sim::SimConfig::default(), fast_machine_settings()).await;
    // The first config write is processed but its answer never arrives.
    h.sim.state().set_faults(FaultSpec {
        endpoints: vec![EndpointFault {
            endpoint: CONFIG_POST.to_owned(),
            drop_after_rate: 1.0,
            ..EndpointFault::default()
        }],
        ..FaultSpec::default()
    });
    h.create_cluster("disks", json!({})).await;
    h.create_machine(
        "disks",
        "data",
        false,
        Some((CLOUD_CONFIG, Some("cloud-config"))),
        json!({"disks": {"additionalVolumes": [
            {"disk": "scsi1", "sizeGb": 10, "discard": true, "ssd": true, "iothread": true, "cache": "writeback"},
            {"disk": "virtio1", "sizeGb": 4, "storage": "shared", "format": "qcow2"}
        ]}}),
    )
    .await;
    let vmid = h
        .wait_pm("data", 60, "a VMID", |pm| pm.spec.virtual_machine_id.is_some())
        .await
        .spec
        .virtual_machine_id
        .unwrap() as u32;
    let posts_before = h.sim.state().request_count(CONFIG_POST);
    wait_for(60, "the disks allocated by the lost write", || async {
        config_of(&h, vmid).contains_key("scsi1").then_some(())
    })
    .await;
    // From here on answers arrive again.
    h.sim.state().set_faults(FaultSpec::default());
    let pm = h.wait_provisioned("data", 90).await;
    assert!(
        h.sim.state().request_count(CONFIG_POST) > posts_before,
        "the lost write was answered by nothing"
    );
    let config = config_of(&h, vmid);
    assert_eq!(
        config.get("scsi1").map(String::as_str),
        Some(
            format!("local-lvm:vm-{vmid}-disk-1,cache=writeback,discard=on,iothread=1,ssd=1,size=10G")
                .as_str()
        ),
        "{config:?}"
    );
    assert_eq!(
        config.get("virtio1").map(String::as_str),
        Some(format!("shared:vm-{vmid}-disk-2,format=qcow2,size=4G").as_str()),
        "{config:?}"
    );
    assert!(
        !config.keys().any(|k| k.starts_with("unused")),
        "a disk was allocated twice: {config:?}"
    );
    assert_eq!(
        images_of(&h, vmid),
        vec![
            format!("local-lvm:vm-{vmid}-disk-0"),
            format!("local-lvm:vm-{vmid}-disk-1"),
            format!("shared:vm-{vmid}-disk-2"),
        ]
    );
    // The boot order still starts at the boot disk (the data disks are blank).
    assert_eq!(config.get("boot").map(String::as_str), Some("order=scsi0;net0"));
    assert!(h.sim.state().with(|c| c.vms[&vmid].booted_os));
    assert!(pm.status.unwrap().ha_resource.is_none());

    // A storage Proxmox does not have: a clear condition, nothing allocated.
    h.create_machine(
        "disks",
        "bad-storage",
        false,
        Some((CLOUD_CONFIG, Some("cloud-config"))),
        json!({"disks": {"additionalVolumes": [{"disk": "scsi1", "sizeGb": 1, "storage": "nope"}]}}),
    )
    .await;
    let bad = h.wait_reason("bad-storage", "AdditionalVolumesFailed", 60).await;
    let message = bad
        .condition("VirtualMachineProvisioned")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(message.contains("storage 'nope' does not exist"), "{message}");
    h.delete_machine("bad-storage", 60).await;

    // Someone else makes the VM HA-managed: deletion keeps the `purge=1` path.
    h.sim.state().with(|c| {
        c.ha.insert(
            vmid,
            pve_sim::HaResource {
                sid: format!("vm:{vmid}"),
                state: "started".into(),
                group: None,
                max_restart: 1,
                max_relocate: 1,
                comment: None,
            },
        )
    });
    h.delete_machine("data", 60).await;
    let (vms, isos, ipam) = h.settled_leftovers().await;
    assert!(
        vms.is_empty() && isos.is_empty() && ipam == 0,
        "{vms:?} {isos:?} {ipam}"
    );
    assert_eq!(images_of(&h, vmid), Vec::<String>::new());
    assert!(
        h.sim.state().ha_resources().is_empty(),
        "purge removed the HA resource"
    );
    assert_eq!(
        h.sim.state().request_count("DELETE /cluster/ha/resources/{sid}"),
        0
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ha_resource_follows_the_machine_from_first_start_to_deletion() {
    // HA groups are Proxmox VE 8's (9 has rules: `on_pve_9_an_ha_group_is_a_node_affinity_rule`).
    let sim = pve_sim::SimConfig {
        pve_version: Some(pve_sim::PveVersion::V8_4),
        ..Default::default()
    };
    let h = Harness::start_with(sim, fast_machine_settings()).await;
    h.sim.state().add_ha_group("prod");
    h.create_cluster("ha", json!({})).await;
    h.create_machine(
        "ha",
        "ha-node",
        false,
        Some((CLOUD_CONFIG, Some("cloud-config"))),
        json!({"ha": {"group": "prod", "maxRestart": 2}}),
    )
    .await;
    h.create_machine(
        "ha",
        "ha-bad-group",
        false,
        Some((CLOUD_CONFIG, Some("cloud-config"))),
        json!({"ha": {"group": "nope"}}),
    )
    .await;
    let pm = h.wait_provisioned("ha-node", 90).await;
    let vmid = pm.spec.virtual_machine_id.unwrap() as u32;
    let applied = pm.status.as_ref().unwrap().ha_resource.clone().expect("recorded");
    assert_eq!(applied.sid, format!("vm:{vmid}"));
    let ha = h.sim.state().ha_resource(vmid).expect("registered");
    assert_eq!(
        (
            ha.state.as_str(),
            ha.group.as_deref(),
            ha.max_restart,
            ha.max_relocate
        ),
        ("started", Some("prod"), 2, 1)
    );

    // A spec change is applied to the resource.
    let patch =
        json!({"spec": {"ha": {"group": null, "state": "ignored", "maxRestart": 2, "maxRelocate": 3}}});
    h.pms()
        .patch(
            "ha-node",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    h.wait_pm("ha-node", 60, "the HA update recorded", |pm| {
        pm.status
            .as_ref()
            .and_then(|s| s.ha_resource.as_ref())
            .is_some_and(|r| r.max_relocate == 3)
    })
    .await;
    let ha = h.sim.state().ha_resource(vmid).expect("still registered");
    assert_eq!(
        (
            ha.state.as_str(),
            ha.group.as_deref(),
            ha.max_restart,
            ha.max_relocate
        ),
        ("ignored", None, 2, 3)
    );

    // An HA group Proxmox does not have: a clear condition and a Warning event.
    let bad = h.wait_reason("ha-bad-group", "HAConfigurationFailed", 90).await;
    let message = bad
        .condition("VirtualMachineProvisioned")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(message.contains("HA group 'nope' does not exist"), "{message}");
    assert!(!bad.is_provisioned());

    // Reading HA state costs nothing per pass: the controller never lists or reads resources.
    let counts = h.sim.state().request_counts();
    assert_eq!(
        counts.get("GET /cluster/ha/resources").copied().unwrap_or(0),
        0,
        "{counts:?}"
    );
    assert_eq!(
        counts
            .get("GET /cluster/ha/resources/{sid}")
            .copied()
            .unwrap_or(0),
        0,
        "{counts:?}"
    );

    h.delete_machine("ha-node", 60).await;
    h.delete_machine("ha-bad-group", 60).await;
    // Our resource was removed before the stop: the stop was a plain `qmstop`, not `hastop`.
    assert_eq!(
        h.sim.state().request_count("DELETE /cluster/ha/resources/{sid}"),
        1
    );
    let hastops = h
        .sim
        .state()
        .with(|c| c.tasks.values().filter(|t| t.kind == "hastop").count());
    assert_eq!(hastops, 0);
    assert!(h.sim.state().ha_resources().is_empty());
    let (vms, isos, ipam) = h.settled_leftovers().await;
    assert!(
        vms.is_empty() && isos.is_empty() && ipam == 0,
        "{vms:?} {isos:?} {ipam}"
    );
    h.stop().await;
}

/// Proxmox VE 9 has no HA groups: `spec.ha.group` names a node-affinity rule, which the first
/// machine creates (with its allowed nodes) and the next joins; a machine that drops its group
/// leaves the rule, and deletion purges the resources (PVE drops the rule left empty).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_pve_9_an_ha_group_is_a_node_affinity_rule() {
    let sim = pve_sim::SimConfig {
        pve_version: Some(pve_sim::PveVersion::V9_1),
        ..Default::default()
    };
    let h = Harness::start_with(sim, fast_machine_settings()).await;
    h.create_cluster("ha9", json!({})).await;
    for name in ["ha9-a", "ha9-b"] {
        h.create_machine(
            "ha9",
            name,
            false,
            Some((CLOUD_CONFIG, Some("cloud-config"))),
            json!({"ha": {"group": "prod"}, "allowedNodes": ["pve1", "pve2"], "sourceNode": "pve2", "templateID": 101}),
        )
        .await;
    }
    let a = h.wait_provisioned("ha9-a", 90).await;
    let b = h.wait_provisioned("ha9-b", 90).await;
    let sid =
        |pm: &capmox_api::v1alpha2::ProxmoxMachine| format!("vm:{}", pm.spec.virtual_machine_id.unwrap());
    let rules = h.sim.state().ha_rules();
    let prod = rules.get("prod").expect("the rule of group prod");
    assert_eq!(prod.kind, "node-affinity");
    assert_eq!(prod.resources.iter().cloned().collect::<Vec<_>>(), {
        let mut v = vec![sid(&a), sid(&b)];
        v.sort();
        v
    });
    assert_eq!(prod.nodes.keys().cloned().collect::<Vec<_>>(), ["pve1", "pve2"]);
    let vmid = a.spec.virtual_machine_id.unwrap() as u32;
    assert_eq!(
        h.sim.state().ha_resource(vmid).and_then(|r| r.group),
        None,
        "no group on PVE 9"
    );
    // Without a group the machine leaves the rule.
    let patch = json!({"spec": {"ha": {"group": null, "maxRestart": 3}}});
    h.pms()
        .patch(
            "ha9-a",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    h.wait_pm("ha9-a", 60, "the HA update recorded", |pm| {
        pm.status
            .as_ref()
            .and_then(|s| s.ha_resource.as_ref())
            .is_some_and(|r| r.max_restart == 3 && r.group.is_none())
    })
    .await;
    let prod = h
        .sim
        .state()
        .ha_rules()
        .get("prod")
        .cloned()
        .expect("still there");
    assert_eq!(prod.resources.iter().cloned().collect::<Vec<_>>(), vec![sid(&b)]);
    h.delete_machine("ha9-a", 60).await;
    h.delete_machine("ha9-b", 60).await;
    assert!(h.sim.state().ha_resources().is_empty());
    assert!(
        h.sim.state().ha_rules().is_empty(),
        "{:?}",
        h.sim.state().ha_rules()
    );
    let (vms, isos, ipam) = h.settled_leftovers().await;
    assert!(
        vms.is_empty() && isos.is_empty() && ipam == 0,
        "{vms:?} {isos:?} {ipam}"
    );
    h.stop().await;
}
