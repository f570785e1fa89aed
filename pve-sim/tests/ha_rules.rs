//! HA on 9.x: rules, groups migrated to rules, `failback`, `purge`; and the groups of 8.4.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use pve_sim::{HaGroupSpec, LatencySpec, PveVersion, Scenario, SimConfig};
use serde_json::json;

async fn ha_vm(sim: &common::Sim, vmid: u32) {
    sim.clone_vm(vmid, &format!("ha{vmid}")).await;
    let r = sim
        .post("/cluster/ha/resources", json!({"sid": format!("vm:{vmid}")}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
}

#[tokio::test]
async fn rules_exist_on_9_only() {
    let sim = common::start_default().await;
    assert_eq!(sim.get("/cluster/ha/rules").await.status, 501);
    let sim = common::start_version(PveVersion::V9_1).await;
    assert_eq!(sim.get("/cluster/ha/rules").await.json["data"], json!([]));
}

#[tokio::test]
async fn node_and_resource_affinity_rules() {
    let sim = common::start_version(PveVersion::V9_1).await;
    ha_vm(&sim, 201).await;
    ha_vm(&sim, 202).await;
    let r = sim
        .post(
            "/cluster/ha/rules",
            json!({"rule": "prefer-pve1", "type": "node-affinity", "resources": "vm:201,vm:202", "nodes": "pve2,pve1:2", "strict": 1}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let rule = sim.get("/cluster/ha/rules/prefer-pve1").await.json["data"].clone();
    assert_eq!(
        (&rule["type"], &rule["nodes"], &rule["resources"], &rule["strict"]),
        (
            &json!("node-affinity"),
            &json!("pve1:2,pve2"),
            &json!("vm:201,vm:202"),
            &json!(1)
        ),
        "{rule}"
    );
    assert!(rule["digest"].is_string() && rule["order"].is_u64(), "{rule}");
    // Validation as pve-ha-manager does it.
    let cases = [
        (
            json!({"rule": "x", "type": "node-affinity", "resources": "vm:201"}),
            "missing value for required option 'nodes'",
        ),
        (
            json!({"rule": "x", "type": "node-affinity", "resources": "vm:201", "nodes": "pve1", "affinity": "positive"}),
            "unexpected property 'affinity'",
        ),
        (
            json!({"rule": "x", "type": "node-affinity", "resources": "vm:299", "nodes": "pve1"}),
            "create ha rule failed: cannot use unmanaged resource(s) vm:299.",
        ),
        (
            json!({"rule": "x", "type": "node-affinity", "resources": "vm:201", "nodes": "pve9"}),
            "create ha rule failed: cannot use non-existent node(s) pve9.",
        ),
        (
            json!({"rule": "prefer-pve1", "type": "node-affinity", "resources": "vm:201", "nodes": "pve1"}),
            "create ha rule failed: HA rule 'prefer-pve1' already defined",
        ),
        (
            json!({"rule": "x", "type": "node-affinity", "resources": "vm:201", "nodes": "pve3"}),
            "create ha rule failed: 400 Rule 'x' is invalid.\nresources: resource 'vm:201' is already used in another node affinity rule\n",
        ),
        (
            json!({"rule": "x", "type": "resource-affinity", "resources": "vm:201", "affinity": "negative"}),
            "create ha rule failed: 400 Rule 'x' is invalid.\nresources: rule is ineffective as there are less than two resources, resources are in node affinity rules with multiple priorities\n",
        ),
    ];
    for (body, want) in cases {
        let r = sim.post("/cluster/ha/rules", body.clone()).await;
        assert_eq!(r.status, 500, "{body}: {}", r.body);
        assert_eq!(
            r.json["message"].as_str().unwrap(),
            format!("{want}\n").replace("\n\n", "\n"),
            "{body}"
        );
    }
    let r = sim
        .post(
            "/cluster/ha/rules",
            json!({"rule": "x", "type": "node-affinity", "resources": "vm:201", "nodes": "pve1:x"}),
        )
        .await;
    assert_eq!(
        r.json["errors"]["nodes"],
        "invalid format - value does not look like a valid ha node\n"
    );
    // An update to one priority; then a resource-affinity rule on the same resources is feasible.
    let r = sim
        .put(
            "/cluster/ha/rules/prefer-pve1",
            json!({"type": "node-affinity", "nodes": "pve1", "delete": "strict"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = sim
        .post("/cluster/ha/rules", json!({"rule": "apart", "type": "resource-affinity", "resources": "vm:201,vm:202", "affinity": "negative"}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let list = sim
        .get("/cluster/ha/rules?resource=vm:202&type=node-affinity")
        .await
        .json["data"]
        .clone();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["nodes"], "pve1");
    assert!(list[0].get("strict").is_none(), "{list}");
    assert_eq!(sim.delete("/cluster/ha/rules/apart").await.status, 200);
    // Deleting a resource (`purge` defaults to 1) takes it out of rules and drops empty ones.
    assert_eq!(sim.delete("/cluster/ha/resources/vm:201").await.status, 200);
    let rule = sim.get("/cluster/ha/rules/prefer-pve1").await.json["data"].clone();
    assert_eq!(rule["resources"], "vm:202");
    assert_eq!(
        sim.delete("/cluster/ha/resources/vm:202?purge=0").await.status,
        200
    );
    assert_eq!(
        sim.get("/cluster/ha/rules/prefer-pve1").await.json["data"]["resources"],
        "vm:202"
    );
    ha_vm(&sim, 203).await;
    let r = sim
        .put(
            "/cluster/ha/rules/prefer-pve1",
            json!({"type": "node-affinity", "resources": "vm:203"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(sim.delete("/cluster/ha/resources/vm:203").await.status, 200);
    assert_eq!(sim.get("/cluster/ha/rules").await.json["data"], json!([]));
}

/// A 9.x cluster without groups counts as migrated: the group endpoints refuse, and so does a
/// resource naming a group.
#[tokio::test]
async fn groups_once_migrated() {
    let sim = common::start_version(PveVersion::V9_1).await;
    sim.clone_vm(210, "g").await;
    let r = sim.get("/cluster/ha/groups").await;
    assert_eq!(
        r.json["message"],
        "cannot index groups: ha groups have been migrated to rules\n"
    );
    let r = sim
        .post("/cluster/ha/groups", json!({"group": "prod", "nodes": "pve1"}))
        .await;
    assert_eq!(
        r.json["message"],
        "cannot create group: ha groups have been migrated to rules\n"
    );
    let r = sim
        .post("/cluster/ha/resources", json!({"sid": "vm:210", "group": "prod"}))
        .await;
    assert_eq!(
        r.json["message"],
        "invalid parameter 'group': ha groups have been migrated to rules\n"
    );
    let r = sim
        .post("/cluster/ha/resources", json!({"sid": "210", "failback": 0}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        sim.get("/cluster/ha/resources/vm:210").await.json["data"]["failback"],
        0
    );
}

/// An upgraded cluster: groups work as on 8.x until the HA manager migrates them (then each group
/// with resources is a `ha-group-<g>` node-affinity rule, `nofailback` becomes `failback 0`).
#[tokio::test]
async fn groups_are_migrated_to_rules() {
    // The scenario's groups as YAML, the way a scenario file gives them.
    let groups = "ha_groups:\n  - {group: prod, nodes: \"pve1:2,pve2\", restricted: true, nofailback: true}\n  - spare\n";
    let scenario = Scenario {
        version: PveVersion::V9_1,
        ha_groups: Scenario::from_yaml(groups).unwrap().ha_groups,
        latency: LatencySpec {
            ha_group_migration_ms: Some(3_600_000),
            ..LatencySpec::default()
        },
        ..Scenario::default()
    };
    assert!(matches!(scenario.ha_groups[1], HaGroupSpec::Name(_)));
    let sim = common::start(SimConfig {
        scenario,
        ..SimConfig::default()
    })
    .await;
    sim.clone_vm(220, "m").await;
    let groups = sim.get("/cluster/ha/groups").await.json["data"].clone();
    assert_eq!(groups.as_array().unwrap().len(), 2, "{groups}");
    let r = sim
        .post("/cluster/ha/resources", json!({"sid": "vm:220", "group": "prod"}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = sim
        .post(
            "/cluster/ha/rules",
            json!({"rule": "r", "type": "node-affinity", "resources": "vm:220", "nodes": "pve1"}),
        )
        .await;
    assert_eq!(
        r.json["message"],
        "cannot create ha rule: ha groups have not been migrated yet\n"
    );
    // Before the migration the rules already show the group as a rule (not yet written).
    let rules = sim.get("/cluster/ha/rules").await.json["data"].clone();
    assert_eq!(rules[0]["rule"], "ha-group-prod", "{rules}");
    assert!(sim.server.state().ha_rules().is_empty());
    sim.server.state().migrate_ha_groups();
    let rule = sim.get("/cluster/ha/rules/ha-group-prod").await.json["data"].clone();
    assert_eq!(
        (
            &rule["nodes"],
            &rule["strict"],
            &rule["resources"],
            &rule["comment"]
        ),
        (
            &json!("pve1:2,pve2"),
            &json!(1),
            &json!("vm:220"),
            &json!("Generated from HA group 'prod'.")
        ),
        "{rule}"
    );
    let res = sim.get("/cluster/ha/resources/vm:220").await.json["data"].clone();
    assert!(res.get("group").is_none(), "{res}");
    assert_eq!(res["failback"], 0);
    let r = sim.get("/cluster/ha/groups").await;
    assert_eq!(r.status, 500);
    assert!(
        sim.server.state().with(|c| c.ha_groups.is_empty()),
        "the group without resources is gone too"
    );
}

/// 8.4: the group endpoints (create, read, update, delete; a used group cannot be deleted).
#[tokio::test]
async fn groups_on_8_4() {
    let sim = common::start_default().await;
    let r = sim
        .post(
            "/cluster/ha/groups",
            json!({"group": "prod", "nodes": "pve1:2,pve2", "restricted": 1}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let g = sim.get("/cluster/ha/groups/prod").await.json["data"].clone();
    assert_eq!(
        (&g["nodes"], &g["restricted"], &g["type"]),
        (&json!("pve1:2,pve2"), &json!(1), &json!("group")),
        "{g}"
    );
    let r = sim
        .post("/cluster/ha/groups", json!({"group": "prod", "nodes": "pve1"}))
        .await;
    assert_eq!(
        r.json["message"],
        "create ha group failed: ha group ID 'prod' already defined\n"
    );
    assert_eq!(
        sim.put(
            "/cluster/ha/groups/prod",
            json!({"nofailback": 1, "delete": "restricted"})
        )
        .await
        .status,
        200
    );
    ha_vm(&sim, 230).await;
    assert_eq!(
        sim.put("/cluster/ha/resources/vm:230", json!({"group": "prod"}))
            .await
            .status,
        200
    );
    let r = sim.delete("/cluster/ha/groups/prod").await;
    assert_eq!(
        r.json["message"],
        "delete ha group failed: ha group is used by service 'vm:230'\n"
    );
    assert_eq!(
        sim.get("/cluster/ha/resources/vm:230").await.json["data"]["group"],
        "prod"
    );
    // `purge` is a 9.x parameter.
    assert_eq!(
        sim.delete("/cluster/ha/resources/vm:230?purge=1").await.status,
        400
    );
    assert_eq!(sim.delete("/cluster/ha/resources/vm:230").await.status, 200);
    assert_eq!(sim.delete("/cluster/ha/groups/prod").await.status, 200);
    assert_eq!(sim.get("/cluster/ha/groups").await.json["data"], json!([]));
}
