//! Request counting: every request the in-tree server receives, by `User-Agent`, verb and
//! resource, classified the way kube-apiserver's audit log does (`get`/`list`/`watch`/`create`/
//! `update`/`patch`/`delete`/`deletecollection`; resource `plural` or `plural/subresource`, the
//! path for non-resource requests such as discovery). Benchmarks read it to tell how many API
//! requests a controller sends.

use std::collections::BTreeMap;
use std::sync::Mutex;

use hyper::{Method, Request};

/// What one counter counts.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestKey {
    /// The `User-Agent` header (empty when absent).
    pub user_agent: String,
    /// Audit verb.
    pub verb: String,
    /// `plural`, `plural/subresource`, or the path of a non-resource request.
    pub resource: String,
}

/// Counters of the requests received so far.
#[derive(Debug, Default)]
pub struct RequestCounts {
    counts: Mutex<BTreeMap<RequestKey, u64>>,
}

impl RequestCounts {
    /// Counts one request.
    pub fn record<B>(&self, req: &Request<B>) {
        let user_agent = req
            .headers()
            .get(hyper::header::USER_AGENT)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let (verb, resource) = classify(req.method(), req.uri().path(), req.uri().query());
        let key = RequestKey {
            user_agent,
            verb,
            resource,
        };
        *self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(key)
            .or_insert(0) += 1;
    }

    /// A copy of every counter.
    pub fn snapshot(&self) -> BTreeMap<RequestKey, u64> {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// The audit verb and resource of a request.
pub fn classify(method: &Method, path: &str, query: Option<&str>) -> (String, String) {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let rest = match segs.as_slice() {
        ["api", _, rest @ ..] | ["apis", _, _, rest @ ..] if !rest.is_empty() => rest,
        _ => return (method.as_str().to_ascii_lowercase(), path.to_owned()),
    };
    let (plural, name, sub) = match rest {
        ["namespaces", ns, "status" | "finalize"] => ("namespaces", Some(*ns), rest.get(2).copied()),
        ["namespaces", _, plural, tail @ ..] => (*plural, tail.first().copied(), tail.get(1).copied()),
        [plural, tail @ ..] => (*plural, tail.first().copied(), tail.get(1).copied()),
        [] => return (method.as_str().to_ascii_lowercase(), path.to_owned()),
    };
    let watch = query.is_some_and(|q| {
        url::form_urlencoded::parse(q.as_bytes()).any(|(k, v)| k == "watch" && (v == "true" || v == "1"))
    });
    let verb = match (method.as_str(), name.is_some()) {
        ("GET", false) if watch => "watch",
        ("GET", false) => "list",
        ("GET", true) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        (other, _) => return (other.to_ascii_lowercase(), path.to_owned()),
    };
    let resource = match sub {
        Some(s) => format!("{plural}/{s}"),
        None => plural.to_owned(),
    };
    (verb.to_owned(), resource)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(method: Method, path: &str, query: Option<&str>) -> (String, String) {
        classify(&method, path, query)
    }

    #[test]
    fn verbs_and_resources_as_in_the_audit_log() {
        let pm = "/apis/infrastructure.cluster.x-k8s.io/v1alpha2/namespaces/ns/proxmoxmachines";
        assert_eq!(
            c(Method::GET, pm, None),
            ("list".into(), "proxmoxmachines".into())
        );
        assert_eq!(
            c(Method::GET, pm, Some("watch=true&resourceVersion=1")),
            ("watch".into(), "proxmoxmachines".into())
        );
        assert_eq!(
            c(Method::GET, &format!("{pm}/m1"), None),
            ("get".into(), "proxmoxmachines".into())
        );
        assert_eq!(
            c(Method::PATCH, &format!("{pm}/m1/status"), None),
            ("patch".into(), "proxmoxmachines/status".into())
        );
        assert_eq!(
            c(Method::POST, pm, None),
            ("create".into(), "proxmoxmachines".into())
        );
        assert_eq!(
            c(Method::DELETE, &format!("{pm}/m1"), None),
            ("delete".into(), "proxmoxmachines".into())
        );
        assert_eq!(
            c(Method::GET, "/api/v1/namespaces/ns/secrets/s", None),
            ("get".into(), "secrets".into())
        );
        assert_eq!(
            c(Method::GET, "/api/v1/namespaces/ns", None),
            ("get".into(), "namespaces".into())
        );
        assert_eq!(
            c(Method::PUT, "/api/v1/namespaces/ns/finalize", None),
            ("update".into(), "namespaces/finalize".into())
        );
        assert_eq!(
            c(Method::GET, "/apis/cluster.x-k8s.io/v1beta2/clusters", None),
            ("list".into(), "clusters".into())
        );
        assert_eq!(c(Method::GET, "/apis", None), ("get".into(), "/apis".into()));
        assert_eq!(
            c(Method::GET, "/apis/ipam.cluster.x-k8s.io/v1beta2", None),
            ("get".into(), "/apis/ipam.cluster.x-k8s.io/v1beta2".into())
        );
    }
}
