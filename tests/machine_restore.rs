//! ProxmoxMachines that come back from a backup (issue 23), against pve-sim and the test control
//! plane in both API-server modes: what survives a restore is the spec (`virtualMachineID`,
//! `providerID`), labels, annotations and owner references — not the status, not the UID.
//!
//! * status lost while the manager runs: the machine is adopted from its VM — provisioned again
//!   with the same providerID and address — without one Proxmox write;
//! * objects re-created with new UIDs (a Velero restore) while the manager is stopped: every VM
//!   exactly once, claims of the old UID adopted with their addresses; with a garbage
//!   collector's effect (claims collected, the address handed to someone else) the VM keeps its
//!   address, the machine says so in `IPAddressesConsistent`, and nothing is written to the VM; a
//!   restored machine deleted before it adopted its claims releases the old UID's claims too;
//! * the book's procedure while the manager runs (the Cluster paused, finalizers stripped,
//!   objects re-created, unpaused): the same, also with a re-created CAPI Machine (a dangling
//!   owner reference) and a claim collected while paused;
//! * a provisioned machine whose VM was deleted behind our back and whose status was lost fails
//!   with "the VM of this machine no longer exists" instead of cloning a new VM, and so does a
//!   machine re-created from a backup after its VM went with the old object.
//!
//! The harness runs without the in-tree garbage collector (the real kube-apiserver has none): the
//! test deletes what a collector would, so both modes see the same.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod machine_support;

use std::collections::BTreeMap;

use capmox_api::capi::ipam_claims::v1beta2::IPAddressClaim;
use capmox_api::v1alpha2::ProxmoxMachine;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use machine_support::restore::*;
use machine_support::*;
use serde_json::json;

const CLONE: &str = "POST /nodes/{node}/qemu/{vmid}/clone";
const MISMATCH: &str = "IPAddressesConsistent";

fn bootstrap() -> Option<(&'static str, Option<&'static str>)> {
    Some((CLOUD_CONFIG, None))
}

/// Provisioned, with its address in the status and the bootstrap ISO gone (the node joined).
fn settled(h: &Harness, pm: &ProxmoxMachine) -> bool {
    let Some(id) = pm.spec.virtual_machine_id.and_then(|v| u32::try_from(v).ok()) else {
        return false;
    };
    let detached = h.sim.state().vm(id).is_some_and(|vm| {
        !vm.config.get("ide0").is_some_and(|v| v.contains("user-data-"))
            && !vm.config.get("tags").is_some_and(|t| t.contains("cloud-init"))
    });
    pm.is_provisioned() && address(pm).is_some() && detached
}

async fn provision(h: &Harness, cluster: &str, name: &str) -> ProxmoxMachine {
    h.create_machine(cluster, name, false, bootstrap(), json!({}))
        .await;
    h.wait_pm(name, 60, "provisioned and settled", |pm| settled(h, pm))
        .await
}

/// Plays the garbage collector for claims whose controller is gone: deletes them and waits until
/// the IPAM stand-in released their addresses and they are gone.
async fn collect_claims(h: &Harness, names: &[String]) {
    for n in names {
        claims(h).delete(n, &DeleteParams::default()).await.unwrap();
    }
    let api = claims(h);
    wait_for(30, "collected claims gone", || {
        let api = api.clone();
        async move {
            for n in names {
                if api.get_opt(n).await.unwrap().is_some() {
                    return None;
                }
            }
            Some(())
        }
    })
    .await;
}

/// A claim of someone else on the cluster's pool (to take an address that was freed).
async fn foreign_claim(h: &Harness, cluster: &str, name: &str) {
    let c: IPAddressClaim = serde_json::from_value(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddressClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool",
                             "name": format!("{cluster}-v4-icip")}},
    }))
    .unwrap();
    claims(h).create(&PostParams::default(), &c).await.unwrap();
    wait_for(30, "foreign claim bound", || async {
        claimed_address(h, name).await.map(|_| ())
    })
    .await;
}

async fn pause(h: &Harness, cluster: &str, paused: bool) {
    h.clusters()
        .patch(
            cluster,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": paused}})),
        )
        .await
        .unwrap();
}

/// Events (either API) about `name` with `reason`.
async fn events(h: &Harness, name: &str, reason: &str) -> Vec<Event> {
    Api::<Event>::namespaced(h.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .collect()
}

/// Every condition of `pm` describes its current generation.
fn conditions_current(pm: &ProxmoxMachine) -> bool {
    let g = pm.metadata.generation;
    pm.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().all(|c| c.observed_generation == g))
}

/// Status lost while the manager runs: adopted from the VM — provisioned, same providerID and
/// address, `bootstrapDataProvided` — without a single Proxmox write, and the conditions describe
/// the generation they are written with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_lost_while_the_manager_runs_is_rebuilt_without_touching_the_vm() {
    let h = Harness::start_without_gc().await;
    h.create_cluster("st", json!({})).await;
    let before = provision(&h, "st", "st-m").await;
    assert!(
        conditions_current(&before),
        "observedGeneration after our own spec patches: {:?}",
        before.status
    );
    let counts = h.sim.state().request_counts();
    h.pms()
        .patch_status(
            "st-m",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": null})),
        )
        .await
        .unwrap();
    let after = h
        .wait_pm("st-m", 60, "adopted again", |pm| {
            settled(&h, pm) && reason_of(pm).as_deref() == Some("Provisioned")
        })
        .await;
    assert_eq!(writes_since(&h, &counts), BTreeMap::new(), "no Proxmox write");
    assert_eq!(after.spec.provider_id, before.spec.provider_id);
    assert_eq!(vmid(&after), vmid(&before));
    assert_eq!(address(&after), address(&before));
    let st = after.status.clone().unwrap();
    assert_eq!(st.bootstrap_data_provided, Some(true));
    assert_eq!(st.proxmox_node, before.status.clone().unwrap().proxmox_node);
    assert_eq!(st.ip_addresses, before.status.clone().unwrap().ip_addresses);
    assert!(conditions_current(&after), "{:?}", after.status);
    wait_for(30, "adoption event", || async {
        (!events(&h, "st-m", "RecoveredIPAddressStatus").await.is_empty()).then_some(())
    })
    .await;
    h.stop().await;
}

/// A Velero-style restore while the manager is stopped: three machines re-created with new UIDs
/// and no status, their claims still controlled by the old UIDs; the third's claims collected
/// and its address handed to someone else. Every VM exactly once, nothing written to a VM, the
/// claims adopted, every machine with the address its VM has; deleting everything leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restored_with_new_uids_while_stopped_keeps_every_vm_and_address() {
    let mut h = Harness::start_without_gc().await;
    h.create_cluster("rs", json!({})).await;
    let mut before = Vec::new();
    for n in ["rs-a", "rs-b", "rs-c"] {
        before.push(provision(&h, "rs", n).await);
    }
    let vms = h.sim.state().non_template_vmids();
    h.kill_controllers().await;
    for pm in &before {
        drop_object(&h, &pm.name_any()).await;
        restore(&h, &backup(pm)).await;
    }
    // rs-c: the collector took its claim (its owner UID is gone) and the address went elsewhere.
    collect_claims(&h, &["rs-c-net0-00-inet".to_owned()]).await;
    foreign_claim(&h, "rs", "someone-else").await;
    assert_eq!(
        claimed_address(&h, "someone-else").await,
        address(&before[2]),
        "the freed address is the pool's lowest"
    );
    let counts = h.sim.state().request_counts();
    h.start_controllers();
    for old in &before {
        let name = old.name_any();
        let pm = h
            .wait_pm(&name, 60, "adopted after the restore", |pm| settled(&h, pm))
            .await;
        assert_ne!(pm.uid(), old.uid());
        assert_eq!(vmid(&pm), vmid(old), "{name}: same VM");
        assert_eq!(pm.spec.provider_id, old.spec.provider_id);
        assert_eq!(address(&pm), address(old), "{name}: the VM's address");
        assert_eq!(
            claim_owner(&h, &format!("{name}-net0-00-inet")).await,
            pm.uid(),
            "{name}: claim adopted"
        );
    }
    // rs-c: IPAM holds another address now; the machine keeps the VM's and says so.
    let c = h
        .wait_pm("rs-c", 30, "mismatch shown", |pm| {
            pm.condition(MISMATCH).is_some()
        })
        .await;
    let other = claimed_address(&h, "rs-c-net0-00-inet").await.unwrap();
    assert_ne!(Some(other.clone()), address(&before[2]));
    let cond = c.condition(MISMATCH).unwrap();
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("False", "IPAddressMismatch")
    );
    let old = address(&before[2]).unwrap();
    assert!(
        cond.message.contains(&other) && cond.message.contains(&old),
        "{}",
        cond.message
    );
    let tags = h.sim.state().vm(vmid(&c)).unwrap().config["tags"].clone();
    assert!(
        tags.contains(&format!("ip_net0_{old}")) && !tags.contains(&other),
        "{tags}"
    );
    for name in ["rs-a", "rs-b"] {
        assert!(h.pms().get(name).await.unwrap().condition(MISMATCH).is_none());
    }
    assert_eq!(h.sim.state().non_template_vmids(), vms, "every VM exactly once");
    assert_eq!(writes_since(&h, &counts), BTreeMap::new(), "no Proxmox write");
    assert!(!events(&h, "rs-c", "IPAddressMismatch").await.is_empty());

    claims(&h)
        .delete("someone-else", &DeleteParams::default())
        .await
        .unwrap();
    for name in ["rs-a", "rs-b", "rs-c"] {
        h.delete_machine(name, 60).await;
    }
    let (vms, isos, _) = h.leftovers().await;
    assert!(vms.is_empty() && isos.is_empty(), "VMs {vms:?}, ISOs {isos:?}");
    wait_for(30, "every claim and address released", || async {
        (h.leftovers().await.2 == 0).then_some(())
    })
    .await;
    h.stop().await;
}

/// A restored machine that is deleted before it took over its claims (deleted while the manager
/// was stopped) releases the claims of its old UID with its VM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_restored_machine_releases_the_old_uids_claims() {
    let mut h = Harness::start_without_gc().await;
    h.create_cluster("rd", json!({})).await;
    let pm = provision(&h, "rd", "rd-m").await;
    h.kill_controllers().await;
    drop_object(&h, "rd-m").await;
    restore(&h, &backup(&pm)).await;
    assert_eq!(
        claim_owner(&h, "rd-m-net0-00-inet").await,
        pm.uid(),
        "still the old UID's"
    );
    h.machines()
        .delete("rd-m", &DeleteParams::default())
        .await
        .unwrap();
    h.start_controllers();
    let (pms, machines) = (h.pms(), h.machines());
    wait_for(60, "machine deleted", || {
        let (pms, machines) = (pms.clone(), machines.clone());
        async move {
            (pms.get_opt("rd-m").await.unwrap().is_none()
                && machines.get_opt("rd-m").await.unwrap().is_none())
            .then_some(())
        }
    })
    .await;
    wait_for(30, "nothing left", || async {
        let (vms, isos, ipam) = h.leftovers().await;
        (vms.is_empty() && isos.is_empty() && ipam == 0).then_some(())
    })
    .await;
    h.stop().await;
}

/// The book's procedure with the manager running: pause the Cluster, restore (finalizers
/// stripped, objects re-created), unpause. Nothing happens while paused; then every machine is
/// adopted with its VM and address, without a Proxmox write: `rp-a` takes over its old claim;
/// `rp-b` had its CAPI Machine re-created too (its owner reference dangles) and its claim
/// deleted by the collector (held by IPAM's finalizer while paused, released on unpause), and is
/// claimed again with its VM's address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restored_while_running_with_the_cluster_paused() {
    let h = Harness::start_without_gc().await;
    h.create_cluster("rp", json!({})).await;
    let old = [
        provision(&h, "rp", "rp-a").await,
        provision(&h, "rp", "rp-b").await,
    ];
    let vms = h.sim.state().non_template_vmids();
    let counts = h.sim.state().request_counts();
    pause(&h, "rp", true).await;
    for pm in &old {
        h.wait_pm(&pm.name_any(), 30, "paused", |pm| {
            pm.condition("Paused").is_some_and(|c| c.status == "True")
        })
        .await;
    }
    let machine = h.machines().get("rp-b").await.unwrap();
    let mut copy = capmox_api::capi::v1beta2::Machine::new("rp-b", machine.spec.clone());
    copy.metadata.namespace = machine.namespace();
    copy.metadata.labels = machine.metadata.labels.clone();
    for pm in &old {
        drop_object(&h, &pm.name_any()).await;
    }
    // Deleted before its finalizers are stripped: the CAPI stand-in (unlike CAPI) does not hold
    // off a paused Cluster's Machines, and no finalizer can be added to an object being deleted.
    let machines = h.machines();
    machines.delete("rp-b", &DeleteParams::default()).await.unwrap();
    let strip = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    match machines.patch("rp-b", &PatchParams::default(), &strip).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {} // the stand-in finished first
        Err(e) => panic!("stripping rp-b's finalizers: {e}"),
    }
    wait_for(30, "Machine rp-b gone", || {
        let machines = machines.clone();
        async move { machines.get_opt("rp-b").await.unwrap().is_none().then_some(()) }
    })
    .await;
    let new_machine = machines.create(&PostParams::default(), &copy).await.unwrap();
    let mut restored = Vec::new();
    for pm in &old {
        restored.push(restore(&h, &backup(pm)).await);
    }
    assert_ne!(new_machine.uid(), machine.uid(), "rp-b's owner reference dangles");
    // The collector deletes rp-b's claim (its controller is gone).
    claims(&h)
        .delete("rp-b-net0-00-inet", &DeleteParams::default())
        .await
        .unwrap();
    for pm in &old {
        let paused = h
            .wait_pm(&pm.name_any(), 30, "paused after the restore", |pm| {
                pm.condition("Paused").is_some_and(|c| c.status == "True")
            })
            .await;
        assert!(
            !paused.is_provisioned(),
            "nothing but the Paused condition while paused"
        );
    }
    pause(&h, "rp", false).await;
    for (old, restored) in old.iter().zip(&restored) {
        let name = old.name_any();
        let pm = h
            .wait_pm(&name, 60, "adopted after unpausing", |pm| settled(&h, pm))
            .await;
        assert_eq!(pm.uid(), restored.uid());
        assert_eq!((vmid(&pm), address(&pm)), (vmid(old), address(old)));
        let claim = format!("{name}-net0-00-inet");
        wait_for(
            30,
            "the claim is the restored machine's, with its address",
            || {
                let (claim, uid) = (claim.clone(), pm.uid());
                let h = &h;
                async move {
                    let bound = claimed_address(h, &claim).await == address(old);
                    (bound && claim_owner(h, &claim).await == uid).then_some(())
                }
            },
        )
        .await;
        let pm = h.pms().get(&name).await.unwrap();
        assert!(pm.condition(MISMATCH).is_none(), "{name}: {:?}", pm.status);
    }
    assert_eq!(writes_since(&h, &counts), BTreeMap::new(), "no Proxmox write");
    assert_eq!(h.sim.state().non_template_vmids(), vms, "every VM exactly once");
    h.stop().await;
}

/// A provisioned machine whose VM was deleted behind our back and whose status was lost is not
/// re-provisioned: it fails with capmox's reason and no clone; so does a machine re-created from
/// a backup after its VM went with the deletion of the old object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provisioned_machine_whose_vm_is_gone_fails_instead_of_cloning() {
    let h = Harness::start_without_gc().await;
    h.create_cluster("gn", json!({})).await;
    let pm = provision(&h, "gn", "gn-m").await;
    let st = h.sim.state();
    let clones = st.request_count(CLONE);
    st.with(|c| c.vms.remove(&vmid(&pm)));
    h.pms()
        .patch_status(
            "gn-m",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": null})),
        )
        .await
        .unwrap();
    let failed = h
        .wait_pm("gn-m", 30, "VM gone reported", |pm| {
            reason_of(pm).as_deref() == Some("VMProvisionFailed")
                && pm
                    .condition("VirtualMachineProvisioned")
                    .is_some_and(|c| c.message.contains("no longer exists"))
        })
        .await;
    assert_eq!(vmid(&failed), vmid(&pm));
    assert_eq!(st.request_count(CLONE), clones, "no clone");
    assert!(st.non_template_vmids().is_empty());

    // The same for an object deleted the normal way (its VM goes with it) and re-created.
    let other = provision(&h, "gn", "gn-n").await;
    let clones = st.request_count(CLONE);
    let copy = backup(&other);
    h.pms().delete("gn-n", &DeleteParams::default()).await.unwrap();
    let pms = h.pms();
    wait_for(60, "gn-n deleted with its VM", || {
        let pms = pms.clone();
        async move { pms.get_opt("gn-n").await.unwrap().is_none().then_some(()) }
    })
    .await;
    restore(&h, &copy).await;
    h.wait_pm("gn-n", 30, "re-created machine fails", |pm| {
        reason_of(pm).as_deref() == Some("VMProvisionFailed")
    })
    .await;
    assert_eq!(
        st.request_count(CLONE),
        clones,
        "no clone for the re-created machine"
    );
    assert!(!st.non_template_vmids().contains(&vmid(&other)));
    h.stop().await;
}

/// A ProxmoxCluster restored with a new UID: its InClusterIPPool, still controlled by the old UID
/// (server-side apply would add a second controller: refused), and its credentials Secret are
/// taken over — one controller reference, ours; the Secret keeps the label `clusterctl move`
/// moves it by.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restored_proxmox_cluster_takes_over_its_pool_and_secret() {
    use capmox_api::capi::ipam::InClusterIPPool;
    use capmox_api::v1alpha2::ProxmoxCluster;
    use k8s_openapi::api::core::v1::Secret;

    let mut h = Harness::start_without_gc().await;
    h.create_credentials_secret("rc-creds", h.sim.token_secret())
        .await;
    h.create_cluster("rc", json!({"credentialsRef": {"name": "rc-creds"}}))
        .await;
    let ready = |pc: &ProxmoxCluster| {
        pc.status
            .as_ref()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.provisioned)
            == Some(true)
    };
    let pcs = h.pcs();
    let old = wait_for(30, "rc ready", || {
        let pcs = pcs.clone();
        async move { pcs.get("rc").await.ok().filter(ready) }
    })
    .await;
    let pools: Api<InClusterIPPool> = Api::namespaced(h.client.clone(), NS);
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), NS);
    let controllers = |p: &InClusterIPPool| -> Vec<String> {
        p.owner_references()
            .iter()
            .filter(|o| o.controller == Some(true))
            .map(|o| o.uid.clone())
            .collect()
    };
    let owners = |s: &Secret| -> Vec<String> {
        s.owner_references()
            .iter()
            .filter(|o| o.kind == "ProxmoxCluster")
            .map(|o| o.uid.clone())
            .collect()
    };
    let moved_label = |s: &Secret| s.labels().contains_key("clusterctl.cluster.x-k8s.io/move");
    let secret = secrets.get("rc-creds").await.unwrap();
    assert_eq!(owners(&secret), vec![old.uid().unwrap()]);
    assert!(moved_label(&secret), "{:?}", secret.labels());

    h.kill_controllers().await;
    let mut copy = ProxmoxCluster::new("rc", old.spec.clone());
    copy.metadata.namespace = old.namespace();
    copy.metadata.labels = old.metadata.labels.clone();
    copy.metadata.owner_references = old.metadata.owner_references.clone();
    copy.metadata.finalizers = old.metadata.finalizers.clone();
    pcs.patch(
        "rc",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    pcs.delete("rc", &DeleteParams::default()).await.unwrap();
    wait_for(30, "rc gone", || {
        let pcs = pcs.clone();
        async move { pcs.get_opt("rc").await.unwrap().is_none().then_some(()) }
    })
    .await;
    let restored = pcs.create(&PostParams::default(), &copy).await.unwrap();
    // The pool comes back from the backup too (its owner references now another writer's, so
    // our apply cannot simply drop the old one).
    let pool = pools.get("rc-v4-icip").await.unwrap();
    let mut pool_copy = InClusterIPPool::new("rc-v4-icip", pool.spec.clone());
    pool_copy.metadata.namespace = pool.namespace();
    pool_copy.metadata.labels = pool.metadata.labels.clone();
    pool_copy.metadata.annotations = pool.metadata.annotations.clone();
    pool_copy.metadata.owner_references = pool.metadata.owner_references.clone();
    pools
        .delete("rc-v4-icip", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(30, "pool gone", || {
        let pools = pools.clone();
        async move { pools.get_opt("rc-v4-icip").await.unwrap().is_none().then_some(()) }
    })
    .await;
    pools.create(&PostParams::default(), &pool_copy).await.unwrap();
    assert_eq!(
        controllers(&pools.get("rc-v4-icip").await.unwrap()),
        vec![old.uid().unwrap()],
        "the pool is still the old UID's"
    );
    h.start_controllers();
    let new_uid = restored.uid().unwrap();
    wait_for(30, "rc ready again", || {
        let pcs = pcs.clone();
        async move { pcs.get("rc").await.ok().filter(ready) }
    })
    .await;
    let pool = pools.get("rc-v4-icip").await.unwrap();
    assert_eq!(controllers(&pool), vec![new_uid.clone()], "pool taken over");
    let secret = secrets.get("rc-creds").await.unwrap();
    assert_eq!(owners(&secret), vec![new_uid], "Secret taken over");
    assert!(moved_label(&secret));
    h.stop().await;
}
