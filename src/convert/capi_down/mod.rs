//! Cluster API v1beta2 → v1beta1 (and Kamaji's KamajiControlPlane v1alpha2 → v1alpha1) for the
//! kinds cluster templates and ClusterClasses use: the reverse of [`super::capi`], as tree
//! rewrites that keep comments and styles. It makes the templates of a v1beta1-contract release
//! (CAPI v1.10, clusterctl v1.10) from the v1beta2 ones: `apiGroup` references get the apiVersion
//! of the v1beta1 generation of their kind, `…Seconds` integers become Go durations, name/value
//! argument lists become maps, rollout/remediation/deletion settings and health checks go back to
//! their v1beta1 places, a ClusterClass's `templateRef`s become `ref`s. Anything this does not know
//! how to express in v1beta1 is an error: a release must not lose a field silently.

mod kubeadm;

use super::capi::{take_map, with_comments};
use super::tokens::Tokens;
use super::tree::{Entry, Map, Node};

/// Why a document cannot be converted.
pub type Failure = String;

/// The v1beta1-generation apiVersion of a document of `api_version` and `kind` this module
/// converts, if it does.
pub fn target_version(api_version: &str, kind: &str) -> Option<&'static str> {
    match (api_version, kind) {
        (
            "cluster.x-k8s.io/v1beta2",
            "Cluster" | "ClusterClass" | "MachineDeployment" | "MachineSet" | "Machine"
            | "MachineHealthCheck",
        ) => Some("cluster.x-k8s.io/v1beta1"),
        ("controlplane.cluster.x-k8s.io/v1beta2", "KubeadmControlPlane" | "KubeadmControlPlaneTemplate") => {
            Some("controlplane.cluster.x-k8s.io/v1beta1")
        }
        ("bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfig" | "KubeadmConfigTemplate") => {
            Some("bootstrap.cluster.x-k8s.io/v1beta1")
        }
        ("addons.cluster.x-k8s.io/v1beta2", "ClusterResourceSet") => Some("addons.cluster.x-k8s.io/v1beta1"),
        ("controlplane.cluster.x-k8s.io/v1alpha2", "KamajiControlPlane" | "KamajiControlPlaneTemplate") => {
            Some("controlplane.cluster.x-k8s.io/v1alpha1")
        }
        // The same version in both generations; only its machine template reference changes.
        ("controlplane.cluster.x-k8s.io/v1alpha3", "TalosControlPlane") => {
            Some("controlplane.cluster.x-k8s.io/v1alpha3")
        }
        _ => None,
    }
}

/// Whether `api_version` is one of the v1beta2 generation that has no place in a v1beta1 set.
pub fn is_v1beta2_generation(api_version: &str) -> bool {
    matches!(
        api_version,
        "cluster.x-k8s.io/v1beta2"
            | "controlplane.cluster.x-k8s.io/v1beta2"
            | "bootstrap.cluster.x-k8s.io/v1beta2"
            | "addons.cluster.x-k8s.io/v1beta2"
            | "runtime.cluster.x-k8s.io/v1beta2"
            | "ipam.cluster.x-k8s.io/v1beta2"
    )
}

/// The apiVersion a CAPI v1.10 reference names `group`/`kind` with: the version of that kind's
/// v1beta1 contract generation (ours: v1alpha1; Kamaji ≤ v0.19: v1alpha1; Talos: v1alpha3).
pub fn v1beta1_api_version(group: &str, kind: &str) -> Result<String, Failure> {
    let version = match (group, kind) {
        ("cluster.x-k8s.io", _) => "v1beta1",
        (
            "infrastructure.cluster.x-k8s.io",
            "ProxmoxCluster" | "ProxmoxClusterTemplate" | "ProxmoxMachine" | "ProxmoxMachineTemplate",
        ) => "v1alpha1",
        ("controlplane.cluster.x-k8s.io", "KubeadmControlPlane" | "KubeadmControlPlaneTemplate") => "v1beta1",
        ("controlplane.cluster.x-k8s.io", "KamajiControlPlane" | "KamajiControlPlaneTemplate") => "v1alpha1",
        ("controlplane.cluster.x-k8s.io", "TalosControlPlane" | "TalosControlPlaneTemplate") => "v1alpha3",
        ("bootstrap.cluster.x-k8s.io", "KubeadmConfig" | "KubeadmConfigTemplate") => "v1beta1",
        ("bootstrap.cluster.x-k8s.io", "TalosConfig" | "TalosConfigTemplate") => "v1alpha3",
        _ => {
            return Err(format!(
                "no known v1beta1-generation version of {kind} ({group}) to reference it by"
            ));
        }
    };
    Ok(format!("{group}/{version}"))
}

/// Rewrites `root` (a v1beta2-generation object of `kind`) in place to `target`.
pub fn convert(root: &mut Node, kind: &str, target: &str, tokens: &Tokens) -> Result<(), Failure> {
    let cx = Cx { tokens };
    let Some(obj) = root.as_map_mut() else {
        return Err("not a mapping".into());
    };
    if obj.get("status").is_some() {
        return Err("has a status (templates carry none)".into());
    }
    if let Some(Node::Scalar(s)) = obj.get_mut("apiVersion") {
        s.text = target.to_owned();
    }
    let Some(spec) = obj.get_mut("spec").and_then(Node::as_map_mut) else {
        return Ok(());
    };
    match kind {
        "Cluster" => cx.cluster(spec),
        "ClusterClass" => cx.cluster_class(spec),
        "MachineDeployment" => cx.machine_deployment(spec),
        "MachineSet" => cx.machine_set(spec),
        "Machine" => cx.machine_spec(spec),
        "MachineHealthCheck" => cx.health_check(spec),
        "KubeadmControlPlane" => cx.control_plane(spec),
        "KubeadmControlPlaneTemplate" | "KubeadmConfigTemplate" => {
            let Some(inner) = spec
                .get_mut("template")
                .and_then(Node::as_map_mut)
                .and_then(|t| t.get_mut("spec"))
                .and_then(Node::as_map_mut)
            else {
                return Ok(());
            };
            if kind == "KubeadmConfigTemplate" {
                cx.kubeadm_config_spec(inner)
            } else {
                cx.control_plane(inner)
            }
        }
        "KubeadmConfig" => cx.kubeadm_config_spec(spec),
        "KamajiControlPlane" => kamaji(spec),
        "TalosControlPlane" => match spec.get_mut("infrastructureTemplate").and_then(Node::as_map_mut) {
            Some(r) => cx.api_version_field(r, "spec.infrastructureTemplate"),
            None => Ok(()),
        },
        "KamajiControlPlaneTemplate" => match spec
            .get_mut("template")
            .and_then(Node::as_map_mut)
            .and_then(|t| t.get_mut("spec"))
            .and_then(Node::as_map_mut)
        {
            Some(inner) => kamaji(inner),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// KamajiControlPlane v1alpha2 (Kamaji ≥ v0.20) → v1alpha1 (≤ v0.19): the spec is the same but
/// for what v0.20 added.
fn kamaji(spec: &Map) -> Result<(), Failure> {
    let network = spec.get("network").and_then(Node::as_map);
    if network.is_some_and(|n| n.get("additionalServicePorts").is_some()) {
        return Err("spec.network.additionalServicePorts exists in v1alpha2 only".into());
    }
    let gateway = network.and_then(|n| n.get("gateway")).and_then(Node::as_map);
    for k in ["sectionName", "port"] {
        if gateway.is_some_and(|g| g.get(k).is_some()) {
            return Err(format!("spec.network.gateway.{k} exists in v1alpha2 only"));
        }
    }
    Ok(())
}

/// Renames `old` to `new` in place (position and comments kept).
fn rename(map: &mut Map, old: &str, new: &str) {
    if let Some(e) = map.entries.iter_mut().find(|e| e.key == old) {
        e.key = new.to_owned();
    }
}

/// Moves `key` of `from` to `into` (under `new_key`), keeping its comments.
fn move_entry(from: &mut Map, key: &str, into: &mut Map, new_key: &str) {
    if let Some(e) = from.remove(key) {
        into.insert(with_comments(Entry::new(new_key, e.value), e.comments));
    }
}

pub(super) struct Cx<'a> {
    tokens: &'a Tokens,
}

impl Cx<'_> {
    fn scalar<'n>(&self, n: &'n Node, what: &str) -> Result<&'n str, Failure> {
        let s = n.as_str().ok_or_else(|| format!("{what} is not a scalar"))?;
        if self.tokens.contains_token(s) {
            return Err(format!("{what} is a variable; convert it by hand"));
        }
        Ok(s)
    }

    /// `{apiGroup, kind, name}` → `{apiVersion, kind, name}` (the kind's v1beta1 generation).
    fn contract_ref(&self, map: &mut Map, key: &str) -> Result<(), Failure> {
        let Some(r) = map.get_mut(key).and_then(Node::as_map_mut) else {
            return Ok(());
        };
        let kind = match r.get("kind") {
            Some(k) => self.scalar(k, &format!("{key}.kind"))?.to_owned(),
            None => return Err(format!("{key} has no kind")),
        };
        let Some(pos) = r.entries.iter().position(|e| e.key == "apiGroup") else {
            return Err(format!("{key} has no apiGroup"));
        };
        let group = self.scalar(&r.entries[pos].value, &format!("{key}.apiGroup"))?;
        let api_version = v1beta1_api_version(group, &kind)?;
        r.entries[pos].key = "apiVersion".into();
        r.entries[pos].value = Node::text(api_version);
        Ok(())
    }

    /// A ClusterClass `templateRef` (`{apiVersion, kind, name}`) → `ref` of the v1beta1 version.
    fn template_ref(&self, map: &mut Map) -> Result<(), Failure> {
        rename(map, "templateRef", "ref");
        let Some(r) = map.get_mut("ref").and_then(Node::as_map_mut) else {
            return Ok(());
        };
        self.api_version_field(r, "templateRef")
    }

    /// Maps an `apiVersion` field of a reference or patch selector to the v1beta1 generation.
    fn api_version_field(&self, r: &mut Map, what: &str) -> Result<(), Failure> {
        let kind = match r.get("kind") {
            Some(k) => self.scalar(k, &format!("{what}.kind"))?.to_owned(),
            None => return Err(format!("{what} has no kind")),
        };
        let Some(av) = r.get_mut("apiVersion") else {
            return Err(format!("{what} has no apiVersion"));
        };
        let text = self.scalar(av, &format!("{what}.apiVersion"))?;
        let group = text.rsplit_once('/').map_or("", |(g, _)| g).to_owned();
        *av = Node::text(v1beta1_api_version(&group, &kind)?);
        Ok(())
    }

    /// Whole seconds as a Go duration (`300` → `"300s"`).
    fn duration(&self, n: &Node, what: &str) -> Result<Node, Failure> {
        let text = self.scalar(n, what)?;
        let secs: u64 = text
            .parse()
            .map_err(|_| format!("{what} is not a number of seconds: {text}"))?;
        Ok(Node::text(format!("{secs}s")))
    }

    /// Moves `key` (seconds) of `from` to `into.<new_key>` as a duration.
    fn move_seconds(&self, from: &mut Map, key: &str, into: &mut Map, new_key: &str) -> Result<(), Failure> {
        if let Some(e) = from.remove(key) {
            let d = self.duration(&e.value, key)?;
            into.insert(with_comments(Entry::new(new_key, d), e.comments));
        }
        Ok(())
    }

    /// `deletion.{nodeDrainTimeoutSeconds,…}` of `from` → `node*Timeout` of `into`; `order` goes
    /// to `order_into` (a MachineDeployment's or MachineSet's delete policy) when given.
    fn deletion(&self, from: &mut Map, into: &mut Map, order_into: Option<&mut Map>) -> Result<(), Failure> {
        let Some(e) = from.remove("deletion") else {
            return Ok(());
        };
        let Node::Map(mut d) = e.value else {
            return Err("deletion is not a mapping".into());
        };
        for (new, old) in [
            ("nodeDrainTimeoutSeconds", "nodeDrainTimeout"),
            ("nodeVolumeDetachTimeoutSeconds", "nodeVolumeDetachTimeout"),
            ("nodeDeletionTimeoutSeconds", "nodeDeletionTimeout"),
        ] {
            self.move_seconds(&mut d, new, into, old)?;
        }
        if let (Some(order), Some(target)) = (d.remove("order"), order_into) {
            target.insert(with_comments(
                Entry::new("deletePolicy", order.value),
                order.comments,
            ));
        }
        match d.entries.first() {
            Some(e) => Err(format!("deletion.{} has no v1beta1 counterpart", e.key)),
            None => Ok(()),
        }
    }

    fn machine_spec(&self, spec: &mut Map) -> Result<(), Failure> {
        if let Some(b) = spec.get_mut("bootstrap").and_then(Node::as_map_mut) {
            self.contract_ref(b, "configRef")?;
        }
        self.contract_ref(spec, "infrastructureRef")?;
        let mut taken = Map::default();
        self.deletion(spec, &mut taken, None)?;
        spec.entries.extend(taken.entries);
        if spec.get("taints").is_some() {
            return Err("spec.taints has no v1beta1 counterpart".into());
        }
        Ok(())
    }

    /// What MachineDeployments and MachineSets share: the machine template; the template's
    /// `minReadySeconds` goes back to the spec.
    fn workload_common(&self, spec: &mut Map) -> Result<(), Failure> {
        let mut min_ready = None;
        if let Some(t) = spec
            .get_mut("template")
            .and_then(Node::as_map_mut)
            .and_then(|t| t.get_mut("spec"))
            .and_then(Node::as_map_mut)
        {
            min_ready = t.remove("minReadySeconds");
            self.machine_spec(t)?;
        }
        if let Some(m) = min_ready {
            spec.insert(with_comments(Entry::new("minReadySeconds", m.value), m.comments));
        }
        Ok(())
    }

    fn machine_deployment(&self, spec: &mut Map) -> Result<(), Failure> {
        self.workload_common(spec)?;
        let mut rollout = take_map(spec, "rollout");
        let mut strategy = match rollout.remove("strategy") {
            Some(Entry {
                value: Node::Map(m), ..
            }) => m,
            Some(_) => return Err("rollout.strategy is not a mapping".into()),
            None => Map::default(),
        };
        move_entry(&mut rollout, "after", spec, "rolloutAfter");
        if let Some(e) = rollout.entries.first() {
            return Err(format!("rollout.{} has no v1beta1 counterpart", e.key));
        }
        move_entry(spec, "remediation", &mut strategy, "remediation");
        let mut delete_policy = Map::default();
        let mut none = Map::default();
        self.deletion(spec, &mut none, Some(&mut delete_policy))?;
        if !none.entries.is_empty() {
            return Err("MachineDeployment deletion timeouts have no v1beta1 counterpart".into());
        }
        if let Some(dp) = delete_policy.remove("deletePolicy") {
            strategy
                .child_map("rollingUpdate")
                .ok_or("rollout.strategy.rollingUpdate is not a mapping")?
                .insert(with_comments(Entry::new("deletePolicy", dp.value), dp.comments));
        }
        if !strategy.entries.is_empty() {
            spec.insert(Entry::new("strategy", Node::Map(strategy)));
        }
        Ok(())
    }

    fn machine_set(&self, spec: &mut Map) -> Result<(), Failure> {
        self.workload_common(spec)?;
        let mut none = Map::default();
        let mut policy = Map::default();
        self.deletion(spec, &mut none, Some(&mut policy))?;
        spec.entries.extend(policy.entries);
        Ok(())
    }

    fn cluster(&self, spec: &mut Map) -> Result<(), Failure> {
        self.contract_ref(spec, "infrastructureRef")?;
        self.contract_ref(spec, "controlPlaneRef")?;
        let Some(topology) = spec.get_mut("topology").and_then(Node::as_map_mut) else {
            return Ok(());
        };
        if let Some(pos) = topology.entries.iter().position(|e| e.key == "classRef") {
            let class_ref = topology.entries.remove(pos);
            let Node::Map(mut r) = class_ref.value else {
                return Err("topology.classRef is not a mapping".into());
            };
            let name = r.remove("name").ok_or("topology.classRef has no name")?;
            let mut entries = vec![with_comments(Entry::new("class", name.value), class_ref.comments)];
            if let Some(ns) = r.remove("namespace") {
                entries.push(with_comments(Entry::new("classNamespace", ns.value), ns.comments));
            }
            for (i, e) in entries.into_iter().enumerate() {
                topology.entries.insert(pos + i, e);
            }
        }
        if let Some(cp) = topology.get_mut("controlPlane").and_then(Node::as_map_mut) {
            self.topology_machines(cp)?;
        }
        if let Some(workers) = topology.get_mut("workers").and_then(Node::as_map_mut) {
            if workers.get("machinePools").is_some() {
                return Err("spec.topology.workers.machinePools is not converted".into());
            }
            if let Some(Node::Seq(mds)) = workers.get_mut("machineDeployments") {
                for it in &mut mds.items {
                    if let Node::Map(md) = &mut it.value {
                        self.topology_machines(md)?;
                        if md.get("rollout").is_some() {
                            return Err(
                                "spec.topology.workers.machineDeployments[].rollout is not converted".into(),
                            );
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// A topology control plane / machine deployment (or their ClusterClass counterparts):
    /// deletion timeouts and health check.
    fn topology_machines(&self, m: &mut Map) -> Result<(), Failure> {
        let mut taken = Map::default();
        self.deletion(m, &mut taken, None)?;
        m.entries.extend(taken.entries);
        if let Some(hc) = m.remove("healthCheck") {
            let Node::Map(mut h) = hc.value else {
                return Err("healthCheck is not a mapping".into());
            };
            rename(&mut h, "enabled", "enable");
            self.health_check(&mut h)?;
            m.insert(with_comments(
                Entry::new("machineHealthCheck", Node::Map(h)),
                hc.comments,
            ));
        }
        Ok(())
    }

    /// v1beta2 `checks`/`remediation` (a MachineHealthCheck spec or a health check of a
    /// topology or class) → the v1beta1 fields.
    fn health_check(&self, spec: &mut Map) -> Result<(), Failure> {
        let mut checks = take_map(spec, "checks");
        let mut remediation = take_map(spec, "remediation");
        self.move_seconds(
            &mut checks,
            "nodeStartupTimeoutSeconds",
            spec,
            "nodeStartupTimeout",
        )?;
        if let Some(uc) = checks.remove("unhealthyNodeConditions") {
            let Node::Seq(mut conds) = uc.value else {
                return Err("unhealthyNodeConditions is not a list".into());
            };
            for it in &mut conds.items {
                if let Node::Map(c) = &mut it.value
                    && let Some(pos) = c.entries.iter().position(|e| e.key == "timeoutSeconds")
                {
                    let t = c.entries.remove(pos);
                    let d = self.duration(&t.value, "unhealthyNodeConditions[].timeoutSeconds")?;
                    c.entries
                        .insert(pos, with_comments(Entry::new("timeout", d), t.comments));
                }
            }
            spec.insert(with_comments(
                Entry::new("unhealthyConditions", Node::Seq(conds)),
                uc.comments,
            ));
        }
        if let Some(e) = checks.entries.first() {
            return Err(format!("checks.{} has no v1beta1 counterpart", e.key));
        }
        let mut trigger = take_map(&mut remediation, "triggerIf");
        move_entry(&mut trigger, "unhealthyLessThanOrEqualTo", spec, "maxUnhealthy");
        move_entry(&mut trigger, "unhealthyInRange", spec, "unhealthyRange");
        if let Some(e) = trigger.entries.first() {
            return Err(format!(
                "remediation.triggerIf.{} has no v1beta1 counterpart",
                e.key
            ));
        }
        move_entry(&mut remediation, "templateRef", spec, "remediationTemplate");
        if let Some(e) = remediation.entries.first() {
            return Err(format!("remediation.{} has no v1beta1 counterpart", e.key));
        }
        Ok(())
    }

    fn cluster_class(&self, spec: &mut Map) -> Result<(), Failure> {
        if let Some(infra) = spec.get_mut("infrastructure").and_then(Node::as_map_mut) {
            self.template_ref(infra)?;
            if let Some(n) = infra.remove("naming") {
                spec.insert(with_comments(
                    Entry::new("infrastructureNamingStrategy", n.value),
                    n.comments,
                ));
            }
        }
        if let Some(cp) = spec.get_mut("controlPlane").and_then(Node::as_map_mut) {
            self.template_ref(cp)?;
            if let Some(mi) = cp.get_mut("machineInfrastructure").and_then(Node::as_map_mut) {
                self.template_ref(mi)?;
            }
            rename(cp, "naming", "namingStrategy");
            self.topology_machines(cp)?;
        }
        if let Some(Node::Seq(mds)) = spec
            .get_mut("workers")
            .and_then(Node::as_map_mut)
            .and_then(|w| w.get_mut("machineDeployments"))
        {
            for it in &mut mds.items {
                if let Node::Map(md) = &mut it.value {
                    self.machine_deployment_class(md)?;
                }
            }
        }
        if spec
            .get("workers")
            .and_then(Node::as_map)
            .is_some_and(|w| w.get("machinePools").is_some())
        {
            return Err("spec.workers.machinePools is not converted".into());
        }
        if let Some(Node::Seq(patches)) = spec.get_mut("patches") {
            for p in &mut patches.items {
                let Some(defs) = p.value.as_map_mut().and_then(|p| p.get_mut("definitions")) else {
                    continue;
                };
                let Node::Seq(defs) = defs else { continue };
                for d in &mut defs.items {
                    if let Some(sel) = d
                        .value
                        .as_map_mut()
                        .and_then(|d| d.get_mut("selector"))
                        .and_then(Node::as_map_mut)
                    {
                        self.api_version_field(sel, "patches[].definitions[].selector")?;
                    }
                }
            }
        }
        Ok(())
    }

    /// A ClusterClass machine deployment class: `bootstrap`/`infrastructure` template refs and
    /// `metadata` go under `template`.
    fn machine_deployment_class(&self, md: &mut Map) -> Result<(), Failure> {
        let mut template = take_map(md, "template");
        for key in ["bootstrap", "infrastructure"] {
            if let Some(e) = md.remove(key) {
                let Node::Map(mut m) = e.value else {
                    return Err(format!("{key} is not a mapping"));
                };
                self.template_ref(&mut m)?;
                template.insert(with_comments(Entry::new(key, Node::Map(m)), e.comments));
            }
        }
        move_entry(md, "metadata", &mut template, "metadata");
        // v1beta1 wants metadata, bootstrap, infrastructure (in that order, for readability).
        template.entries.sort_by_key(|e| match e.key.as_str() {
            "metadata" => 0,
            "bootstrap" => 1,
            _ => 2,
        });
        let at = md
            .entries
            .iter()
            .position(|e| e.key == "class")
            .map_or(0, |p| p + 1);
        md.entries.insert(at, Entry::new("template", Node::Map(template)));
        rename(md, "naming", "namingStrategy");
        self.topology_machines(md)?;
        if md.get("rollout").is_some() {
            return Err("workers.machineDeployments[].rollout is not converted".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
