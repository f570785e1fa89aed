//! Progress output: timestamped lines and the tracking of each ProxmoxMachine's
//! `VirtualMachineProvisioned` reason.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Instant;

use capmox_api::v1alpha2::ProxmoxMachine;
use capmox_api::v1alpha2::VIRTUAL_MACHINE_PROVISIONED_CONDITION;
use kube::ResourceExt;

use crate::DemoError;

/// Writes `[ 12.3s] ...` lines, timed from the start of the demo.
pub struct Printer<W: Write> {
    out: W,
    start: Instant,
}

impl<W: Write> Printer<W> {
    /// A printer timing from now.
    pub fn new(out: W) -> Self {
        Self {
            out,
            start: Instant::now(),
        }
    }

    /// When the demo started.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// One timestamped line.
    pub fn line(&mut self, text: impl AsRef<str>) -> Result<(), DemoError> {
        let secs = self.start.elapsed().as_secs_f64();
        writeln!(self.out, "[{secs:>5.1}s] {}", text.as_ref()).map_err(DemoError::Output)?;
        self.out.flush().map_err(DemoError::Output)
    }

    /// Text without a timestamp (tables, reports).
    pub fn raw(&mut self, text: impl AsRef<str>) -> Result<(), DemoError> {
        write!(self.out, "{}", text.as_ref()).map_err(DemoError::Output)?;
        self.out.flush().map_err(DemoError::Output)
    }
}

/// The `VirtualMachineProvisioned` reason (and message) of a ProxmoxMachine.
pub fn provisioning_reason(pm: &ProxmoxMachine) -> Option<(String, String)> {
    pm.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == VIRTUAL_MACHINE_PROVISIONED_CONDITION)
        .map(|c| (c.reason.clone(), c.message.clone()))
}

/// Whether the ProxmoxMachine reports `status.initialization.provisioned: true`.
pub fn is_provisioned(pm: &ProxmoxMachine) -> bool {
    pm.status
        .as_ref()
        .and_then(|s| s.initialization.as_ref())
        .and_then(|i| i.provisioned)
        .unwrap_or(false)
}

/// Last seen reason per machine; reports changes.
#[derive(Debug, Default)]
pub struct ReasonTracker {
    last: BTreeMap<String, String>,
    messages: BTreeMap<String, String>,
}

impl ReasonTracker {
    /// Records the machines' current reasons and returns one line per change
    /// (`demo-cp-0       Cloning -> WaitingForDiskReconciliation`).
    pub fn observe(&mut self, machines: &[ProxmoxMachine]) -> Vec<String> {
        let mut lines = Vec::new();
        for pm in machines {
            let name = pm.name_any();
            let Some((reason, message)) = provisioning_reason(pm) else {
                continue;
            };
            self.messages.insert(name.clone(), message);
            let before = self.last.get(&name).cloned().unwrap_or_else(|| "-".to_owned());
            if before != reason {
                lines.push(format!("{name:<15} {before} -> {reason}"));
                self.last.insert(name, reason);
            }
        }
        lines
    }

    /// The last reason and message of every machine seen (for timeout diagnostics).
    pub fn summary(&self) -> String {
        self.last
            .iter()
            .map(|(name, reason)| {
                let msg = self.messages.get(name).map(String::as_str).unwrap_or_default();
                if msg.is_empty() {
                    format!("{name}: {reason}")
                } else {
                    format!("{name}: {reason} ({msg})")
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pm(name: &str, reason: &str) -> ProxmoxMachine {
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
            "kind": "ProxmoxMachine",
            "metadata": {"name": name},
            "spec": {"network": {"networkDevices": [{"name": "net0"}]}},
            "status": {"conditions": [{
                "type": "VirtualMachineProvisioned", "status": "False", "reason": reason,
                "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"
            }]},
        }))
        .unwrap()
    }

    #[test]
    fn reports_only_changes() {
        let mut t = ReasonTracker::default();
        assert_eq!(
            t.observe(&[pm("a", "Cloning")]),
            vec!["a               - -> Cloning"]
        );
        assert!(t.observe(&[pm("a", "Cloning")]).is_empty());
        assert_eq!(
            t.observe(&[pm("a", "WaitingForDiskReconciliation")]),
            vec!["a               Cloning -> WaitingForDiskReconciliation"]
        );
        assert_eq!(t.summary(), "a: WaitingForDiskReconciliation (m)");
    }
}
