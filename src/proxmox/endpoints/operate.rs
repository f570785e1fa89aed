//! Reads a VM's operation needs beside the ones the lifecycle uses: the changes Proxmox keeps
//! pending until the next restart (`GET …/pending`) and the node's recent tasks of a VM
//! (`GET /nodes/{node}/tasks?vmid=`), which tell a stop someone asked Proxmox for from one it
//! did not see coming.

use serde::Deserialize;

use crate::proxmox::Client;
use crate::proxmox::error::Error;
use crate::proxmox::lenient;
use crate::proxmox::path::ApiPath;

/// One entry of `GET /nodes/{node}/qemu/{vmid}/pending`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct PendingItem {
    /// The config key.
    pub key: String,
    /// The current value (absent for a key only pending).
    #[serde(default)]
    pub value: Option<serde_json::Value>,
    /// The pending value, when one is pending.
    #[serde(default)]
    pub pending: Option<serde_json::Value>,
    /// `1` (or `2`, forced) when the key's deletion is pending.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub delete: Option<u64>,
}

impl PendingItem {
    /// Whether a change of this key waits for the next restart.
    pub fn is_pending(&self) -> bool {
        self.delete.unwrap_or(0) > 0
            || self
                .pending
                .as_ref()
                .is_some_and(|p| self.value.as_ref() != Some(p))
    }
}

/// One entry of `GET /nodes/{node}/tasks`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct TaskEntry {
    /// The task's UPID.
    pub upid: String,
    /// The task type (`qmstart`, `qmshutdown`, …).
    #[serde(rename = "type")]
    pub task_type: String,
    /// Start time (Unix seconds).
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub starttime: Option<u64>,
    /// The exit status of a finished task (`OK`, an error).
    #[serde(default)]
    pub status: Option<String>,
    /// The user (or token) that started it.
    #[serde(default)]
    pub user: Option<String>,
}

impl Client {
    /// `GET /nodes/{node}/qemu/{vmid}/pending`.
    pub async fn vm_pending(&self, node: &str, vmid: u32) -> Result<Vec<PendingItem>, Error> {
        self.get(&ApiPath::vm(node, vmid).lit("pending"), &[]).await
    }

    /// The `limit` most recent tasks of VM `vmid` on `node`, finished or not, newest first
    /// (`GET /nodes/{node}/tasks?vmid=&source=all&limit=`).
    pub async fn vm_tasks(&self, node: &str, vmid: u32, limit: u32) -> Result<Vec<TaskEntry>, Error> {
        let query = [
            ("vmid".to_owned(), vmid.to_string()),
            ("source".to_owned(), "all".to_owned()),
            ("limit".to_owned(), limit.to_string()),
        ];
        self.get(&ApiPath::node(node).lit("tasks"), &query).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pending_entries_say_what_waits() {
        let items: Vec<PendingItem> = serde_json::from_value(json!([
            {"key": "cores", "value": 2, "pending": 4},
            {"key": "memory", "value": "4096"},
            {"key": "tablet", "value": 1, "delete": 1},
            {"key": "agent", "pending": "1"}
        ]))
        .unwrap();
        let pending: Vec<&str> = items
            .iter()
            .filter(|i| i.is_pending())
            .map(|i| i.key.as_str())
            .collect();
        assert_eq!(pending, ["cores", "tablet", "agent"]);
        let t: TaskEntry = serde_json::from_value(json!({
            "upid": "UPID:pve1:00000001:00000002:65000000:qmshutdown:200:root@pam:",
            "type": "qmshutdown", "starttime": 1_700_000_000, "status": "OK", "user": "root@pam"
        }))
        .unwrap();
        assert_eq!(t.task_type, "qmshutdown");
        assert_eq!(t.starttime, Some(1_700_000_000));
    }
}
