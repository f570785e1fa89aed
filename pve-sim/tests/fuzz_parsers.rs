//! Fuzzing what pve-sim parses from its clients (the provider under test, or anyone): property
//! strings of every VM config key family (`netN`, disks, `ipconfigN`, `smbios1`, `boot`, tags,
//! sizes), percent-encoded and form bodies, multipart uploads and ISO images. Nothing may panic
//! (a panic would take a request handler down), and a parsed property string prints back to
//! itself. `PROPTEST_CASES` raises the case count (`make fuzz`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use proptest::test_runner::Config;
use pve_sim::formats;
use pve_sim::{iso, multipart, params, propstr};

fn config(default: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

const KEYS: &[&str] = &[
    "net0",
    "net31",
    "scsi0",
    "virtio15",
    "ide0",
    "ide2",
    "sata5",
    "efidisk0",
    "tpmstate0",
    "ipconfig0",
    "ipconfig31",
    "smbios1",
    "boot",
    "tags",
    "memory",
    "sshkeys",
    "agent",
    "cores",
    "sockets",
    "name",
    "description",
    "onboot",
    "cpu",
    "machine",
    "vga",
    "unused0",
    "hostpci0",
    "numa0",
    "serial0",
    "usb0",
    "bogus",
    "net",
    "net032",
];

fn value() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("virtio=BC:24:11:00:00:01".to_owned()),
        Just("bridge=vmbr0".to_owned()),
        Just("tag=4095".to_owned()),
        Just("ip=10.0.0.5/24".to_owned()),
        Just("gw=10.0.0.1".to_owned()),
        Just("ip6=auto".to_owned()),
        Just("ip=dhcp".to_owned()),
        Just("local-lvm:32".to_owned()),
        Just("local:iso/x.iso".to_owned()),
        Just("media=cdrom".to_owned()),
        Just("size=4M".to_owned()),
        Just("uuid=6c3fa683-bef9-4425-b413-eaa45a9d6191".to_owned()),
        Just("order=scsi0;ide2;net0".to_owned()),
        Just("current=2048".to_owned()),
        Just("enabled=1".to_owned()),
        Just("=".to_owned()),
        "[a-z0-9]{1,6}=[a-zA-Z0-9:;./%+\\-]{0,16}",
        "\\PC{0,10}",
    ];
    prop_oneof![
        4 => prop::collection::vec(piece, 0..6).prop_map(|p| p.join(",")),
        1 => any::<String>(),
    ]
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn fuzz_config_values(key in proptest::sample::select(KEYS), value in value()) {
        let _ = propstr::family(key);
        for version in pve_sim::PveVersion::ALL {
            let _ = propstr::is_config_key(key, version);
            if let Err(e) = propstr::check_config_value(key, &value, version) {
                prop_assert!(!e.is_empty());
            }
            for format in [formats::inline::NET, formats::inline::SCSI, formats::named::IPCONFIG, formats::named::SMBIOS1, formats::named::BOOT] {
                let _ = formats::parse(key, &value, format, version);
            }
        }
        let _ = propstr::check_tags(&value);
        let _ = propstr::normalise_tags(&value);
        let _ = propstr::boot_devices(&value);
        let _ = propstr::to_map(&value, Some("model"));
        let _ = propstr::set_key(&value, "size", "8G");
    }

    #[test]
    fn fuzz_property_strings_print_back(value in value(), default in proptest::option::of(proptest::sample::select(&["model", "file", "order"][..]))) {
        if let Ok(props) = propstr::parse(&value, default) {
            let printed = propstr::print(&props);
            prop_assert_eq!(propstr::parse(&printed, None), Ok(props));
        }
    }

    #[test]
    fn fuzz_sizes(s in prop_oneof!["[+]?[0-9.]{0,20}[KMGTkmgt]?", any::<String>()], n in any::<u64>()) {
        let _ = propstr::parse_size(&s);
        let printed = propstr::format_size(n);
        prop_assert_eq!(propstr::parse_size(&printed), Some(n));
    }

    #[test]
    fn fuzz_request_bodies(s in prop_oneof!["([a-z%0-9+=&]|%[0-9A-Fa-f]{0,2}){0,40}", any::<String>()], plus in any::<bool>()) {
        let _ = params::percent_decode(&s, plus);
        let mut map = serde_json::Map::new();
        params::parse_urlencoded(&s, &mut map);
    }

    #[test]
    fn fuzz_multipart(
        body in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..256),
            ("[a-z0-9]{1,8}", "\\PC{0,40}").prop_map(|(b, x)| format!(
                "--{b}\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\niso\r\n--{b}\r\nContent-Disposition: form-data; name=\"filename\"; filename=\"{x}\"\r\n\r\n{x}\r\n--{b}--\r\n"
            ).into_bytes()),
        ],
        ctype in prop_oneof![Just("multipart/form-data; boundary=abc".to_owned()), "\\PC{0,40}"],
    ) {
        if let Some(b) = multipart::boundary(&ctype) {
            let _ = multipart::parse(&body, &b);
        }
        let _ = multipart::parse(&body, "abc");
    }
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn fuzz_iso_reader(bytes in prop::collection::vec(any::<u8>(), 0..12_000), name in prop_oneof![Just("network-config".to_owned()), "\\PC{0,12}"]) {
        let _ = iso::read_file(&bytes, &name);
    }
}

/// Sizes went through an f64: byte counts above 2^53 came back changed
/// (`9027519469362259` → `9027519469362260`). Whole numbers are now parsed exactly.
#[test]
fn regression_large_sizes_are_exact() {
    assert_eq!(
        propstr::parse_size("9027519469362259"),
        Some(9_027_519_469_362_259)
    );
    assert_eq!(propstr::parse_size(&u64::MAX.to_string()), Some(u64::MAX));
    assert_eq!(propstr::parse_size("16777216T"), None, "overflow is no size");
    assert_eq!(propstr::parse_size("1.5G"), Some(1_610_612_736));
    assert_eq!(propstr::parse_size("inf"), None);
}
