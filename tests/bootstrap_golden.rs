//! Golden tests of the bootstrap renderers (`UPDATE_GOLDEN=1` rewrites `tests/golden/bootstrap/*`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod bootstrap_common;

use bootstrap_common::*;
use capmox::bootstrap::{
    BootstrapError, BootstrapFormat, EMPTY_NETWORK_V1, ExtraMetadata, FibRule, NetworkConfigFormat,
    NetworkModel, Route, enrich_ignition, proxmox_env_plain, render_metadata, render_network_config,
    render_networkd_units, render_nocloud,
};
use serde_json::json;

fn capmox_v2(net: &NetworkModel) -> String {
    render_network_config(net, NetworkConfigFormat::CapmoxV2).unwrap()
}

#[test]
fn metadata_without_provider_id() {
    let mut i = input(single_v4());
    i.kubernetes_version = Some("v1.33.1".to_owned());
    golden("meta-data.yaml", &render_metadata(&i).unwrap());
}

#[test]
fn metadata_with_provider_id() {
    let mut i = input(single_v4());
    i.provider_id_injection = true;
    i.kubernetes_version = Some("v1.33.1".to_owned());
    golden("meta-data-provider-id.yaml", &render_metadata(&i).unwrap());
}

#[test]
fn metadata_minimal_is_capmox_bytes() {
    let i = input(single_v4());
    assert_eq!(
        render_metadata(&i).unwrap(),
        format!("instance-id: {UUID}\nlocal-hostname: m1\nhostname: m1\n")
    );
}

#[test]
fn metadata_with_node_and_zone() {
    let mut i = input(single_v4());
    i.extra_metadata = ExtraMetadata {
        proxmox_node: Some("pve1".to_owned()),
        zone: Some("zone-a".to_owned()),
        region: Some("pve-cluster".to_owned()),
    };
    golden("meta-data-extra.yaml", &render_metadata(&i).unwrap());
}

#[test]
fn metadata_requires_name_and_uuid() {
    let mut i = input(single_v4());
    i.hostname.clear();
    assert_eq!(render_metadata(&i), Err(BootstrapError::MissingHostname));
    let mut i = input(single_v4());
    i.instance_id.clear();
    assert_eq!(render_metadata(&i), Err(BootstrapError::MissingInstanceId));
}

#[test]
fn single_nic_v4() {
    let out = capmox_v2(&single_v4());
    // Written out by hand from capmox's template, to pin the exact bytes independently of the golden file.
    let expected = "network:\n  version: 2\n  renderer: networkd\n  ethernets:\n    eth0:\n      match:\n        \
macaddress: BC:24:11:5B:22:C2\n      dhcp4: false\n      dhcp6: false\n      addresses:\n        - '10.10.10.12/24'\n      \
routes:\n        - { \"to\": \"0.0.0.0/0\",  \"via\": \"10.10.10.1\",  \"metric\": 100, }\n      nameservers:\n        \
addresses:\n          - '8.8.8.8'\n          - '8.8.4.4'";
    assert_eq!(out, expected);
    golden("network-config-single-v4.yaml", &out);
}

pub fn dual_stack() -> NetworkModel {
    network(
        json!({"networkDevices": [{"name": "net0", "bridge": "vmbr0", "defaultIPv4": true, "defaultIPv6": true}]}),
        vec![(
            "net0",
            MAC0,
            vec![
                addr(
                    "m1-net0-01-inet",
                    "2001:db8::12",
                    64,
                    Some("2001:db8::1"),
                    None,
                    true,
                ),
                addr(
                    "m1-net0-00-inet",
                    "10.10.10.12",
                    24,
                    Some("10.10.10.1"),
                    Some(100),
                    true,
                ),
            ],
        )],
        &["8.8.8.8", "2001:4860:4860::8888"],
    )
}

#[test]
fn dual_stack_sorted_by_ipaddress_name() {
    golden("network-config-dual-stack.yaml", &capmox_v2(&dual_stack()));
}

pub fn multi_nic() -> NetworkModel {
    network(
        json!({"networkDevices": [
            {"name": "net0", "bridge": "vmbr0", "defaultIPv4": true},
            {"name": "net1", "bridge": "vmbr1", "dnsServers": ["10.20.0.53"],
             "ipPoolRef": [{"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "storage"},
                           {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "GlobalInClusterIPPool", "name": "backup"}]}
        ]}),
        vec![
            (
                "net0",
                MAC0,
                vec![addr(
                    "m1-net0-00-inet",
                    "10.10.10.12",
                    24,
                    Some("10.10.10.1"),
                    Some(100),
                    true,
                )],
            ),
            (
                "net1",
                MAC1,
                vec![
                    addr("m1-net1-01-inet", "10.30.0.7", 16, None, None, false),
                    addr(
                        "m1-net1-00-inet",
                        "10.20.0.7",
                        24,
                        Some("10.20.0.1"),
                        Some(200),
                        false,
                    ),
                ],
            ),
        ],
        &["8.8.8.8"],
    )
}

#[test]
fn multiple_nics_extra_pools_and_nic_dns() {
    golden("network-config-multi-nic.yaml", &capmox_v2(&multi_nic()));
}

pub fn routes_and_policy() -> NetworkModel {
    network(
        json!({"networkDevices": [
            {"name": "net0", "bridge": "vmbr0", "defaultIPv4": true},
            {"name": "net1", "bridge": "vmbr1",
             "routes": [{"to": "172.16.24.1/24", "via": "10.10.11.254", "metric": 50},
                        {"to": "2002::/64", "via": "2001:db8::1"},
                        {"to": "default", "via": "10.10.11.1", "table": 100},
                        {"to": "192.168.5.5", "via": "10.10.11.254", "metric": 0}],
             "routingPolicy": [{"to": "0.0.0.0/0", "from": "192.168.178.1/24", "priority": 999, "table": 100},
                               {"from": "10.10.11.0/24", "table": 100}]}
        ]}),
        vec![
            (
                "net0",
                MAC0,
                vec![addr(
                    "m1-net0-00-inet",
                    "10.10.10.12",
                    24,
                    Some("10.10.10.1"),
                    Some(100),
                    true,
                )],
            ),
            (
                "net1",
                MAC1,
                vec![addr("m1-net1-00-inet", "10.10.11.12", 24, None, None, false)],
            ),
        ],
        &["8.8.8.8"],
    )
}

#[test]
fn routes_and_routing_policy() {
    golden("network-config-routes.yaml", &capmox_v2(&routes_and_policy()));
}

pub fn vrfs() -> NetworkModel {
    network(
        json!({
            "networkDevices": [
                {"name": "net0", "bridge": "vmbr0", "defaultIPv4": true},
                {"name": "net1", "bridge": "vmbr1"}
            ],
            "vrfs": [
                {"name": "vrf-blue", "table": 500, "interfaces": ["net1"],
                 "routes": [{"to": "default", "via": "192.168.178.1", "metric": 100},
                            {"to": "10.10.10.0/24", "via": "192.168.178.254", "metric": 100}],
                 "routingPolicy": [{"from": "192.168.178.0/24", "priority": 999}]},
                {"name": "vrf-red", "table": 501,
                 "routingPolicy": [{"to": "0.0.0.0/0", "from": "192.168.100.0/24", "priority": 998, "table": 501}]}
            ]
        }),
        vec![
            (
                "net0",
                MAC0,
                vec![addr(
                    "m1-net0-00-inet",
                    "10.10.10.12",
                    24,
                    Some("10.10.10.1"),
                    Some(100),
                    true,
                )],
            ),
            (
                "net1",
                MAC1,
                vec![addr("m1-net1-00-inet", "192.168.178.12", 24, None, None, false)],
            ),
        ],
        &["8.8.8.8"],
    )
}

#[test]
fn vrf_devices() {
    let net = vrfs();
    assert_eq!(net.vrfs[0].interfaces, vec!["eth1".to_owned()]);
    golden("network-config-vrfs.yaml", &capmox_v2(&net));
}

pub fn link_mtu() -> NetworkModel {
    network(
        json!({"networkDevices": [{"name": "net0", "bridge": "vmbr0", "defaultIPv4": true, "mtu": 1, "linkMtu": 9000}]}),
        vec![(
            "net0",
            MAC0,
            vec![addr(
                "m1-net0-00-inet",
                "10.10.10.12",
                24,
                Some("10.10.10.1"),
                None,
                true,
            )],
        )],
        &[],
    )
}

#[test]
fn link_mtu_without_dns() {
    golden("network-config-link-mtu.yaml", &capmox_v2(&link_mtu()));
}

#[test]
fn talos_bare_v2() {
    let bare = render_network_config(&dual_stack(), NetworkConfigFormat::NetplanV2Bare).unwrap();
    assert!(bare.starts_with("version: 2\n"));
    // Same content as capmox's, one level up.
    let wrapped = capmox_v2(&dual_stack());
    let unwrapped: Vec<String> = wrapped
        .lines()
        .skip(1)
        .map(|l| l.strip_prefix("  ").unwrap().to_owned())
        .collect();
    assert_eq!(bare, unwrapped.join("\n"));
    golden("network-config-talos.yaml", &bare);
}

fn ignition_input() -> capmox::bootstrap::MachineBootstrapInput {
    let mut i = input(vrfs());
    i.network.devices[0].addresses.push(capmox::bootstrap::Address {
        ip: "2001:db8::12".parse().unwrap(),
        prefix: 64,
        gateway: Some("2001:db8::1".parse().unwrap()),
        metric: None,
        is_default: true,
    });
    i.network.devices[0].link_mtu = Some(1450);
    i.bootstrap.format = BootstrapFormat::Ignition;
    i.bootstrap.value = serde_json::to_vec(&json!({
        "ignition": {"version": "2.3.0", "config": {}},
        "storage": {"files": [{"filesystem": "root", "path": "/etc/kubeadm.yml", "mode": 384,
                               "contents": {"source": "data:,kind%3A%20InitConfiguration"}}]},
        "systemd": {"units": [{"name": "kubeadm.service", "enabled": true, "contents": "[Unit]\n"}]},
        "x-unknown": {"kept": true}
    }))
    .unwrap();
    i
}

#[test]
fn ignition_enrichment() {
    let i = ignition_input();
    let out = enrich_ignition(&i).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let pretty = serde_json::to_string_pretty(&v).unwrap() + "\n";
    golden("ignition-user-data.json", &pretty);

    assert_eq!(v["x-unknown"]["kept"], true);
    let files = v["storage"]["files"].as_array().unwrap();
    assert_eq!(files.len(), 3);
    assert_eq!(files[1]["path"], "/etc/hostname");
    assert_eq!(files[1]["contents"]["source"], "data:,m1");
    assert_eq!(files[2]["path"], "/etc/proxmox-env");
    assert_eq!(files[2]["mode"], 420);
    let units = v["systemd"]["units"].as_array().unwrap();
    assert_eq!(
        units[1],
        json!({"name": "systemd-resolved.service", "enable": true})
    );

    assert_eq!(
        proxmox_env_plain(&i),
        format!(
            "COREOS_CUSTOM_HOSTNAME=m1\nCOREOS_CUSTOM_INSTANCE_ID={UUID}\nCOREOS_CUSTOM_PROVIDER_ID=proxmox://{UUID}\n\
COREOS_CUSTOM_PRIVATE_IPV4=10.10.10.12/24\nCOREOS_CUSTOM_PRIVATE_IPV6=2001:db8::12/64"
        )
    );

    let files = render_nocloud(&i, NetworkConfigFormat::CapmoxV2).unwrap();
    assert_eq!(files.network_config, EMPTY_NETWORK_V1.as_bytes());
    assert_eq!(files.user_data, out);
}

#[test]
fn ignition_networkd_units() {
    let units = render_networkd_units(&ignition_input().network).unwrap();
    let names: Vec<&str> = units.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "00-eth0.network",
            "00-vrf0.netdev",
            "01-eth1.network",
            "01-vrf1.netdev",
            "02-vrf2.network",
            "03-vrf3.network"
        ]
    );
    let text: String = units
        .iter()
        .map(|u| format!("### {}\n{}", u.name, u.contents))
        .collect();
    golden("ignition-networkd-units.txt", &text);
}

#[test]
fn ignition_rejects_non_v2() {
    let mut i = ignition_input();
    i.bootstrap.value = br#"{"ignition":{"version":"3.4.0"}}"#.to_vec();
    assert_eq!(
        enrich_ignition(&i),
        Err(BootstrapError::IgnitionVersion("3.4.0".to_owned()))
    );
    i.bootstrap.value = b"#cloud-config\n".to_vec();
    assert!(matches!(
        enrich_ignition(&i),
        Err(BootstrapError::IgnitionParse(_))
    ));
}

#[test]
fn cloud_config_user_data_is_passed_through() {
    let i = input(single_v4());
    let files = render_nocloud(&i, NetworkConfigFormat::CapmoxV2).unwrap();
    assert_eq!(files.user_data, i.bootstrap.value);
    assert!(files.vendor_data.is_empty());
    assert!(!format!("{files:?}").contains("echo hello"));
    assert!(!format!("{i:?}").contains("echo hello"));
}

#[test]
fn bootstrap_data_from_secret() {
    assert_eq!(
        capmox::bootstrap::BootstrapData::from_secret(None, Some(b"cloud-config")),
        Err(BootstrapError::MissingBootstrapValue)
    );
    assert_eq!(
        BootstrapError::MissingBootstrapValue.to_string(),
        "error retrieving bootstrap data: secret `value` key is missing"
    );
    let data = capmox::bootstrap::BootstrapData::from_secret(Some(b"machine: {}"), None).unwrap();
    assert_eq!(data.format, BootstrapFormat::CloudConfig);
    assert!(!format!("{data:?}").contains("machine"));
}

#[test]
fn format_from_secret() {
    assert_eq!(
        BootstrapFormat::from_secret(None),
        Ok(BootstrapFormat::CloudConfig)
    );
    assert_eq!(
        BootstrapFormat::from_secret(Some(b"ignition")),
        Ok(BootstrapFormat::Ignition)
    );
    assert!(matches!(
        BootstrapFormat::from_secret(Some(b"talos")),
        Err(BootstrapError::UnsupportedFormat(_))
    ));
}

// ---- validation errors ----

#[test]
fn error_no_gateway() {
    let mut net = single_v4();
    net.devices[0].addresses[0].gateway = None;
    assert_eq!(capmox_err(&net), BootstrapError::MissingGateway);
    assert_eq!(BootstrapError::MissingGateway.to_string(), "gateway is not set");
}

#[test]
fn error_no_devices() {
    assert_eq!(
        capmox_err(&NetworkModel::default()),
        BootstrapError::MissingNetworkConfigData
    );
}

#[test]
fn error_route_collision_across_devices() {
    let mut net = multi_nic();
    net.devices[1].addresses[0].metric = Some(100); // both default routes: main table, 0.0.0.0/0, metric 100
    let err = capmox_err(&net);
    assert!(
        matches!(
            err,
            BootstrapError::ConflictingRoute {
                table: 254,
                metric: 100,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with("route already exists for destination/metric in routing table")
    );
}

#[test]
fn vrf_member_routes_live_in_the_vrf_table() {
    // eth1 is in vrf-blue (table 500): its default route does not collide with eth0's in main ...
    let mut net = vrfs();
    net.devices[1].routes.push(Route {
        to: Some("0.0.0.0/0".parse().unwrap()),
        via: Some("192.168.178.1".parse().unwrap()),
        metric: Some(100),
        table: None,
    });
    // ... but it does collide with the VRF's own default route (table 500, metric 100).
    assert!(matches!(
        capmox_err(&net),
        BootstrapError::ConflictingRoute { table: 500, .. }
    ));
    net.devices[1].routes[0].metric = Some(101);
    assert!(render_network_config(&net, NetworkConfigFormat::CapmoxV2).is_ok());
}

#[test]
fn error_bad_fib_rules() {
    let mut net = single_v4();
    net.devices[0].routing_policy = vec![FibRule {
        to: None,
        from: None,
        table: Some(100),
        priority: None,
    }];
    assert!(matches!(
        capmox_err(&net),
        BootstrapError::MalformedFibRule { .. }
    ));
    net.devices[0].routing_policy = vec![FibRule {
        to: Some("10.0.0.0/8".parse().unwrap()),
        from: None,
        table: None,
        priority: None,
    }];
    assert!(matches!(
        capmox_err(&net),
        BootstrapError::MalformedFibRule { .. }
    ));
    net.devices[0].routing_policy = vec![FibRule {
        to: Some("10.0.0.0/8".parse().unwrap()),
        from: Some("2001:db8::/64".parse().unwrap()),
        table: Some(100),
        priority: None,
    }];
    let err = capmox_err(&net);
    assert!(
        err.to_string().starts_with("routing policy is malformed"),
        "{err}"
    );
}

#[test]
fn error_route_without_destination() {
    let mut net = single_v4();
    net.devices[0].routes.push(Route {
        to: None,
        via: Some("10.10.10.254".parse().unwrap()),
        metric: None,
        table: None,
    });
    assert!(matches!(capmox_err(&net), BootstrapError::MalformedRoute { .. }));
}

#[test]
fn error_unknown_vrf_interface_and_missing_mac() {
    let spec: capmox_api::v1alpha2::NetworkSpec = serde_json::from_value(json!({
        "networkDevices": [{"name": "net0"}],
        "vrfs": [{"name": "vrf-x", "table": 600, "interfaces": ["net7"]}]
    }))
    .unwrap();
    let mut resolved = std::collections::BTreeMap::new();
    resolved.insert(
        "net0".to_owned(),
        capmox::bootstrap::ResolvedDevice {
            mac: MAC0.to_owned(),
            addresses: vec![],
        },
    );
    assert!(matches!(
        capmox::bootstrap::network_from_api(&spec, &resolved, &[]),
        Err(BootstrapError::UnknownVrfInterface { .. })
    ));
    resolved.clear();
    assert!(matches!(
        capmox::bootstrap::network_from_api(&spec, &resolved, &[]),
        Err(BootstrapError::MissingMacAddress { .. })
    ));
}

fn capmox_err(net: &NetworkModel) -> BootstrapError {
    render_network_config(net, NetworkConfigFormat::CapmoxV2).unwrap_err()
}
