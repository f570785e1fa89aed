//! The Kubernetes permissions the manager needs, declared next to the controllers (and the
//! diagnostics server) that use them. `config/rbac/role.yaml`,
//! `config/rbac/leader_election_role.yaml` and `config/rbac/metrics_reader_role.yaml` are
//! rendered from these lists (a test keeps the files in sync).

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use kube::api::ObjectMeta;

/// One permission: verbs on a resource of an API group (`""` is the core group).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// API group.
    pub group: &'static str,
    /// Resource (plural, optionally `/subresource`).
    pub resource: &'static str,
    /// Verbs.
    pub verbs: &'static [&'static str],
}

const fn rule(group: &'static str, resource: &'static str, verbs: &'static [&'static str]) -> Rule {
    Rule {
        group,
        resource,
        verbs,
    }
}

const READ: &[&str] = &["get", "list", "watch"];
const READ_PATCH: &[&str] = &["get", "list", "patch", "watch"];
const ALL: &[&str] = &["create", "delete", "get", "list", "patch", "update", "watch"];

/// What the ProxmoxCluster controller does: reads and patches ProxmoxClusters (finalizer, status),
/// reads owner Clusters (any version) and the cluster's ProxmoxMachines, adopts and releases
/// credentials Secrets, applies InClusterIPPools and records events.
pub const CLUSTER_CONTROLLER: &[Rule] = &[
    rule("infrastructure.cluster.x-k8s.io", "proxmoxclusters", READ_PATCH),
    rule(
        "infrastructure.cluster.x-k8s.io",
        "proxmoxclusters/status",
        &["get", "patch"],
    ),
    rule(
        "infrastructure.cluster.x-k8s.io",
        "proxmoxclusters/finalizers",
        &["update"],
    ),
    rule("infrastructure.cluster.x-k8s.io", "proxmoxmachines", READ),
    rule("cluster.x-k8s.io", "clusters", READ),
    rule("", "secrets", READ_PATCH),
    rule(
        "ipam.cluster.x-k8s.io",
        "inclusterippools",
        &["create", "get", "list", "patch", "watch"],
    ),
    rule("events.k8s.io", "events", &["create", "patch"]),
];

/// What the ProxmoxMachine controller does: patches ProxmoxMachines (finalizer, VMID, providerID,
/// labels, status), updates the ProxmoxCluster's `status.nodeLocations`, reads CAPI Machines and
/// Clusters (either version), bootstrap and credentials Secrets, creates and deletes
/// IPAddressClaims, reads IPAddresses and pools, and records events. The list is capmox's manager
/// role, so the role stays a drop-in.
pub const MACHINE_CONTROLLER: &[Rule] = &[
    rule(
        "",
        "events",
        &["create", "get", "list", "patch", "update", "watch"],
    ),
    rule("cluster.x-k8s.io", "clusters/status", READ_PATCH),
    rule("cluster.x-k8s.io", "clusters", READ_PATCH),
    rule("cluster.x-k8s.io", "machines", READ_PATCH),
    rule("cluster.x-k8s.io", "machines/status", READ_PATCH),
    rule("infrastructure.cluster.x-k8s.io", "proxmoxclusters", ALL),
    rule("infrastructure.cluster.x-k8s.io", "proxmoxmachines", ALL),
    rule(
        "infrastructure.cluster.x-k8s.io",
        "proxmoxmachines/finalizers",
        &["update"],
    ),
    rule(
        "infrastructure.cluster.x-k8s.io",
        "proxmoxclusters/status",
        &["get", "patch", "update"],
    ),
    rule(
        "infrastructure.cluster.x-k8s.io",
        "proxmoxmachines/status",
        &["get", "patch", "update"],
    ),
    rule("ipam.cluster.x-k8s.io", "globalinclusterippools", ALL),
    rule("ipam.cluster.x-k8s.io", "inclusterippools", ALL),
    rule(
        "ipam.cluster.x-k8s.io",
        "ipaddressclaims",
        &["create", "delete", "get", "list", "update", "watch"],
    ),
    rule("ipam.cluster.x-k8s.io", "ipaddresses", READ),
];

/// What the ProxmoxMachineTemplate controller does ([`crate::controllers::machine_template`]):
/// reads templates and patches their `status` (capacity and node info for the cluster-autoscaler).
pub const MACHINE_TEMPLATE_CONTROLLER: &[Rule] = &[
    rule("infrastructure.cluster.x-k8s.io", "proxmoxmachinetemplates", READ),
    rule(
        "infrastructure.cluster.x-k8s.io",
        "proxmoxmachinetemplates/status",
        &["get", "patch"],
    ),
    rule("events.k8s.io", "events", &["create", "patch"]),
];

/// What the ProxmoxVirtualMachine controller does ([`crate::controllers::virtual_machine`]):
/// reads and patches ProxmoxVirtualMachines (finalizer, status), reads their credentials and
/// user-data Secrets, creates, reads and deletes the IPAddressClaims of NICs with an IPAM pool
/// and reads their IPAddresses and pools (the default-route metric), and records events.
pub const VIRTUAL_MACHINE_CONTROLLER: &[Rule] = &[
    rule("vm.capmox-rs.io", "proxmoxvirtualmachines", READ_PATCH),
    rule(
        "vm.capmox-rs.io",
        "proxmoxvirtualmachines/status",
        &["get", "patch"],
    ),
    rule(
        "vm.capmox-rs.io",
        "proxmoxvirtualmachines/finalizers",
        &["update"],
    ),
    rule("", "secrets", &["get"]),
    rule(
        "ipam.cluster.x-k8s.io",
        "ipaddressclaims",
        &["create", "delete", "get"],
    ),
    rule("ipam.cluster.x-k8s.io", "ipaddresses", &["get"]),
    rule("events.k8s.io", "events", &["create", "patch"]),
    // `spec.imageRef`: the image's template.
    rule("vm.capmox-rs.io", "proxmoxvmimages", &["get"]),
];

/// What the ProxmoxVMImage controller does ([`crate::controllers::vm_image`]): reads and patches
/// ProxmoxVMImages (finalizer, status), reads their credentials Secrets and records events; the
/// ProxmoxMachine controller reads the images its machines name (`spec.imageRef`).
pub const IMAGE_CONTROLLER: &[Rule] = &[
    rule("vm.capmox-rs.io", "proxmoxvmimages", READ_PATCH),
    rule("vm.capmox-rs.io", "proxmoxvmimages/status", &["get", "patch"]),
    rule("vm.capmox-rs.io", "proxmoxvmimages/finalizers", &["update"]),
    rule("", "secrets", &["get"]),
    rule("events.k8s.io", "events", &["create", "patch"]),
];

/// What the controllers of ProxmoxVirtualMachine snapshots, restores and clones do
/// ([`crate::controllers::vm_operations`]): read and patch their kinds (finalizer, status), read
/// the ProxmoxVirtualMachines they name (and their credentials Secrets), mark a restored one
/// (an annotation), create the clones' new ones, and record events.
pub const VM_OPERATIONS_CONTROLLERS: &[Rule] = &[
    rule("vm.capmox-rs.io", "proxmoxvmsnapshots", READ_PATCH),
    rule("vm.capmox-rs.io", "proxmoxvmsnapshots/status", &["get", "patch"]),
    rule("vm.capmox-rs.io", "proxmoxvmsnapshots/finalizers", &["update"]),
    rule("vm.capmox-rs.io", "proxmoxvmrestores", READ),
    rule("vm.capmox-rs.io", "proxmoxvmrestores/status", &["get", "patch"]),
    rule("vm.capmox-rs.io", "proxmoxvmclones", READ),
    rule("vm.capmox-rs.io", "proxmoxvmclones/status", &["get", "patch"]),
    rule(
        "vm.capmox-rs.io",
        "proxmoxvirtualmachines",
        &["create", "get", "list", "patch", "watch"],
    ),
    rule("", "secrets", &["get"]),
    rule("events.k8s.io", "events", &["create", "patch"]),
];

/// What the secured diagnostics server does ([`crate::diagnostics`]): reviews the bearer token
/// and the access of every metrics request with the API server.
pub const DIAGNOSTICS: &[Rule] = &[
    rule("authentication.k8s.io", "tokenreviews", &["create"]),
    rule("authorization.k8s.io", "subjectaccessreviews", &["create"]),
];

/// Leader election (namespaced Role): the `controller-leader-elect-capmox` Lease and its events.
pub const LEADER_ELECTION: &[Rule] = &[
    rule("", "configmaps", ALL),
    rule("coordination.k8s.io", "leases", ALL),
    rule("", "events", &["create", "patch"]),
];

/// Name of the manager ClusterRole.
pub const MANAGER_ROLE: &str = "manager-role";
/// Name of the leader-election Role.
pub const LEADER_ELECTION_ROLE: &str = "leader-election-role";
/// Name of the ClusterRole a metrics scraper is bound to (`capmox-metrics-reader` once
/// prefixed, capmox's name).
pub const METRICS_READER_ROLE: &str = "metrics-reader";
/// The non-resource URL the metrics reader may `get`.
pub const METRICS_PATH: &str = "/metrics";

/// Merges rules per (group, resource) and groups resources with identical verbs, sorted, as
/// controller-gen does.
pub fn policy_rules(rules: &[&[Rule]]) -> Vec<PolicyRule> {
    let mut per: BTreeMap<(String, String), std::collections::BTreeSet<String>> = BTreeMap::new();
    for r in rules.iter().flat_map(|r| r.iter()) {
        per.entry((r.group.to_owned(), r.resource.to_owned()))
            .or_default()
            .extend(r.verbs.iter().map(|v| (*v).to_owned()));
    }
    let mut grouped: BTreeMap<(String, Vec<String>), Vec<String>> = BTreeMap::new();
    for ((group, resource), verbs) in per {
        grouped
            .entry((group, verbs.into_iter().collect()))
            .or_default()
            .push(resource);
    }
    grouped
        .into_iter()
        .map(|((group, verbs), resources)| PolicyRule {
            api_groups: Some(vec![group]),
            resources: Some(resources),
            verbs,
            ..Default::default()
        })
        .collect()
}

/// Whether `rules` grant `verb` on `group`/`resource`.
pub fn grants(rules: &[PolicyRule], group: &str, resource: &str, verb: &str) -> bool {
    rules.iter().any(|r| {
        let has = |l: &Option<Vec<String>>, v: &str| l.iter().flatten().any(|x| x == v || x == "*");
        has(&r.api_groups, group)
            && has(&r.resources, resource)
            && r.verbs.iter().any(|x| x == verb || x == "*")
    })
}

/// The manager ClusterRole (`config/rbac/role.yaml`).
pub fn manager_role() -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(MANAGER_ROLE.to_owned()),
            ..Default::default()
        },
        rules: Some(policy_rules(&[
            CLUSTER_CONTROLLER,
            MACHINE_CONTROLLER,
            MACHINE_TEMPLATE_CONTROLLER,
            VIRTUAL_MACHINE_CONTROLLER,
            IMAGE_CONTROLLER,
            VM_OPERATIONS_CONTROLLERS,
            DIAGNOSTICS,
        ])),
        ..Default::default()
    }
}

/// The ClusterRole for metrics scrapers (`config/rbac/metrics_reader_role.yaml`): `get` on
/// `/metrics`, checked by the diagnostics server's SubjectAccessReview.
pub fn metrics_reader_role() -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(METRICS_READER_ROLE.to_owned()),
            ..Default::default()
        },
        rules: Some(vec![PolicyRule {
            non_resource_urls: Some(vec![METRICS_PATH.to_owned()]),
            verbs: vec!["get".to_owned()],
            ..Default::default()
        }]),
        ..Default::default()
    }
}

/// The leader-election Role (`config/rbac/leader_election_role.yaml`).
pub fn leader_election_role() -> Role {
    Role {
        metadata: ObjectMeta {
            name: Some(LEADER_ELECTION_ROLE.to_owned()),
            namespace: Some("system".to_owned()),
            ..Default::default()
        },
        rules: Some(policy_rules(&[LEADER_ELECTION])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_rules_cover_every_declared_verb() {
        let rules = policy_rules(&[
            CLUSTER_CONTROLLER,
            MACHINE_CONTROLLER,
            MACHINE_TEMPLATE_CONTROLLER,
            VIRTUAL_MACHINE_CONTROLLER,
            IMAGE_CONTROLLER,
            VM_OPERATIONS_CONTROLLERS,
            DIAGNOSTICS,
        ]);
        for r in CLUSTER_CONTROLLER
            .iter()
            .chain(MACHINE_CONTROLLER)
            .chain(MACHINE_TEMPLATE_CONTROLLER)
            .chain(VIRTUAL_MACHINE_CONTROLLER)
            .chain(IMAGE_CONTROLLER)
            .chain(VM_OPERATIONS_CONTROLLERS)
            .chain(DIAGNOSTICS)
        {
            for v in r.verbs {
                assert!(grants(&rules, r.group, r.resource, v), "{r:?} {v}");
            }
        }
        assert!(!grants(&rules, "", "secrets", "delete"));
        assert!(!grants(&rules, "", "secrets", "create"));
    }
}
