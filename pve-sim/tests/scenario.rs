//! Scenario files parse and drive the server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use pve_sim::{Profile, Scenario, SimConfig};

#[tokio::test]
async fn demo_scenario_parses_and_serves() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/demo.yaml");
    let mut scenario = Scenario::from_file(&path).expect("demo.yaml parses");
    assert_eq!(scenario.nodes.len(), 3);
    assert_eq!(scenario.latency.profile, Profile::Realistic);
    assert_eq!(scenario.latency.task("qmclone-linked").as_millis(), 1500);
    assert_eq!(scenario.latency.task("qmclone-full").as_millis(), 20_000);
    {
        // With the realistic profile, VMs present at start already have RRD data (status known).
        let sim = common::start(SimConfig {
            scenario: scenario.clone(),
            ..SimConfig::default()
        })
        .await;
        let r = sim.get("/cluster/resources?type=vm").await;
        assert_eq!(r.json["data"][0]["status"], "stopped", "{}", r.body);
        assert_eq!(r.json["data"][0]["template"], 1);
    }
    scenario.latency.profile = Profile::Instant;
    scenario.latency.tasks.clear();
    scenario.latency.agent_ready_ms = None;
    scenario.latency.cloud_init_done_ms = None;
    let sim = common::start(SimConfig {
        scenario,
        ..SimConfig::default()
    })
    .await;
    assert_eq!(sim.server.token_id(), "capmox@pve!capi");
    assert_eq!(sim.server.token_secret(), "6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f");
    let r = sim.get("/cluster/resources?type=vm").await;
    assert_eq!(r.json["data"].as_array().unwrap().len(), 2);
    let r = sim.get("/cluster/resources?type=storage").await;
    assert_eq!(
        r.json["data"].as_array().unwrap().len(),
        9,
        "one entry per node and storage"
    );
}

#[test]
fn invalid_scenarios_are_rejected() {
    assert!(Scenario::from_yaml("nodes: []\n").is_err());
    assert!(Scenario::from_yaml("nodes: [{name: a}]\ntemplates: [{vmid: 100, node: b, name: t}]\n").is_err());
    assert!(Scenario::from_yaml("bogus: 1\n").is_err());
    let s = Scenario::from_yaml("nodes: [{name: a}]\nstorages: [{name: local, content: iso}]\n").unwrap();
    assert_eq!(s.nodes[0].cpus, 16);
}
