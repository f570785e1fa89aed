//! `capmox vm start|stop|restart|pause|unpause|console` against the test control plane (in-tree or
//! real kube-apiserver): each verb edits the ProxmoxVirtualMachine as its controller reads it; a
//! missing CRD and a missing object get clear messages; and the binary, linked as `kubectl-pvm`,
//! works as the kubectl plugin `kubectl pvm …` (judged by the real kubectl when it is installed).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use capmox::vmctl::{VmAction, VmArgs, run};
use capmox_api::vm::{POWER_REQUEST_ANNOTATION, ProxmoxVirtualMachine, RESTARTED_AT_ANNOTATION, RunStrategy};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

const NS: &str = "cli";

fn args(action: VmAction) -> VmArgs {
    VmArgs {
        action,
        namespace: Some(NS.into()),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn verbs_edit_the_object() {
    let env = testenv::TestEnv::start().await.unwrap();
    let c = env.client();
    let web = || VmAction::Start { name: "web".into() };
    // Without the CRD.
    let e = run(&args(web()), c.clone(), "default").await.unwrap_err();
    assert!(
        e.to_string().contains(
            "the ProxmoxVirtualMachine kind (proxmoxvirtualmachines.vm.capmox-rs.io) is not installed"
        ),
        "{e}"
    );
    env.install_crds(vec![capmox_api::crd::proxmox_virtual_machines().unwrap()])
        .await
        .unwrap();
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(c.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    // Without the object.
    let e = run(&args(web()), c.clone(), "default").await.unwrap_err();
    assert_eq!(e.to_string(), "ProxmoxVirtualMachine cli/web not found");
    let api: Api<ProxmoxVirtualMachine> = Api::namespaced(c.clone(), NS);
    let obj: ProxmoxVirtualMachine = serde_json::from_value(json!({
        "apiVersion": capmox_api::vm::API_VERSION, "kind": capmox_api::vm::KIND,
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"templateID": 100, "sourceNode": "pve1", "runStrategy": "Halted"}
    }))
    .unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
    let get = || async { api.get("web").await.unwrap() };

    let out = run(&args(web()), c.clone(), "default").await.unwrap();
    assert_eq!(out, "cli/web will be started (runStrategy: Always)");
    assert_eq!(get().await.spec.run_strategy(), RunStrategy::Always);
    let stop = || VmAction::Stop { name: "web".into() };
    run(&args(stop()), c.clone(), "default").await.unwrap();
    assert_eq!(get().await.spec.run_strategy(), RunStrategy::Halted);
    run(
        &args(VmAction::Restart { name: "web".into() }),
        c.clone(),
        "default",
    )
    .await
    .unwrap();
    let restarted = get().await.metadata.annotations.unwrap()[RESTARTED_AT_ANNOTATION].clone();
    assert!(restarted.ends_with('Z'), "an RFC 3339 time: {restarted}");
    run(
        &args(VmAction::Pause { name: "web".into() }),
        c.clone(),
        "default",
    )
    .await
    .unwrap();
    assert_eq!(get().await.spec.paused, Some(true));
    run(
        &args(VmAction::Unpause { name: "web".into() }),
        c.clone(),
        "default",
    )
    .await
    .unwrap();
    assert_eq!(get().await.spec.paused, Some(false));
    // Manual: one-shot requests.
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"runStrategy": "Manual"}})),
    )
    .await
    .unwrap();
    run(&args(web()), c.clone(), "default").await.unwrap();
    let request = get().await.metadata.annotations.unwrap()[POWER_REQUEST_ANNOTATION].clone();
    assert!(request.starts_with("start@"), "{request}");
    // The console: none before the VM exists, then the status's URL.
    let console = || VmAction::Console { name: "web".into() };
    let e = run(&args(console()), c.clone(), "default").await.unwrap_err();
    assert!(e.to_string().contains("has no console URL yet"), "{e}");
    let url = "https://pve.example:8006/?console=kvm&novnc=1&vmid=101&node=pve1";
    api.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"consoleURL": url}})),
    )
    .await
    .unwrap();
    assert_eq!(run(&args(console()), c.clone(), "default").await.unwrap(), url);

    // The binary as the kubectl plugin `kubectl pvm`.
    if std::process::Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        eprintln!("skipped the kubectl plugin check: kubectl is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_capmox"), dir.path().join("kubectl-pvm")).unwrap();
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let kubectl = |verb: &str| {
        std::process::Command::new("kubectl")
            .args(["pvm", verb, "web", "-n", NS])
            .env("PATH", &path)
            .env("KUBECONFIG", env.kubeconfig_path())
            .output()
            .unwrap()
    };
    let out = kubectl("pause");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "cli/web will be paused"
    );
    assert_eq!(get().await.spec.paused, Some(true));
    let out = kubectl("console");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), url);
    let missing = std::process::Command::new("kubectl")
        .args(["pvm", "start", "nope", "-n", NS])
        .env("PATH", &path)
        .env("KUBECONFIG", env.kubeconfig_path())
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert_eq!(
        String::from_utf8_lossy(&missing.stderr).trim(),
        "error: ProxmoxVirtualMachine cli/nope not found"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn snapshot_restore_and_clone_verbs_create_their_objects() {
    use capmox_api::vm::{ProxmoxVMClone, ProxmoxVMRestore, ProxmoxVMSnapshot};
    let env = testenv::TestEnv::start().await.unwrap();
    let c = env.client();
    let mut crds = vec![capmox_api::crd::proxmox_virtual_machines().unwrap()];
    crds.extend(capmox_api::crd::vm_operations().unwrap());
    env.install_crds(crds).await.unwrap();
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(c.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let snapshot = VmAction::Snapshot {
        name: "db".into(),
        memory: true,
        description: Some("before".into()),
    };
    let e = run(&args(snapshot.clone()), c.clone(), "default")
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "ProxmoxVirtualMachine cli/db not found");
    let obj: ProxmoxVirtualMachine = serde_json::from_value(json!({
        "apiVersion": capmox_api::vm::API_VERSION, "kind": capmox_api::vm::KIND,
        "metadata": {"name": "db", "namespace": NS},
        "spec": {"templateID": 100, "sourceNode": "pve1"}
    }))
    .unwrap();
    Api::<ProxmoxVirtualMachine>::namespaced(c.clone(), NS)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
    let out = run(&args(snapshot), c.clone(), "default").await.unwrap();
    assert!(
        out.starts_with("ProxmoxVMSnapshot cli/db-") && out.contains(" created"),
        "{out}"
    );
    let snaps = Api::<ProxmoxVMSnapshot>::namespaced(c.clone(), NS)
        .list(&Default::default())
        .await
        .unwrap();
    let snap = &snaps.items[0];
    assert_eq!(snap.spec.source.name, "db");
    assert_eq!(
        (snap.spec.include_memory, snap.spec.description.as_deref()),
        (Some(true), Some("before"))
    );
    let name = snap.metadata.name.clone().unwrap();
    let restore = VmAction::Restore {
        name: "db".into(),
        snapshot: name.clone(),
    };
    run(&args(restore), c.clone(), "default").await.unwrap();
    let restores = Api::<ProxmoxVMRestore>::namespaced(c.clone(), NS)
        .list(&Default::default())
        .await
        .unwrap();
    assert_eq!(restores.items[0].spec.snapshot_name, name);
    let clone = VmAction::Clone {
        source: "db".into(),
        target: "db2".into(),
        linked: true,
    };
    assert_eq!(
        run(&args(clone), c.clone(), "default").await.unwrap(),
        "ProxmoxVMClone cli/db2 created (kubectl get -n cli proxmoxvmclones/db2 -w)"
    );
    let clone = Api::<ProxmoxVMClone>::namespaced(c.clone(), NS)
        .get("db2")
        .await
        .unwrap();
    assert_eq!(
        (clone.spec.source.name.as_str(), clone.spec.linked),
        ("db", Some(true))
    );
}
