//! Generators and configuration shared by the `fuzz_*` property tests: hostile JSON shaped like
//! Proxmox answers (the field names the client reads, with every JSON type in every place),
//! hostile strings, and the case count (`PROPTEST_CASES`, default small so `make test` stays
//! quick; `make fuzz` raises it).
#![allow(dead_code)]

use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Map, Value, json};

/// Cases per property: `PROPTEST_CASES` when set, else `default`. Failures are not persisted to
/// files: every failure found becomes a named regression test instead.
pub fn config(default: u32) -> Config {
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

/// Field names of Proxmox answers (and a few nonsense ones), so generated objects hit the
/// fields the client decodes.
pub const PVE_KEYS: &[&str] = &[
    "data",
    "vmid",
    "node",
    "name",
    "status",
    "type",
    "template",
    "tags",
    "maxmem",
    "mem",
    "cpu",
    "maxcpu",
    "uptime",
    "pool",
    "lock",
    "hastate",
    "id",
    "upid",
    "exitstatus",
    "starttime",
    "pid",
    "user",
    "tokenid",
    "n",
    "t",
    "total",
    "used",
    "avail",
    "content",
    "storage",
    "shared",
    "active",
    "enabled",
    "version",
    "release",
    "repoid",
    "result",
    "exited",
    "exitcode",
    "out-data",
    "err-data",
    "out-truncated",
    "err-truncated",
    "signal",
    "ha",
    "managed",
    "qmpstatus",
    "running",
    "memory",
    "sockets",
    "cores",
    "net0",
    "net1",
    "net31",
    "scsi0",
    "virtio0",
    "ide0",
    "ide2",
    "sata5",
    "efidisk0",
    "smbios1",
    "boot",
    "description",
    "digest",
    "agent",
    "disk",
    "maxdisk",
    "level",
    "cpus",
    "free",
    "ticket",
    "CSRFPreventionToken",
    "username",
    "nodes",
    "online",
    "quorate",
    "ip",
    "local",
    "nodeid",
    "volid",
    "size",
    "format",
    "ctime",
    "vmstate",
    "snaptime",
    "parent",
    "hardware-address",
    "ip-addresses",
    "ip-address",
    "ip-address-type",
    "prefix",
    "kernel-release",
    "pretty-name",
    "version-id",
    "plugintype",
    "errors",
    "message",
    "",
    "\u{0}",
    "ünïcödé",
];

/// Strings PVE might send where numbers, booleans or property strings are expected.
pub fn pve_string() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("0".to_owned()),
        Just("1".to_owned()),
        Just("-1".to_owned()),
        Just("1e400".to_owned()),
        Just("NaN".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just("OK".to_owned()),
        Just("WARNINGS: 3".to_owned()),
        Just("stopped".to_owned()),
        Just("running".to_owned()),
        Just("virtio=BC:24:11:00:00:01,bridge=vmbr0".to_owned()),
        Just("local-lvm:vm-100-disk-0,size=32G".to_owned()),
        Just("uuid=6c3fa683-bef9-4425-b413-eaa45a9d6191".to_owned()),
        Just("UPID:pve1:000A1B2C:0001E240:65A0B2F1:qmclone:100:root@pam:".to_owned()),
        "[0-9]{1,25}",
        "[a-z0-9=,:;.\\- ]{0,40}",
        "\\PC{0,30}",
        any::<String>(),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        Just(json!(-0.5)),
        Just(json!(4_294_967_296u64)),
        pve_string().prop_map(Value::String),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(PVE_KEYS).prop_map(str::to_owned),
        1 => "[a-z0-9_\\-]{0,12}",
    ]
}

/// Any JSON, biased towards objects with Proxmox field names.
pub fn pve_json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 64, 10, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..12)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

/// An object (or a list of objects) with Proxmox field names and hostile values: the usual
/// shape of a `data` member.
pub fn pve_data() -> impl Strategy<Value = Value> {
    fn object() -> impl Strategy<Value = Value> {
        prop::collection::vec((key(), pve_json()), 0..16)
            .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>()))
    }
    prop_oneof![
        3 => object(),
        2 => prop::collection::vec(object(), 0..5).prop_map(Value::Array),
        1 => pve_json(),
    ]
}

/// Hostile text for values that end up in documents: YAML/JSON/INI injection, quotes,
/// control characters, non-ASCII, and very long strings.
pub fn hostile_string() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("node\nruncmd: [rm -rf /]".to_owned()),
        Just("x\n  evil: true".to_owned()),
        Just("a: b".to_owned()),
        Just("'; DROP".to_owned()),
        Just("\"quoted\"".to_owned()),
        Just("- item".to_owned()),
        Just("{a: 1}".to_owned()),
        Just("[Match]\nName=*".to_owned()),
        Just("x\r\ny=z".to_owned()),
        Just("#comment".to_owned()),
        Just("&anchor *alias".to_owned()),
        Just("!!python/object:os.system".to_owned()),
        Just("yes".to_owned()),
        Just("null".to_owned()),
        Just("~".to_owned()),
        Just("0x1F".to_owned()),
        Just("1:20".to_owned()),
        Just("2001-12-14".to_owned()),
        Just("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI x@y".to_owned()),
        Just("ünïcödé-名前-🙂".to_owned()),
        Just("\u{feff}bom".to_owned()),
        Just("tab\there".to_owned()),
        Just("a".repeat(10_000)),
        "[a-z0-9.\\-]{1,63}",
        "\\PC{0,40}",
        any::<String>(),
    ]
}
