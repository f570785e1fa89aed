//! Node inventory of a ProxmoxCluster: capacity and usage of the allowed Proxmox nodes (all
//! nodes when `allowedNodes` is empty), from `GET /cluster/resources` (nodes and guests in one
//! list, shared with the machine controller).

use capmox_api::v1alpha2::NodeInventory;

use crate::proxmox::{self, Client, ClusterResource, NodeListEntry};

fn to_i64(v: Option<u64>) -> Option<i64> {
    v.and_then(|v| i64::try_from(v).ok())
}

/// Builds the inventory (pure): one entry per node in `allowed` order (or name order when
/// `allowed` is empty); allowed nodes Proxmox does not know are reported offline.
pub fn build(nodes: &[NodeListEntry], guests: &[ClusterResource], allowed: &[String]) -> Vec<NodeInventory> {
    let entry = |name: &str| {
        let n = nodes.iter().find(|n| n.node == name);
        let vms = guests
            .iter()
            .filter(|g| g.resource_type == "qemu" && !g.template && g.node.as_deref() == Some(name))
            .count();
        NodeInventory {
            node: name.to_owned(),
            online: n.is_some_and(|n| n.status == "online"),
            cpus: n.and_then(|n| to_i64(n.maxcpu)),
            memory_total_bytes: n.and_then(|n| to_i64(n.maxmem)),
            memory_used_bytes: n.and_then(|n| to_i64(n.mem)),
            vm_count: n.map(|_| i64::try_from(vms).unwrap_or(i64::MAX)),
        }
    };
    if allowed.is_empty() {
        let mut names: Vec<&str> = nodes.iter().map(|n| n.node.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names.into_iter().map(entry).collect()
    } else {
        let mut seen = std::collections::BTreeSet::new();
        allowed
            .iter()
            .filter(|a| seen.insert(a.as_str()))
            .map(|a| entry(a))
            .collect()
    }
}

/// The node entries of `GET /cluster/resources` as node list entries.
pub fn nodes_of(resources: &[ClusterResource]) -> Vec<NodeListEntry> {
    resources
        .iter()
        .filter(|r| r.resource_type == "node")
        .filter_map(|r| {
            Some(NodeListEntry {
                node: r.node.clone()?,
                status: r.status.clone().unwrap_or_default(),
                cpu: r.cpu,
                maxcpu: r.maxcpu.map(|c| c.max(0.0).round() as u64),
                mem: r.mem,
                maxmem: r.maxmem,
                uptime: r.uptime,
                ssl_fingerprint: None,
            })
        })
        .collect()
}

/// Reads the cluster's resource list (shared: a list read within `max_age` is reused) and builds
/// the inventory.
pub async fn collect(
    clients: &crate::credentials::ProxmoxClients,
    client: &Client,
    allowed: &[String],
    max_age: std::time::Duration,
) -> Result<Vec<NodeInventory>, proxmox::Error> {
    let fresh = crate::proxmox::view::Freshness::within(max_age);
    let (_, snap) = clients
        .resources(client)
        .get(fresh, || crate::proxmox::view::Snapshot::fetch(client))
        .await?;
    let guests: Vec<ClusterResource> = snap
        .resources
        .iter()
        .filter(|r| r.resource_type == "qemu" || r.resource_type == "lxc")
        .cloned()
        .collect();
    Ok(build(&nodes_of(&snap.resources), &guests, allowed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, status: &str) -> NodeListEntry {
        serde_json::from_value(serde_json::json!({
            "node": name, "status": status, "maxcpu": 8, "maxmem": 1024, "mem": 256,
        }))
        .unwrap()
    }

    fn guest(node: &str, vmid: u32, template: bool) -> ClusterResource {
        serde_json::from_value(serde_json::json!({
            "id": format!("qemu/{vmid}"), "type": "qemu", "vmid": vmid, "node": node,
            "template": u8::from(template),
        }))
        .unwrap()
    }

    #[test]
    fn counts_vms_without_templates_and_honours_allowed_nodes() {
        let nodes = [node("b", "online"), node("a", "offline")];
        let guests = [
            guest("a", 100, true),
            guest("a", 101, false),
            guest("b", 102, false),
            guest("a", 103, false),
        ];
        let all = build(&nodes, &guests, &[]);
        assert_eq!(
            all.iter().map(|n| n.node.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(
            (all[0].online, all[0].vm_count, all[0].cpus),
            (false, Some(2), Some(8))
        );
        assert_eq!((all[1].online, all[1].vm_count), (true, Some(1)));
        assert_eq!(all[1].memory_total_bytes, Some(1024));
        assert_eq!(all[1].memory_used_bytes, Some(256));
        let some = build(&nodes, &guests, &["b".into(), "ghost".into(), "b".into()]);
        assert_eq!(some.len(), 2);
        assert_eq!(
            (some[1].node.as_str(), some[1].online, some[1].cpus),
            ("ghost", false, None)
        );
    }
}
