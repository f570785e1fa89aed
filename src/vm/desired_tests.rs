//! Tests of [`super`]: the config a VM needs before its first boot.

use super::*;
use serde_json::json;
use std::collections::BTreeMap;

fn config(v: serde_json::Value) -> VmConfig {
    let map: BTreeMap<String, serde_json::Value> = serde_json::from_value(v).unwrap();
    VmConfig::from(map)
}

fn nic(index: u32, model: &str, bridge: Option<&str>, vlan: Option<u16>) -> DesiredNic {
    DesiredNic {
        index,
        model: model.into(),
        bridge: bridge.map(Into::into),
        vlan,
        mtu: None,
        queues: None,
        mac: None,
        firewall: None,
    }
}

fn base() -> DesiredVm {
    DesiredVm {
        sockets: Some(2),
        cores: Some(4),
        memory_mib: Some(4096),
        boot_disk: Some(("scsi0".into(), 20)),
        tags: vec!["Team-A".into()],
        nics: vec![nic(0, "virtio", Some("vmbr0"), Some(10))],
        ..Default::default()
    }
}

#[test]
fn fresh_clone_needs_every_option_and_a_new_nic() {
    let d = base();
    let c = config(json!({
        "sockets": 1, "cores": 1, "memory": "2048", "tags": "capmox;template",
        "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0",
        "scsi0": "local-lvm:base-100-disk-0,size=10G"
    }));
    let u = config_changes(&d, &c);
    let p = u.params();
    assert_eq!(p["sockets"], json!(2));
    assert_eq!(p["cores"], json!(4));
    assert_eq!(p["memory"], json!("4096"));
    assert_eq!(p["net0"], json!("virtio,bridge=vmbr0,tag=10"));
    assert_eq!(p["tags"], json!("capmox;team-a;template"));
    assert_eq!(boot_disk_resize(&d, &c), Some(("scsi0".into(), 20)));
}

#[test]
fn configured_vm_needs_nothing() {
    let d = base();
    let c = config(json!({
        "sockets": 2, "cores": 4, "memory": 4096, "tags": "capmox;team-a;template",
        "net0": "virtio=BC:24:11:00:00:02,bridge=vmbr0,tag=10",
        "scsi0": "local-lvm:vm-105-disk-0,size=20G"
    }));
    assert!(config_changes(&d, &c).is_empty());
    assert_eq!(boot_disk_resize(&d, &c), None);
}

#[test]
fn disks_never_shrink_and_unset_options_are_left_alone() {
    let d = DesiredVm {
        boot_disk: Some(("scsi0".into(), 20)),
        nics: vec![nic(0, "virtio", None, None)],
        ..Default::default()
    };
    let c = config(
        json!({"sockets": 8, "net0": "virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr7",
        "scsi0": "local:vm-1-disk-0,size=40G"}),
    );
    assert!(
        config_changes(&d, &c).is_empty(),
        "no bridge in spec keeps the template's"
    );
    assert_eq!(boot_disk_resize(&d, &c), None);
}

#[test]
fn new_volumes_are_allocated_once_per_slot() {
    let d = DesiredVm {
        boot_disk: Some(("scsi0".into(), 20)),
        volumes: vec![
            Volume {
                disk: "scsi1".into(),
                size_gib: 10,
                discard: true,
                ssd: true,
                iothread: true,
                cache: Some("writeback".into()),
                format: Some("qcow2".into()),
                ..Default::default()
            },
            Volume {
                disk: "virtio2".into(),
                size_gib: 5,
                storage: Some("ceph".into()),
                ..Default::default()
            },
        ],
        nics: vec![nic(0, "virtio", None, None)],
        ..Default::default()
    };
    let c = config(json!({
        "scsi0": "local-lvm:vm-105-disk-0,size=20G", "boot": "order=scsi0;net0", "digest": "abc",
        "net0": "virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr0"
    }));
    let u = new_volumes(&d, &c).unwrap();
    let p = u.params();
    assert_eq!(
        p["scsi1"],
        json!("local-lvm:10,cache=writeback,discard=on,format=qcow2,iothread=1,ssd=1")
    );
    assert_eq!(p["virtio2"], json!("ceph:5"));
    assert_eq!(p["digest"], json!("abc"));
    assert!(!p.contains_key("boot"), "the order already names scsi0");
    // Once the slots exist (whatever their volume), nothing is allocated again.
    let c = config(json!({
        "scsi0": "local-lvm:vm-105-disk-0,size=20G", "scsi1": "local-lvm:vm-105-disk-1,size=10G",
        "virtio2": "ceph:vm-105-disk-0,size=5G"
    }));
    assert!(new_volumes(&d, &c).unwrap().is_empty());
}

#[test]
fn new_volumes_need_a_storage_and_pin_the_boot_disk() {
    let d = DesiredVm {
        volumes: vec![Volume {
            disk: "scsi0".into(),
            size_gib: 10,
            ..Default::default()
        }],
        nics: vec![nic(0, "virtio", None, None)],
        ..Default::default()
    };
    // The template boots virtio0 by PVE's default; scsi0 would sort before it.
    let c = config(
        json!({"virtio0": "zfs:vm-1-disk-0,size=8G", "net0": "virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr0"}),
    );
    let u = new_volumes(&d, &c).unwrap();
    assert_eq!(u.params()["scsi0"], json!("zfs:10"));
    assert_eq!(u.params()["boot"], json!("order=virtio0;net0"));
    let err = new_volumes(&d, &config(json!({}))).unwrap_err();
    assert!(err.contains("scsi0") && err.contains("storage"), "{err}");
    let mut d = d;
    d.boot_disk = Some(("scsi0".into(), 20));
    let err = new_volumes(&d, &c).unwrap_err();
    assert!(err.contains("boot volume"), "{err}");
}

#[test]
fn missing_nic_gets_the_fallback_bridge_and_tags_merge_case_insensitively() {
    let d = DesiredVm {
        nics: vec![nic(0, "virtio", None, None), nic(1, "e1000", None, None)],
        ..Default::default()
    };
    let c = config(json!({"net0": "virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr1", "tags": "A;b"}));
    let u = config_changes(&d, &c);
    assert_eq!(u.params()["net0"], json!("virtio,bridge=vmbr1"));
    assert_eq!(u.params()["net1"], json!("e1000,bridge=vmbr0"));
    assert_eq!(missing_tags(&["a".into(), "C".into(), "c".into()], &c), vec!["c"]);
    assert_eq!(merged_tags(&c, &["c".into()]), vec!["a", "b", "c"]);
    assert_eq!(tags_without(&c, "B"), vec!["A"]);
}

#[test]
fn on_boot_is_written_only_when_it_differs() {
    let d = DesiredVm {
        on_boot: Some(true),
        ..Default::default()
    };
    assert_eq!(
        config_changes(&d, &config(json!({}))).params()["onboot"],
        json!(1)
    );
    assert!(config_changes(&d, &config(json!({"onboot": 1}))).is_empty());
    let off = DesiredVm {
        on_boot: Some(false),
        ..Default::default()
    };
    assert!(
        config_changes(&off, &config(json!({}))).is_empty(),
        "PVE's default is off"
    );
    assert_eq!(
        config_changes(&off, &config(json!({"onboot": "1"}))).params()["onboot"],
        json!(0)
    );
    assert!(config_changes(&DesiredVm::default(), &config(json!({"onboot": 1}))).is_empty());
}
