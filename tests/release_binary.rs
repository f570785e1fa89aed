//! The `capmox` binary as a user meets it: `--version`, `--help`, `capmox convert` on standard
//! input and as clusterctl's `capmox-convert` plugin (the test build, cheap), and the release
//! build itself — LTO and stripped, as `make release-binary` and the Dockerfile build it — which
//! takes minutes and so only runs on request (`make release-binary-test`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const V1ALPHA1: &str = "apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1\nkind: ProxmoxMachineTemplate\nmetadata:\n  name: \"${CLUSTER_NAME}-worker\" # the workers\nspec:\n  template:\n    spec:\n      sourceNode: pve\n      templateID: ${TEMPLATE_VMID}\n      network:\n        default:\n          bridge: vmbr0\n";

fn run(bin: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let mut child = Command::new(bin)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    let mut input = child.stdin.take().unwrap();
    if let Some(s) = stdin {
        input.write_all(s.as_bytes()).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What every build of the binary must do.
fn check_binary(bin: &Path) {
    let (ok, out, err) = run(bin, &["--version"], None);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), format!("capmox {}", env!("CARGO_PKG_VERSION")));
    let (ok, out, err) = run(bin, &["--help"], None);
    assert!(ok, "{err}");
    for flag in [
        "--leader-elect",
        "--diagnostics-address",
        "--feature-gates",
        "convert",
    ] {
        assert!(out.contains(flag), "--help lacks {flag}:\n{out}");
    }
    let (ok, out, err) = run(bin, &["convert", "--help"], None);
    assert!(ok, "{err}");
    assert!(out.contains("--filename") && out.contains("--in-place"), "{out}");
    let (ok, out, err) = run(bin, &["convert"], Some(V1ALPHA1));
    assert!(ok, "{err}");
    assert!(
        out.starts_with("apiVersion: infrastructure.cluster.x-k8s.io/v1alpha2\n"),
        "{out}"
    );
    assert!(
        out.contains("  name: \"${CLUSTER_NAME}-worker\" # the workers\n"),
        "{out}"
    );
    assert!(out.contains("      templateID: ${TEMPLATE_VMID}\n"), "{out}");
    // A bad document fails with the file and the reason.
    let (ok, _, err) = run(
        bin,
        &["convert"],
        Some(&V1ALPHA1.replace("sourceNode", "sourceNod")),
    );
    assert!(!ok);
    assert!(
        err.contains("<stdin>: document 1") && err.contains("spec.template.spec.sourceNod"),
        "{err}"
    );
    // Installed as `clusterctl-capmox-convert`, it is clusterctl's `capmox-convert` plugin.
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("clusterctl-capmox-convert");
    std::os::unix::fs::symlink(bin, &plugin).unwrap();
    let file = dir.path().join("t.yaml");
    std::fs::write(&file, V1ALPHA1).unwrap();
    let (ok, _, err) = run(&plugin, &["-f", file.to_str().unwrap(), "-i.orig"], None);
    assert!(ok, "{err}");
    assert!(std::fs::read_to_string(&file).unwrap().contains("v1alpha2"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("t.yaml.orig")).unwrap(),
        V1ALPHA1
    );
}

#[test]
fn test_build_answers_version_help_and_convert() {
    check_binary(Path::new(env!("CARGO_BIN_EXE_capmox")));
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"))
}

#[test]
#[ignore = "builds the release binary with LTO (minutes on two cores): make release-binary-test"]
fn release_binary_builds_starts_and_is_small() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "--locked", "--bin", "capmox"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap();
    assert!(status.success());
    let bin = target_dir().join("release/capmox");
    let size = std::fs::metadata(&bin).unwrap().len();
    eprintln!(
        "release binary {}: {size} bytes ({:.1} MiB)",
        bin.display(),
        size as f64 / 1_048_576.0
    );
    // Stripped: no symbol table left.
    let bytes = std::fs::read(&bin).unwrap();
    assert!(
        !bytes.windows(7).any(|w| w == b".symtab"),
        "the release binary is not stripped"
    );
    assert!(size < 40 * 1024 * 1024, "{size} bytes");
    check_binary(&bin);
}
