//! Step-by-step tests of the VM lifecycle's decision: one test per transition, each from facts
//! as a pass would observe them.

use super::*;
use crate::proxmox::types::VmConfig;
use serde_json::json;
use std::collections::BTreeMap;

fn config(v: serde_json::Value) -> VmConfig {
    let map: BTreeMap<String, serde_json::Value> = serde_json::from_value(v).unwrap();
    VmConfig::from(map)
}

/// A VM that already matches `desired()`.
fn shaped_config() -> VmConfig {
    config(json!({
        "name": "m1", "sockets": 2, "cores": 2, "memory": "2048",
        "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0",
        "scsi0": "local-lvm:vm-200-disk-0,size=20G",
        "tags": "ip_net0_10.0.0.5"
    }))
}

fn desired() -> DesiredVm {
    DesiredVm {
        sockets: Some(2),
        cores: Some(2),
        memory_mib: Some(2048),
        nics: vec![super::super::desired::DesiredNic {
            index: 0,
            model: "virtio".into(),
            bridge: Some("vmbr0".into()),
            vlan: None,
            mtu: None,
            queues: None,
            mac: None,
            firewall: None,
        }],
        boot_disk: Some(("scsi0".into(), 20)),
        ..Default::default()
    }
}

fn vm(power: Power, cfg: VmConfig) -> VmPresence {
    VmPresence::Ours(Box::new(VmFacts {
        vmid: 200,
        node: "pve1".into(),
        power,
        uptime_secs: 0,
        ha_managed: false,
        config: cfg,
    }))
}

fn resolved() -> AddressFacts {
    AddressFacts::Ready
}

fn facts() -> Facts {
    Facts {
        desired: desired(),
        task: None,
        retry_after: None,
        vm: VmPresence::NotReserved,
        addresses: AddressFacts::NotChecked,
        bootstrap_delivered: false,
        failed_terminally: false,
        provisioned: false,
        bootstrap_consumed: false,
        bootstrap_iso_attached: false,
        ha: None,
        ha_applied: None,
        identity: None,
    }
}

#[test]
fn reserves_before_cloning_and_clones_only_a_missing_vmid() {
    let mut f = facts();
    assert_eq!(decide(&f), Step::ReserveVm);
    assert!(!Step::ReserveVm.writes_to_proxmox());
    f.vm = VmPresence::Missing;
    assert_eq!(decide(&f), Step::CloneVm);
    assert_eq!(Step::CloneVm.phase(), Some(Phase::Cloning));
}

#[test]
fn adopts_a_vm_left_by_an_interrupted_clone_and_waits_for_its_lock() {
    let mut f = facts();
    let mut cfg = shaped_config();
    cfg.lock = Some("clone".into());
    f.vm = vm(Power::Stopped, cfg);
    assert_eq!(decide(&f), Step::WaitForUnlock("clone".into()));
}

#[test]
fn a_vmid_taken_by_another_vm_is_reserved_again_before_boot_and_fatal_after() {
    let mut f = facts();
    f.vm = VmPresence::Foreign {
        name: Some("other".into()),
    };
    assert_eq!(
        decide(&f),
        Step::ForgetVmid {
            holder: Some("other".into())
        }
    );
    f.bootstrap_delivered = true;
    let Step::Fail(fail) = decide(&f) else {
        panic!("expected failure")
    };
    assert_eq!(fail.reason, Reason::VmFailed);
    assert_eq!(fail.retry_after, None);
}

#[test]
fn running_task_is_polled_and_failed_task_is_handled_first() {
    let mut f = facts();
    f.vm = VmPresence::Missing;
    f.task = Some(TaskFacts::Running);
    assert_eq!(decide(&f), Step::PollTask);
    assert_eq!(Step::PollTask.phase(), None, "polling keeps the current phase");
    f.task = Some(TaskFacts::Failed {
        kind: "qmclone".into(),
        exitstatus: "clone failed".into(),
    });
    assert!(matches!(decide(&f), Step::HandleFailedTask { .. }));
    f.task = Some(TaskFacts::Unknown);
    assert_eq!(decide(&f), Step::ForgetTask);
    f.task = Some(TaskFacts::Succeeded);
    assert_eq!(decide(&f), Step::CloneVm);
    f.retry_after = Some(Duration::from_secs(30));
    assert_eq!(decide(&f), Step::WaitForRetry(Duration::from_secs(30)));
}

#[test]
fn shapes_the_stopped_clone_config_first_then_disk() {
    let mut f = facts();
    let mut cfg = shaped_config();
    cfg.cores = Some(1);
    f.vm = vm(Power::Stopped, cfg.clone());
    // Options without a MAC or a new disk go out with the bootstrap ISO.
    assert_eq!(decide(&f), Step::ObtainAddresses);
    f.addresses = resolved();
    assert_eq!(decide(&f), Step::DeliverBootstrapData);
    let VmPresence::Ours(facts_vm) = &f.vm else {
        unreachable!()
    };
    let update =
        super::super::iso::delivery_update(&f.desired, facts_vm, "local", &["ip_net0_10.0.0.5".into()]);
    let p = update.params();
    assert_eq!(p["cores"], json!(2));
    assert_eq!(p["ide0"], json!("local:iso/user-data-200.iso,media=cdrom"));
    let tags = p["tags"].as_str().unwrap();
    assert!(
        tags.contains("ip_net0_10.0.0.5") && tags.contains(crate::bootstrap::CLOUD_INIT_TAG),
        "{tags}"
    );
    // A NIC that differs is written first: Proxmox gives it the MAC the bootstrap data names.
    let mut cfg = shaped_config();
    cfg.cores = Some(1);
    cfg.nets.get_mut(&0).unwrap().bridge = Some("vmbr9".into());
    f.vm = vm(Power::Stopped, cfg);
    assert!(matches!(decide(&f), Step::ConfigureVm(u)
        if u.params().contains_key("cores") && u.params().contains_key("net0")));
    let mut cfg = shaped_config();
    cfg.disks.get_mut("scsi0").unwrap().size = Some("10G".into());
    f.vm = vm(Power::Stopped, cfg);
    assert_eq!(
        decide(&f),
        Step::ResizeBootDisk {
            disk: "scsi0".into(),
            size_gib: 20
        }
    );
}

#[test]
fn address_steps() {
    let mut f = facts();
    f.vm = vm(Power::Stopped, shaped_config());
    assert_eq!(decide(&f), Step::ObtainAddresses);
    f.addresses = AddressFacts::Missing;
    assert_eq!(decide(&f), Step::ObtainAddresses);
    f.addresses = AddressFacts::Pending;
    assert_eq!(decide(&f), Step::WaitForAddresses);
    f.addresses = AddressFacts::Conflict("pool mismatch".into());
    assert_eq!(decide(&f), Step::AddressConflict("pool mismatch".into()));
    let mut cfg = shaped_config();
    cfg.tags.clear();
    f.vm = vm(Power::Stopped, cfg);
    f.addresses = resolved();
    // The IP tags are written together with the bootstrap ISO.
    assert_eq!(decide(&f), Step::DeliverBootstrapData);
}

#[test]
fn delivers_bootstrap_data_once_shaped_and_addressed_then_powers_on() {
    let mut f = facts();
    f.vm = vm(Power::Stopped, shaped_config());
    f.addresses = resolved();
    assert_eq!(decide(&f), Step::DeliverBootstrapData);
    f.bootstrap_delivered = true;
    assert_eq!(decide(&f), Step::PowerOn);
    f.vm = vm(Power::Paused, shaped_config());
    assert_eq!(decide(&f), Step::Resume);
}

#[test]
fn config_drift_after_bootstrap_is_not_corrected() {
    let mut f = facts();
    let mut cfg = shaped_config();
    cfg.cores = Some(16);
    f.vm = vm(Power::Stopped, cfg);
    f.addresses = resolved();
    f.bootstrap_delivered = true;
    assert_eq!(decide(&f), Step::PowerOn);
}

#[test]
fn running_vm_is_checked_then_provisioned_then_iso_removed_after_join() {
    let mut f = facts();
    f.vm = vm(Power::Running, shaped_config());
    f.addresses = resolved();
    f.bootstrap_delivered = true;
    assert_eq!(decide(&f), Step::CheckGuest);
    f.provisioned = true;
    f.bootstrap_iso_attached = true;
    assert_eq!(decide(&f), Step::Idle, "ISO stays until the data was consumed");
    f.bootstrap_consumed = true;
    assert_eq!(decide(&f), Step::RemoveBootstrapIso);
    f.bootstrap_iso_attached = false;
    assert_eq!(decide(&f), Step::Idle);
    assert_eq!(Step::Idle.phase(), Some(Phase::Provisioned));
}

#[test]
fn never_provisioned_without_bootstrap_data_and_power_on() {
    // Even when the template already matches everything, the VM goes through bootstrap and power-on.
    let mut f = facts();
    f.vm = vm(Power::Stopped, shaped_config());
    f.addresses = resolved();
    assert_eq!(decide(&f), Step::DeliverBootstrapData);
    f.vm = vm(Power::Running, shaped_config());
    assert_eq!(
        decide(&f),
        Step::DeliverBootstrapData,
        "running without our data is not provisioned"
    );
}

#[test]
fn provisioned_vm_reports_a_vanished_vm() {
    let mut f = facts();
    f.provisioned = true;
    f.bootstrap_delivered = true;
    f.vm = vm(Power::Running, shaped_config());
    assert_eq!(decide(&f), Step::Idle);
    f.vm = VmPresence::Missing;
    assert!(matches!(
        decide(&f),
        Step::Fail(Failure {
            retry_after: None,
            ..
        })
    ));
}

/// The identity a machine records for its VM (`proxmox://<uuid>` → `<uuid>`).
const UUID: &str = "3f0c5b8e-2a6d-4c1e-9b7a-0d5e6f7a8b9c";

/// A VM that ran with our data: shaped, tagged, its SMBIOS UUID [`UUID`].
fn identified_config() -> VmConfig {
    let mut cfg = shaped_config();
    cfg.smbios_uuid = Some(UUID.into());
    cfg
}

#[test]
fn a_lost_record_with_an_identity_and_no_vm_fails_instead_of_cloning() {
    let mut f = facts();
    f.vm = VmPresence::Missing;
    assert_eq!(
        decide(&f),
        Step::CloneVm,
        "no identity: the clone is still to be made"
    );
    f.identity = Some(UUID.into());
    let Step::Fail(fail) = decide(&f) else {
        panic!("expected failure, got {:?}", decide(&f))
    };
    assert_eq!(fail.reason, Reason::VmFailed);
    assert_eq!(fail.retry_after, None, "terminal: the owner is replaced");
    assert!(fail.message.contains("no longer exists"), "{}", fail.message);
}

#[test]
fn a_running_identified_vm_is_adopted_without_a_write_then_checked() {
    let mut f = facts();
    f.identity = Some(UUID.into());
    f.vm = vm(Power::Running, identified_config());
    // Addresses first (no VM write), then the adoption; never a delivery or a config write.
    assert_eq!(decide(&f), Step::ObtainAddresses);
    f.addresses = AddressFacts::Pending;
    assert_eq!(decide(&f), Step::WaitForAddresses);
    f.addresses = AddressFacts::Conflict("claim of someone else".into());
    assert_eq!(decide(&f), Step::AddressConflict("claim of someone else".into()));
    f.addresses = resolved();
    let step = decide(&f);
    assert_eq!(step, Step::Adopt { provisioned: false });
    assert!(!step.writes_to_proxmox());
    assert!(step.record_can_wait());
    // Recorded: the guest is checked as after a delivery.
    f.bootstrap_delivered = true;
    assert_eq!(decide(&f), Step::CheckGuest);
}

#[test]
fn a_consumed_vm_is_adopted_as_provisioned_even_when_stopped() {
    let mut f = facts();
    f.identity = Some(UUID.into());
    f.bootstrap_consumed = true;
    f.addresses = resolved();
    for power in [Power::Running, Power::Stopped] {
        f.vm = vm(power, identified_config());
        let step = decide(&f);
        assert_eq!(step, Step::Adopt { provisioned: true }, "{power:?}");
        assert_eq!(step.phase(), Some(Phase::Provisioned));
    }
    // Consumed without a recorded identity (only the node's join says so) counts too.
    f.identity = None;
    assert_eq!(decide(&f), Step::Adopt { provisioned: true });
    f.provisioned = true;
    f.bootstrap_delivered = true;
    assert_eq!(decide(&f), Step::Idle, "a stopped provisioned VM stays stopped");
}

#[test]
fn an_attached_bootstrap_iso_shows_a_delivery_the_record_lost() {
    let mut f = facts();
    let mut cfg = shaped_config();
    cfg.ide0 = Some("local:iso/user-data-200.iso,media=cdrom".into());
    f.vm = vm(Power::Stopped, cfg.clone());
    f.addresses = resolved();
    assert_eq!(decide(&f), Step::Adopt { provisioned: false });
    f.bootstrap_delivered = true;
    assert_eq!(decide(&f), Step::PowerOn, "then started as after a delivery");
    // The tag alone (a template may carry it) is no proof.
    let mut cfg = shaped_config();
    cfg.tags.push(crate::bootstrap::CLOUD_INIT_TAG.into());
    f.bootstrap_delivered = false;
    f.vm = vm(Power::Stopped, cfg);
    assert_eq!(decide(&f), Step::DeliverBootstrapData);
}

#[test]
fn a_stopped_identified_vm_without_proof_goes_the_normal_way() {
    // capmox records the provider ID right after the clone: a stopped VM without our ISO is
    // still to be bootstrapped.
    let mut f = facts();
    f.identity = Some(UUID.into());
    f.vm = vm(Power::Stopped, identified_config());
    f.addresses = resolved();
    assert_eq!(decide(&f), Step::DeliverBootstrapData);
}

#[test]
fn a_vm_with_another_uuid_than_the_identity_is_not_ours() {
    let mut f = facts();
    f.identity = Some("00000000-0000-4000-8000-000000000001".into());
    f.vm = vm(Power::Running, identified_config());
    f.addresses = resolved();
    let Step::Fail(fail) = decide(&f) else {
        panic!("expected failure, got {:?}", decide(&f))
    };
    assert!(fail.message.contains(UUID), "{}", fail.message);
    assert_eq!(fail.retry_after, None);
    // Upper-case spellings are the same UUID.
    f.identity = Some(UUID.to_uppercase());
    assert_eq!(decide(&f), Step::Adopt { provisioned: false });
}

#[test]
fn a_provisioned_vm_asks_again_for_addresses_it_lost() {
    let mut f = facts();
    f.provisioned = true;
    f.bootstrap_delivered = true;
    f.vm = vm(Power::Running, identified_config());
    f.addresses = AddressFacts::Missing;
    assert_eq!(decide(&f), Step::ObtainAddresses);
    f.addresses = AddressFacts::Pending;
    assert_eq!(decide(&f), Step::Idle, "no waiting: the VM is provisioned");
    f.addresses = AddressFacts::NotChecked;
    assert_eq!(decide(&f), Step::Idle);
}

fn delete_facts() -> DeleteFacts {
    DeleteFacts {
        task: None,
        vm: VmPresence::NotReserved,
        bootstrap_iso: None,
        retry_after: None,
        ha_ours: false,
    }
}

#[test]
fn delete_retries_a_failed_task_only_after_the_delay() {
    let mut f = delete_facts();
    f.vm = vm(Power::Running, shaped_config());
    f.retry_after = Some(Duration::from_secs(30));
    assert_eq!(
        decide_delete(&f),
        DeleteStep::WaitForRetry(Duration::from_secs(30))
    );
    f.task = Some(TaskFacts::Running);
    assert_eq!(decide_delete(&f), DeleteStep::PollTask);
    f.task = None;
    f.vm = VmPresence::Missing;
    assert_eq!(
        decide_delete(&f),
        DeleteStep::Finish,
        "no VM: nothing to hold back"
    );
    f.vm = vm(Power::Running, shaped_config());
    f.retry_after = None;
    assert_eq!(decide_delete(&f), DeleteStep::StopVm);
}

#[test]
fn delete_stops_then_destroys_then_cleans_up() {
    let mut f = delete_facts();
    f.vm = vm(Power::Running, shaped_config());
    assert_eq!(decide_delete(&f), DeleteStep::StopVm);
    f.task = Some(TaskFacts::Running);
    assert_eq!(
        decide_delete(&f),
        DeleteStep::PollTask,
        "never a second stop while one runs"
    );
    f.task = Some(TaskFacts::Succeeded);
    f.vm = vm(Power::Stopped, shaped_config());
    assert_eq!(decide_delete(&f), DeleteStep::DestroyVm);
    f.vm = VmPresence::Missing;
    let iso = IsoLocation {
        node: "pve1".into(),
        storage: "local".into(),
        volid: "local:iso/user-data-200.iso".into(),
    };
    f.bootstrap_iso = Some(iso.clone());
    assert_eq!(decide_delete(&f), DeleteStep::DeleteIso(iso));
    f.bootstrap_iso = None;
    assert_eq!(decide_delete(&f), DeleteStep::Finish);
}

#[test]
fn delete_of_foreign_or_unreserved_vmid_touches_no_vm() {
    let mut f = delete_facts();
    assert_eq!(decide_delete(&f), DeleteStep::Finish);
    f.vm = VmPresence::Foreign {
        name: Some("x".into()),
    };
    assert_eq!(decide_delete(&f), DeleteStep::Finish);
}

#[test]
fn delete_waits_for_locks_and_forgets_failed_tasks() {
    let mut f = delete_facts();
    let mut cfg = shaped_config();
    cfg.lock = Some("backup".into());
    f.vm = vm(Power::Stopped, cfg);
    assert_eq!(decide_delete(&f), DeleteStep::WaitForUnlock("backup".into()));
    f.task = Some(TaskFacts::Failed {
        kind: "qmdestroy".into(),
        exitstatus: "boom".into(),
    });
    assert_eq!(
        decide_delete(&f),
        DeleteStep::ForgetTask {
            failure: Some("boom".into())
        }
    );
}

#[test]
fn a_terminal_failure_stays_until_the_owner_is_replaced() {
    let mut f = facts();
    f.vm = vm(Power::Running, shaped_config());
    f.addresses = resolved();
    f.bootstrap_delivered = true;
    f.failed_terminally = true;
    assert_eq!(decide(&f), Step::StayFailed);
    assert_eq!(Step::StayFailed.phase(), None, "the failure is kept");
    f.failed_terminally = false;
    assert_eq!(decide(&f), Step::CheckGuest);
}

#[test]
fn new_data_disks_go_out_with_the_config_and_only_once() {
    let mut f = facts();
    f.desired.volumes = vec![super::super::desired::Volume {
        disk: "scsi1".into(),
        size_gib: 8,
        ..Default::default()
    }];
    f.vm = vm(Power::Stopped, shaped_config());
    let Step::ConfigureVm(update) = decide(&f) else {
        panic!("expected ConfigureVm, got {:?}", decide(&f));
    };
    assert_eq!(update.params()["scsi1"], json!("local-lvm:8"));
    // The slot exists (the write went through, even if its answer was lost): never again.
    let mut cfg = shaped_config();
    cfg.disks.insert(
        "scsi1".into(),
        crate::proxmox::types::DiskDevice::parse("local-lvm:vm-200-disk-1,size=8G").unwrap(),
    );
    f.vm = vm(Power::Stopped, cfg);
    assert_eq!(decide(&f), Step::ObtainAddresses);
    // No storage to put it on: a failure that is retried.
    f.desired.boot_disk = None;
    f.vm = vm(Power::Stopped, config(json!({"name": "m1"})));
    f.desired.sockets = None;
    f.desired.cores = None;
    f.desired.memory_mib = None;
    f.desired.nics.clear();
    assert!(matches!(
        decide(&f),
        Step::Fail(Failure {
            reason: Reason::VolumesFailed,
            retry_after: Some(_),
            ..
        })
    ));
}

#[test]
fn cpu_and_pci_devices_go_into_the_config_write_and_pcie_needs_q35() {
    let mut f = facts();
    f.desired.cpu = Some(super::super::devices::Cpu {
        model: Some("host".into()),
        flags: Vec::new(),
        numa: Some(true),
    });
    f.desired.pci_devices = vec![super::super::devices::PciDevice {
        mapping: "gpu".into(),
        pcie: true,
        x_vga: false,
    }];
    f.vm = vm(Power::Stopped, shaped_config());
    assert!(matches!(
        decide(&f),
        Step::Fail(Failure {
            reason: Reason::PcieNeedsQ35,
            retry_after: Some(_),
            ..
        })
    ));
    let mut cfg = shaped_config();
    cfg.raw.insert("machine".into(), json!("q35"));
    f.vm = vm(Power::Stopped, cfg);
    f.addresses = resolved();
    assert_eq!(decide(&f), Step::DeliverBootstrapData);
    let VmPresence::Ours(facts_vm) = &f.vm else {
        unreachable!()
    };
    let update = super::super::iso::delivery_update(&f.desired, facts_vm, "local", &[]);
    assert_eq!(update.params()["cpu"], json!("host"));
    assert_eq!(update.params()["numa"], json!(1));
    assert_eq!(update.params()["hostpci0"], json!("mapping=gpu,pcie=1"));
}

#[test]
fn ha_is_applied_after_the_first_start_and_follows_the_spec() {
    let mut f = facts();
    f.ha = Some(HaWish::default());
    f.addresses = resolved();
    // Before the first start: nothing to register yet.
    f.vm = vm(Power::Stopped, shaped_config());
    f.bootstrap_delivered = true;
    assert_eq!(decide(&f), Step::PowerOn);
    f.vm = vm(Power::Running, shaped_config());
    let wanted = HaWish::default().resource(200);
    assert_eq!(decide(&f), Step::ApplyHa(wanted.clone()));
    assert!(Step::ApplyHa(wanted.clone()).writes_to_proxmox());
    f.ha_applied = Some(wanted.clone());
    assert_eq!(decide(&f), Step::CheckGuest);
    // A provisioned VM follows changes and a removed wish.
    f.provisioned = true;
    f.ha = Some(HaWish {
        max_restart: Some(3),
        ..Default::default()
    });
    assert!(matches!(decide(&f), Step::ApplyHa(r) if r.max_restart == 3));
    f.ha = None;
    assert_eq!(decide(&f), Step::RemoveHa(wanted));
}

#[test]
fn delete_removes_our_ha_resource_before_stopping() {
    let mut f = delete_facts();
    f.vm = vm(Power::Running, shaped_config());
    f.ha_ours = true;
    assert_eq!(decide_delete(&f), DeleteStep::RemoveHa { sid: "vm:200".into() });
    // HA-managed by someone else: stop and destroy with purge as before.
    f.ha_ours = false;
    assert_eq!(decide_delete(&f), DeleteStep::StopVm);
}
