//! pve-sim plays Proxmox VE 8.4 (default) or 9.1: what the version changes on the wire.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use pve_sim::{PveVersion, Scenario, SimConfig};
use serde_json::json;

#[tokio::test]
async fn version_endpoint_reports_the_release_played() {
    let sim = common::start_default().await;
    let v = sim.get("/version").await.json["data"].clone();
    assert_eq!(
        (v["release"].as_str(), v["version"].as_str()),
        (Some("8.4"), Some("8.4.1"))
    );
    let sim = common::start_version(PveVersion::V9_1).await;
    let v = sim.get("/version").await.json["data"].clone();
    assert_eq!(v["release"], "9.1");
    assert!(v["version"].as_str().unwrap().starts_with("9.1."), "{v}");
    assert!(v["repoid"].as_str().unwrap().len() >= 8, "{v}");
    let node = sim.get("/nodes/pve1/status").await.json["data"].clone();
    assert!(
        node["pveversion"]
            .as_str()
            .unwrap()
            .starts_with("pve-manager/9.1."),
        "{node}"
    );
    assert!(node["memory"]["available"].is_u64(), "{node}");
}

#[tokio::test]
async fn scenario_files_pick_the_version() {
    for (yaml, want) in [
        ("version: \"9.1\"\n", PveVersion::V9_1),
        ("version: 9.1\n", PveVersion::V9_1),
        ("version: \"8.4\"\n", PveVersion::V8_4),
        ("cluster_name: x\n", PveVersion::V8_4),
    ] {
        assert_eq!(Scenario::from_yaml(yaml).unwrap().version, want, "{yaml}");
    }
    assert!(Scenario::from_yaml("version: \"9.0\"\n").is_err());
    let sim = common::start(SimConfig {
        scenario: Scenario::from_yaml("version: \"9.1\"\n").unwrap(),
        ..SimConfig::default()
    })
    .await;
    assert_eq!(sim.get("/version").await.json["data"]["release"], "9.1");
}

/// Parameters only 9.x has: refused as unknown by 8.4, accepted by 9.1.
#[tokio::test]
async fn nine_only_parameters() {
    for version in PveVersion::ALL {
        let sim = common::start_version(version).await;
        sim.clone_vm(120, "v").await;
        let nine = version.is_9();
        let expect = |r: &common::Resp, what: &str| {
            if nine {
                assert_eq!(r.status, 200, "{version} {what}: {}", r.body);
            } else {
                assert_eq!(r.status, 400, "{version} {what}: {}", r.body);
                assert!(
                    r.body.contains("property is not defined in schema"),
                    "{what}: {}",
                    r.body
                );
            }
        };
        let r = sim
            .put(
                "/nodes/pve1/qemu/120/config",
                json!({"allow-ksm": 0, "intel-tdx": "tdx,attestation=1"}),
            )
            .await;
        expect(&r, "allow-ksm/intel-tdx");
        let r = sim
            .post(
                "/nodes/pve1/qemu/120/status/start",
                json!({"with-conntrack-state": 0}),
            )
            .await;
        expect(&r, "with-conntrack-state");
        let r = sim
            .post("/cluster/ha/resources", json!({"sid": "vm:120", "failback": 0}))
            .await;
        expect(&r, "failback");
        let r = sim.delete("/cluster/ha/resources/vm:120?purge=1").await;
        expect(&r, "purge");
        let r = sim
            .post(
                "/nodes/pve1/qemu",
                json!({"vmid": 130, "ha-managed": 1, "memory": 512}),
            )
            .await;
        expect(&r, "ha-managed");
        if nine {
            sim.wait_task(r.json["data"].as_str().unwrap()).await;
            let ha = sim.get("/cluster/ha/resources/vm:130").await;
            assert_eq!(ha.json["data"]["state"], "stopped", "{}", ha.body);
        }
        // `agent` gained `freeze-fs` (with `freeze-fs-on-backup` as its alias) in 9.x.
        let r = sim
            .put("/nodes/pve1/qemu/120/config", json!({"agent": "1,freeze-fs=0"}))
            .await;
        if nine {
            assert_eq!(r.status, 200, "{}", r.body);
        } else {
            assert_eq!(
                r.json["errors"]["agent"],
                "invalid format - invalid key in comma-separated list property: freeze-fs\n"
            );
        }
    }
}

/// 9.x return shapes: `memhost` and the pressure averages (running VMs), `memhost` in
/// `/cluster/resources`.
#[tokio::test]
async fn nine_return_shapes() {
    let sim = common::start_version(PveVersion::V9_1).await;
    sim.clone_vm(140, "shape").await;
    let st = sim
        .post_task("/nodes/pve1/qemu/140/status/start", json!({}))
        .await;
    assert_eq!(st, "OK");
    let cur = sim.get("/nodes/pve1/qemu/140/status/current").await.json["data"].clone();
    for k in [
        "memhost",
        "pressurecpusome",
        "pressureiofull",
        "pressurememorysome",
    ] {
        assert!(cur.get(k).is_some(), "{k} in {cur}");
    }
    assert_eq!(cur["running-qemu"], "10.1.2");
    let list = sim.get("/nodes/pve1/qemu").await.json["data"].clone();
    let e = list
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vmid"] == 140)
        .unwrap();
    assert!(e.get("memhost").is_some(), "{e}");
    let res = sim.get("/cluster/resources?type=vm").await.json["data"].clone();
    let e = res.as_array().unwrap().iter().find(|v| v["vmid"] == 140).unwrap();
    assert!(e.get("memhost").is_some(), "{e}");
    let sim = common::start_default().await;
    let res = sim.get("/cluster/resources?type=vm").await.json["data"].clone();
    assert!(res[0].get("memhost").is_none(), "8.4 has no memhost: {}", res[0]);
}
