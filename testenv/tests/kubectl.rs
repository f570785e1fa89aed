//! kubectl against the control plane: `get`, `apply` (client- and server-side), `get -o json`,
//! `delete`, for core kinds and custom resources.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use testenv::TestEnv;

fn kubectl_present() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs kubectl (blocking) with the env's kubeconfig; returns (success, stdout, stderr).
fn kubectl(env: &TestEnv, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
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

fn run(env: &TestEnv, args: &[&str], stdin: Option<&str>) -> String {
    let (ok, out, err) = tokio::task::block_in_place(|| kubectl(env, args, stdin));
    assert!(ok, "kubectl {args:?} failed: {out}{err}");
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_core_kinds() {
    if !kubectl_present() {
        eprintln!("skipped: kubectl not found on PATH");
        return;
    }
    let env = TestEnv::start().await.unwrap();
    assert!(run(&env, &["get", "ns"], None).contains("kube-system"));
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-kubectl\n  namespace: default\ndata:\n  a: \"1\"\n";
    assert!(run(&env, &["apply", "-f", "-"], Some(cm)).contains("created"));
    let v: serde_json::Value = serde_json::from_str(&run(
        &env,
        &["get", "configmap", "from-kubectl", "-o", "json"],
        None,
    ))
    .unwrap();
    assert_eq!(v["data"]["a"], "1");
    assert!(run(&env, &["apply", "-f", "-"], Some(&cm.replace("\"1\"", "\"2\""))).contains("configured"));
    run(
        &env,
        &["apply", "--server-side", "-f", "-"],
        Some(&cm.replace("\"1\"", "\"3\"")),
    );
    let v: serde_json::Value =
        serde_json::from_str(&run(&env, &["get", "cm", "from-kubectl", "-o", "json"], None)).unwrap();
    assert_eq!(v["data"]["a"], "3");
    run(&env, &["label", "cm", "from-kubectl", "x=y"], None);
    assert!(run(&env, &["get", "cm", "-l", "x=y", "-o", "name"], None).contains("configmap/from-kubectl"));
    run(&env, &["delete", "configmap", "from-kubectl"], None);
    // Typed generators send protobuf bodies.
    run(&env, &["create", "namespace", "gen"], None);
    assert!(run(&env, &["describe", "namespace", "gen"], None).contains("Active"));
    run(
        &env,
        &["-n", "gen", "create", "configmap", "lit", "--from-literal=k=v"],
        None,
    );
    run(
        &env,
        &[
            "-n",
            "gen",
            "create",
            "secret",
            "generic",
            "sec",
            "--from-literal=p=q",
        ],
        None,
    );
    let v: serde_json::Value =
        serde_json::from_str(&run(&env, &["-n", "gen", "get", "cm", "lit", "-o", "json"], None)).unwrap();
    assert_eq!(v["data"]["k"], "v");
    let v: serde_json::Value = serde_json::from_str(&run(
        &env,
        &["-n", "gen", "get", "secret", "sec", "-o", "json"],
        None,
    ))
    .unwrap();
    assert_eq!(v["data"]["p"], "cQ==");
    let (ok, _, err) = tokio::task::block_in_place(|| kubectl(&env, &["get", "cm", "from-kubectl"], None));
    assert!(!ok && err.contains("NotFound"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_custom_resources() {
    if !kubectl_present() {
        eprintln!("skipped: kubectl not found on PATH");
        return;
    }
    let env = TestEnv::start().await.unwrap();
    let crd = serde_json::to_string(&common::widget_crd()).unwrap();
    run(&env, &["apply", "-f", "-"], Some(&crd));
    run(
        &env,
        &[
            "wait",
            "--for=condition=Established",
            &format!("crd/widgets.{}", common::GROUP),
            "--timeout=60s",
        ],
        None,
    );
    let w = format!(
        "apiVersion: {}/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 2\n",
        common::GROUP
    );
    common::wait_for(60, "kubectl apply of a Widget", || {
        let ok = tokio::task::block_in_place(|| kubectl(&env, &["apply", "-f", "-"], Some(&w))).0;
        async move { ok.then_some(()) }
    })
    .await;
    let v: serde_json::Value =
        serde_json::from_str(&run(&env, &["get", "widgets", "w1", "-o", "json"], None)).unwrap();
    assert_eq!(v["spec"]["color"], "red");
    let table = run(&env, &["get", "wd"], None);
    assert!(table.contains("w1"), "{table}");
    // With additionalPrinterColumns the table is Name plus those columns: no automatic AGE.
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "SIZE", "PHASE"], "{table}");
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..2], ["w1", "2"], "{table}");
    let (ok, _, err) = tokio::task::block_in_place(|| {
        kubectl(
            &env,
            &["apply", "-f", "-"],
            Some(&w.replace("size: 2", "size: 70")),
        )
    });
    assert!(!ok && err.contains("Invalid"), "{err}");
    let (ok, _, err) = tokio::task::block_in_place(|| {
        kubectl(&env, &["apply", "-f", "-"], Some(&format!("{w}  bogus: 1\n")))
    });
    assert!(!ok && err.contains("unknown field \"spec.bogus\""), "{err}");
    run(&env, &["delete", "widget", "w1"], None);
    // Without printer columns: Name and Age.
    let crd = serde_json::to_string(&common::gadget_crd()).unwrap();
    run(&env, &["apply", "-f", "-"], Some(&crd));
    run(
        &env,
        &[
            "wait",
            "--for=condition=Established",
            &format!("crd/gadgets.{}", common::GROUP),
            "--timeout=60s",
        ],
        None,
    );
    let g = format!(
        "apiVersion: {}/v1\nkind: Gadget\nmetadata:\n  name: g1\nspec:\n  a: 1\n",
        common::GROUP
    );
    common::wait_for(60, "kubectl apply of a Gadget", || {
        let ok = tokio::task::block_in_place(|| kubectl(&env, &["apply", "-f", "-"], Some(&g))).0;
        async move { ok.then_some(()) }
    })
    .await;
    let table = run(&env, &["get", "gadgets"], None);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "AGE"], "{table}");
}
