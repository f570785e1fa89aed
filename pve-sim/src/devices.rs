//! CPU models and PCI passthrough: the `cpu` and `hostpci[n]` config values as PVE checks them,
//! and PCI resource mappings (`/cluster/mapping/pci`): a `hostpci[n]: mapping=<id>` must name a
//! mapping with an entry for the VM's node, at config write and at start.

use std::collections::BTreeMap;

use crate::propstr::{get, parse};

/// Built-in CPU models of PVE 8 (`PVE::QemuServer::CPUConfig`); custom ones are `custom-<id>`.
const CPU_MODELS: &[&str] = &[
    "486",
    "athlon",
    "core2duo",
    "coreduo",
    "kvm32",
    "kvm64",
    "pentium",
    "pentium2",
    "pentium3",
    "phenom",
    "qemu32",
    "qemu64",
    "Conroe",
    "Penryn",
    "Nehalem",
    "Nehalem-IBRS",
    "Westmere",
    "Westmere-IBRS",
    "SandyBridge",
    "SandyBridge-IBRS",
    "IvyBridge",
    "IvyBridge-IBRS",
    "Haswell",
    "Haswell-IBRS",
    "Haswell-noTSX",
    "Haswell-noTSX-IBRS",
    "Broadwell",
    "Broadwell-IBRS",
    "Broadwell-noTSX",
    "Broadwell-noTSX-IBRS",
    "Skylake-Client",
    "Skylake-Client-IBRS",
    "Skylake-Client-noTSX-IBRS",
    "Skylake-Client-v4",
    "Skylake-Server",
    "Skylake-Server-IBRS",
    "Skylake-Server-noTSX-IBRS",
    "Skylake-Server-v4",
    "Skylake-Server-v5",
    "Cascadelake-Server",
    "Cascadelake-Server-noTSX",
    "Cascadelake-Server-v2",
    "Cascadelake-Server-v4",
    "Cascadelake-Server-v5",
    "Cooperlake",
    "Cooperlake-v2",
    "Icelake-Client",
    "Icelake-Client-noTSX",
    "Icelake-Server",
    "Icelake-Server-noTSX",
    "Icelake-Server-v3",
    "Icelake-Server-v4",
    "Icelake-Server-v5",
    "Icelake-Server-v6",
    "SapphireRapids",
    "SapphireRapids-v2",
    "GraniteRapids",
    "KnightsMill",
    "Opteron_G1",
    "Opteron_G2",
    "Opteron_G3",
    "Opteron_G4",
    "Opteron_G5",
    "EPYC",
    "EPYC-IBPB",
    "EPYC-v3",
    "EPYC-v4",
    "EPYC-Rome",
    "EPYC-Rome-v2",
    "EPYC-Rome-v3",
    "EPYC-Rome-v4",
    "EPYC-Milan",
    "EPYC-Milan-v2",
    "EPYC-Genoa",
    "x86-64-v2",
    "x86-64-v2-AES",
    "x86-64-v3",
    "x86-64-v4",
    "host",
    "max",
];

/// CPU flags a VM's `cpu` option may set (`supported_cpu_flags`).
const VM_CPU_FLAGS: &[&str] = &[
    "pcid",
    "spec-ctrl",
    "ibpb",
    "ssbd",
    "virt-ssbd",
    "amd-ssbd",
    "amd-no-ssb",
    "pdpe1gb",
    "md-clear",
    "hv-tlbflush",
    "hv-evmcs",
    "aes",
];

fn sub_err(key: &str, sub: &str, msg: &str) -> String {
    format!("invalid format - format error\n{key}.{sub}: {msg}\n")
}

/// `validate_vm_cpu_conf` on a parsed `cpu` value: a known (or `custom-<id>`) model, VM flags.
pub fn check_cpu(props: &crate::formats::Parsed) -> Result<(), String> {
    let Some(v) = props.get("cputype") else {
        return Err(sub_err(
            "cpu",
            "cputype",
            "property is missing and it is not optional",
        ));
    };
    let custom = v
        .strip_prefix("custom-")
        .is_some_and(|n| crate::formats::pattern_matches(r"[a-zA-Z][a-zA-Z0-9_\-]*", n));
    if !custom && !CPU_MODELS.contains(&v.as_str()) {
        return Err(sub_err(
            "cpu",
            "cputype",
            &format!("Built-in cputype '{v}' is not defined (missing 'custom-' prefix?)"),
        ));
    }
    if let Some(flags) = props.get("flags") {
        let ok = !flags.is_empty()
            && flags.split(';').all(|f| {
                f.strip_prefix(['+', '-'])
                    .is_some_and(|name| VM_CPU_FLAGS.contains(&name))
            });
        if !ok {
            return Err(sub_err("cpu", "flags", "value does not match the regex pattern"));
        }
    }
    if let Some(m) = props.get("reported-model")
        && !CPU_MODELS.contains(&m.as_str())
    {
        return Err(sub_err(
            "cpu",
            "reported-model",
            &format!(
                "value '{m}' does not have a value in the enumeration '{}'",
                CPU_MODELS.join(", ")
            ),
        ));
    }
    Ok(())
}

/// Checks a parsed `hostpci[n]` value: exactly one of `host` / `mapping`.
pub fn check_hostpci(key: &str, props: &crate::formats::Parsed) -> Result<(), String> {
    match (props.get("host"), props.get("mapping")) {
        (None, None) => Err(format!("{key}: either 'host' or 'mapping' must be set.")),
        (Some(_), Some(_)) => Err(format!(
            "{key}: 'host' and 'mapping' cannot be set at the same time"
        )),
        _ => Ok(()),
    }
}

/// The mapping ids named by the `hostpci[n]` values among `entries`.
pub fn mappings_in<'a>(entries: impl IntoIterator<Item = (&'a String, &'a String)>) -> Vec<String> {
    entries
        .into_iter()
        .filter(|(k, _)| crate::propstr::family(k) == Some("hostpci"))
        .filter_map(|(_, v)| {
            parse(v, Some("host"))
                .ok()
                .and_then(|p| get(&p, "mapping").map(str::to_owned))
        })
        .collect()
}

/// The first of `wanted` that `mappings` (id → `map` entries) has no entry for on `node`, as
/// PVE's error.
pub fn missing_on_node(
    mappings: &BTreeMap<String, Vec<String>>,
    wanted: &[String],
    node: &str,
) -> Option<String> {
    let needle = format!("node={node}");
    wanted.iter().find_map(|id| match mappings.get(id) {
        None => Some(format!("PCI mapping '{id}' not found")),
        Some(map) if !map.iter().any(|e| e.split(',').any(|p| p == needle)) => Some(format!(
            "PCI device mapping not found for '{id}' on node '{node}'"
        )),
        Some(_) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(v: &str) -> Result<(), String> {
        crate::config_keys::check_config_value("cpu", v, crate::version::PveVersion::V8_4)
    }

    fn hostpci(v: &str) -> Result<(), String> {
        crate::config_keys::check_config_value("hostpci0", v, crate::version::PveVersion::V8_4)
    }

    #[test]
    fn cpu_values() {
        assert!(cpu("host").is_ok());
        assert!(cpu("cputype=x86-64-v2-AES,flags=+aes;-pcid").is_ok());
        assert!(cpu("custom-mine,hidden=1").is_ok());
        assert!(cpu("nosuch").unwrap_err().contains("missing 'custom-' prefix"));
        assert!(cpu("host,flags=+avx512").unwrap_err().contains("cpu.flags"));
        assert!(cpu("host,flags=aes").is_err());
        assert!(cpu("host,bogus=1").is_err());
    }

    #[test]
    fn hostpci_values() {
        assert!(hostpci("mapping=gpu,pcie=1,x-vga=1").is_ok());
        assert!(hostpci("0000:01:00.0").is_ok());
        assert!(
            hostpci("pcie=1")
                .unwrap_err()
                .contains("either 'host' or 'mapping'")
        );
        assert!(hostpci("0000:01:00.0,mapping=gpu").is_err());
        // `parse_boolean` takes yes/no/on/off/true/false in property strings.
        assert!(hostpci("mapping=gpu,pcie=yes").is_ok());
        assert!(hostpci("mapping=gpu,pcie=maybe").is_err());
    }

    #[test]
    fn mappings_must_have_the_node() {
        let mut m = BTreeMap::new();
        m.insert(
            "gpu".to_owned(),
            vec!["node=pve2,path=0000:01:00.0,id=10de:1eb8".to_owned()],
        );
        let cfg: BTreeMap<String, String> = [
            ("hostpci0".to_owned(), "mapping=gpu,pcie=1".to_owned()),
            ("net0".to_owned(), "virtio".to_owned()),
        ]
        .into();
        let wanted = mappings_in(&cfg);
        assert_eq!(wanted, ["gpu"]);
        assert_eq!(missing_on_node(&m, &wanted, "pve2"), None);
        assert!(
            missing_on_node(&m, &wanted, "pve1")
                .unwrap()
                .contains("node 'pve1'")
        );
        assert!(
            missing_on_node(&m, &["tpu".to_owned()], "pve2")
                .unwrap()
                .contains("not found")
        );
    }
}
