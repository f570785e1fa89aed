//! A ProxmoxVMClone: the new ProxmoxVirtualMachine's spec made from the source's (pure), and the
//! clone's status read from the new object. A full clone names the source's VM as the VM to clone
//! (at the snapshot, for a snapshot source) on the source's node; a linked clone names the
//! source's template with `full: false` (Proxmox links clones to templates only). Either way the
//! NICs lose their MACs (Proxmox gives new ones), the VMID is a new one, and the new object's
//! NoCloud ISO makes a new cloud-init instance.

use std::collections::BTreeMap;

use capmox_api::vm::{
    self as api, CLONE_UID_ANNOTATION, CLONED_BY_LABEL, OperationPhase, ProxmoxVMClone,
    ProxmoxVirtualMachine, ProxmoxVirtualMachineSpec, VmPhase,
};
use kube::ResourceExt;

use super::{FAILED_REASON, IN_PROGRESS_REASON, SUCCEEDED_REASON, Target, set_condition};
use crate::conditions::Desired;

/// The spec of the ProxmoxVirtualMachine `clone` creates from `source` (whose VM is `at`), at
/// Proxmox snapshot `snap_name` when cloning a snapshot. `Err`: why it cannot be made.
pub fn target_spec(
    clone: &ProxmoxVMClone,
    source: &ProxmoxVirtualMachine,
    at: &Target,
    snap_name: Option<&str>,
) -> Result<ProxmoxVirtualMachineSpec, String> {
    let c = &clone.spec;
    let mut spec = source.spec.clone();
    let has_template =
        spec.template_id.is_some() || spec.template_selector.is_some() || spec.template_name.is_some();
    if c.is_linked() {
        if snap_name.is_some() {
            return Err(
                "a linked clone is made from the source's template; a snapshot can only be cloned in full (linked: false)"
                    .into(),
            );
        }
        if spec.adopts() || !has_template {
            return Err(format!(
                "a linked clone needs a source cloned from a template, and ProxmoxVirtualMachine {} adopted VM {} (not a template): clone it in full (linked: false)",
                source.name_any(),
                at.vmid
            ));
        }
        spec.full = Some(false);
        spec.storage = None;
        spec.format = None;
        if let Some(node) = &c.target_node {
            spec.allowed_nodes = Some(vec![node.clone()]);
        }
    } else {
        spec.template_id =
            Some(i32::try_from(at.vmid).map_err(|_| format!("VMID {} is out of range", at.vmid))?);
        spec.source_node = Some(at.node.clone());
        spec.template_selector = None;
        spec.template_name = None;
        spec.full = Some(true);
        spec.storage.clone_from(&c.storage);
        spec.format = None;
        spec.snap_name = snap_name.map(str::to_owned);
        spec.allowed_nodes = Some(vec![c.target_node.clone().unwrap_or_else(|| at.node.clone())]);
    }
    spec.adopt = None;
    spec.vmid = None;
    spec.vm_id_range = None;
    for nic in spec.network.iter_mut().flat_map(|n| n.network_devices.iter_mut()) {
        nic.mac_address = None;
    }
    let Some(o) = c.target.overrides.as_ref() else {
        return Ok(spec);
    };
    spec.vmid = o.vmid;
    if o.description.is_some() {
        spec.description.clone_from(&o.description);
    }
    if o.tags.is_some() {
        spec.tags.clone_from(&o.tags);
    }
    if o.run_strategy.is_some() {
        spec.run_strategy = o.run_strategy;
    }
    if o.cloud_init.is_some() {
        spec.cloud_init.clone_from(&o.cloud_init);
    }
    for n in o.network_devices.iter().flatten() {
        let nic = spec
            .network
            .iter_mut()
            .flat_map(|net| net.network_devices.iter_mut())
            .find(|d| d.name == n.name)
            .ok_or_else(|| format!("overrides name NIC {}, which the source does not have", n.name))?;
        nic.mac_address.clone_from(&n.mac_address);
        if n.ipv4_addresses.is_some() {
            nic.ipv4_addresses.clone_from(&n.ipv4_addresses);
            nic.gateway.clone_from(&n.gateway);
        }
        if n.ipv6_addresses.is_some() {
            nic.ipv6_addresses.clone_from(&n.ipv6_addresses);
            nic.gateway6.clone_from(&n.gateway6);
        }
    }
    Ok(spec)
}

/// The new ProxmoxVirtualMachine object.
pub fn target_object(clone: &ProxmoxVMClone, spec: ProxmoxVirtualMachineSpec) -> ProxmoxVirtualMachine {
    let mut labels: BTreeMap<String, String> = clone
        .spec
        .target
        .overrides
        .as_ref()
        .and_then(|o| o.labels.clone())
        .unwrap_or_default();
    labels.insert(CLONED_BY_LABEL.to_owned(), clone.name_any());
    // A manager sharded by `--watch-filter` that reconciles the clone reconciles its VM too.
    let filter = capmox_api::consts::WATCH_FILTER_LABEL;
    if let Some(shard) = clone.labels().get(filter) {
        labels.insert(filter.to_owned(), shard.clone());
    }
    let mut pvm = ProxmoxVirtualMachine::new(&clone.spec.target.name, spec);
    pvm.metadata.namespace = clone.namespace();
    pvm.metadata.labels = Some(labels);
    pvm.metadata.annotations = Some(BTreeMap::from([(
        CLONE_UID_ANNOTATION.to_owned(),
        clone.metadata.uid.clone().unwrap_or_default(),
    )]));
    pvm
}

/// Whether `pvm` is the object `clone` created.
pub fn made_by(pvm: &ProxmoxVirtualMachine, clone: &ProxmoxVMClone) -> bool {
    pvm.annotations().get(CLONE_UID_ANNOTATION) == clone.metadata.uid.as_ref()
}

/// Shows `phase` with `Ready` as `desired`.
pub fn show(clone: &mut ProxmoxVMClone, phase: OperationPhase, desired: &Desired) {
    let generation = clone.metadata.generation;
    let status = clone.status.get_or_insert_with(Default::default);
    status.phase = Some(phase);
    set_condition(&mut status.conditions, desired, generation);
}

/// The clone's status from its new ProxmoxVirtualMachine: `InProgress` until that VM runs as its
/// run strategy says (`Succeeded`), `Failed` when it failed.
pub fn follow(clone: &mut ProxmoxVMClone, target: &ProxmoxVirtualMachine) {
    let s = target.status.clone().unwrap_or_default();
    let name = target.name_any();
    clone.status.get_or_insert_with(Default::default).target_vmid = s.vmid;
    let ready = s
        .conditions
        .as_deref()
        .and_then(|c| crate::conditions::get(c, api::READY_CONDITION))
        .map(|c| c.message.clone())
        .unwrap_or_default();
    match s.phase {
        Some(VmPhase::Error) => show(
            clone,
            OperationPhase::Failed,
            &Desired::falsy(
                api::READY_CONDITION,
                FAILED_REASON,
                format!("ProxmoxVirtualMachine {name} failed: {ready}"),
            ),
        ),
        Some(VmPhase::Running | VmPhase::Stopped | VmPhase::Paused) if s.provisioned == Some(true) => show(
            clone,
            OperationPhase::Succeeded,
            &Desired::truthy(
                api::READY_CONDITION,
                SUCCEEDED_REASON,
                format!(
                    "ProxmoxVirtualMachine {name} is VM {}",
                    s.vmid.unwrap_or_default()
                ),
            ),
        ),
        _ => show(
            clone,
            OperationPhase::InProgress,
            &Desired::falsy(
                api::READY_CONDITION,
                IN_PROGRESS_REASON,
                format!("ProxmoxVirtualMachine {name} is being created"),
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn source(spec: serde_json::Value) -> ProxmoxVirtualMachine {
        serde_json::from_value(json!({
            "apiVersion": api::API_VERSION, "kind": api::KIND,
            "metadata": {"name": "web", "namespace": "apps"}, "spec": spec,
            "status": {"vmid": 201, "node": "pve2"}
        }))
        .unwrap()
    }

    fn clone(spec: serde_json::Value) -> ProxmoxVMClone {
        serde_json::from_value(json!({
            "apiVersion": api::API_VERSION, "kind": "ProxmoxVMClone",
            "metadata": {"name": "c", "namespace": "apps", "uid": "u-1"}, "spec": spec
        }))
        .unwrap()
    }

    const AT: fn() -> Target = || Target {
        vmid: 201,
        node: "pve2".into(),
    };

    fn nic_spec() -> serde_json::Value {
        json!({"templateID": 100, "sourceNode": "pve1", "vmid": 201, "memoryMiB": 2048,
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "macAddress": "BC:24:11:00:00:01",
                "ipv4Addresses": ["10.0.0.5/24"], "gateway": "10.0.0.1"}]}})
    }

    #[test]
    fn a_full_clone_copies_the_source_vm_with_new_macs_and_overrides() {
        let c = clone(
            json!({"source": {"name": "web"}, "target": {"name": "web2", "overrides": {
            "networkDevices": [{"name": "net0", "ipv4Addresses": ["10.0.0.6/24"], "gateway": "10.0.0.1"}],
            "labels": {"app": "web"}}}}),
        );
        let spec = target_spec(&c, &source(nic_spec()), &AT(), Some("snap-1")).unwrap();
        assert_eq!(
            (spec.template_id, spec.source_node.as_deref()),
            (Some(201), Some("pve2"))
        );
        assert_eq!(
            (spec.full, spec.snap_name.as_deref(), spec.vmid),
            (Some(true), Some("snap-1"), None)
        );
        assert_eq!(spec.allowed_nodes, Some(vec!["pve2".to_owned()]));
        let nic = &spec.nics()[0];
        assert_eq!(nic.mac_address, None);
        assert_eq!(nic.ipv4_addresses, Some(vec!["10.0.0.6/24".to_owned()]));
        assert_eq!(spec.memory_mib, Some(2048));
        let obj = target_object(&c, spec);
        assert_eq!(obj.labels().get(CLONED_BY_LABEL).map(String::as_str), Some("c"));
        assert_eq!(obj.labels().get("app").map(String::as_str), Some("web"));
        assert!(made_by(&obj, &c));
        let filter = capmox_api::consts::WATCH_FILTER_LABEL;
        let mut sharded = c.clone();
        sharded.metadata.labels = Some([(filter.to_owned(), "shard-a".to_owned())].into());
        let obj = target_object(&sharded, obj.spec);
        assert_eq!(
            obj.labels().get(filter).map(String::as_str),
            Some("shard-a"),
            "the same shard"
        );
    }

    #[test]
    fn a_linked_clone_needs_a_template_source_and_no_snapshot() {
        let c = clone(json!({"source": {"name": "web"}, "target": {"name": "web2"}, "linked": true}));
        let spec = target_spec(&c, &source(nic_spec()), &AT(), None).unwrap();
        assert_eq!((spec.template_id, spec.full), (Some(100), Some(false)));
        let adopted = source(json!({"adopt": true, "vmid": 201}));
        let err = target_spec(&c, &adopted, &AT(), None).unwrap_err();
        assert!(err.contains("needs a source cloned from a template"), "{err}");
        let err = target_spec(&c, &source(nic_spec()), &AT(), Some("s")).unwrap_err();
        assert!(err.contains("in full"), "{err}");
        let bad = clone(
            json!({"source": {"name": "web"}, "target": {"name": "x", "overrides": {
            "networkDevices": [{"name": "net7"}]}}}),
        );
        assert!(
            target_spec(&bad, &source(nic_spec()), &AT(), None)
                .unwrap_err()
                .contains("net7")
        );
    }
}
