//! The pure mapping from the v1alpha2 network spec (plus resolved IPs/MACs/DNS) into the render model.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod bootstrap_common;

use bootstrap_common::*;
use capmox::bootstrap::{FibRule, Route};
use serde_json::json;

fn one_nic(extra: serde_json::Value) -> capmox::bootstrap::NetworkModel {
    let mut nic = json!({"name": "net0", "bridge": "vmbr0", "defaultIPv4": true});
    nic.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    network(
        json!({"networkDevices": [nic]}),
        vec![(
            "net0",
            MAC0,
            vec![addr(
                "m1-net0-00-inet",
                "10.0.0.5",
                24,
                Some("10.0.0.1"),
                None,
                true,
            )],
        )],
        &["10.0.0.53"],
    )
}

#[test]
fn placeholder_targets_take_their_family_from_is6_or_via() {
    let net = one_nic(json!({"routes": [
        {"to": "default", "via": "2001:db8::1"},
        {"to": "all", "via": "10.0.0.254", "metric": 5},
        {"to": "default", "is6": true},
        {"to": "2001:db8::7"},
        {"to": "192.168.1.7/24", "via": "10.0.0.254"}
    ]}));
    let r = &net.devices[0].routes;
    let to = |i: usize| r[i].to.unwrap().to_string();
    assert_eq!(to(0), "::/0");
    assert_eq!(to(1), "0.0.0.0/0");
    assert_eq!(to(2), "::/0");
    assert_eq!(to(3), "2001:db8::7/128");
    // Host bits are kept, as Go's netip.Prefix keeps them.
    assert_eq!(to(4), "192.168.1.7/24");
    assert_eq!(r[1].metric, Some(5));
}

#[test]
fn rule_family_comes_from_the_concrete_side() {
    let net = one_nic(json!({"routingPolicy": [
        {"to": "default", "from": "2001:db8::/64", "table": 10},
        {"from": "all", "to": "10.1.0.0/16", "table": 11, "priority": 100}
    ]}));
    assert_eq!(
        net.devices[0].routing_policy,
        vec![
            FibRule {
                to: Some("::/0".parse().unwrap()),
                from: Some("2001:db8::/64".parse().unwrap()),
                table: Some(10),
                priority: None
            },
            FibRule {
                to: Some("10.1.0.0/16".parse().unwrap()),
                from: Some("0.0.0.0/0".parse().unwrap()),
                table: Some(11),
                priority: Some(100)
            },
        ]
    );
}

#[test]
fn invalid_targets_are_typed_errors() {
    let spec: capmox_api::v1alpha2::NetworkSpec = serde_json::from_value(json!({
        "networkDevices": [{"name": "net0", "routes": [{"to": "not-an-ip", "via": "10.0.0.1"}]}]
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
    let err = capmox::bootstrap::network_from_api(&spec, &resolved, &[]).unwrap_err();
    assert!(
        matches!(
            err,
            capmox::bootstrap::BootstrapError::InvalidAddress {
                what: "route target",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn nic_names_dns_and_defaults() {
    let net = network(
        json!({"networkDevices": [
            {"bridge": "vmbr0", "defaultIPv4": true},
            {"name": "net1", "bridge": "vmbr1", "dnsServers": ["1.1.1.1"], "linkMtu": 1450}
        ]}),
        vec![
            (
                "net0",
                MAC0,
                vec![addr("a", "10.0.0.5", 24, Some("10.0.0.1"), Some(100), true)],
            ),
            (
                "net1",
                MAC1,
                vec![addr("b", "10.1.0.5", 24, Some(""), None, false)],
            ),
        ],
        &["10.0.0.53"],
    );
    let d0 = &net.devices[0];
    assert_eq!(
        (d0.proxmox_name.as_str(), d0.guest_name().as_str()),
        ("net0", "eth0")
    );
    assert_eq!(d0.dns_servers, vec!["10.0.0.53".to_owned()]);
    assert_eq!(
        d0.effective_routes(),
        vec![Route {
            to: Some("0.0.0.0/0".parse().unwrap()),
            via: Some("10.0.0.1".parse().unwrap()),
            metric: Some(100),
            table: None
        }]
    );
    let d1 = &net.devices[1];
    assert_eq!(d1.guest_name(), "eth1");
    assert_eq!(d1.dns_servers, vec!["1.1.1.1".to_owned()]);
    assert_eq!(d1.link_mtu, Some(1450));
    // An empty gateway means no default route.
    assert!(d1.effective_routes().is_empty());
}
