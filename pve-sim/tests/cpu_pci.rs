//! PCI resource mappings (`GET /cluster/mapping/pci`), `hostpciN: mapping=` checked against the
//! VM's node at config write and at start, and `cpu` validation.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::json;

#[tokio::test]
async fn pci_mappings_are_checked_at_config_write_and_start() {
    let sim = common::start_default().await;
    sim.clone_vm(181, "pci").await;
    sim.server.state().add_pci_mapping("gpu", &["pve2"]);
    let list = sim.get("/cluster/mapping/pci").await;
    assert_eq!(list.json["data"][0]["id"], "gpu");
    assert!(
        list.json["data"][0]["map"][0]
            .as_str()
            .unwrap()
            .starts_with("node=pve2,")
    );
    // VM 181 is on pve1: the mapping has no entry there.
    let r = sim
        .post(
            "/nodes/pve1/qemu/181/config",
            json!({"hostpci0": "mapping=gpu,pcie=1"}),
        )
        .await;
    assert_eq!(r.status, 500, "{}", r.body);
    assert!(r.body.contains("'gpu' on node 'pve1'"), "{}", r.body);
    let r = sim
        .post("/nodes/pve1/qemu/181/config", json!({"hostpci0": "pcie=1"}))
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    // With an entry for pve1 the write goes through; without it again, the start fails.
    sim.server.state().add_pci_mapping("gpu", &["pve1"]);
    let st = sim
        .post_task(
            "/nodes/pve1/qemu/181/config",
            json!({"hostpci0": "mapping=gpu,pcie=1,x-vga=1", "cpu": "x86-64-v2-AES,flags=+aes;-pcid", "numa": 1}),
        )
        .await;
    assert_eq!(st, "OK");
    sim.server.state().with(|c| {
        c.pci_mappings
            .get_mut("gpu")
            .unwrap()
            .retain(|e| !e.contains("pve1"))
    });
    let st = sim
        .post_task("/nodes/pve1/qemu/181/status/start", json!({}))
        .await;
    assert!(st.contains("'gpu' on node 'pve1'"), "{st}");
    // cpu: unknown model and a flag PVE does not allow on a VM.
    for bad in ["nosuch", "host,flags=+avx512f"] {
        let r = sim.post("/nodes/pve1/qemu/181/config", json!({"cpu": bad})).await;
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
}
