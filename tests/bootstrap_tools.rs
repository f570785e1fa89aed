//! The bootstrap outputs judged by real tools: isoinfo/xorriso/blkid read the NoCloud ISO, cloud-init's own
//! NoCloud datasource and `net-convert` read the rendered files. Each test skips with one line when its tool
//! is missing (Debian packages: cloud-init, xorriso, genisoimage, util-linux).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod bootstrap_common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use bootstrap_common::*;
use capmox::bootstrap::{NetworkConfigFormat, NoCloudFiles, build_nocloud_iso, render_nocloud};

/// The system Python that has cloud-init's modules (pyenv shims may shadow it).
const SYSTEM_PYTHON: &str = "/usr/bin/python3";

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool} >/dev/null 2>&1")])
        .status()
        .is_ok_and(|s| s.success())
}

fn have_cloudinit_python() -> bool {
    Command::new(SYSTEM_PYTHON)
        .args(["-c", "import cloudinit"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn golden_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/bootstrap")
        .join(name)
}

fn sample_files(vendor: &[u8]) -> NoCloudFiles {
    let mut files = render_nocloud(&input(single_v4()), NetworkConfigFormat::CapmoxV2).unwrap();
    files.vendor_data = vendor.to_vec();
    files
}

fn write_iso(dir: &Path, files: &NoCloudFiles) -> PathBuf {
    let path = dir.join("user-data-104.iso");
    std::fs::write(&path, build_nocloud_iso(files).unwrap()).unwrap();
    path
}

#[test]
fn isoinfo_sees_cidata_joliet_rock_ridge_and_exact_files() {
    if !have("isoinfo") {
        eprintln!("skipped: isoinfo not found (apt-get install genisoimage)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let files = sample_files(b"");
    let iso = write_iso(dir.path(), &files);

    let info = run(Command::new("isoinfo").arg("-d").arg("-i").arg(&iso));
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(info.contains("Volume id: cidata"), "{info}");
    assert!(info.contains("Logical block size is: 2048"), "{info}");
    assert!(info.contains("Joliet with UCS level"), "{info}");
    assert!(info.contains("Rock Ridge signatures"), "{info}");

    for (name, want) in [
        ("user-data", &files.user_data),
        ("meta-data", &files.meta_data),
        ("network-config", &files.network_config),
    ] {
        for ext in ["-J", "-R"] {
            let got = run(Command::new("isoinfo")
                .arg(ext)
                .arg("-x")
                .arg(format!("/{name}"))
                .arg("-i")
                .arg(&iso));
            assert_eq!(&got.stdout, want, "{name} via isoinfo {ext}");
        }
    }
    let listing = run(Command::new("isoinfo").args(["-J", "-f", "-i"]).arg(&iso));
    let listing = String::from_utf8_lossy(&listing.stdout);
    assert!(!listing.contains("vendor-data"), "{listing}");

    let with_vendor = write_iso(dir.path(), &sample_files(b"#cloud-config\n{}\n"));
    let listing = run(Command::new("isoinfo").args(["-J", "-f", "-i"]).arg(&with_vendor));
    assert!(String::from_utf8_lossy(&listing.stdout).contains("/vendor-data"));
}

#[test]
fn xorriso_extracts_exact_bytes() {
    if !have("xorriso") {
        eprintln!("skipped: xorriso not found (apt-get install xorriso)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let files = sample_files(b"vendor\n");
    let iso = write_iso(dir.path(), &files);
    let out = dir.path().join("out");
    run(Command::new("xorriso")
        .args(["-osirrox", "on", "-indev"])
        .arg(&iso)
        .args(["-extract", "/"])
        .arg(&out));
    assert_eq!(std::fs::read(out.join("user-data")).unwrap(), files.user_data);
    assert_eq!(std::fs::read(out.join("meta-data")).unwrap(), files.meta_data);
    assert_eq!(
        std::fs::read(out.join("network-config")).unwrap(),
        files.network_config
    );
    assert_eq!(std::fs::read(out.join("vendor-data")).unwrap(), files.vendor_data);
}

#[test]
fn large_files_span_blocks_and_images_are_deterministic() {
    let mut files = sample_files(b"");
    files.user_data = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let a = build_nocloud_iso(&files).unwrap();
    assert_eq!(a, build_nocloud_iso(&files).unwrap(), "same files, same image");
    if !have("xorriso") {
        eprintln!("skipped: xorriso not found (apt-get install xorriso)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let iso = dir.path().join("big.iso");
    std::fs::write(&iso, &a).unwrap();
    let out = dir.path().join("out");
    run(Command::new("xorriso")
        .args(["-osirrox", "on", "-indev"])
        .arg(&iso)
        .args(["-extract", "/"])
        .arg(&out));
    assert_eq!(std::fs::read(out.join("user-data")).unwrap(), files.user_data);
}

#[test]
fn blkid_reports_label_cidata() {
    if !have("blkid") {
        eprintln!("skipped: blkid not found (apt-get install util-linux)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let iso = write_iso(dir.path(), &sample_files(b""));
    let out = run(Command::new("blkid").args(["-p", "-o", "export"]).arg(&iso));
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.lines().any(|l| l == "LABEL=cidata"), "{out}");
    assert!(out.lines().any(|l| l == "TYPE=iso9660"), "{out}");
}

/// Reads a NoCloud seed directory with cloud-init's own datasource; returns its JSON view.
fn cloud_init_read_seed(files: &NoCloudFiles) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let seed = dir.path().join("cloud/seed/nocloud");
    std::fs::create_dir_all(&seed).unwrap();
    std::fs::create_dir_all(dir.path().join("run")).unwrap();
    std::fs::write(seed.join("user-data"), &files.user_data).unwrap();
    std::fs::write(seed.join("meta-data"), &files.meta_data).unwrap();
    std::fs::write(seed.join("network-config"), &files.network_config).unwrap();
    let script = r#"
import json, sys
from cloudinit import helpers
from cloudinit.sources import DataSourceNoCloud as ds
paths = helpers.Paths({'cloud_dir': sys.argv[1] + '/cloud', 'run_dir': sys.argv[1] + '/run'})
d = ds.DataSourceNoCloud(sys_cfg={}, distro=None, paths=paths)
assert d.get_data(), 'NoCloud found no data'
nc = d.network_config
if isinstance(nc, dict) and 'network' in nc:
    nc = nc['network']
print(json.dumps({'metadata': d.metadata, 'network': nc, 'userdata': d.userdata_raw.decode()}))
"#;
    let out = run(Command::new(SYSTEM_PYTHON).args(["-c", script]).arg(dir.path()));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn cloud_init_nocloud_reads_capmox_and_bare_network_config() {
    if !have_cloudinit_python() {
        eprintln!("skipped: cloud-init python modules not found (apt-get install cloud-init)");
        return;
    }
    for format in [NetworkConfigFormat::CapmoxV2, NetworkConfigFormat::NetplanV2Bare] {
        let mut i = input(single_v4());
        i.provider_id_injection = true;
        let files = render_nocloud(&i, format).unwrap();
        let v = cloud_init_read_seed(&files);
        assert_eq!(v["metadata"]["instance-id"], UUID);
        assert_eq!(v["metadata"]["provider-id"], format!("proxmox://{UUID}"));
        assert_eq!(v["metadata"]["local-hostname"], "m1");
        assert_eq!(v["userdata"].as_str().unwrap().as_bytes(), &i.bootstrap.value[..]);
        let eth0 = &v["network"]["ethernets"]["eth0"];
        assert_eq!(v["network"]["version"], 2, "{format:?}");
        assert_eq!(eth0["match"]["macaddress"], MAC0);
        assert_eq!(eth0["addresses"][0], "10.10.10.12/24");
        assert_eq!(eth0["routes"][0]["via"], "10.10.10.1");
        assert_eq!(eth0["routes"][0]["metric"], 100);
        assert_eq!(eth0["nameservers"]["addresses"][1], "8.8.4.4");
    }
}

fn net_convert(src: &Path, distro: &str, output: &str) -> Vec<(String, String)> {
    let out = tempfile::tempdir().unwrap();
    run(Command::new("cloud-init")
        .args(["devel", "net-convert", "-p"])
        .arg(src)
        .args(["-k", "yaml", "-d"])
        .arg(out.path())
        .args(["-D", distro, "-O", output]));
    let mut files = Vec::new();
    let mut stack = vec![out.path().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                files.push((name, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn cloud_init_net_convert_renders_networkd() {
    if !have("cloud-init") {
        eprintln!("skipped: cloud-init not found (apt-get install cloud-init)");
        return;
    }
    let cases: [(&str, &[&[&str]]); 6] = [
        (
            "network-config-single-v4.yaml",
            &[&[
                "MACAddress=BC:24:11:5B:22:C2",
                "Address=10.10.10.12/24",
                "Gateway=10.10.10.1",
                "DNS=8.8.8.8 8.8.4.4",
            ]],
        ),
        (
            "network-config-dual-stack.yaml",
            &[&[
                "Address=10.10.10.12/24",
                "Address=2001:db8::12/64",
                "Gateway=10.10.10.1",
                "Gateway=2001:db8::1",
            ]],
        ),
        (
            "network-config-multi-nic.yaml",
            &[
                &[
                    "MACAddress=BC:24:11:5B:22:C2",
                    "Address=10.10.10.12/24",
                    "DNS=8.8.8.8",
                ],
                &[
                    "MACAddress=BC:24:11:BF:A3:60",
                    "Address=10.20.0.7/24",
                    "Address=10.30.0.7/16",
                    "DNS=10.20.0.53",
                ],
            ],
        ),
        (
            "network-config-routes.yaml",
            &[
                &["Gateway=10.10.10.1"],
                &[
                    "Destination=172.16.24.1/24",
                    "Destination=2002::/64",
                    "Destination=192.168.5.5/32",
                ],
            ],
        ),
        (
            "network-config-link-mtu.yaml",
            &[&["Address=10.10.10.12/24", "MTUBytes=9000"]],
        ),
        (
            "network-config-talos.yaml",
            &[&["Address=10.10.10.12/24", "Address=2001:db8::12/64"]],
        ),
    ];
    for (golden, per_nic) in cases {
        let files = net_convert(&golden_file(golden), "debian", "networkd");
        assert_eq!(files.len(), per_nic.len(), "{golden}: {files:?}");
        for ((name, text), wants) in files.iter().zip(per_nic) {
            for want in *wants {
                let found = text.lines().any(|l| l == *want)
                    || (want.starts_with("DNS=")
                        && text
                            .lines()
                            .filter(|l| l.starts_with("DNS="))
                            .map(|l| &l[4..])
                            .collect::<Vec<_>>()
                            .join(" ")
                            == want[4..]);
                assert!(found, "{golden}: {name} lacks {want}:\n{text}");
            }
        }
    }
}

#[test]
fn cloud_init_net_convert_keeps_vrfs_for_netplan() {
    if !have("cloud-init") {
        eprintln!("skipped: cloud-init not found (apt-get install cloud-init)");
        return;
    }
    // cloud-init's own networkd renderer has no VRFs; netplan distros pass the v2 document through.
    let files = net_convert(&golden_file("network-config-vrfs.yaml"), "ubuntu", "netplan");
    assert_eq!(files.len(), 1, "{files:?}");
    let text = &files[0].1;
    for want in [
        "vrfs:",
        "vrf-blue:",
        "table: 500",
        "- eth1",
        "priority: 999",
        "vrf-red:",
    ] {
        assert!(text.contains(want), "netplan output lacks {want}:\n{text}");
    }
}

#[test]
fn cloud_init_schema_accepts_passthrough_user_data() {
    if !have("cloud-init") {
        eprintln!("skipped: cloud-init not found (apt-get install cloud-init)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut i = input(single_v4());
    i.bootstrap.value = b"#cloud-config\nhostname: m1\nruncmd:\n  - [sh, -c, 'echo ok']\n".to_vec();
    let files = render_nocloud(&i, NetworkConfigFormat::CapmoxV2).unwrap();
    let path = dir.path().join("user-data");
    std::fs::write(&path, &files.user_data).unwrap();
    let out = run(Command::new("cloud-init").args(["schema", "-c"]).arg(&path));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Valid cloud-config"));
}

/// Talos' older nocloud decoder reads `version` from the document's top level; its route parser needs
/// `to` (a prefix) and `via` on every route. Checked with PyYAML (a cloud-init dependency).
#[test]
fn talos_shape_has_top_level_version_two() {
    if !have_cloudinit_python() {
        eprintln!("skipped: system python with PyYAML not found (apt-get install cloud-init)");
        return;
    }
    let script = r#"
import ipaddress, json, sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
routes_ok = all('to' in r and 'via' in r and ipaddress.ip_network(r['to'], strict=False) is not None
                for eth in (doc.get('ethernets') or {}).values() for r in eth.get('routes', []))
print(json.dumps({'keys': sorted(doc), 'version': doc.get('version'), 'routes_ok': routes_ok}))
"#;
    let check = |golden: &str| -> serde_json::Value {
        let out = run(Command::new(SYSTEM_PYTHON)
            .args(["-c", script])
            .arg(golden_file(golden)));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let bare = check("network-config-talos.yaml");
    assert_eq!(bare["version"], 2, "{bare}");
    assert_eq!(bare["routes_ok"], true, "{bare}");
    // capmox's wrapped form: no top-level version, which old Talos reads as version 0.
    let wrapped = check("network-config-dual-stack.yaml");
    assert_eq!(wrapped["keys"], serde_json::json!(["network"]));
    assert!(wrapped["version"].is_null());
}

/// A DHCPv4 NIC beside a SLAAC NIC with a static address: both network-config formats are read by
/// cloud-init's NoCloud datasource and rendered by `net-convert` into DHCP networkd units and a
/// netplan document that keeps `accept-ra` (issue 14 item 4).
#[test]
fn cloud_init_renders_dhcp_and_slaac_nics() {
    if !have("cloud-init") || !have_cloudinit_python() {
        eprintln!("skipped: cloud-init not found (apt-get install cloud-init)");
        return;
    }
    let net = network(
        serde_json::json!({"networkDevices": [
            {"name": "net0", "bridge": "vmbr0", "defaultIPv4": true, "defaultIPv6": true, "ipv4": "dhcp", "ipv6": "dhcp"},
            {"name": "net1", "bridge": "vmbr1", "ipv6": "slaac", "ipPoolRef": [{"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "extra"}]}
        ]}),
        vec![
            ("net0", MAC0, vec![]),
            (
                "net1",
                "BC:24:11:BF:A3:60",
                vec![addr("m1-net1-00-inet", "10.20.0.7", 24, None, None, false)],
            ),
        ],
        &["10.0.0.53"],
    );
    for format in [NetworkConfigFormat::CapmoxV2, NetworkConfigFormat::NetplanV2Bare] {
        let files = render_nocloud(&input(net.clone()), format).unwrap();
        let v = cloud_init_read_seed(&files);
        let eth0 = &v["network"]["ethernets"]["eth0"];
        let eth1 = &v["network"]["ethernets"]["eth1"];
        assert_eq!(eth0["dhcp4"], true, "{format:?}: {v}");
        assert_eq!(eth0["dhcp6"], true, "{format:?}: {v}");
        assert!(eth0.get("addresses").is_none(), "{format:?}: {v}");
        assert_eq!(eth1["dhcp4"], false, "{format:?}: {v}");
        assert_eq!(eth1["accept-ra"], true, "{format:?}: {v}");
        assert_eq!(eth1["addresses"][0], "10.20.0.7/24");

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("network-config");
        std::fs::write(&path, &files.network_config).unwrap();
        let units = net_convert(&path, "debian", "networkd");
        assert_eq!(units.len(), 2, "{units:?}");
        let all: String = units.iter().map(|(_, t)| t.as_str()).collect();
        assert!(all.lines().any(|l| l == "DHCP=yes"), "{format:?}:\n{all}");
        assert!(
            all.lines().any(|l| l == "Address=10.20.0.7/24"),
            "{format:?}:\n{all}"
        );
        // cloud-init's own networkd renderer (22.4) drops `accept-ra`; netplan distros keep it.
        let netplan = net_convert(&path, "ubuntu", "netplan");
        let text = &netplan[0].1;
        assert!(text.contains("accept-ra: true"), "{format:?}:\n{text}");
        assert!(text.contains("dhcp4: true"), "{format:?}:\n{text}");
    }
}
