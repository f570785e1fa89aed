//! Fuzzing the bootstrap renderers with hostile values (YAML/JSON/INI injection in host names,
//! versions, MACs from Proxmox, DNS servers and VRF names; quotes, control characters, non-ASCII,
//! very long strings): whatever is rendered still parses and means what was given — every key is
//! one we wrote, every value reads back as the input — or the renderer refuses the value with an
//! error; legitimate values always render. The cloud-config user data passes through unchanged and
//! Ignition enrichment keeps the document valid JSON. A corpus of the nastiest values is also
//! judged by PyYAML (what cloud-init parses with) when `python3` with `yaml` is installed.
//!
//! Every failure these properties found is pinned as a named test at the end.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fuzz_support;

use std::net::{IpAddr, Ipv4Addr};

use capmox::bootstrap::{
    Address, BootstrapData, BootstrapFormat, Device, ExtraMetadata, MachineBootstrapInput,
    NetworkConfigFormat, NetworkModel, Vrf, enrich_ignition, render_metadata, render_network_config,
    render_networkd_units, render_nocloud,
};
use fuzz_support::{config, hostile_string};
use proptest::prelude::*;
use serde_json::{Value, json};

/// A value and whether it is a legitimate one (which must render).
#[derive(Debug, Clone)]
struct Val {
    text: String,
    legit: bool,
}

fn val(legit: impl Strategy<Value = String>) -> impl Strategy<Value = Val> {
    prop_oneof![
        2 => legit.prop_map(|text| Val { text, legit: true }),
        1 => hostile_string().prop_map(|text| Val { text, legit: false }),
    ]
}

fn hostname() -> impl Strategy<Value = Val> {
    val("[a-z]([a-z0-9\\-]{0,30}[a-z0-9])?(\\.[a-z0-9]([a-z0-9\\-]{0,20}[a-z0-9])?){0,3}")
}

fn uuid() -> impl Strategy<Value = Val> {
    val("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
}

fn version() -> impl Strategy<Value = Val> {
    val("v1\\.[0-9]{1,2}\\.[0-9]{1,2}(\\+rke2r1|-rc\\.1)?")
}

fn mac() -> impl Strategy<Value = Val> {
    val("([0-9A-F]{2}:){5}[0-9A-F]{2}")
}

fn dns() -> impl Strategy<Value = Val> {
    let ip = prop_oneof![
        any::<Ipv4Addr>().prop_map(|a| a.to_string()),
        any::<std::net::Ipv6Addr>().prop_map(|a| a.to_string()),
    ];
    val(ip)
}

fn vrf_name() -> impl Strategy<Value = Val> {
    val("vrf-[a-z0-9]{1,11}")
}

fn yaml(text: &str) -> Value {
    serde_saphyr::from_str::<Value>(text).unwrap_or_else(|e| panic!("does not parse ({e}):\n{text}"))
}

fn input(host: &str, id: &str, version: Option<&str>, net: NetworkModel) -> MachineBootstrapInput {
    MachineBootstrapInput {
        hostname: host.to_owned(),
        instance_id: id.to_owned(),
        provider_id_injection: true,
        kubernetes_version: version.map(str::to_owned),
        network: net,
        bootstrap: BootstrapData {
            value: b"#cloud-config\n".to_vec(),
            format: BootstrapFormat::CloudConfig,
        },
        extra_metadata: ExtraMetadata::default(),
    }
}

#[derive(Debug, Clone)]
struct Nic {
    mac: Val,
    dns: Vec<Val>,
    ip: Ipv4Addr,
}

#[derive(Debug, Clone)]
struct VrfIn {
    name: Val,
    members: Vec<Val>,
}

fn nics() -> impl Strategy<Value = Vec<Nic>> {
    prop::collection::vec(
        (mac(), prop::collection::vec(dns(), 0..3), any::<Ipv4Addr>()).prop_map(|(mac, dns, ip)| Nic {
            mac,
            dns,
            ip,
        }),
        1..4,
    )
}

fn vrfs(n_nics: usize) -> impl Strategy<Value = Vec<VrfIn>> {
    let member = val((0..n_nics).prop_map(|i| format!("eth{i}")));
    prop::collection::vec(
        (vrf_name(), prop::collection::vec(member, 0..2)).prop_map(|(name, members)| VrfIn { name, members }),
        0..3,
    )
}

fn network() -> impl Strategy<Value = (Vec<Nic>, Vec<VrfIn>)> {
    nics().prop_flat_map(|n| {
        let len = n.len();
        (Just(n), vrfs(len))
    })
}

fn model(nics: &[Nic], vrfs: &[VrfIn]) -> NetworkModel {
    NetworkModel {
        devices: nics
            .iter()
            .enumerate()
            .map(|(i, n)| Device {
                proxmox_name: format!("net{i}"),
                index: i,
                mac: n.mac.text.clone(),
                addresses: vec![Address {
                    ip: IpAddr::V4(n.ip),
                    prefix: 24,
                    gateway: (i == 0).then(|| IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))),
                    metric: None,
                    is_default: i == 0,
                }],
                dns_servers: n.dns.iter().map(|d| d.text.clone()).collect(),
                ..Device::default()
            })
            .collect(),
        vrfs: vrfs
            .iter()
            .enumerate()
            .map(|(k, v)| Vrf {
                name: v.name.text.clone(),
                table: 100 + i32::try_from(k).unwrap(),
                interfaces: v.members.iter().map(|m| m.text.clone()).collect(),
                ..Vrf::default()
            })
            .collect(),
    }
}

fn all_legit(nics: &[Nic], vrfs: &[VrfIn]) -> bool {
    let names: Vec<&str> = vrfs.iter().map(|v| v.name.text.as_str()).collect();
    let unique = names.iter().collect::<std::collections::BTreeSet<_>>().len() == names.len();
    unique
        && nics.iter().all(|n| n.mac.legit && n.dns.iter().all(|d| d.legit))
        && vrfs
            .iter()
            .all(|v| v.name.legit && v.members.iter().all(|m| m.legit))
}

fn s(v: &str) -> Value {
    Value::String(v.to_owned())
}

/// What a parsed `network-config` must say for the given model.
fn check_network_doc(doc: &Value, nics: &[Nic], vrfs: &[VrfIn]) -> Result<(), TestCaseError> {
    let top = doc.as_object().unwrap();
    let mut want_keys = vec!["ethernets", "renderer", "version"];
    if !vrfs.is_empty() {
        want_keys.push("vrfs");
    }
    want_keys.sort_unstable();
    let keys: Vec<&str> = top.keys().map(String::as_str).collect();
    prop_assert_eq!(keys, want_keys);
    let eth = doc["ethernets"].as_object().unwrap();
    prop_assert_eq!(eth.len(), nics.len());
    for (i, n) in nics.iter().enumerate() {
        let e = &eth[&format!("eth{i}")];
        prop_assert_eq!(&e["match"]["macaddress"], &s(&n.mac.text));
        let want_dns: Vec<Value> = n.dns.iter().map(|d| s(&d.text)).collect();
        if want_dns.is_empty() {
            prop_assert!(e.get("nameservers").is_none());
        } else {
            prop_assert_eq!(&e["nameservers"]["addresses"], &Value::Array(want_dns));
        }
    }
    if !vrfs.is_empty() {
        let v = doc["vrfs"].as_object().unwrap();
        prop_assert_eq!(v.len(), vrfs.len());
        for vrf in vrfs {
            let got = &v[&vrf.name.text];
            let members: Vec<Value> = vrf.members.iter().map(|m| s(&m.text)).collect();
            if members.is_empty() {
                prop_assert!(got.get("interfaces").is_none());
            } else {
                prop_assert_eq!(&got["interfaces"], &Value::Array(members));
            }
        }
    }
    Ok(())
}

/// Every line of a networkd unit is a `[Section]` or a `Key=Value` line.
fn check_unit(contents: &str) -> Result<Vec<(String, String)>, TestCaseError> {
    let mut out = Vec::new();
    for line in contents.lines() {
        if line.starts_with('[') {
            prop_assert!(
                line.ends_with(']') && line[1..line.len() - 1].chars().all(|c| c.is_ascii_alphabetic()),
                "bad section line {:?} in\n{}",
                line,
                contents
            );
            out.push(("[".to_owned(), line.to_owned()));
        } else {
            let (k, v) = line.split_once('=').ok_or_else(|| {
                TestCaseError::fail(format!("not a Key=Value line {line:?} in\n{contents}"))
            })?;
            prop_assert!(k.chars().all(|c| c.is_ascii_alphanumeric()), "bad key {:?}", k);
            out.push((k.to_owned(), v.to_owned()));
        }
    }
    Ok(out)
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn fuzz_meta_data_means_what_was_given(
        host in hostname(),
        id in uuid(),
        version in proptest::option::of(version()),
        node in proptest::option::of(hostile_string()),
        zone in proptest::option::of(hostile_string()),
        region in proptest::option::of(hostile_string()),
    ) {
        let mut inp = input(&host.text, &id.text, version.as_ref().map(|v| v.text.as_str()), NetworkModel::default());
        inp.extra_metadata = ExtraMetadata { proxmox_node: node.clone(), zone: zone.clone(), region: region.clone() };
        let legit = host.legit && id.legit && version.as_ref().is_none_or(|v| v.legit);
        match render_metadata(&inp) {
            Ok(text) => {
                let doc = yaml(&text);
                let mut want = serde_json::Map::new();
                want.insert("instance-id".into(), s(&id.text));
                want.insert("local-hostname".into(), s(&host.text));
                want.insert("hostname".into(), s(&host.text));
                want.insert("provider-id".into(), s(&format!("proxmox://{}", id.text)));
                if let Some(v) = version.as_ref().filter(|v| !v.text.is_empty()) {
                    want.insert("kubernetes-version".into(), s(&v.text));
                }
                for (k, v) in [("proxmox_node", &node), ("zone", &node), ("network_zone", &zone), ("region", &region)] {
                    if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
                        want.insert(k.into(), s(v));
                    }
                }
                prop_assert_eq!(doc, Value::Object(want), "rendered:\n{}", text);
            }
            Err(e) => prop_assert!(!legit, "legitimate input refused: {}", e),
        }
    }

    #[test]
    fn fuzz_network_config_means_what_was_given((nics, vrfs) in network(), bare in any::<bool>()) {
        let net = model(&nics, &vrfs);
        let format = if bare { NetworkConfigFormat::NetplanV2Bare } else { NetworkConfigFormat::CapmoxV2 };
        match render_network_config(&net, format) {
            Ok(text) => {
                let doc = yaml(&text);
                let doc = if bare {
                    doc
                } else {
                    let top: Vec<&String> = doc.as_object().unwrap().keys().collect();
                    prop_assert_eq!(top, vec!["network"], "rendered:\n{}", text);
                    doc["network"].clone()
                };
                check_network_doc(&doc, &nics, &vrfs)
                    .map_err(|e| TestCaseError::fail(format!("{e}\nrendered:\n{text}")))?;
            }
            Err(e) => prop_assert!(!all_legit(&nics, &vrfs), "legitimate network refused: {}", e),
        }
    }

    #[test]
    fn fuzz_networkd_units_are_well_formed((nics, vrfs) in network()) {
        let net = model(&nics, &vrfs);
        match render_networkd_units(&net) {
            Ok(units) => {
                for u in &units {
                    let lines = check_unit(&u.contents)?;
                    let matches = lines.iter().filter(|(k, v)| k == "[" && v == "[Match]").count();
                    let netdevs = lines.iter().filter(|(k, v)| k == "[" && v == "[NetDev]").count();
                    prop_assert_eq!(matches + netdevs, 1, "{}", u.contents);
                }
                let all: Vec<(String, String)> = units.iter().flat_map(|u| check_unit(&u.contents).unwrap()).collect();
                for n in &nics {
                    prop_assert!(all.contains(&("MACAddress".to_owned(), n.mac.text.clone())));
                    for d in &n.dns {
                        prop_assert!(all.contains(&("DNS".to_owned(), d.text.clone())));
                    }
                }
                for v in &vrfs {
                    prop_assert!(all.contains(&("Name".to_owned(), v.name.text.clone())));
                }
            }
            Err(e) => prop_assert!(!all_legit(&nics, &vrfs), "legitimate network refused: {}", e),
        }
    }

    #[test]
    fn fuzz_ignition_keeps_json_and_the_host_name(
        host in hostname(),
        doc in prop_oneof![
            fuzz_support::pve_json(),
            fuzz_support::pve_json().prop_map(|extra| json!({"ignition": {"version": "2.3.0"}, "storage": extra})),
            fuzz_support::pve_json().prop_map(|extra| json!({"ignition": {"version": "2.3.0"}, "passwd": extra, "systemd": {"units": []}})),
        ],
        raw in proptest::option::of(prop::collection::vec(any::<u8>(), 0..64)),
    ) {
        let mut inp = input(&host.text, "6c3fa683-bef9-4425-b413-eaa45a9d6191", None, NetworkModel {
            devices: vec![Device {
                proxmox_name: "net0".into(),
                mac: "BC:24:11:00:00:01".into(),
                addresses: vec![Address { ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 5)), prefix: 24, gateway: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))), metric: None, is_default: true }],
                ..Device::default()
            }],
            vrfs: vec![],
        });
        inp.bootstrap = BootstrapData {
            value: raw.unwrap_or_else(|| serde_json::to_vec(&doc).unwrap()),
            format: BootstrapFormat::Ignition,
        };
        if let Ok(out) = enrich_ignition(&inp) {
            let parsed: Value = serde_json::from_slice(&out).unwrap();
            let original: Value = serde_json::from_slice(&inp.bootstrap.value).unwrap();
            for k in original.as_object().unwrap().keys() {
                prop_assert!(parsed.get(k).is_some(), "lost top-level key {}", k);
            }
            let files = parsed["storage"]["files"].as_array().unwrap();
            let hostname = files.iter().find(|f| f["path"] == "/etc/hostname").unwrap();
            let source = hostname["contents"]["source"].as_str().unwrap();
            let decoded = percent_decode(source.strip_prefix("data:,").unwrap());
            prop_assert_eq!(decoded, host.text.clone());
            let env = files.iter().find(|f| f["path"] == "/etc/proxmox-env").unwrap();
            let env = percent_decode(env["contents"]["source"].as_str().unwrap().strip_prefix("data:,").unwrap());
            let keys: Vec<&str> = env.lines().filter_map(|l| l.split_once('=').map(|(k, _)| k)).collect();
            prop_assert_eq!(keys, vec!["COREOS_CUSTOM_HOSTNAME", "COREOS_CUSTOM_INSTANCE_ID", "COREOS_CUSTOM_PROVIDER_ID", "COREOS_CUSTOM_PRIVATE_IPV4"], "{}", env);
        }
    }

    #[test]
    fn fuzz_cloud_config_user_data_passes_through(value in prop::collection::vec(any::<u8>(), 0..2048), host in hostname()) {
        let mut inp = input(&host.text, "6c3fa683-bef9-4425-b413-eaa45a9d6191", Some("v1.33.0"), NetworkModel {
            devices: vec![Device {
                proxmox_name: "net0".into(),
                mac: "BC:24:11:00:00:01".into(),
                addresses: vec![Address { ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 5)), prefix: 24, gateway: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))), metric: None, is_default: true }],
                ..Device::default()
            }],
            vrfs: vec![],
        });
        inp.bootstrap.value = value.clone();
        match render_nocloud(&inp, NetworkConfigFormat::CapmoxV2) {
            Ok(files) => prop_assert_eq!(files.user_data, value),
            Err(e) => prop_assert!(!host.legit, "{}", e),
        }
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let hex = |c: u8| char::from(c).to_digit(16);
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push(u8::try_from(h * 16 + l).unwrap());
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

// ------------------------------------------------------------------ regressions found by fuzzing

fn one_nic(mac: &str, dns: &[&str]) -> NetworkModel {
    NetworkModel {
        devices: vec![Device {
            proxmox_name: "net0".into(),
            mac: mac.into(),
            addresses: vec![Address {
                ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 5)),
                prefix: 24,
                gateway: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))),
                metric: None,
                is_default: true,
            }],
            dns_servers: dns.iter().map(|d| (*d).to_owned()).collect(),
            ..Device::default()
        }],
        vrfs: vec![],
    }
}

const UUID: &str = "6c3fa683-bef9-4425-b413-eaa45a9d6191";

fn invalid_value(e: capmox::bootstrap::BootstrapError, what: &str) {
    match e {
        capmox::bootstrap::BootstrapError::InvalidValue { what: w, .. } => assert_eq!(w, what),
        other => panic!("expected an invalid {what}, got {other:?}"),
    }
}

/// A line break in the host name made `runcmd` a meta-data key (and an extra variable in the
/// Ignition environment file): now refused.
#[test]
fn regression_hostname_with_a_line_break_is_refused() {
    let inp = input(
        "node\nruncmd: [rm -rf /]",
        UUID,
        None,
        one_nic("BC:24:11:00:00:01", &[]),
    );
    invalid_value(render_metadata(&inp).unwrap_err(), "hostname");
    let mut ign = inp.clone();
    ign.bootstrap = BootstrapData {
        value: br#"{"ignition":{"version":"2.3.0"}}"#.to_vec(),
        format: BootstrapFormat::Ignition,
    };
    invalid_value(enrich_ignition(&ign).unwrap_err(), "hostname");
    invalid_value(
        render_metadata(&input("a: b", UUID, None, NetworkModel::default())).unwrap_err(),
        "hostname",
    );
}

/// The Machine's `spec.version` is free text: a line break in it added meta-data keys
/// (`public-keys` is read by NoCloud). Now quoted: one key, the same text.
#[test]
fn regression_version_cannot_add_meta_data_keys() {
    let version = "v1.33.0\npublic-keys: [ssh-ed25519 AAAA attacker]";
    let text = render_metadata(&input("node-1", UUID, Some(version), NetworkModel::default())).unwrap();
    let doc = yaml(&text);
    assert_eq!(doc["kubernetes-version"], s(version), "{text}");
    assert!(doc.get("public-keys").is_none(), "{text}");
}

/// Values plain YAML would read as something else are quoted: a host name `yes` (a boolean for
/// PyYAML), `123` (a number), an instance id that looks like a date.
#[test]
fn regression_ambiguous_scalars_are_quoted() {
    let text = render_metadata(&input("yes", "2001-12-14", Some("1.33"), NetworkModel::default())).unwrap();
    assert!(text.contains("hostname: 'yes'\n"), "{text}");
    assert!(text.contains("instance-id: '2001-12-14'\n"), "{text}");
    assert!(text.contains("kubernetes-version: '1.33'\n"), "{text}");
    // The usual values stay byte-identical to capmox's.
    let usual = render_metadata(&input("c1-cp-0", UUID, Some("v1.33.0"), NetworkModel::default())).unwrap();
    assert_eq!(
        usual,
        format!(
            "instance-id: {UUID}\nlocal-hostname: c1-cp-0\nhostname: c1-cp-0\nprovider-id: proxmox://{UUID}\nkubernetes-version: v1.33.0\n"
        )
    );
}

/// A line break inside a single-quoted scalar is folded into a space: a zone `a\nb` came back
/// as `a b`. Values that cannot stand in single quotes are double-quoted with escapes.
#[test]
fn regression_line_breaks_survive_quoting() {
    let mut inp = input("n1", UUID, None, NetworkModel::default());
    inp.extra_metadata.zone = Some("zone a\nzone b\u{7f}".into());
    let doc = yaml(&render_metadata(&inp).unwrap());
    assert_eq!(doc["network_zone"], s("zone a\nzone b\u{7f}"));
}

/// MACs come from Proxmox: one carrying a line break added keys to `network-config` and lines to
/// the networkd units. Now refused.
#[test]
fn regression_mac_from_proxmox_is_checked() {
    let net = one_nic("BC:24:11:00:00:01\n      evil: true", &[]);
    invalid_value(
        render_network_config(&net, NetworkConfigFormat::CapmoxV2).unwrap_err(),
        "MAC address",
    );
    invalid_value(render_networkd_units(&net).unwrap_err(), "MAC address");
}

/// DNS servers are free strings in the CRDs: one with a line break added a `[Match]` section to
/// the networkd unit (and was folded inside netplan's quotes). Now refused.
#[test]
fn regression_dns_server_cannot_add_unit_sections() {
    let net = one_nic("BC:24:11:00:00:01", &["1.1.1.1\n[Match]\nName=*"]);
    invalid_value(render_networkd_units(&net).unwrap_err(), "DNS server");
    invalid_value(
        render_network_config(&net, NetworkConfigFormat::NetplanV2Bare).unwrap_err(),
        "DNS server",
    );
    // networkd's own forms still pass.
    let ok = one_nic("BC:24:11:00:00:01", &["1.1.1.1#one.one.one.one", "fe80::1%eth0"]);
    render_networkd_units(&ok).unwrap();
}

/// VRF names are free strings (minLength 3) in the CRDs: `vrf-a:\n    x` became a second key of
/// `vrfs`; `yes` was a boolean key and `123` a number. Now names that are no interface names are
/// refused and ambiguous ones quoted.
#[test]
fn regression_vrf_names() {
    let mut net = one_nic("BC:24:11:00:00:01", &[]);
    net.vrfs = vec![Vrf {
        name: "vrf-a:\n    evil".into(),
        table: 100,
        ..Vrf::default()
    }];
    invalid_value(
        render_network_config(&net, NetworkConfigFormat::CapmoxV2).unwrap_err(),
        "VRF name",
    );
    for name in ["yes", "123"] {
        net.vrfs[0].name = name.into();
        let text = render_network_config(&net, NetworkConfigFormat::NetplanV2Bare).unwrap();
        let doc = yaml(&text);
        assert!(doc["vrfs"].get(name).is_some(), "{text}");
    }
}

/// The nastiest accepted values, judged by PyYAML (cloud-init's parser): every document reads
/// back with exactly the keys and strings given.
#[test]
fn pyyaml_reads_what_was_meant() {
    let probe = std::process::Command::new("python3")
        .args(["-c", "import yaml"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: python3 with the yaml module not found");
        return;
    }
    let mut cases = Vec::new();
    for v in [
        "v1.33.0\npublic-keys: [x]",
        "yes",
        "null",
        "~",
        "1:20",
        "0x1F",
        "2001-12-14",
        "'; DROP",
        "\"q\"",
        "#c",
        "&a *b",
        "!!python/object:os.system",
        "ünï 🙂",
        "tab\there",
        "a\u{85}b\u{2028}c\u{feff}\u{7f}",
    ] {
        let mut inp = input("n1", "2001-12-14", Some(v), NetworkModel::default());
        inp.extra_metadata.zone = Some(v.to_owned());
        inp.extra_metadata.proxmox_node = Some(format!("{v}\n{v}"));
        let doc = render_metadata(&inp).unwrap();
        let want = json!({
            "instance-id": "2001-12-14", "local-hostname": "n1", "hostname": "n1",
            "provider-id": "proxmox://2001-12-14", "kubernetes-version": v,
            "proxmox_node": format!("{v}\n{v}"), "zone": format!("{v}\n{v}"), "network_zone": v,
        });
        cases.push(json!({"doc": doc, "want": want}));
    }
    let mut net = one_nic("52:54:00:12:34:56", &["1.1.1.1"]);
    net.vrfs = vec![
        Vrf {
            name: "yes".into(),
            table: 100,
            interfaces: vec!["eth0".into()],
            ..Vrf::default()
        },
        Vrf {
            name: "123".into(),
            table: 101,
            ..Vrf::default()
        },
    ];
    let doc = render_network_config(&net, NetworkConfigFormat::NetplanV2Bare).unwrap();
    cases.push(json!({"doc": doc, "want": {
        "version": 2, "renderer": "networkd",
        "ethernets": {"eth0": {
            "match": {"macaddress": "52:54:00:12:34:56"}, "dhcp4": false, "dhcp6": false,
            "addresses": ["10.0.0.5/24"],
            "routes": [{"to": "0.0.0.0/0", "via": "10.0.0.1"}],
            "nameservers": {"addresses": ["1.1.1.1"]},
        }},
        "vrfs": {"yes": {"table": 100, "interfaces": ["eth0"]}, "123": {"table": 101}},
    }}));
    let script = r#"
import json, sys, yaml
for i, case in enumerate(json.load(sys.stdin)):
    got = yaml.safe_load(case["doc"])
    if got != case["want"]:
        print(f"case {i}: got {got!r}\nwant {case['want']!r}\ndoc:\n{case['doc']}")
        sys.exit(1)
print("ok")
"#;
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&serde_json::to_vec(&cases).unwrap())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.trim() == "ok", "{text}");
}
