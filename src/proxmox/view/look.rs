//! A VM as the view sees it: from the shared `/cluster/resources` list (existence, node, name,
//! lock, tags, power state, uptime), with what this process wrote since laid over it (tags it set,
//! a start it confirmed that the list may not show yet: PVE fills the list's power state from
//! pvestatd's status cache, which lags), and with the full config only when the caller needs it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Freshness, ProxmoxView, Snapshot, ViewError, lock};
use crate::proxmox::types::{ClusterResource, VmConfig};

/// Power state of a VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Power {
    /// `running` (and not paused).
    Running,
    /// `running` with QMP status `paused` or `suspended`.
    Paused,
    /// `stopped` (or anything else that is not running).
    Stopped,
}

/// What Proxmox says about a VM.
#[derive(Debug, Clone, PartialEq)]
pub struct VmFacts {
    /// The VMID.
    pub vmid: u32,
    /// The node the VM lives on now.
    pub node: String,
    /// Power state.
    pub power: Power,
    /// Seconds since the VM started (0 when stopped).
    pub uptime_secs: u64,
    /// Whether Proxmox HA manages the VM.
    pub ha_managed: bool,
    /// The VM's configuration (`lock` included): in full, or the fields the list shows (name,
    /// lock, tags, template).
    pub config: VmConfig,
}

/// A VM as looked at.
#[derive(Debug, Clone)]
pub struct Look {
    /// The VM (`None`: no VM with that VMID exists).
    pub vm: Option<VmFacts>,
    /// When it booted (running VMs only).
    pub booted: Option<Instant>,
}

impl Look {
    fn none() -> Self {
        Self {
            vm: None,
            booted: None,
        }
    }
}

fn power_of(status: Option<&str>) -> Option<Power> {
    match status? {
        "running" => Some(Power::Running),
        "paused" | "suspended" => Some(Power::Paused),
        "stopped" => Some(Power::Stopped),
        _ => None,
    }
}

/// The config fields `/cluster/resources` shows: name, lock, tags, template.
fn partial_config(r: &ClusterResource) -> VmConfig {
    fields_config(r.name.as_ref(), r.lock.as_ref(), r.tags.as_ref(), r.template)
}

/// A config of only the fields a list or `status/current` shows.
fn fields_config(
    name: Option<&String>,
    lock: Option<&String>,
    tags: Option<&String>,
    template: bool,
) -> VmConfig {
    let mut raw = std::collections::BTreeMap::new();
    let mut put = |k: &str, v: Option<&String>| {
        if let Some(v) = v {
            raw.insert(k.to_owned(), serde_json::Value::String(v.clone()));
        }
    };
    put("name", name);
    put("lock", lock);
    put("tags", tags);
    if template {
        raw.insert("template".to_owned(), serde_json::json!(1));
    }
    VmConfig::from(raw)
}

impl ProxmoxView {
    /// VM `vmid` from the shared list (`fresh`, and read after this process's last write to it
    /// that the list shows); with its full config when the listed VM is `config_of` (named so,
    /// not a template), else the fields the list shows.
    pub async fn look(
        &self,
        vmid: u32,
        fresh: Freshness,
        config_of: Option<&str>,
    ) -> Result<Look, ViewError> {
        let last = lock(&self.writes).last_vm(vmid);
        let (at, snap) = self.snapshot(fresh.after(last)).await?;
        self.look_in(&snap, at, vmid, config_of).await
    }

    async fn look_in(
        &self,
        snap: &Arc<Snapshot>,
        at: Instant,
        vmid: u32,
        config_of: Option<&str>,
    ) -> Result<Look, ViewError> {
        let Some(listed) = snap.vm(vmid) else {
            return Ok(Look::none());
        };
        // Tags this process wrote after the list was read are known without reading it again.
        let overlaid;
        let r = match lock(&self.writes).tags_after(vmid, at) {
            Some(tags) => {
                overlaid = ClusterResource {
                    tags: Some(tags).filter(|t| !t.is_empty()),
                    ..listed.clone()
                };
                &overlaid
            }
            None => listed,
        };
        let Some(node) = r.node.clone() else {
            return Ok(Look::none());
        };
        let power = power_of(r.status.as_deref());
        let clone_running = r.lock.as_deref() == Some("clone");
        let Some(power) = power.filter(|_| r.name.is_some() && !clone_running) else {
            if clone_running {
                // Named once the clone is done (a clone has a temporary config without a name).
                return Ok(Look {
                    vm: Some(VmFacts {
                        vmid,
                        node,
                        power: Power::Stopped,
                        uptime_secs: 0,
                        ha_managed: r.hastate.is_some(),
                        config: partial_config(&ClusterResource {
                            name: None,
                            ..r.clone()
                        }),
                    }),
                    booted: None,
                });
            }
            // Too fresh for the list: read the VM itself.
            let vm = self.read_vm(&node, vmid, config_of.is_some()).await?;
            let booted = vm
                .as_ref()
                .filter(|v| v.power != Power::Stopped)
                .map(|v| Instant::now() - Duration::from_secs(v.uptime_secs));
            return Ok(Look { vm, booted });
        };
        let snapshot_age = at.elapsed();
        // A start (or pause, resume, reboot) this process confirmed, which the list may not
        // show yet. While the list may lag, the time since a confirmed start is also the VM's
        // uptime when the list shows it running: the list's uptime is pvestatd's, up to one
        // cycle old when read, and guests would look younger than they are.
        let confirmed = lock(&self.writes).confirmed_since(vmid, at);
        let power = confirmed.filter(|(p, _)| *p != power).map_or(power, |(p, _)| p);
        let started = confirmed
            .filter(|(p, _)| *p == Power::Running && power == Power::Running)
            .map(|(_, since)| since);
        let uptime = match (power, started) {
            (_, Some(since)) => since.elapsed(),
            (Power::Stopped, None) => Duration::ZERO,
            _ => Duration::from_secs(r.uptime.unwrap_or(0)) + snapshot_age,
        };
        let partial = partial_config(r);
        let full = config_of.is_some_and(|name| !partial.template && partial.name.as_deref() == Some(name));
        let config = if full {
            match self.config(&node, vmid).await? {
                Some(c) => (*c).clone(),
                None => {
                    return Err(ViewError::Inconsistent(format!(
                        "VM {vmid} left node {node} while it was read; looking again"
                    )));
                }
            }
        } else {
            partial
        };
        Ok(Look {
            vm: Some(VmFacts {
                vmid,
                node,
                power,
                uptime_secs: uptime.as_secs(),
                ha_managed: r.hastate.is_some(),
                config,
            }),
            booted: (power != Power::Stopped).then(|| Instant::now() - uptime),
        })
    }

    /// Reads the VM on `node` directly (`status/current`, and its config when `full`): for VMs the
    /// shared list cannot describe yet (Proxmox shows a freshly created VM without name and status
    /// for up to one pvestatd cycle). Without `full`, the fields `status/current` shows (name,
    /// lock, tags, template — read from the config by PVE) stand for the config, as the list's do.
    async fn read_vm(&self, node: &str, vmid: u32, full: bool) -> Result<Option<VmFacts>, ViewError> {
        let status = match self.client.vm_status(node, vmid).await {
            Ok(s) => s,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(ViewError::proxmox(format!("reading VM {vmid} on {node}"))(e)),
        };
        let config = if full {
            let Some(config) = self.config(node, vmid).await? else {
                return Ok(None);
            };
            (*config).clone()
        } else {
            fields_config(
                status.name.as_ref(),
                status.lock.as_ref(),
                status.tags.as_ref(),
                status.template,
            )
        };
        let power = if status.is_paused() {
            Power::Paused
        } else if status.is_running() {
            Power::Running
        } else {
            Power::Stopped
        };
        Ok(Some(VmFacts {
            vmid,
            node: node.to_owned(),
            power,
            uptime_secs: if power == Power::Stopped {
                0
            } else {
                status.uptime.unwrap_or(0)
            },
            ha_managed: status.ha.managed,
            config,
        }))
    }
}

#[cfg(test)]
pub(in crate::proxmox::view) mod tests {
    use super::*;
    use crate::proxmox::view::{ViewSettings, Wake};
    use crate::proxmox::{ClientConfig, Credentials};

    /// A view whose client points nowhere: the looks below must not send a request.
    pub(in crate::proxmox::view) fn offline_view() -> Arc<ProxmoxView> {
        let client = crate::proxmox::Client::new(ClientConfig::new(
            "https://pve.invalid:8006",
            Credentials::token("capmox@pve!t", "secret"),
        ))
        .unwrap();
        let settings = ViewSettings {
            observe_interval: Duration::from_secs(1),
            look_min: Duration::from_millis(100),
            look_max: Duration::from_secs(5),
        };
        ProxmoxView::new(
            client,
            Default::default(),
            Default::default(),
            settings,
            Wake::default(),
        )
    }

    fn listed(status: &str) -> Arc<Snapshot> {
        Arc::new(Snapshot::new(
            serde_json::from_value(serde_json::json!([
                {"type": "qemu", "vmid": 200, "node": "pve1", "name": "m1", "status": status, "uptime": 0}
            ]))
            .unwrap(),
        ))
    }

    #[tokio::test]
    async fn a_confirmed_start_outweighs_a_list_that_does_not_show_it_yet() {
        let view = offline_view();
        let upid = "UPID:pve1:00001234:00005678:65000000:qmstart:200:capmox@pve!t:";
        view.started(upid, 200);
        // A list read while the start ran (another VM's pass) shows the VM stopped.
        let during = Instant::now();
        let power = |look: Look| {
            let v = look.vm.unwrap();
            (v.power, look.booted.is_some())
        };
        let before = view.look_in(&listed("stopped"), during, 200, None).await.unwrap();
        assert_eq!(power(before), (Power::Stopped, false), "not confirmed yet");
        assert!(lock(&view.writes).started(200));
        let after = view.look_in(&listed("stopped"), during, 200, None).await.unwrap();
        assert_eq!(power(after), (Power::Running, true), "the task said it runs");
        // A list that shows it running tells its own uptime.
        let shown = view
            .look_in(&listed("running"), Instant::now(), 200, None)
            .await
            .unwrap();
        assert_eq!(power(shown), (Power::Running, true));
        // A stop after it: lists tell again.
        view.record(200, super::super::writes::WriteKind::Vm);
        let stopped = view
            .look_in(&listed("stopped"), Instant::now(), 200, None)
            .await
            .unwrap();
        assert_eq!(power(stopped), (Power::Stopped, false));
    }

    #[test]
    fn a_confirmed_stop_makes_the_list_read_before_it_good_again() {
        // A deletion destroys on the list read before its own stop once the stop's task says it
        // is done: the stop is one write (recording it twice made the stop itself the write
        // the list had to come after, and every deletion read the list once more).
        let view = offline_view();
        let before = lock(&view.writes).last_vm(200);
        let upid =
            crate::proxmox::Upid::parse("UPID:pve1:00001234:00005678:65000000:qmstop:200:capmox@pve!t:")
                .unwrap();
        let sent = view.sent_vm_task(200, Ok(upid.clone())).unwrap();
        assert_eq!(sent, upid);
        assert!(lock(&view.writes).last_vm(200).is_some(), "the stop is a write");
        assert!(
            view.task_age(upid.as_str(), 0) < Duration::from_secs(60),
            "its task is known"
        );
        assert!(lock(&view.writes).confirmed(200, Power::Stopped));
        assert_eq!(
            lock(&view.writes).last_vm(200),
            before,
            "lists read before the stop are good again"
        );
    }

    #[tokio::test]
    async fn a_confirmed_start_gives_the_uptime_while_the_list_may_lag() {
        let view = offline_view();
        let upid = "UPID:pve1:00001234:00005678:65000000:qmstart:200:capmox@pve!t:";
        view.started(upid, 200);
        assert!(lock(&view.writes).started(200));
        let since = Instant::now();
        // Some time passes (a wait on the clock, not on the code under test)...
        while since.elapsed() < Duration::from_millis(20) {
            std::thread::yield_now();
        }
        // ... and a list read now shows it running, up 0 s at pvestatd's last refresh: the list
        // alone would make it 20 ms younger than it is.
        let read = Instant::now();
        let look = view.look_in(&listed("running"), read, 200, None).await.unwrap();
        let booted = look.booted.unwrap();
        assert!(
            booted + Duration::from_millis(10) < read,
            "up since the confirmed start, not since the list was read"
        );
    }

    #[test]
    fn a_vm_keeps_its_known_name_when_its_config_is_dropped() {
        let view = offline_view();
        let raw: std::collections::BTreeMap<String, serde_json::Value> =
            serde_json::from_value(serde_json::json!({"name": "m1", "memory": "2048"})).unwrap();
        lock(&view.configs).insert(
            200,
            super::super::CachedConfig {
                config: Arc::new(VmConfig::from(raw)),
                at: Instant::now(),
            },
        );
        assert_eq!(view.known_name(200).as_deref(), Some("m1"));
        view.iso_removed(200);
        assert!(lock(&view.configs).get(&200).is_none(), "the config is dropped");
        assert_eq!(view.known_name(200).as_deref(), Some("m1"), "its name is kept");
        view.forget_vm(200);
        assert_eq!(view.known_name(200), None);
    }

    #[test]
    fn list_fields_make_a_partial_config() {
        let r: ClusterResource = serde_json::from_value(serde_json::json!({
            "type": "qemu", "vmid": 200, "name": "m1", "tags": "a;go-proxmox+cloud-init", "lock": "backup"
        }))
        .unwrap();
        let c = partial_config(&r);
        assert_eq!(c.name.as_deref(), Some("m1"));
        assert_eq!(c.lock.as_deref(), Some("backup"));
        assert_eq!(power_of(Some("running")), Some(Power::Running));
        assert_eq!(power_of(Some("unknown")), None);
    }
}
