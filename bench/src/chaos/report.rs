//! What a chaos run found, the checks it must pass, and its printed form.

use std::fmt;

use serde::Serialize;

/// One kill of the manager process.
#[derive(Debug, Clone, Serialize)]
pub struct KillRecord {
    /// Step during which it happened.
    pub step: usize,
    /// Machines of the step at their goal when it happened.
    pub done: usize,
    /// Seconds since the start of the run.
    pub at_secs: f64,
}

/// The result of a chaos run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ChaosReport {
    /// Machines driven through create → provisioned → delete.
    pub machines: usize,
    /// Waves they were created in.
    pub waves: usize,
    /// Overall per-request Proxmox fault rate.
    pub fault_rate: f64,
    /// Seed of faults and kills.
    pub seed: u64,
    /// pve-sim latency profile.
    pub profile: String,
    /// `in-tree` or `kube-apiserver`.
    pub control_plane: String,
    /// Machines seen provisioned.
    pub provisioned: usize,
    /// Machines whose objects are gone after deletion.
    pub deleted: usize,
    /// Machines that failed for good (name: reason: message).
    pub failed: Vec<String>,
    /// Kills of the manager process planned.
    pub planned_kills: usize,
    /// Kills of the manager process that happened.
    pub kills: Vec<KillRecord>,
    /// Clones that completed on Proxmox, all machines together.
    pub vms_cloned: usize,
    /// Machines with more than one completed clone (name and count).
    pub duplicate_vms: Vec<String>,
    /// VMs (not templates) left on Proxmox at the end.
    pub orphaned_vms: Vec<u32>,
    /// Bootstrap ISOs left on Proxmox storage at the end.
    pub leaked_isos: Vec<String>,
    /// IPAddressClaims left at the end.
    pub leaked_claims: Vec<String>,
    /// IPAddresses left at the end.
    pub leaked_addresses: Vec<String>,
    /// Objects left at the end with a deletion timestamp (kind/name: finalizers).
    pub finalizers_left: Vec<String>,
    /// Proxmox API requests the manager sent.
    pub proxmox_requests: u64,
    /// Seconds from the first machine created to everything deleted.
    pub total_secs: f64,
    /// Errors of the run itself (a step that timed out, an API call that failed).
    pub errors: Vec<String>,
}

impl ChaosReport {
    /// Every way the run failed, one line each; empty when it passed.
    pub fn problems(&self) -> Vec<String> {
        let mut out = self.errors.clone();
        let n = self.machines;
        if self.provisioned != n {
            out.push(format!("{} of {n} machines provisioned", self.provisioned));
        }
        if self.deleted != n {
            out.push(format!("{} of {n} machines deleted", self.deleted));
        }
        out.extend(self.failed.iter().map(|f| format!("failed: {f}")));
        if self.kills.len() != self.planned_kills {
            out.push(format!(
                "{} of {} planned kills happened",
                self.kills.len(),
                self.planned_kills
            ));
        }
        let list = |what: &str, items: &[String]| {
            (!items.is_empty()).then(|| format!("{what}: {}", items.join(", ")))
        };
        out.extend(list("more than one VM cloned", &self.duplicate_vms));
        if !self.orphaned_vms.is_empty() {
            out.push(format!("orphaned VMs: {:?}", self.orphaned_vms));
        }
        out.extend(list("leaked ISOs", &self.leaked_isos));
        out.extend(list("leaked IPAddressClaims", &self.leaked_claims));
        out.extend(list("leaked IPAddresses", &self.leaked_addresses));
        out.extend(list("finalizers left", &self.finalizers_left));
        if self.vms_cloned != self.provisioned {
            out.push(format!(
                "{} clones for {} machines provisioned",
                self.vms_cloned, self.provisioned
            ));
        }
        out
    }

    /// True when every check passed.
    pub fn passed(&self) -> bool {
        self.problems().is_empty()
    }
}

impl fmt::Display for ChaosReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let per_machine = |v: usize| {
            if self.provisioned == 0 {
                "-".to_owned()
            } else {
                format!("{:.2}", v as f64 / self.provisioned as f64)
            }
        };
        writeln!(
            f,
            "chaos: {} machines in {} waves, {:.0} % Proxmox faults, seed {}, {} profile, {} control plane",
            self.machines,
            self.waves,
            self.fault_rate * 100.0,
            self.seed,
            self.profile,
            self.control_plane
        )?;
        let rows: Vec<(&str, String)> = vec![
            (
                "machines provisioned",
                format!("{} / {}", self.provisioned, self.machines),
            ),
            (
                "machines deleted",
                format!("{} / {}", self.deleted, self.machines),
            ),
            ("machines failed for good", self.failed.len().to_string()),
            (
                "manager kills (SIGKILL)",
                self.kills
                    .iter()
                    .map(|k| format!("step {} at {} done ({:.1} s)", k.step, k.done, k.at_secs))
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            ("VMs cloned per machine provisioned", per_machine(self.vms_cloned)),
            (
                "machines with more than one VM",
                self.duplicate_vms.len().to_string(),
            ),
            ("orphaned VMs", self.orphaned_vms.len().to_string()),
            ("leaked ISOs", self.leaked_isos.len().to_string()),
            ("leaked IPAddressClaims", self.leaked_claims.len().to_string()),
            ("leaked IPAddresses", self.leaked_addresses.len().to_string()),
            ("finalizers left", self.finalizers_left.len().to_string()),
            (
                "Proxmox requests per machine",
                per_machine(self.proxmox_requests as usize),
            ),
            ("time", format!("{:.1} s", self.total_secs)),
        ];
        for (k, v) in rows {
            writeln!(f, "  {k:<36} {v}")?;
        }
        let problems = self.problems();
        if problems.is_empty() {
            writeln!(f, "PASSED")
        } else {
            writeln!(f, "FAILED:")?;
            for p in problems {
                writeln!(f, "  - {p}")?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_run_passes_and_every_leak_is_named() {
        let mut r = ChaosReport {
            machines: 2,
            provisioned: 2,
            deleted: 2,
            vms_cloned: 2,
            ..ChaosReport::default()
        };
        assert!(r.passed(), "{:?}", r.problems());
        assert!(r.to_string().contains("PASSED"));
        r.duplicate_vms.push("m-1 (2 VMs)".into());
        r.vms_cloned = 3;
        r.leaked_isos.push("local:iso/user-data-m-1.iso".into());
        r.deleted = 1;
        let p = r.problems();
        assert_eq!(p.len(), 4, "{p:?}");
        let text = r.to_string();
        assert!(
            text.contains("FAILED") && text.contains("user-data-m-1"),
            "{text}"
        );
    }
}
