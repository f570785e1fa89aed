//! VM list, status and request types (clone, resize, power, delete).

use serde::{Deserialize, Serialize};

use crate::proxmox::lenient;

/// One entry of `GET /nodes/{node}/qemu` (or `/lxc`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct VmListEntry {
    /// Guest id.
    #[serde(deserialize_with = "lenient::u32")]
    pub vmid: u32,
    /// `running` or `stopped`.
    #[serde(default)]
    pub status: String,
    /// Name.
    #[serde(default)]
    pub name: Option<String>,
    /// Whether the VM is a template (present only when 1).
    #[serde(default, deserialize_with = "lenient::bool01")]
    pub template: bool,
    /// Configured memory in bytes.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub maxmem: Option<u64>,
    /// Configured disk size in bytes.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub maxdisk: Option<u64>,
    /// CPUs.
    #[serde(default, deserialize_with = "lenient::opt_f64")]
    pub cpus: Option<f64>,
    /// Lock.
    #[serde(default)]
    pub lock: Option<String>,
    /// Tags.
    #[serde(default)]
    pub tags: Option<String>,
    /// Uptime (seconds).
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub uptime: Option<u64>,
}

/// HA state in `status/current`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct HaStatus {
    /// Whether the VM is an HA resource.
    #[serde(default, deserialize_with = "lenient::bool01")]
    pub managed: bool,
    /// HA state.
    #[serde(default)]
    pub state: Option<String>,
    /// HA group.
    #[serde(default)]
    pub group: Option<String>,
}

/// `GET /nodes/{node}/qemu/{vmid}/status/current`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct VmStatus {
    /// Guest id.
    #[serde(default, deserialize_with = "lenient::opt_u32")]
    pub vmid: Option<u32>,
    /// `running` or `stopped`.
    #[serde(default)]
    pub status: String,
    /// QMP state (`running`, `paused`, `prelaunch`, ...); equals `status` when stopped.
    #[serde(default)]
    pub qmpstatus: Option<String>,
    /// Name.
    #[serde(default)]
    pub name: Option<String>,
    /// CPUs.
    #[serde(default, deserialize_with = "lenient::opt_f64")]
    pub cpus: Option<f64>,
    /// Configured memory in bytes.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub maxmem: Option<u64>,
    /// Disk size in bytes.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub maxdisk: Option<u64>,
    /// Uptime (seconds).
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub uptime: Option<u64>,
    /// Lock.
    #[serde(default)]
    pub lock: Option<String>,
    /// Tags.
    #[serde(default)]
    pub tags: Option<String>,
    /// Template.
    #[serde(default, deserialize_with = "lenient::bool01")]
    pub template: bool,
    /// Agent enabled in the config (not: responding).
    #[serde(default, deserialize_with = "lenient::bool01")]
    pub agent: bool,
    /// HA state.
    #[serde(default)]
    pub ha: HaStatus,
}

impl VmStatus {
    /// Whether the VM runs (paused VMs count as running with `qmpstatus` = `paused`).
    pub fn is_running(&self) -> bool {
        self.status == "running"
    }

    /// Whether the VM is running but paused or suspended.
    pub fn is_paused(&self) -> bool {
        self.is_running() && matches!(self.qmpstatus.as_deref(), Some("paused" | "suspended"))
    }
}

/// `POST /nodes/{node}/qemu/{vmid}/clone`.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct CloneRequest {
    /// New VMID.
    pub newid: u32,
    /// New VM name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Target node (shared storage only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Full (`true`) or linked (`false`) clone; PVE defaults to linked for templates.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "lenient::ser_opt_bool01"
    )]
    pub full: Option<bool>,
    /// Target storage (full clones only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
    /// Target format (full clones only): `raw`, `qcow2`, `vmdk`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// Pool to add the new VM to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// Snapshot to clone from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapname: Option<String>,
    /// Bandwidth limit (KiB/s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bwlimit: Option<u64>,
}

impl CloneRequest {
    /// A clone request for `newid` with everything else defaulted.
    pub fn new(newid: u32) -> Self {
        Self {
            newid,
            ..Default::default()
        }
    }
}

/// `PUT /nodes/{node}/qemu/{vmid}/resize`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ResizeRequest {
    /// Disk key, e.g. `scsi0`.
    pub disk: String,
    /// New size (`32G`) or growth (`+10G`).
    pub size: String,
    /// Config digest to guard against concurrent changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

impl ResizeRequest {
    /// Resize `disk` to `gib` GiB (`"<N>G"`, as capmox sends it).
    pub fn to_gib(disk: impl Into<String>, gib: u64) -> Self {
        Self {
            disk: disk.into(),
            size: format!("{gib}G"),
            digest: None,
        }
    }
}

/// `POST .../status/start`.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct StartRequest {
    /// Timeout in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
}

/// `POST .../status/stop`.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct StopRequest {
    /// Timeout in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// Abort running shutdown tasks.
    #[serde(
        rename = "overrule-shutdown",
        skip_serializing_if = "Option::is_none",
        serialize_with = "lenient::ser_opt_bool01"
    )]
    pub overrule_shutdown: Option<bool>,
    /// Keep storage volumes active.
    #[serde(
        rename = "keepActive",
        skip_serializing_if = "Option::is_none",
        serialize_with = "lenient::ser_opt_bool01"
    )]
    pub keep_active: Option<bool>,
}

/// `POST .../status/shutdown`.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct ShutdownRequest {
    /// Timeout in seconds (PVE default 60).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// Stop the VM if the shutdown times out.
    #[serde(
        rename = "forceStop",
        skip_serializing_if = "Option::is_none",
        serialize_with = "lenient::ser_opt_bool01"
    )]
    pub force_stop: Option<bool>,
}

/// `POST .../status/reboot`.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct RebootRequest {
    /// Timeout in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
}

/// Query options of `DELETE /nodes/{node}/qemu/{vmid}`.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct DeleteVmOptions {
    /// Also remove the VM from HA, backup jobs and replication.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "lenient::ser_opt_bool01"
    )]
    pub purge: Option<bool>,
    /// Destroy disks not referenced in the config.
    #[serde(
        rename = "destroy-unreferenced-disks",
        skip_serializing_if = "Option::is_none",
        serialize_with = "lenient::ser_opt_bool01"
    )]
    pub destroy_unreferenced_disks: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn clone_request_json() {
        let mut r = CloneRequest::new(101);
        r.name = Some("capi-md-0".into());
        r.full = Some(false);
        r.pool = Some("capi".into());
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"newid":101,"name":"capi-md-0","full":0,"pool":"capi"})
        );
    }

    #[test]
    fn power_requests_json() {
        let s = ShutdownRequest {
            timeout: Some(30),
            force_stop: Some(true),
        };
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({"timeout":30,"forceStop":1})
        );
        let d = DeleteVmOptions {
            purge: Some(true),
            destroy_unreferenced_disks: Some(true),
        };
        assert_eq!(
            serde_json::to_value(&d).unwrap(),
            json!({"purge":1,"destroy-unreferenced-disks":1})
        );
        assert_eq!(
            serde_json::to_value(ResizeRequest::to_gib("scsi0", 20)).unwrap(),
            json!({"disk":"scsi0","size":"20G"})
        );
    }

    #[test]
    fn vm_status_decoding() {
        let s: VmStatus = serde_json::from_value(json!({
            "vmid": 100, "status": "running", "qmpstatus": "paused", "agent": 1,
            "maxmem": "4294967296", "ha": {"managed": 0}, "template": ""
        }))
        .unwrap();
        assert!(s.is_running() && s.is_paused() && s.agent && !s.ha.managed && !s.template);
        assert_eq!(s.maxmem, Some(4_294_967_296));
    }
}
