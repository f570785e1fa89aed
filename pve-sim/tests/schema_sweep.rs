//! pve-sim's tables against PVE's schemas, both versions (`../shared/pve-api/apidoc.json` and
//! `apidoc-9.1.json`, read at test time; skipped with one line when absent): property-string
//! formats (keys, default keys, types, bounds, enums), named formats (`typetext`), config keys,
//! the permissions of every endpoint served, and which path parameters may hold a `/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use pve_sim::access::checks::{Check, endpoint_check};
use pve_sim::formats::{Sub, Ty, inline, named};
use pve_sim::schema::{self, ApiSchema};
use pve_sim::{PveVersion, api, config_keys};
use regex::Regex;
use serde_json::{Value, json};

/// The schemas of both versions, or `None` (after printing why) when they are not there.
fn schemas() -> Option<Vec<(PveVersion, ApiSchema)>> {
    let mut out = Vec::new();
    for v in PveVersion::ALL {
        let Some(path) = schema::find(v) else {
            eprintln!(
                "skipped: {} not found in {} (set PVE_API_SCHEMA_DIR)",
                v.schema_file(),
                schema::default_dir().display()
            );
            return None;
        };
        out.push((v, ApiSchema::load(&path).unwrap()));
    }
    Some(out)
}

fn create_params(s: &ApiSchema) -> &serde_json::Map<String, Value> {
    s.params("POST /nodes/{node}/qemu").unwrap()
}

fn num(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64)
}

/// Compares one sub-key of our table with the schema's.
fn compare_sub(what: &str, ours: &Sub, theirs: &Value) -> Vec<String> {
    let mut diffs = Vec::new();
    let mut diff = |m: String| diffs.push(format!("{what}.{}: {m}", ours.name));
    if let Some(alias) = theirs.get("alias").and_then(Value::as_str) {
        if ours.alias != Some(alias) {
            diff(format!("alias of {alias} in the schema, ours {:?}", ours.alias));
        }
        if theirs.get("keyAlias").and_then(Value::as_str) != ours.key_alias {
            diff("keyAlias differs".into());
        }
        return diffs;
    }
    let dk = theirs.get("default_key").and_then(Value::as_i64) == Some(1);
    let optional = theirs.get("optional").and_then(Value::as_i64) == Some(1);
    if dk != ours.default_key {
        diff(format!("default_key {dk} in the schema"));
    }
    if optional != ours.optional {
        diff(format!("optional {optional} in the schema"));
    }
    if num(theirs, "maxLength").map(|x| x as usize) != ours.max_len {
        diff("maxLength differs".into());
    }
    let ty = theirs.get("type").and_then(Value::as_str).unwrap_or("string");
    let fmt = theirs.get("format").and_then(Value::as_str);
    let ok = match (ty, ours.ty) {
        ("boolean", Ty::Bool) => true,
        ("integer", Ty::Int(lo, hi)) => {
            num(theirs, "minimum") == lo.map(|x| x as f64) && num(theirs, "maximum") == hi.map(|x| x as f64)
        }
        ("number", Ty::Num(lo, hi)) => num(theirs, "minimum") == lo && num(theirs, "maximum") == hi,
        ("string", Ty::Enum(values)) => theirs.get("enum") == Some(&json!(values)),
        ("string", Ty::Pattern(p)) => theirs
            .get("pattern")
            .and_then(Value::as_str)
            .is_some_and(|t| t.replace("(?^:", "(?:").replace("{,", "{0,") == p),
        ("string", Ty::Volume) => matches!(fmt, Some("pve-volume-id-or-qm-path" | "pve-volume-id")),
        ("string", Ty::Size) => fmt == Some("disk-size"),
        ("string", Ty::Mac) => fmt == Some("mac-addr"),
        ("string", Ty::Bridge) => fmt == Some("pve-bridge-id"),
        ("string", Ty::ConfigId) => fmt == Some("pve-configid"),
        ("string", Ty::Urlencoded) => fmt == Some("urlencoded"),
        ("string", Ty::Str) => theirs.get("enum").is_none() && theirs.get("pattern").is_none(),
        _ => false,
    };
    if !ok {
        diff(format!("type {ty} {theirs} vs ours {:?}", ours.ty));
    }
    diffs
}

/// Our tables of the inline formats (the schema spells them out in full).
const INLINE: &[(&str, &[Sub])] = &[
    ("net[n]", inline::NET),
    ("ide[n]", inline::IDE),
    ("sata[n]", inline::SATA),
    ("scsi[n]", inline::SCSI),
    ("virtio[n]", inline::VIRTIO),
    ("efidisk0", inline::EFIDISK),
    ("tpmstate0", inline::TPMSTATE),
    ("unused[n]", inline::UNUSED),
    ("agent", inline::AGENT),
    ("memory", inline::MEMORY),
    ("machine", inline::MACHINE),
    ("vga", inline::VGA),
    ("usb[n]", inline::USB),
    ("virtiofs[n]", inline::VIRTIOFS),
    ("numa[n]", inline::NUMA),
    ("audio0", inline::AUDIO),
    ("spice_enhancements", inline::SPICE),
    ("ivshmem", inline::IVSHMEM),
];

#[test]
fn inline_formats_match_the_schema() {
    let Some(schemas) = schemas() else { return };
    let mut diffs = Vec::new();
    for (v, s) in &schemas {
        let params = create_params(s);
        for (key, table) in INLINE {
            let format = params[*key]["format"].as_object().unwrap();
            let ours: BTreeSet<&str> = table.iter().filter(|x| x.avail.has(*v)).map(|x| x.name).collect();
            let theirs: BTreeSet<&str> = format.keys().map(String::as_str).collect();
            if ours != theirs {
                let ours_only: Vec<_> = ours.difference(&theirs).collect();
                let theirs_only: Vec<_> = theirs.difference(&ours).collect();
                diffs.push(format!(
                    "{v} {key}: ours only {ours_only:?}, schema only {theirs_only:?}"
                ));
            }
            for sub in table.iter().filter(|x| x.avail.has(*v)) {
                if let Some(t) = format.get(sub.name) {
                    diffs.extend(compare_sub(&format!("{v} {key}"), sub, t));
                }
            }
        }
    }
    assert!(diffs.is_empty(), "{diffs:#?}");
}

/// `(key, default key, optional)` of every key in a `typetext` such as
/// `[[legacy=]<[acdn]{1,4}>] [,order=<device[;device...]>]` or `[type=]<tdx-type> ,attestation=<1|0>`.
fn typetext_keys(text: &str) -> Vec<(String, bool, bool)> {
    let re = Regex::new(r"(?:^|\s)(\[?)(\[?),?([A-Za-z0-9_-]+)=(\]?)").unwrap();
    re.captures_iter(text)
        .map(|c| {
            let default_key = &c[4] == "]";
            let optional = if default_key { &c[2] == "[" } else { &c[1] == "[" };
            (c[3].to_owned(), default_key, optional)
        })
        .collect()
}

const NAMED: &[(&str, &[Sub])] = &[
    ("boot", named::BOOT),
    ("cpu", named::CPU),
    ("hostpci[n]", named::HOSTPCI),
    ("ipconfig[n]", named::IPCONFIG),
    ("smbios1", named::SMBIOS1),
    ("rng0", named::RNG),
    ("watchdog", named::WATCHDOG),
    ("startup", named::STARTUP),
    ("amd-sev", named::AMD_SEV),
    ("intel-tdx", named::INTEL_TDX),
    ("cicustom", named::CICUSTOM),
];

#[test]
fn named_formats_match_the_typetext() {
    let Some(schemas) = schemas() else { return };
    let mut diffs = Vec::new();
    for (v, s) in &schemas {
        let params = create_params(s);
        for (key, table) in NAMED {
            let Some(p) = params.get(*key) else {
                assert!(*key == "intel-tdx" && !v.is_9(), "{v}: {key} missing");
                continue;
            };
            let mut theirs = typetext_keys(p["typetext"].as_str().unwrap());
            theirs.sort();
            let mut ours: Vec<(String, bool, bool)> = table
                .iter()
                .filter(|x| x.avail.has(*v) && x.alias.is_none())
                .map(|x| (x.name.to_owned(), x.default_key, x.optional))
                .collect();
            ours.sort();
            if ours != theirs {
                diffs.push(format!("{v} {key}: ours {ours:?}, typetext {theirs:?}"));
            }
        }
    }
    assert!(diffs.is_empty(), "{diffs:#?}");
}

/// The config keys `POST .../config` takes, per version, are the keys pve-sim knows.
#[test]
fn config_keys_match_the_schema() {
    let Some(schemas) = schemas() else { return };
    let control = [
        "node",
        "vmid",
        "delete",
        "revert",
        "digest",
        "force",
        "skiplock",
        "background_delay",
    ];
    for (v, s) in &schemas {
        let params = s.params("POST /nodes/{node}/qemu/{vmid}/config").unwrap();
        let mut missing = Vec::new();
        for key in params.keys().filter(|k| !control.contains(&k.as_str())) {
            let name = key.replace("[n]", "0");
            if !config_keys::is_config_key(&name, *v) {
                missing.push(name);
            }
        }
        assert!(
            missing.is_empty(),
            "{v}: schema keys pve-sim refuses: {missing:?}"
        );
        for extra in ["allow-ksm", "intel-tdx", "bogus", "net99"] {
            let known = params.contains_key(extra) || params.contains_key(&extra.replace("99", "[n]"));
            let in_schema = known && !extra.ends_with("99");
            assert_eq!(config_keys::is_config_key(extra, *v), in_schema, "{v}: {extra}");
        }
    }
}

fn check_json(c: &Check) -> Option<Value> {
    match c {
        Check::All => None,
        Check::Perm {
            path,
            privs,
            any,
            require,
        } => {
            let mut v = vec![json!("perm"), json!(path), json!(privs)];
            if *any {
                v.extend([json!("any"), json!(1)]);
            }
            if let Some(r) = require {
                v.extend([json!("require_param"), json!(r)]);
            }
            Some(Value::Array(v))
        }
        Check::And(subs) | Check::Or(subs) => {
            let op = if matches!(c, Check::And(_)) { "and" } else { "or" };
            let mut v = vec![json!(op)];
            v.extend(subs.iter().filter_map(check_json));
            Some(Value::Array(v))
        }
    }
}

/// Every endpoint served exists in the version's schema, with the permission test pve-sim runs.
#[test]
fn endpoints_and_their_permissions_match_the_schema() {
    let Some(schemas) = schemas() else { return };
    let mut diffs = Vec::new();
    for (v, s) in &schemas {
        for key in api::ENDPOINT_KEYS.iter().filter(|k| api::serves(k, *v)) {
            let Some(m) = s.method(key) else {
                diffs.push(format!("{v}: {key} not in the schema"));
                continue;
            };
            let theirs = m["permissions"].get("check").cloned();
            let ours = endpoint_check(*v, key).and_then(|c| check_json(&c));
            if theirs != ours {
                diffs.push(format!("{v} {key}: schema {theirs:?}, ours {ours:?}"));
            }
        }
        let rules = s.method("GET /cluster/ha/rules").is_some();
        assert_eq!(rules, v.is_9(), "{v}: HA rules in the schema");
    }
    assert!(diffs.is_empty(), "{diffs:#?}");
}

/// Path parameters whose schema admits a `/` (no restricting format or pattern): only the storage
/// volume id, which pve-sim routes with the rest of the path (`fragmentDelimiter => ''`).
#[test]
fn only_the_volume_path_parameter_may_hold_a_slash() {
    let Some(schemas) = schemas() else { return };
    let safe_formats = [
        "pve-node",
        "pve-vmid",
        "pve-storage-id",
        "pve-configid",
        "pve-ha-resource-or-vm-id",
    ];
    let names = Regex::new(r"\{([a-z]+)\}").unwrap();
    for (v, s) in &schemas {
        let mut slashy = BTreeSet::new();
        for key in api::ENDPOINT_KEYS.iter().filter(|k| api::serves(k, *v)) {
            for c in names.captures_iter(key) {
                let params = s.params(key).unwrap();
                let p = &params[&c[1]];
                let format = p.get("format").and_then(Value::as_str).unwrap_or_default();
                let restricted = safe_formats.contains(&format)
                    || p.get("type").and_then(Value::as_str) == Some("integer")
                    || p.get("pattern").is_some()
                    || c[1].eq("upid");
                if !restricted {
                    slashy.insert(c[1].to_owned());
                }
            }
        }
        assert_eq!(slashy, BTreeSet::from(["volume".to_owned()]), "{v}");
    }
}
