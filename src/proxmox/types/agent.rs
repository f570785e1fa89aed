//! QEMU guest agent types.

use serde::{Deserialize, Serialize};

use crate::proxmox::lenient;

/// The `{"result": ...}` wrapper of raw QGA passthroughs.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct AgentResult<T> {
    /// The agent's answer.
    pub result: T,
}

/// `GET .../agent/get-osinfo` result.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct OsInfo {
    /// e.g. `ubuntu`.
    #[serde(default)]
    pub id: Option<String>,
    /// e.g. `Ubuntu`.
    #[serde(default)]
    pub name: Option<String>,
    /// e.g. `Ubuntu 24.04 LTS`.
    #[serde(rename = "pretty-name", default)]
    pub pretty_name: Option<String>,
    /// Version.
    #[serde(default)]
    pub version: Option<String>,
    /// Version id.
    #[serde(rename = "version-id", default)]
    pub version_id: Option<String>,
    /// Kernel release.
    #[serde(rename = "kernel-release", default)]
    pub kernel_release: Option<String>,
    /// Kernel version.
    #[serde(rename = "kernel-version", default)]
    pub kernel_version: Option<String>,
    /// Machine (`x86_64`).
    #[serde(default)]
    pub machine: Option<String>,
}

/// One address of a guest interface.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct GuestIpAddress {
    /// Address.
    #[serde(rename = "ip-address")]
    pub ip_address: String,
    /// `ipv4` or `ipv6`.
    #[serde(rename = "ip-address-type", default)]
    pub ip_address_type: String,
    /// Prefix length.
    #[serde(default, deserialize_with = "lenient::opt_u32")]
    pub prefix: Option<u32>,
}

/// One interface of `agent/network-get-interfaces`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct GuestNetworkInterface {
    /// Interface name.
    pub name: String,
    /// MAC address (lower-case, as the guest reports it).
    #[serde(rename = "hardware-address", default)]
    pub hardware_address: Option<String>,
    /// Addresses.
    #[serde(rename = "ip-addresses", default)]
    pub ip_addresses: Vec<GuestIpAddress>,
}

/// `POST .../agent/exec`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct AgentExecRequest {
    /// Program and arguments.
    pub command: Vec<String>,
    /// Stdin data.
    #[serde(rename = "input-data", skip_serializing_if = "Option::is_none")]
    pub input_data: Option<String>,
}

impl AgentExecRequest {
    /// Runs `command` with empty stdin (as capmox sends `cloud-init status`).
    pub fn new<S: AsRef<str>>(command: &[S]) -> Self {
        Self {
            command: command.iter().map(|s| s.as_ref().to_owned()).collect(),
            input_data: Some(String::new()),
        }
    }
}

/// `POST .../agent/exec` answer.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct AgentExecPid {
    /// Process id in the guest.
    #[serde(deserialize_with = "lenient::u64")]
    pub pid: u64,
}

/// `GET .../agent/exec-status?pid=N`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct AgentExecStatus {
    /// Whether the process has exited.
    #[serde(default, deserialize_with = "lenient::bool01")]
    pub exited: bool,
    /// Exit code.
    #[serde(default, deserialize_with = "lenient::opt_i64")]
    pub exitcode: Option<i64>,
    /// Signal that ended the process.
    #[serde(default, deserialize_with = "lenient::opt_i64")]
    pub signal: Option<i64>,
    /// Stdout (decoded).
    #[serde(rename = "out-data", default)]
    pub out_data: Option<String>,
    /// Stderr (decoded).
    #[serde(rename = "err-data", default)]
    pub err_data: Option<String>,
    /// Stdout truncated.
    #[serde(rename = "out-truncated", default, deserialize_with = "lenient::bool01")]
    pub out_truncated: bool,
    /// Stderr truncated.
    #[serde(rename = "err-truncated", default, deserialize_with = "lenient::bool01")]
    pub err_truncated: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_interfaces() {
        let r: AgentResult<Vec<GuestNetworkInterface>> = serde_json::from_value(json!({"result":[
            {"name":"lo","hardware-address":"00:00:00:00:00:00","ip-addresses":[{"ip-address":"127.0.0.1","ip-address-type":"ipv4","prefix":8}]},
            {"name":"eth0","hardware-address":"bc:24:11:5e:2a:7f","ip-addresses":[{"ip-address":"10.0.0.21","ip-address-type":"ipv4","prefix":24}],
             "statistics":{"rx-bytes":1234}},
            {"name":"eth1"}
        ]}))
        .unwrap();
        assert_eq!(r.result.len(), 3);
        assert_eq!(r.result[1].ip_addresses[0].prefix, Some(24));
        assert!(r.result[2].ip_addresses.is_empty());
    }

    #[test]
    fn exec_status_and_request() {
        let s: AgentExecStatus = serde_json::from_value(
            json!({"exited":1,"exitcode":0,"out-data":"status: running\n","out-truncated":false}),
        )
        .unwrap();
        assert!(s.exited && !s.out_truncated);
        assert_eq!(s.exitcode, Some(0));
        assert_eq!(
            serde_json::to_value(AgentExecRequest::new(&["cloud-init", "status"])).unwrap(),
            json!({"command":["cloud-init","status"],"input-data":""})
        );
    }
}
