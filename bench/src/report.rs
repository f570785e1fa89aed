//! What one bench run measured ([`RunReport`], also the `--json` output), the critical-path
//! floor it is compared with, and the table `make bench` prints.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::counts::Delta;
use crate::floor::{self, Floor};

/// The time one machine needs if every API call returned at once: the issue's definition — full
/// (or linked) clone, two config tasks (configuration and IP tags), the ISO import, the start and
/// the guest until cloud-init is done (or the agent answers, whichever is later).
pub fn floor_secs(latency: &pve_sim::LatencySpec, full_clone: bool) -> f64 {
    let clone = if full_clone {
        "qmclone-full"
    } else {
        "qmclone-linked"
    };
    let tasks = [clone, "qmconfig", "qmconfig", "imgcopy", "qmstart"]
        .iter()
        .map(|t| latency.task(t).as_secs_f64())
        .sum::<f64>();
    tasks + latency.cloud_init_done().max(latency.agent_ready()).as_secs_f64()
}

/// Everything one run measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RunReport {
    /// Machines provisioned and deleted.
    pub machines: usize,
    /// pve-sim latency profile (`realistic`, `instant`).
    pub profile: String,
    /// `in-tree` or `kube-apiserver`.
    pub control_plane: String,
    /// How Kubernetes requests were counted.
    pub kube_counting: String,
    /// Manager arguments beyond the defaults.
    pub manager_args: Vec<String>,
    /// Critical-path floor of one machine, seconds.
    pub floor_secs: f64,
    /// From creating the machines until all were provisioned, seconds.
    pub makespan_secs: f64,
    /// From creating the machines until all bootstrap ISOs were removed (the end of the
    /// provisioning phase counted below), seconds.
    pub settled_secs: f64,
    /// From deleting the Machines until every ProxmoxMachine and VM was gone, seconds.
    pub delete_secs: f64,
    /// Clone requests while provisioning.
    pub vms_cloned: u64,
    /// Non-template VMs once provisioned.
    pub vms_after_provisioning: usize,
    /// Requests while provisioning (creation until settled).
    pub provision: Delta,
    /// Requests during the rest window.
    pub rest: Delta,
    /// Length of the rest window, seconds.
    pub rest_window_secs: f64,
    /// Requests in the window after a manager restart.
    pub restart: Delta,
    /// Length of the restart window, seconds.
    pub restart_window_secs: f64,
    /// Requests while deleting.
    pub delete: Delta,
    /// From the manager's start until its first reconcile, seconds.
    pub first_reconcile_secs: Option<f64>,
    /// The same after the restart.
    pub restart_first_reconcile_secs: Option<f64>,
    /// Manager RSS once the cluster was ready, before machines existed (bytes).
    pub rss_idle_bytes: Option<u64>,
    /// Peak manager RSS (VmHWM) of the first manager process (bytes).
    pub rss_peak_bytes: Option<u64>,
    /// Manager CPU time over the whole run (both processes), seconds.
    pub cpu_seconds: Option<f64>,
    /// Machines that failed or did not finish, and leaks.
    pub errors: Vec<String>,
}

impl RunReport {
    /// Makespan over floor.
    pub fn ratio(&self) -> f64 {
        if self.floor_secs > 0.0 {
            self.makespan_secs / self.floor_secs
        } else {
            0.0
        }
    }

    fn per_machine(&self, n: u64) -> f64 {
        n as f64 / self.machines.max(1) as f64
    }
}

fn mib(b: Option<u64>) -> String {
    b.map_or_else(|| "n/a".to_owned(), |b| format!("{:.1}", b as f64 / 1048576.0))
}

fn secs(s: Option<f64>) -> String {
    s.map_or_else(|| "n/a".to_owned(), |s| format!("{s:.2}"))
}

fn per_minute(n: u64, window: f64) -> String {
    if window <= 0.0 {
        return "n/a".to_owned();
    }
    format!("{:.1}", n as f64 * 60.0 / window)
}

/// Rows of per-key values, keys ordered by their largest value (then name); with a `floor`, its
/// endpoints are rows even where no run used them, and each row ends with the endpoint's floor.
fn breakdown(
    reports: &[RunReport],
    pick: impl Fn(&RunReport) -> &BTreeMap<String, u64>,
    per_machine: bool,
    floor: Option<Floor>,
) -> Vec<(String, Vec<String>)> {
    let mut keys: BTreeSet<&str> = reports
        .iter()
        .flat_map(|r| pick(r).keys().map(String::as_str))
        .collect();
    for e in floor.into_iter().flat_map(Floor::endpoints) {
        keys.insert(e);
    }
    let value = |r: &RunReport, k: &str| pick(r).get(k).copied().unwrap_or(0);
    let mut keys: Vec<&str> = keys.into_iter().collect();
    keys.sort_by(|a, b| {
        let max = |k: &str| {
            reports
                .iter()
                .map(|r| r.per_machine(value(r, k)))
                .fold(0.0_f64, f64::max)
        };
        max(b).total_cmp(&max(a)).then_with(|| a.cmp(b))
    });
    keys.into_iter()
        .map(|k| {
            let mut cells: Vec<String> = reports
                .iter()
                .map(|r| {
                    let v = value(r, k);
                    if per_machine {
                        format!("{:.1}", r.per_machine(v))
                    } else {
                        v.to_string()
                    }
                })
                .collect();
            cells.extend(floor.map(|f| f.of(k).to_string()));
            (format!("    {k}"), cells)
        })
        .collect()
}

/// The table of all runs: one column per run, then the floor of one machine (see [`floor`]) on
/// the Proxmox request rows.
pub fn table(reports: &[RunReport]) -> String {
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let cells = |f: &dyn Fn(&RunReport) -> String| -> Vec<String> { reports.iter().map(f).collect() };
    let per = |f: &dyn Fn(&RunReport) -> u64| -> Vec<String> {
        reports
            .iter()
            .map(|r| format!("{:.1}", r.per_machine(f(r))))
            .collect()
    };
    let row = |rows: &mut Vec<(String, Vec<String>)>, label: &str, c: Vec<String>| {
        rows.push((label.to_owned(), c));
    };
    let with_floor = |mut c: Vec<String>, f: String| {
        c.push(f);
        c
    };
    row(
        &mut rows,
        "machines",
        with_floor(cells(&|r| r.machines.to_string()), "floor of 1".to_owned()),
    );
    row(&mut rows, "profile", cells(&|r| r.profile.clone()));
    row(&mut rows, "control plane", cells(&|r| r.control_plane.clone()));
    row(
        &mut rows,
        "time to all provisioned (s)",
        cells(&|r| format!("{:.1}", r.makespan_secs)),
    );
    row(
        &mut rows,
        "  floor (s) / ratio",
        cells(&|r| format!("{:.1} / {:.2}x", r.floor_secs, r.ratio())),
    );
    row(
        &mut rows,
        "time to all ISOs removed (s)",
        cells(&|r| format!("{:.1}", r.settled_secs)),
    );
    row(
        &mut rows,
        "time to all deleted (s)",
        cells(&|r| format!("{:.1}", r.delete_secs)),
    );
    row(
        &mut rows,
        "VMs cloned / VMs after provisioning",
        cells(&|r| format!("{} / {}", r.vms_cloned, r.vms_after_provisioning)),
    );
    row(
        &mut rows,
        "reconcile passes per machine",
        per(&|r| r.provision.machine_passes),
    );
    row(
        &mut rows,
        "ProxmoxCluster passes (provisioning)",
        cells(&|r| r.provision.cluster_passes.to_string()),
    );
    row(
        &mut rows,
        "Proxmox requests per machine provisioned",
        with_floor(
            per(&|r| r.provision.proxmox_total()),
            floor::MACHINE_UP.total().to_string(),
        ),
    );
    rows.extend(breakdown(
        reports,
        |r| &r.provision.proxmox,
        true,
        Some(floor::MACHINE_UP),
    ));
    row(
        &mut rows,
        "Proxmox requests per machine deleted",
        with_floor(
            per(&|r| r.delete.proxmox_total()),
            floor::MACHINE_DOWN.total().to_string(),
        ),
    );
    rows.extend(breakdown(
        reports,
        |r| &r.delete.proxmox,
        true,
        Some(floor::MACHINE_DOWN),
    ));
    let counting = reports
        .first()
        .map(|r| r.kube_counting.clone())
        .unwrap_or_default();
    row(
        &mut rows,
        &format!("Kubernetes requests per machine provisioned ({counting})"),
        per(&|r| r.provision.kube_total()),
    );
    rows.extend(breakdown(reports, |r| &r.provision.kube, true, None));
    row(
        &mut rows,
        "Kubernetes requests per machine deleted",
        per(&|r| r.delete.kube_total()),
    );
    rows.extend(breakdown(reports, |r| &r.delete.kube, true, None));
    row(
        &mut rows,
        "at rest: Proxmox requests per minute",
        cells(&|r| per_minute(r.rest.proxmox_total(), r.rest_window_secs)),
    );
    rows.extend(breakdown(reports, |r| &r.rest.proxmox, false, None));
    row(
        &mut rows,
        "at rest: Kubernetes requests per minute",
        cells(&|r| per_minute(r.rest.kube_total(), r.rest_window_secs)),
    );
    rows.extend(breakdown(reports, |r| &r.rest.kube, false, None));
    row(
        &mut rows,
        "  rest window (s)",
        cells(&|r| format!("{:.0}", r.rest_window_secs)),
    );
    row(
        &mut rows,
        "after a restart: Proxmox requests in the window",
        cells(&|r| r.restart.proxmox_total().to_string()),
    );
    rows.extend(breakdown(reports, |r| &r.restart.proxmox, false, None));
    row(
        &mut rows,
        "after a restart: Kubernetes requests in the window",
        cells(&|r| r.restart.kube_total().to_string()),
    );
    row(
        &mut rows,
        "  restart window (s)",
        cells(&|r| format!("{:.0}", r.restart_window_secs)),
    );
    row(
        &mut rows,
        "start to first reconcile (s), first / restart",
        cells(&|r| {
            format!(
                "{} / {}",
                secs(r.first_reconcile_secs),
                secs(r.restart_first_reconcile_secs)
            )
        }),
    );
    row(
        &mut rows,
        "manager RSS idle / peak (MiB)",
        cells(&|r| format!("{} / {}", mib(r.rss_idle_bytes), mib(r.rss_peak_bytes))),
    );
    row(
        &mut rows,
        "manager CPU (s)",
        cells(&|r| {
            r.cpu_seconds
                .map_or_else(|| "n/a".to_owned(), |c| format!("{c:.1}"))
        }),
    );
    row(&mut rows, "errors", cells(&|r| r.errors.len().to_string()));
    render(&rows, reports)
}

/// Renders `rows` as a Markdown table; a row with fewer cells than the widest (the floor column
/// is only on the Proxmox request rows) gets empty ones.
fn render(rows: &[(String, Vec<String>)], reports: &[RunReport]) -> String {
    let label_w = rows.iter().map(|(l, _)| l.chars().count()).max().unwrap_or(0);
    let columns = rows.iter().map(|(_, c)| c.len()).max().unwrap_or(0);
    let col_w: Vec<usize> = (0..columns)
        .map(|i| {
            rows.iter()
                .map(|(_, c)| c.get(i).map_or(0, |s| s.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut s = String::new();
    for (label, cells) in rows {
        let _ = write!(s, "| {label:<label_w$} |");
        for (i, w) in col_w.iter().enumerate() {
            let c = cells.get(i).map_or("", String::as_str);
            let _ = write!(s, " {c:>w$} |");
        }
        s.push('\n');
        if label == "machines" {
            let _ = write!(s, "|{}|", "-".repeat(label_w + 2));
            for w in &col_w {
                let _ = write!(s, "{}:|", "-".repeat(w + 1));
            }
            s.push('\n');
        }
    }
    for r in reports.iter().filter(|r| !r.errors.is_empty()) {
        let _ = writeln!(s, "\nerrors of the {}-machine run:", r.machines);
        for e in r.errors.iter().take(20) {
            let _ = writeln!(s, "  {e}");
        }
    }
    s
}

/// The cells of the row of `table` whose label starts with `label` (leading spaces ignored),
/// trimmed; panics without such a row.
#[cfg(test)]
pub(crate) fn row_cells(table: &str, label: &str) -> Vec<String> {
    let line = table
        .lines()
        .find(|l| l.trim_start_matches('|').trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no row {label} in\n{table}"));
    line.split('|').skip(2).map(|c| c.trim().to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_of_the_demo_scenario_is_the_issues() {
        let lat = pve_sim::Scenario::from_yaml(include_str!("../../pve-sim/scenarios/demo.yaml"))
            .unwrap()
            .latency;
        assert!((floor_secs(&lat, true) - 54.6).abs() < 1e-9);
    }

    #[test]
    fn table_has_one_column_per_run() {
        let mut r = RunReport {
            machines: 2,
            profile: "instant".into(),
            ..RunReport::default()
        };
        r.provision.proxmox.insert("GET /cluster/resources".into(), 4);
        let t = table(&[r.clone(), r]);
        assert!(t.contains("| machines"), "{t}");
        assert!(t.contains("GET /cluster/resources"), "{t}");
        assert!(t.lines().all(|l| l.is_empty() || l.starts_with('|')), "{t}");
    }

    #[test]
    fn proxmox_rows_end_with_the_floor_of_one_machine() {
        let mut r = RunReport {
            machines: 2,
            ..RunReport::default()
        };
        r.provision.proxmox.insert("GET /cluster/resources".into(), 4);
        r.provision.proxmox.insert("GET /cluster/nextid".into(), 1);
        let t = table(&[r]);
        let cells = |label: &str| -> Vec<String> {
            row_cells(&t, label)
                .into_iter()
                .filter(|c| !c.is_empty())
                .collect()
        };
        assert_eq!(cells("machines"), ["2", "floor of 1"]);
        assert_eq!(cells("GET /cluster/nextid"), ["0.5", "1"], "{t}");
        assert_eq!(cells("GET /cluster/resources"), ["2.0", "0"], "{t}");
        // An unavoidable request no run made is still a row, so the floor adds up.
        assert_eq!(
            cells("POST /nodes/{node}/qemu/{vmid}/agent/exec"),
            ["0.0", "1"],
            "{t}"
        );
        assert_eq!(
            cells("Proxmox requests per machine provisioned"),
            ["2.5", "10"],
            "{t}"
        );
        assert_eq!(cells("Proxmox requests per machine deleted"), ["0.0", "5"], "{t}");
        assert_eq!(cells("errors"), ["0"], "{t}");
        // Every line has the same number of cells (a Markdown table).
        let widths: BTreeSet<usize> = t
            .lines()
            .filter(|l| l.starts_with('|'))
            .map(|l| l.matches('|').count())
            .collect();
        assert_eq!(widths.len(), 1, "{t}");
    }
}
