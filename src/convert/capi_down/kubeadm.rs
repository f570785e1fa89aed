//! The kubeadm kinds (KubeadmControlPlane, KubeadmConfig and their templates) v1beta2 → v1beta1.

use super::super::capi::{take_map, with_comments};
use super::{Cx, Failure, move_entry};
use crate::convert::tree::{Entry, Map, Node};

impl Cx<'_> {
    /// KubeadmControlPlane spec (or a KubeadmControlPlaneTemplate's template spec).
    pub(super) fn control_plane(&self, spec: &mut Map) -> Result<(), Failure> {
        if let Some(mt) = spec.get_mut("machineTemplate").and_then(Node::as_map_mut) {
            let mut inner = take_map(mt, "spec");
            if inner.get("infrastructureRef").is_some() {
                self.contract_ref(&mut inner, "infrastructureRef")?;
                move_entry(&mut inner, "infrastructureRef", mt, "infrastructureRef");
            }
            move_entry(&mut inner, "readinessGates", mt, "readinessGates");
            let mut taken = Map::default();
            self.deletion(&mut inner, &mut taken, None)?;
            mt.entries.extend(taken.entries);
            if let Some(e) = inner.entries.first() {
                return Err(format!(
                    "machineTemplate.spec.{} has no v1beta1 counterpart",
                    e.key
                ));
            }
        }
        if let Some(k) = spec.get_mut("kubeadmConfigSpec").and_then(Node::as_map_mut) {
            self.kubeadm_config_spec(k)?;
        }
        let mut rollout = take_map(spec, "rollout");
        for (new, old) in [
            ("strategy", "rolloutStrategy"),
            ("after", "rolloutAfter"),
            ("before", "rolloutBefore"),
        ] {
            move_entry(&mut rollout, new, spec, old);
        }
        if let Some(e) = rollout.entries.first() {
            return Err(format!("rollout.{} has no v1beta1 counterpart", e.key));
        }
        if let Some(r) = spec.remove("remediation") {
            let Node::Map(mut r_map) = r.value else {
                return Err("remediation is not a mapping".into());
            };
            let mut out = Map::default();
            move_entry(&mut r_map, "maxRetry", &mut out, "maxRetry");
            self.move_seconds(&mut r_map, "retryPeriodSeconds", &mut out, "retryPeriod")?;
            self.move_seconds(
                &mut r_map,
                "minHealthyPeriodSeconds",
                &mut out,
                "minHealthyPeriod",
            )?;
            if let Some(e) = r_map.entries.first() {
                return Err(format!("remediation.{} has no v1beta1 counterpart", e.key));
            }
            spec.insert(with_comments(
                Entry::new("remediationStrategy", Node::Map(out)),
                r.comments,
            ));
        }
        Ok(())
    }

    /// KubeadmConfigSpec: argument lists → maps, timeouts back to their v1beta1 places.
    pub(super) fn kubeadm_config_spec(&self, spec: &mut Map) -> Result<(), Failure> {
        if let Some(cc) = spec.get_mut("clusterConfiguration").and_then(Node::as_map_mut) {
            for component in ["apiServer", "controllerManager", "scheduler"] {
                if let Some(c) = cc.get_mut(component).and_then(Node::as_map_mut) {
                    list_to_args(c, "extraArgs")?;
                }
            }
            if let Some(local) = cc
                .get_mut("etcd")
                .and_then(Node::as_map_mut)
                .and_then(|e| e.get_mut("local"))
                .and_then(Node::as_map_mut)
            {
                list_to_args(local, "extraArgs")?;
            }
        }
        let mut control_plane_timeout: Option<Node> = None;
        for (cfg, init) in [("initConfiguration", true), ("joinConfiguration", false)] {
            let Some(c) = spec.get_mut(cfg).and_then(Node::as_map_mut) else {
                continue;
            };
            if let Some(nr) = c.get_mut("nodeRegistration").and_then(Node::as_map_mut) {
                list_to_args(nr, "kubeletExtraArgs")?;
            }
            let mut timeouts = take_map(c, "timeouts");
            if let Some(t) = timeouts.remove("controlPlaneComponentHealthCheckSeconds") {
                let d = self.duration(&t.value, "timeouts.controlPlaneComponentHealthCheckSeconds")?;
                if control_plane_timeout
                    .as_ref()
                    .is_some_and(|p| p.as_str() != d.as_str())
                {
                    return Err(
                        "init and join timeouts.controlPlaneComponentHealthCheckSeconds differ; v1beta1 has one".into(),
                    );
                }
                control_plane_timeout = Some(d);
            }
            if !init && let Some(t) = timeouts.remove("tlsBootstrapSeconds") {
                let d = self.duration(&t.value, "timeouts.tlsBootstrapSeconds")?;
                c.child_map("discovery")
                    .ok_or("discovery is not a mapping")?
                    .insert(with_comments(Entry::new("timeout", d), t.comments));
            }
            if let Some(e) = timeouts.entries.first() {
                return Err(format!("{cfg}.timeouts.{} has no v1beta1 counterpart", e.key));
            }
            if init && let Some(Node::Seq(tokens)) = c.get_mut("bootstrapTokens") {
                for it in &mut tokens.items {
                    if let Node::Map(t) = &mut it.value
                        && let Some(pos) = t.entries.iter().position(|e| e.key == "ttlSeconds")
                    {
                        let ttl = t.entries.remove(pos);
                        let d = self.duration(&ttl.value, "bootstrapTokens[].ttlSeconds")?;
                        t.entries
                            .insert(pos, with_comments(Entry::new("ttl", d), ttl.comments));
                    }
                }
            }
            if c.entries.is_empty() {
                spec.remove(cfg);
            }
        }
        if let Some(t) = control_plane_timeout {
            spec.child_map("clusterConfiguration")
                .ok_or("clusterConfiguration is not a mapping")?
                .child_map("apiServer")
                .ok_or("clusterConfiguration.apiServer is not a mapping")?
                .insert(Entry::new("timeoutForControlPlane", t));
        }
        Ok(())
    }
}

/// `key: [{name: a, value: "1"}]` → `key: {a: "1"}` (already-maps are left alone); a name given
/// twice cannot be a map key.
fn list_to_args(m: &mut Map, key: &str) -> Result<(), Failure> {
    let Some(pos) = m.entries.iter().position(|e| e.key == key) else {
        return Ok(());
    };
    let Node::Seq(items) = &m.entries[pos].value else {
        return Ok(());
    };
    let mut args = Map::default();
    for it in &items.items {
        let Node::Map(a) = &it.value else {
            return Err(format!("{key}[] is not a name/value mapping"));
        };
        let name = a
            .get("name")
            .and_then(Node::as_str)
            .ok_or_else(|| format!("{key}[] has no name"))?
            .to_owned();
        if args.get(&name).is_some() {
            return Err(format!(
                "{key} names {name} twice; v1beta1 holds one value per argument"
            ));
        }
        let value = a.get("value").cloned().unwrap_or_else(|| Node::text(""));
        let mut e = Entry::new(name, value);
        e.comments = it.comments.clone();
        args.entries.push(e);
    }
    if args.entries.is_empty() {
        m.entries.remove(pos);
    } else {
        m.entries[pos].value = Node::Map(args);
    }
    Ok(())
}
