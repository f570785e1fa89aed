//! Cluster API v1beta1 → v1beta2 for the kinds cluster templates use, as tree rewrites that keep
//! comments and styles: references become `apiGroup` references, durations become `…Seconds`
//! integers under `deletion`/`timeouts`, `extraArgs`/`kubeletExtraArgs` maps become name/value
//! lists, rollout/remediation settings move to their v1beta2 places, MachineHealthCheck checks
//! and remediation are regrouped. A document with something this does not know how to convert is
//! left as it is (CAPI still serves v1beta1) with a warning saying why.

use super::tokens::Tokens;
use super::tree::{Comments, Entry, Item, Map, Node, Seq};

/// Why a document is left unconverted.
pub type Skip = String;

/// The v1beta2 apiVersion for a v1beta1 kind this module converts, if it does.
pub fn target_version(api_version: &str, kind: &str) -> Option<&'static str> {
    match (api_version, kind) {
        (
            "cluster.x-k8s.io/v1beta1",
            "Cluster" | "MachineDeployment" | "MachineSet" | "Machine" | "MachineHealthCheck",
        ) => Some("cluster.x-k8s.io/v1beta2"),
        ("controlplane.cluster.x-k8s.io/v1beta1", "KubeadmControlPlane" | "KubeadmControlPlaneTemplate") => {
            Some("controlplane.cluster.x-k8s.io/v1beta2")
        }
        ("bootstrap.cluster.x-k8s.io/v1beta1", "KubeadmConfig" | "KubeadmConfigTemplate") => {
            Some("bootstrap.cluster.x-k8s.io/v1beta2")
        }
        ("addons.cluster.x-k8s.io/v1beta1", "ClusterResourceSet") => Some("addons.cluster.x-k8s.io/v1beta2"),
        _ => None,
    }
}

/// Whether this is a v1beta1 kind of CAPI this module does not convert (reported, left as is).
pub fn is_unconverted_v1beta1(api_version: &str) -> bool {
    matches!(
        api_version,
        "cluster.x-k8s.io/v1beta1"
            | "controlplane.cluster.x-k8s.io/v1beta1"
            | "bootstrap.cluster.x-k8s.io/v1beta1"
            | "addons.cluster.x-k8s.io/v1beta1"
    )
}

/// Rewrites `root` (a v1beta1 object of `kind`) in place; warnings for dropped fields.
pub fn convert(root: &mut Node, kind: &str, target: &str, tokens: &Tokens) -> Result<Vec<String>, Skip> {
    let mut cx = Cx {
        tokens,
        warnings: Vec::new(),
    };
    let Some(obj) = root.as_map_mut() else {
        return Err("not a mapping".into());
    };
    if let Some(status) = obj.remove("status")
        && !is_empty(&status.value)
    {
        cx.warnings.push("status dropped (the API server sets it)".into());
    }
    if let Some(Node::Scalar(s)) = obj.get_mut("apiVersion") {
        s.text = target.to_owned();
    }
    if let Some(spec) = obj.get_mut("spec").and_then(Node::as_map_mut) {
        match kind {
            "Cluster" => cx.cluster(spec)?,
            "MachineDeployment" => cx.machine_deployment(spec)?,
            "MachineSet" => cx.machine_set(spec)?,
            "Machine" => cx.machine_spec(spec)?,
            "MachineHealthCheck" => cx.health_check(spec, false)?,
            "KubeadmControlPlane" => cx.control_plane(spec)?,
            "KubeadmControlPlaneTemplate" => {
                if let Some(s) = template_spec(spec) {
                    cx.control_plane(s)?;
                }
            }
            "KubeadmConfig" => cx.kubeadm_config_spec(spec)?,
            "KubeadmConfigTemplate" => {
                if let Some(s) = template_spec(spec) {
                    cx.kubeadm_config_spec(s)?;
                }
            }
            _ => {}
        }
    }
    Ok(cx.warnings)
}

fn template_spec(spec: &mut Map) -> Option<&mut Map> {
    spec.get_mut("template")?
        .as_map_mut()?
        .get_mut("spec")?
        .as_map_mut()
}

fn is_empty(n: &Node) -> bool {
    match n {
        Node::Map(m) => m.entries.iter().all(|e| is_empty(&e.value)),
        Node::Seq(s) => s.items.is_empty(),
        Node::Scalar(s) => matches!(s.text.as_str(), "" | "null" | "~" | "false" | "0"),
    }
}

struct Cx<'a> {
    tokens: &'a Tokens,
    warnings: Vec<String>,
}

impl Cx<'_> {
    fn scalar<'n>(&self, n: &'n Node, what: &str) -> Result<&'n str, Skip> {
        n.as_str().ok_or_else(|| format!("{what} is not a scalar"))
    }

    /// `{apiVersion, kind, name[, namespace]}` → `{apiGroup, kind, name}`.
    fn contract_ref(&mut self, map: &mut Map, key: &str) -> Result<(), Skip> {
        let Some(r) = map.get_mut(key).and_then(Node::as_map_mut) else {
            return Ok(());
        };
        if r.get("apiGroup").is_some() {
            return Ok(());
        }
        if let Some(ns) = r.remove("namespace") {
            self.warnings.push(format!(
                "{key}.namespace ({}) dropped: v1beta2 references point into the object's own namespace",
                ns.value.as_str().unwrap_or("?")
            ));
        }
        for k in ["uid", "resourceVersion", "fieldPath"] {
            r.remove(k);
        }
        let Some(pos) = r.entries.iter().position(|e| e.key == "apiVersion") else {
            return Err(format!("{key} has no apiVersion"));
        };
        let api_version = self.scalar(&r.entries[pos].value, "apiVersion")?.to_owned();
        if self.tokens.contains_token(&api_version) {
            return Err(format!("{key}.apiVersion is a variable"));
        }
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g).to_owned();
        r.entries[pos].key = "apiGroup".into();
        r.entries[pos].value = Node::text(group);
        Ok(())
    }

    /// A Go duration (`90s`, `1m30s`) as whole seconds.
    fn seconds(&self, n: &Node, what: &str) -> Result<Node, Skip> {
        let text = self.scalar(n, what)?;
        if self.tokens.contains_token(text) {
            return Err(format!("{what} is a variable; v1beta2 needs whole seconds"));
        }
        let d = crate::duration::parse_duration(text).map_err(|e| format!("{what}: {e}"))?;
        Ok(Node::plain(d.as_secs().to_string()))
    }

    /// Moves the duration `key` of `from` to `into.<new_key>` in seconds.
    fn move_duration(&self, from: &mut Map, key: &str, into: &mut Map, new_key: &str) -> Result<(), Skip> {
        if let Some(e) = from.remove(key) {
            let secs = self.seconds(&e.value, key)?;
            into.insert(with_comments(Entry::new(new_key, secs), e.comments));
        }
        Ok(())
    }

    /// `nodeDrainTimeout` & co. of a machine spec → `deletion.*Seconds` of `target`.
    fn deletion_timeouts(&self, from: &mut Map, target: &mut Map) -> Result<(), Skip> {
        let mut deletion = target
            .remove("deletion")
            .and_then(|e| match e.value {
                Node::Map(m) => Some(m),
                _ => None,
            })
            .unwrap_or_default();
        for (old, new) in [
            ("nodeDrainTimeout", "nodeDrainTimeoutSeconds"),
            ("nodeVolumeDetachTimeout", "nodeVolumeDetachTimeoutSeconds"),
            ("nodeDeletionTimeout", "nodeDeletionTimeoutSeconds"),
        ] {
            self.move_duration(from, old, &mut deletion, new)?;
        }
        if !deletion.entries.is_empty() {
            target.insert(Entry::new("deletion", Node::Map(deletion)));
        }
        Ok(())
    }

    fn machine_spec(&mut self, spec: &mut Map) -> Result<(), Skip> {
        if let Some(b) = spec.get_mut("bootstrap").and_then(Node::as_map_mut) {
            self.contract_ref(b, "configRef")?;
        }
        self.contract_ref(spec, "infrastructureRef")?;
        let mut taken = take_timeouts(spec);
        self.deletion_timeouts(&mut taken, spec)
    }

    fn machine_deployment(&mut self, spec: &mut Map) -> Result<(), Skip> {
        self.workload_common(spec)?;
        let mut rollout = take_map(spec, "rollout");
        if let Some(strategy) = spec.remove("strategy") {
            let Node::Map(mut s) = strategy.value else {
                return Err("strategy is not a mapping".into());
            };
            if let Some(r) = s.remove("remediation") {
                spec.insert(with_comments(Entry::new("remediation", r.value), r.comments));
            }
            if let Some(ru) = s.get_mut("rollingUpdate").and_then(Node::as_map_mut)
                && let Some(dp) = ru.remove("deletePolicy")
            {
                spec.child_map("deletion")
                    .ok_or("deletion is not a mapping")?
                    .insert(with_comments(Entry::new("order", dp.value), dp.comments));
            }
            if !s.entries.is_empty() {
                rollout.insert(with_comments(
                    Entry::new("strategy", Node::Map(s)),
                    strategy.comments,
                ));
            }
        }
        if let Some(after) = spec.remove("rolloutAfter") {
            rollout.insert(with_comments(Entry::new("after", after.value), after.comments));
        }
        if !rollout.entries.is_empty() {
            spec.insert(Entry::new("rollout", Node::Map(rollout)));
        }
        for k in ["progressDeadlineSeconds", "revisionHistoryLimit"] {
            if spec.remove(k).is_some() {
                self.warnings.push(format!("spec.{k} dropped (not in v1beta2)"));
            }
        }
        Ok(())
    }

    fn machine_set(&mut self, spec: &mut Map) -> Result<(), Skip> {
        self.workload_common(spec)?;
        if let Some(dp) = spec.remove("deletePolicy") {
            spec.child_map("deletion")
                .ok_or("deletion is not a mapping")?
                .insert(with_comments(Entry::new("order", dp.value), dp.comments));
        }
        Ok(())
    }

    /// What MachineDeployments and MachineSets share: the machine template and minReadySeconds.
    fn workload_common(&mut self, spec: &mut Map) -> Result<(), Skip> {
        let min_ready = spec.remove("minReadySeconds");
        if let Some(t) = spec
            .get_mut("template")
            .and_then(Node::as_map_mut)
            .and_then(|t| t.child_map("spec"))
        {
            self.machine_spec(t)?;
            if let Some(m) = min_ready {
                t.insert(with_comments(Entry::new("minReadySeconds", m.value), m.comments));
            }
        }
        Ok(())
    }

    fn cluster(&mut self, spec: &mut Map) -> Result<(), Skip> {
        self.contract_ref(spec, "infrastructureRef")?;
        self.contract_ref(spec, "controlPlaneRef")?;
        let Some(topology) = spec.get_mut("topology").and_then(Node::as_map_mut) else {
            return Ok(());
        };
        for k in ["rolloutAfter"] {
            if topology.get(k).is_some() {
                return Err(format!("spec.topology.{k} has no v1beta2 counterpart"));
            }
        }
        if let Some(pos) = topology.entries.iter().position(|e| e.key == "class") {
            let class = topology.entries.remove(pos);
            let mut class_ref = vec![Entry::new("name", class.value)];
            if let Some(ns) = topology.remove("classNamespace") {
                class_ref.push(with_comments(Entry::new("namespace", ns.value), ns.comments));
            }
            topology.entries.insert(
                pos,
                with_comments(Entry::new("classRef", Node::map(class_ref)), class.comments),
            );
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
                        if md.get("strategy").is_some() {
                            return Err(
                                "spec.topology.workers.machineDeployments[].strategy is not converted".into(),
                            );
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Topology control plane / machine deployment: timeouts and health check.
    fn topology_machines(&mut self, m: &mut Map) -> Result<(), Skip> {
        let mut taken = take_timeouts(m);
        self.deletion_timeouts(&mut taken, m)?;
        if let Some(mhc) = m.remove("machineHealthCheck") {
            let Node::Map(mut h) = mhc.value else {
                return Err("machineHealthCheck is not a mapping".into());
            };
            self.health_check(&mut h, true)?;
            m.insert(with_comments(
                Entry::new("healthCheck", Node::Map(h)),
                mhc.comments,
            ));
        }
        Ok(())
    }

    /// MachineHealthCheck spec (or a topology `machineHealthCheck`) → v1beta2 checks/remediation.
    fn health_check(&mut self, spec: &mut Map, topology: bool) -> Result<(), Skip> {
        let mut checks = take_map(spec, "checks");
        let mut remediation = take_map(spec, "remediation");
        if topology && let Some(e) = spec.remove("enable") {
            spec.insert(with_comments(Entry::new("enabled", e.value), e.comments));
        }
        self.move_duration(
            spec,
            "nodeStartupTimeout",
            &mut checks,
            "nodeStartupTimeoutSeconds",
        )?;
        if let Some(uc) = spec.remove("unhealthyConditions") {
            let Node::Seq(mut conds) = uc.value else {
                return Err("unhealthyConditions is not a list".into());
            };
            for it in &mut conds.items {
                if let Node::Map(c) = &mut it.value
                    && let Some(pos) = c.entries.iter().position(|e| e.key == "timeout")
                {
                    let t = c.entries.remove(pos);
                    let secs = self.seconds(&t.value, "unhealthyConditions[].timeout")?;
                    c.entries
                        .insert(pos, with_comments(Entry::new("timeoutSeconds", secs), t.comments));
                }
            }
            checks.insert(with_comments(
                Entry::new("unhealthyNodeConditions", Node::Seq(conds)),
                uc.comments,
            ));
        }
        let mut trigger = Map::default();
        for (old, new) in [
            ("maxUnhealthy", "unhealthyLessThanOrEqualTo"),
            ("unhealthyRange", "unhealthyInRange"),
        ] {
            if let Some(e) = spec.remove(old) {
                trigger.insert(with_comments(Entry::new(new, e.value), e.comments));
            }
        }
        if !trigger.entries.is_empty() {
            remediation.insert(Entry::new("triggerIf", Node::Map(trigger)));
        }
        if let Some(t) = spec.remove("remediationTemplate") {
            let Node::Map(mut r) = t.value else {
                return Err("remediationTemplate is not a mapping".into());
            };
            if r.remove("namespace").is_some() {
                self.warnings
                    .push("remediationTemplate.namespace dropped (same namespace in v1beta2)".into());
            }
            remediation.insert(with_comments(Entry::new("templateRef", Node::Map(r)), t.comments));
        }
        if !checks.entries.is_empty() {
            spec.insert(Entry::new("checks", Node::Map(checks)));
        }
        if !remediation.entries.is_empty() {
            spec.insert(Entry::new("remediation", Node::Map(remediation)));
        }
        Ok(())
    }

    /// KubeadmControlPlane spec (or a KubeadmControlPlaneTemplate's template spec).
    fn control_plane(&mut self, spec: &mut Map) -> Result<(), Skip> {
        if let Some(mt) = spec.get_mut("machineTemplate").and_then(Node::as_map_mut) {
            let mut inner = take_map(mt, "spec");
            if let Some(r) = mt.remove("infrastructureRef") {
                inner.insert(with_comments(
                    Entry::new("infrastructureRef", r.value),
                    r.comments,
                ));
                self.contract_ref(&mut inner, "infrastructureRef")?;
            }
            if let Some(r) = mt.remove("readinessGates") {
                inner.insert(with_comments(Entry::new("readinessGates", r.value), r.comments));
            }
            let mut taken = take_timeouts(mt);
            self.deletion_timeouts(&mut taken, &mut inner)?;
            if !inner.entries.is_empty() {
                mt.insert(Entry::new("spec", Node::Map(inner)));
            }
        }
        if let Some(k) = spec.get_mut("kubeadmConfigSpec").and_then(Node::as_map_mut) {
            self.kubeadm_config_spec(k)?;
        }
        let mut rollout = take_map(spec, "rollout");
        for (old, new) in [
            ("rolloutStrategy", "strategy"),
            ("rolloutAfter", "after"),
            ("rolloutBefore", "before"),
        ] {
            if let Some(e) = spec.remove(old) {
                rollout.insert(with_comments(Entry::new(new, e.value), e.comments));
            }
        }
        if !rollout.entries.is_empty() {
            spec.insert(Entry::new("rollout", Node::Map(rollout)));
        }
        if let Some(rs) = spec.remove("remediationStrategy") {
            let Node::Map(mut r) = rs.value else {
                return Err("remediationStrategy is not a mapping".into());
            };
            let mut out = take_map(spec, "remediation");
            if let Some(m) = r.remove("maxRetry") {
                out.insert(with_comments(Entry::new("maxRetry", m.value), m.comments));
            }
            self.move_duration(&mut r, "retryPeriod", &mut out, "retryPeriodSeconds")?;
            self.move_duration(&mut r, "minHealthyPeriod", &mut out, "minHealthyPeriodSeconds")?;
            if let Some(e) = r.entries.first() {
                return Err(format!("remediationStrategy.{} is not converted", e.key));
            }
            spec.insert(with_comments(
                Entry::new("remediation", Node::Map(out)),
                rs.comments,
            ));
        }
        Ok(())
    }

    /// KubeadmConfigSpec: argument maps → lists, moved timeouts, dropped fields.
    fn kubeadm_config_spec(&mut self, spec: &mut Map) -> Result<(), Skip> {
        if spec.remove("useExperimentalRetryJoin").is_some() {
            self.warnings
                .push("useExperimentalRetryJoin dropped (not in v1beta2)".into());
        }
        let mut control_plane_timeout = None;
        if let Some(cc) = spec.get_mut("clusterConfiguration").and_then(Node::as_map_mut) {
            for k in ["networking", "kubernetesVersion", "clusterName"] {
                if cc.remove(k).is_some() {
                    self.warnings.push(format!(
                        "clusterConfiguration.{k} dropped (v1beta2 takes it from the Cluster)"
                    ));
                }
            }
            for component in ["apiServer", "controllerManager", "scheduler"] {
                if let Some(c) = cc.get_mut(component).and_then(Node::as_map_mut) {
                    args_to_list(c, "extraArgs")?;
                }
            }
            if let Some(local) = cc
                .get_mut("etcd")
                .and_then(Node::as_map_mut)
                .and_then(|e| e.get_mut("local"))
                .and_then(Node::as_map_mut)
            {
                args_to_list(local, "extraArgs")?;
            }
            if let Some(api) = cc.get_mut("apiServer").and_then(Node::as_map_mut)
                && let Some(t) = api.remove("timeoutForControlPlane")
            {
                control_plane_timeout = Some(self.seconds(&t.value, "timeoutForControlPlane")?);
            }
            for component in ["apiServer", "controllerManager", "scheduler"] {
                if cc.get(component).is_some_and(is_empty_map) {
                    cc.remove(component);
                }
            }
        }
        if spec.get("clusterConfiguration").is_some_and(is_empty_map) {
            spec.remove("clusterConfiguration");
        }
        for (cfg, init) in [("initConfiguration", true), ("joinConfiguration", false)] {
            let needs = control_plane_timeout.is_some();
            if needs && spec.get(cfg).is_none() {
                spec.insert(Entry::new(cfg, Node::map(Vec::new())));
            }
            let Some(c) = spec.get_mut(cfg).and_then(Node::as_map_mut) else {
                continue;
            };
            if let Some(nr) = c.get_mut("nodeRegistration").and_then(Node::as_map_mut) {
                args_to_list(nr, "kubeletExtraArgs")?;
            }
            let mut timeouts = take_map(c, "timeouts");
            if let Some(t) = &control_plane_timeout {
                timeouts.insert(Entry::new("controlPlaneComponentHealthCheckSeconds", t.clone()));
            }
            if init {
                if let Some(Node::Seq(tokens)) = c.get_mut("bootstrapTokens") {
                    for it in &mut tokens.items {
                        if let Node::Map(t) = &mut it.value
                            && let Some(pos) = t.entries.iter().position(|e| e.key == "ttl")
                        {
                            let ttl = t.entries.remove(pos);
                            let secs = self.seconds(&ttl.value, "bootstrapTokens[].ttl")?;
                            t.entries
                                .insert(pos, with_comments(Entry::new("ttlSeconds", secs), ttl.comments));
                        }
                    }
                }
            } else if let Some(d) = c.get_mut("discovery").and_then(Node::as_map_mut)
                && let Some(t) = d.remove("timeout")
            {
                let secs = self.seconds(&t.value, "discovery.timeout")?;
                timeouts.insert(with_comments(Entry::new("tlsBootstrapSeconds", secs), t.comments));
            }
            if !timeouts.entries.is_empty() {
                c.insert(Entry::new("timeouts", Node::Map(timeouts)));
            }
        }
        Ok(())
    }
}

fn is_empty_map(n: &Node) -> bool {
    matches!(n, Node::Map(m) if m.entries.is_empty())
}

/// Removes the v1beta1 machine deletion timeouts from `m`.
fn take_timeouts(m: &mut Map) -> Map {
    let mut taken = Map::default();
    for k in [
        "nodeDrainTimeout",
        "nodeVolumeDetachTimeout",
        "nodeDeletionTimeout",
    ] {
        if let Some(e) = m.remove(k) {
            taken.entries.push(e);
        }
    }
    taken
}

pub(super) fn with_comments(mut e: Entry, c: Comments) -> Entry {
    e.comments = c;
    e
}

/// Removes `key` and returns it as a mapping (empty when absent or not a mapping).
pub(super) fn take_map(m: &mut Map, key: &str) -> Map {
    match m.remove(key).map(|e| e.value) {
        Some(Node::Map(x)) => x,
        _ => Map::default(),
    }
}

/// `key: {a: "1"}` → `key: [{name: a, value: "1"}]` (already-lists are left alone).
fn args_to_list(m: &mut Map, key: &str) -> Result<(), Skip> {
    let Some(pos) = m.entries.iter().position(|e| e.key == key) else {
        return Ok(());
    };
    let items = match &m.entries[pos].value {
        Node::Seq(_) => return Ok(()),
        Node::Map(args) => args
            .entries
            .iter()
            .map(|a| {
                let mut it = Item::new(Node::map(vec![
                    Entry::new("name", Node::text(a.key.clone())),
                    Entry::new("value", a.value.clone()),
                ]));
                it.comments = a.comments.clone();
                it
            })
            .collect(),
        Node::Scalar(s) if s.text.is_empty() || s.text == "null" => Vec::new(),
        Node::Scalar(_) => return Err(format!("{key} is neither a map nor a list")),
    };
    if items.is_empty() {
        m.entries.remove(pos);
    } else {
        m.entries[pos].value = Node::Seq(Seq { items, flow: false });
    }
    Ok(())
}
