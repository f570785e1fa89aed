//! Request counts from a real kube-apiserver's audit log (the real-binary counterpart of the
//! in-tree server's [`crate::server::requests`] counters): one count per request (audit ID), by
//! `User-Agent`, verb and resource.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use crate::Error;
use crate::server::requests::RequestKey;

/// The audit policy the real control plane is started with: every request at `Metadata` level,
/// without the `RequestReceived` stage.
pub const POLICY: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [\"RequestReceived\"]\nrules:\n- level: Metadata\n";

/// Counts the requests in an audit log (JSON lines). A request logged in several stages (a watch:
/// `ResponseStarted`, later `ResponseComplete`) counts once.
pub fn read_counts(path: &Path) -> Result<BTreeMap<RequestKey, u64>, Error> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Error::Io(format!("reading {}", path.display()), e))?;
    Ok(count_lines(&text))
}

/// [`read_counts`] on the text of an audit log.
pub fn count_lines(text: &str) -> BTreeMap<RequestKey, u64> {
    let mut seen = HashSet::new();
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(ev) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let s = |p: &str| ev.pointer(p).and_then(|v| v.as_str()).unwrap_or_default();
        if !seen.insert(s("/auditID").to_owned()) {
            continue;
        }
        let resource = match (s("/objectRef/resource"), s("/objectRef/subresource")) {
            ("", _) => s("/requestURI").split('?').next().unwrap_or_default().to_owned(),
            (r, "") => r.to_owned(),
            (r, sub) => format!("{r}/{sub}"),
        };
        let key = RequestKey {
            user_agent: s("/userAgent").to_owned(),
            verb: s("/verb").to_owned(),
            resource,
        };
        *out.entry(key).or_insert(0) += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_count_per_audit_id() {
        let log = r#"{"auditID":"a","stage":"ResponseComplete","verb":"patch","userAgent":"capmox-rs/0.1.0","requestURI":"/apis/x/v1/namespaces/n/things/t/status","objectRef":{"resource":"things","subresource":"status"}}
{"auditID":"b","stage":"ResponseStarted","verb":"watch","userAgent":"capmox-rs/0.1.0","requestURI":"/apis/x/v1/things?watch=true","objectRef":{"resource":"things"}}
{"auditID":"b","stage":"ResponseComplete","verb":"watch","userAgent":"capmox-rs/0.1.0","requestURI":"/apis/x/v1/things?watch=true","objectRef":{"resource":"things"}}
{"auditID":"c","stage":"ResponseComplete","verb":"get","userAgent":"kubectl","requestURI":"/apis?timeout=32s"}
"#;
        let counts = count_lines(log);
        let key = |ua: &str, verb: &str, r: &str| RequestKey {
            user_agent: ua.into(),
            verb: verb.into(),
            resource: r.into(),
        };
        assert_eq!(
            counts.get(&key("capmox-rs/0.1.0", "patch", "things/status")),
            Some(&1)
        );
        assert_eq!(counts.get(&key("capmox-rs/0.1.0", "watch", "things")), Some(&1));
        assert_eq!(counts.get(&key("kubectl", "get", "/apis")), Some(&1));
        assert_eq!(counts.values().sum::<u64>(), 3);
    }
}
