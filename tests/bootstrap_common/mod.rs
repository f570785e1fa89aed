//! Shared fixtures for the bootstrap tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use capmox::bootstrap::{
    BootstrapData, BootstrapFormat, ExtraMetadata, MachineBootstrapInput, NetworkModel, ResolvedAddress,
    ResolvedDevice, network_from_api,
};
use capmox_api::v1alpha2::NetworkSpec;

/// SMBIOS uuid of the fixtures.
pub const UUID: &str = "1f3b4c5d-6e7f-4a8b-9c0d-1e2f3a4b5c6d";
/// MAC of net0.
pub const MAC0: &str = "BC:24:11:5B:22:C2";
/// MAC of net1.
pub const MAC1: &str = "BC:24:11:BF:A3:60";

/// Compares `actual` with `tests/golden/bootstrap/<name>`; `UPDATE_GOLDEN=1` rewrites the file.
pub fn golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/bootstrap")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1 to create it)", path.display()));
    pretty_assertions::assert_eq!(expected, actual, "golden {name} differs");
}

/// An IPAM address.
pub fn addr(
    name: &str,
    ip: &str,
    prefix: u8,
    gw: Option<&str>,
    metric: Option<i32>,
    default: bool,
) -> ResolvedAddress {
    ResolvedAddress {
        name: name.to_owned(),
        address: ip.to_owned(),
        prefix,
        gateway: gw.map(str::to_owned),
        metric,
        is_default: default,
    }
}

/// Builds a network model from a JSON `spec.network` and resolved devices.
pub fn network(
    spec: serde_json::Value,
    resolved: Vec<(&str, &str, Vec<ResolvedAddress>)>,
    dns: &[&str],
) -> NetworkModel {
    let spec: NetworkSpec = serde_json::from_value(spec).unwrap();
    let resolved: BTreeMap<String, ResolvedDevice> = resolved
        .into_iter()
        .map(|(net, mac, addresses)| {
            (
                net.to_owned(),
                ResolvedDevice {
                    mac: mac.to_owned(),
                    addresses,
                },
            )
        })
        .collect();
    let dns: Vec<String> = dns.iter().map(|s| s.to_string()).collect();
    network_from_api(&spec, &resolved, &dns).unwrap()
}

/// Single NIC, one IPv4 default-pool address with gateway and metric 100, cluster DNS.
pub fn single_v4() -> NetworkModel {
    network(
        serde_json::json!({"networkDevices": [{"name": "net0", "bridge": "vmbr0", "defaultIPv4": true}]}),
        vec![(
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
        )],
        &["8.8.8.8", "8.8.4.4"],
    )
}

/// A cloud-config machine input around `network`.
pub fn input(network: NetworkModel) -> MachineBootstrapInput {
    MachineBootstrapInput {
        hostname: "m1".to_owned(),
        instance_id: UUID.to_owned(),
        provider_id_injection: false,
        kubernetes_version: None,
        network,
        bootstrap: BootstrapData {
            value: b"## template: jinja\n#cloud-config\nruncmd:\n  - echo hello\n".to_vec(),
            format: BootstrapFormat::CloudConfig,
        },
        extra_metadata: ExtraMetadata::default(),
    }
}
