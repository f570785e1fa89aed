//! Issue 14 items 4, 5 and 8 against pve-sim: DHCP/SLAAC nodes (no IPAM claim, Ready only once
//! the guest agent reports an address), failure domains that place machines on their zone's
//! nodes and pools, and the `proxmox_node`/`zone`/`region` meta-data read back from the ISO; and
//! the pace of the guest checks when many guests finish together.

use capmox_api::capi::ipam_claims::v1beta2::IPAddressClaim;
use capmox_api::consts::PROXMOX_ZONE_LABEL;
use capmox_api::v1alpha2::{MachineAddressType, ProxmoxMachine};
use capmox_standins::capi::objects;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use pve_sim::FaultSpec;
use serde_json::json;

use crate::common::*;
use crate::machine_support::*;

/// Like [`Harness::create_machine`] (cloud-config bootstrap data), with the CAPI Machine's
/// `spec.failureDomain` set from the start, as KCP and MachineSets do.
async fn create_machine_in(h: &Harness, cluster: &str, name: &str, failure_domain: &str) {
    let secret = format!("{name}-bootstrap");
    Api::<Secret>::namespaced(h.client.clone(), NS)
        .create(
            &PostParams::default(),
            &objects::bootstrap_secret(NS, &secret, CLOUD_CONFIG, Some("cloud-config")),
        )
        .await
        .unwrap();
    let mut machine = objects::machine(NS, name, cluster, true, Some(&secret), name, "v1.33.0");
    machine.spec.failure_domain = Some(failure_domain.to_owned());
    let machine = h
        .machines()
        .create(&PostParams::default(), &machine)
        .await
        .unwrap();
    // Template 101 lives on shared storage: it can be cloned to any node.
    let mut spec = default_machine_spec();
    merge(&mut spec, json!({"sourceNode": "pve2", "templateID": 101}));
    let mut pm: ProxmoxMachine = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxMachine",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }))
    .unwrap();
    objects::set_machine_owner(&mut pm.metadata, &machine);
    h.pms().create(&PostParams::default(), &pm).await.unwrap();
}

async fn claims(h: &Harness) -> Vec<String> {
    Api::<IPAddressClaim>::namespaced(h.client.clone(), NS)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|c| c.name_any())
        .collect()
}

fn internal_ips(pm: &ProxmoxMachine) -> Vec<String> {
    pm.status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a.type_ == MachineAddressType::InternalIp)
        .map(|a| a.address)
        .collect()
}

/// A cluster without IP pools (its endpoint is static) whose machines use DHCP (capmox format)
/// and DHCP + SLAAC (v2 format): no claim, `WaitingForDynamicAddress` until the simulated DHCP
/// server hands out leases, then provisioned with the learnt addresses; deleted to nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dhcp_nodes_are_ready_once_the_guest_has_an_address() {
    let mut config = pve_sim::SimConfig::default();
    // No lease to hand out yet: the range is empty.
    config.scenario.dhcp.ipv4_first = "10.99.0.200".parse().unwrap();
    config.scenario.dhcp.ipv4_last = "10.99.0.100".parse().unwrap();
    let h = Harness::start_with(config, fast_machine_settings()).await;
    h.create_cluster("dhcp", json!({"ipv4Config": null})).await;
    let dhcp4 = json!({"network": {"networkDevices": [
        {"name": "net0", "bridge": "vmbr0", "defaultIPv4": true, "defaultIPv6": true, "ipv4": "dhcp"}
    ]}});
    let dual = json!({"networkConfigFormat": "v2", "network": {"networkDevices": [
        {"name": "net0", "bridge": "vmbr0", "defaultIPv4": true, "defaultIPv6": true, "ipv4": "dhcp", "ipv6": "slaac"}
    ]}});
    h.create_machine("dhcp", "dhcp-capmox", false, cloud_config(), dhcp4)
        .await;
    h.create_machine("dhcp", "dhcp-v2", false, cloud_config(), dual)
        .await;
    for name in ["dhcp-capmox", "dhcp-v2"] {
        let pm = h.wait_reason(name, "WaitingForDynamicAddress", 90).await;
        assert!(!pm.is_provisioned());
        assert!(
            message_of(&pm).contains("net0 has no IPv4 address yet"),
            "{}",
            message_of(&pm)
        );
    }
    assert!(claims(&h).await.is_empty(), "a DHCP NIC claims no address");

    h.sim
        .state()
        .with(|c| c.dhcp = pve_sim::state::dhcp::Dhcp::new(pve_sim::DhcpSpec::default()));
    let v4 = h.wait_provisioned("dhcp-capmox", 60).await;
    let ips = internal_ips(&v4);
    assert_eq!(ips.len(), 1, "{ips:?}");
    assert!(ips[0].starts_with("10.99.0."), "{ips:?}");
    let addresses = v4.status.as_ref().unwrap().addresses.clone().unwrap();
    assert_eq!(addresses[0].type_, MachineAddressType::Hostname);
    assert_eq!(addresses[0].address, "dhcp-capmox");
    let dual = h.wait_provisioned("dhcp-v2", 60).await;
    let ips = internal_ips(&dual);
    assert_eq!(ips.len(), 2, "{ips:?}");
    assert!(
        ips[0].starts_with("10.99.0.") && ips[1].starts_with("fd99::"),
        "{ips:?}"
    );
    assert_ne!(internal_ips(&v4)[0], ips[0], "two leases");
    assert!(claims(&h).await.is_empty());

    for name in ["dhcp-capmox", "dhcp-v2"] {
        h.delete_machine(name, 60).await;
    }
    let (vms, isos, ipam) = h.settled_leftovers().await;
    assert!(
        vms.is_empty() && isos.is_empty() && ipam == 0,
        "{vms:?} {isos:?} {ipam}"
    );
    h.stop().await;
}

/// Three control-plane Machines in three failure domains (zones with one node and one pool
/// each) land on three nodes with their zones' addresses; the ISO's meta-data carries the node
/// (also as `zone`, as the Proxmox CCM/CSI name it), the network zone and the Proxmox cluster's
/// name as region. A failure domain that names no zone is a
/// clear condition. Everything is deleted to nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_domains_spread_control_planes_over_zone_nodes() {
    let h = Harness::start_with(pve_sim::SimConfig::default(), fast_machine_settings()).await;
    let zone = |z: &str, node: &str, net: u8| {
        json!({"zone": z, "nodes": [node], "dnsServers": ["10.0.0.1"],
               "ipv4Config": {"addresses": [format!("10.2{net}.0.10-10.2{net}.0.20")], "prefix": 24, "gateway": format!("10.2{net}.0.1")}})
    };
    h.create_cluster(
        "fd",
        json!({"failureDomainsFromZones": true,
               "zoneConfig": [zone("z1", "pve1", 1), zone("z2", "pve2", 2), zone("z3", "pve3", 3)]}),
    )
    .await;
    wait_failure_domains(&h, "fd", 3).await;
    // Stall the guests so the bootstrap ISOs stay attached long enough to be read.
    h.sim.state().set_faults(agent_stalled());
    let cases = [
        ("cp-1", "z1", "pve1", "10.21.0."),
        ("cp-2", "z2", "pve2", "10.22.0."),
        ("cp-3", "z3", "pve3", "10.23.0."),
    ];
    for (name, domain, _, _) in cases {
        create_machine_in(&h, "fd", name, domain).await;
    }
    create_machine_in(&h, "fd", "cp-x", "nowhere").await;
    for (name, domain, node, _) in cases {
        let pm = wait_stalled_at_guest(&h, name).await;
        let (_, iso) = bootstrap_iso(&h, vmid_of(&pm));
        let meta = iso_file(&iso, "meta-data");
        for want in [
            format!("proxmox_node: {node}"),
            format!("zone: {node}"),
            format!("network_zone: {domain}"),
            "region: sim".to_owned(),
        ] {
            assert!(
                meta.lines().any(|l| l == want),
                "{name}: {want} missing in\n{meta}"
            );
        }
    }
    let stray = h.wait_reason("cp-x", "UnknownFailureDomain", 60).await;
    assert!(
        message_of(&stray).contains(r#"failure domain "nowhere" names no zone"#),
        "{}",
        message_of(&stray)
    );
    assert!(
        stray.spec.virtual_machine_id.is_none(),
        "no VM for an unknown failure domain"
    );

    h.sim.state().set_faults(FaultSpec::default());
    for (name, domain, node, net) in cases {
        let pm = h.wait_provisioned(name, 90).await;
        let st = pm.status.clone().unwrap();
        assert_eq!(st.proxmox_node.as_deref(), Some(node), "{name}");
        assert_eq!(h.sim.state().vm(vmid_of(&pm)).unwrap().node, node, "{name}");
        let ips = internal_ips(&pm);
        assert!(ips.len() == 1 && ips[0].starts_with(net), "{name}: {ips:?}");
        assert_eq!(
            pm.labels().get(PROXMOX_ZONE_LABEL).map(String::as_str),
            Some(domain)
        );
    }

    assert_eq!(
        h.sim.state().request_count("GET /cluster/status"),
        1,
        "the name is read once, by the cluster's first probe, not per machine"
    );
    for name in ["cp-1", "cp-2", "cp-3", "cp-x"] {
        h.delete_machine(name, 60).await;
    }
    let (vms, isos, ipam) = h.settled_leftovers().await;
    assert!(
        vms.is_empty() && isos.is_empty() && ipam == 0,
        "{vms:?} {isos:?} {ipam}"
    );
    h.stop().await;
}

/// Waits until the ProxmoxCluster publishes `n` failure domains and its zones' pools.
async fn wait_failure_domains(h: &Harness, name: &str, n: usize) {
    let pcs = h.pcs();
    wait_for(60, &format!("{name}: {n} failure domains"), || {
        let pcs = pcs.clone();
        async move {
            let pc = pcs.get_opt(name).await.unwrap()?;
            let st = pc.status?;
            let domains = st.failure_domains.map_or(0, |d| d.len());
            let zones = st.in_cluster_zone_ref.map_or(0, |z| z.len());
            (domains == n && zones > n).then_some(())
        }
    })
    .await;
}

/// Guests that finish together are each looked at a few times, not once per other guest that
/// finished: a scout's done wakes the machines that booted with it once, and a pass that comes
/// before a machine's next look is due does not read its guest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guests_finishing_together_are_looked_at_a_few_times() {
    const MACHINES: usize = 12;
    let settings = capmox::machine::MachineSettings {
        guest_poll: std::time::Duration::from_millis(1_000),
        ..fast_machine_settings()
    };
    let h = Harness::start_with(pve_sim::SimConfig::default(), settings).await;
    let st = h.sim.state();
    st.set_latency(pve_sim::LatencySpec {
        cloud_init_done_ms: Some(2_500),
        ..Default::default()
    });
    h.create_cluster("gw", json!({})).await;
    let spread = json!({"sourceNode": "pve2", "templateID": 101, "allowedNodes": ["pve1", "pve2", "pve3"]});
    let names: Vec<String> = (0..MACHINES).map(|i| format!("gw-w{i:02}")).collect();
    let before = st.request_counts();
    // Created (and so booted) a little apart, all within one poll: when the first guest is done,
    // the others are woken while most of them still run cloud-init, and then finish one by one.
    for n in &names {
        h.create_machine("gw", n, false, cloud_config(), spread.clone())
            .await;
        tokio::time::sleep(std::time::Duration::from_millis(60)).await;
    }
    for n in &names {
        h.wait_provisioned(n, 120).await;
    }
    let after = st.request_counts();
    let count = |endpoint: &str| {
        after.get(endpoint).copied().unwrap_or(0) - before.get(endpoint).copied().unwrap_or(0)
    };
    let (execs, reads) = (count(AGENT_EXEC), count(AGENT_EXEC_STATUS));
    eprintln!("{MACHINES} machines: {execs} agent exec, {reads} exec-status reads");
    assert!(
        execs >= MACHINES as u64,
        "every guest was looked at: {execs} execs"
    );
    // A scout reads at most three times (first look at two polls' uptime, done at 2.5 s); the
    // others read once or twice after they were woken or their learned time came.
    assert!(
        reads <= 2 * MACHINES as u64,
        "{reads} exec-status reads for {MACHINES} machines"
    );
    h.stop().await;
}

/// A token without `Sys.Audit` on `/` gets HTTP 403 from `GET /cluster/status` (capmox tolerates
/// it): the ProxmoxCluster is available, the machine provisions, and its meta-data has no region.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_that_cannot_read_the_cluster_name_provisions_without_region() {
    let h = Harness::start_with(pve_sim::SimConfig::default(), fast_machine_settings()).await;
    let forbidden = fault(
        "GET /cluster/status",
        1.0,
        403,
        "Permission check failed (/, Sys.Audit)",
        0,
    );
    let stalled = agent_stalled();
    h.sim.state().set_faults(FaultSpec {
        endpoints: stalled
            .endpoints
            .iter()
            .cloned()
            .chain([forbidden.clone()])
            .collect(),
        ..stalled
    });
    h.create_cluster("audit", json!({})).await;
    h.create_machine(
        "audit",
        "no-region",
        true,
        Some((CLOUD_CONFIG, Some("cloud-config"))),
        json!({}),
    )
    .await;
    let pm = wait_stalled_at_guest(&h, "no-region").await;
    let (_, iso) = bootstrap_iso(&h, vmid_of(&pm));
    let meta = iso_file(&iso, "meta-data");
    assert!(
        meta.contains("proxmox_node: ") && !meta.lines().any(|l| l.starts_with("region:")),
        "{meta}"
    );
    assert!(
        h.sim.state().request_count("GET /cluster/status") >= 1,
        "the name was asked for"
    );
    h.sim.state().set_faults(FaultSpec {
        endpoints: vec![forbidden],
        ..FaultSpec::default()
    });
    h.wait_provisioned("no-region", 90).await;
    h.delete_machine("no-region", 60).await;
    let (vms, isos, ipam) = h.settled_leftovers().await;
    assert!(
        vms.is_empty() && isos.is_empty() && ipam == 0,
        "{vms:?} {isos:?} {ipam}"
    );
    h.stop().await;
}
