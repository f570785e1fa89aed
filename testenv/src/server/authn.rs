//! Delegated authentication and authorization, as far as components that protect their own
//! endpoints with the API server need them (controller-runtime's secured metrics, kube-rbac-proxy):
//!
//! * `POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token` (TokenRequest) mints a token for
//!   an existing ServiceAccount;
//! * `POST /apis/authentication.k8s.io/v1/tokenreviews` (TokenReview) knows the admin token
//!   (`testenv-admin` in `system:masters`) and the minted tokens (the ServiceAccount must still
//!   exist with the same uid), as `system:serviceaccount:<ns>:<name>` in the groups
//!   `system:serviceaccounts`, `system:serviceaccounts:<ns>` and `system:authenticated`;
//! * `POST /apis/authorization.k8s.io/v1/subjectaccessreviews` (SubjectAccessReview) allows
//!   `system:masters` everything, every authenticated user the discovery and health URLs of the
//!   bootstrap roles `system:discovery`/`system:public-info-viewer`, and otherwise evaluates the
//!   stored ClusterRoleBindings and ClusterRoles (subjects of kind User, Group and ServiceAccount;
//!   resource rules with groups, resources, subresources and names; non-resource URLs with `*`
//!   suffixes; `*` wildcards).
//!
//! Minted tokens authenticate only through TokenReview: API requests still need the admin token.
//! Namespaced Roles/RoleBindings, aggregation rules, token expiry and audiences are not modelled.

use std::collections::HashMap;
use std::sync::Mutex;

use hyper::{Method, Response};
use serde_json::{Value, json};

use super::status::{ApiError, ApiResult};
use super::{Body, State, json_response};

const ADMIN: &str = "testenv-admin";
/// What the bootstrap ClusterRoles `system:discovery` and `system:public-info-viewer` let every
/// authenticated user `get` (they are not stored as objects here).
const DISCOVERY_URLS: &[&str] = &[
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
];
const RBAC: &str = "rbac.authorization.k8s.io";

/// Who a minted token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenOwner {
    /// A token minted by a TokenRequest for the ServiceAccount `(namespace, name, uid)`.
    ServiceAccount(String, String, String),
}

/// Tokens minted by TokenRequests.
#[derive(Debug, Default)]
pub struct Tokens(Mutex<HashMap<String, TokenOwner>>);

impl Tokens {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, TokenOwner>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether `seg` addresses one of the endpoints of this module.
pub fn handles(seg: &[&str]) -> bool {
    matches!(
        seg,
        ["apis", "authentication.k8s.io", "v1", "tokenreviews"]
            | ["apis", "authorization.k8s.io", "v1", "subjectaccessreviews"]
            | ["api", "v1", "namespaces", _, "serviceaccounts", _, "token"]
    )
}

/// Answers a request for one of the endpoints of this module.
pub fn handle(st: &State, method: &Method, seg: &[&str], body: &[u8]) -> ApiResult<Response<Body>> {
    if method != Method::POST {
        return Err(ApiError::method_not_allowed());
    }
    let req: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("decoding request body: {e}")))?;
    match seg {
        ["apis", "authentication.k8s.io", "v1", "tokenreviews"] => Ok(token_review(st, req)),
        ["apis", "authorization.k8s.io", "v1", "subjectaccessreviews"] => Ok(access_review(st, req)),
        ["api", "v1", "namespaces", ns, "serviceaccounts", name, "token"] => token_request(st, ns, name, req),
        _ => Err(ApiError::no_route()),
    }
}

fn service_account(st: &State, ns: &str, name: &str) -> Option<Value> {
    st.store.get(&(String::new(), "serviceaccounts".into()), ns, name)
}

fn token_request(st: &State, ns: &str, name: &str, req: Value) -> ApiResult<Response<Body>> {
    let sa = service_account(st, ns, name).ok_or_else(|| ApiError::not_found("serviceaccounts", "", name))?;
    let uid = sa["metadata"]["uid"].as_str().unwrap_or_default().to_owned();
    let token = crate::certs::random_token();
    st.tokens.lock().insert(
        token.clone(),
        TokenOwner::ServiceAccount(ns.to_owned(), name.to_owned(), uid),
    );
    let seconds = req["spec"]["expirationSeconds"].as_i64().unwrap_or(3600);
    let expires = k8s_openapi::jiff::Timestamp::now()
        .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(seconds))
        .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now());
    let mut spec = req["spec"].clone();
    if !spec.is_object() {
        spec = json!({});
    }
    spec["expirationSeconds"] = json!(seconds);
    Ok(json_response(
        201,
        &json!({
            "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": null},
            "spec": spec,
            "status": {"token": token, "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()},
        }),
    ))
}

/// The user (name, uid, groups) of a token, if it is valid now.
fn user_of(st: &State, token: &str) -> Option<(String, String, Vec<String>)> {
    if token == st.token {
        return Some((
            ADMIN.to_owned(),
            format!("{ADMIN}-uid"),
            vec!["system:masters".into(), "system:authenticated".into()],
        ));
    }
    let owner = st.tokens.lock().get(token).cloned()?;
    match owner {
        TokenOwner::ServiceAccount(ns, name, uid) => {
            let sa = service_account(st, &ns, &name)?;
            (sa["metadata"]["uid"].as_str() == Some(uid.as_str())).then(|| {
                (
                    format!("system:serviceaccount:{ns}:{name}"),
                    uid,
                    vec![
                        "system:serviceaccounts".into(),
                        format!("system:serviceaccounts:{ns}"),
                        "system:authenticated".into(),
                    ],
                )
            })
        }
    }
}

fn token_review(st: &State, mut req: Value) -> Response<Body> {
    let token = req["spec"]["token"].as_str().unwrap_or_default().to_owned();
    let status = match user_of(st, &token) {
        Some((name, uid, groups)) => json!({
            "authenticated": true,
            "user": {"username": name, "uid": uid, "groups": groups},
        }),
        None => json!({"user": {}}),
    };
    req["status"] = status;
    req["metadata"] = json!({"creationTimestamp": null});
    json_response(201, &req)
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Whether `pattern` (a rule's entry) covers `value`: equal, `*`, or a `prefix*` when `prefix_ok`.
fn covers(pattern: &str, value: &str, prefix_ok: bool) -> bool {
    pattern == "*"
        || pattern == value
        || (prefix_ok && pattern.strip_suffix('*').is_some_and(|p| value.starts_with(p)))
}

fn rule_allows(rule: &Value, attrs: &Value, non_resource: bool) -> bool {
    let verb = attrs["verb"].as_str().unwrap_or_default();
    if !strings(&rule["verbs"]).iter().any(|v| covers(v, verb, false)) {
        return false;
    }
    if non_resource {
        let path = attrs["path"].as_str().unwrap_or_default();
        return strings(&rule["nonResourceURLs"])
            .iter()
            .any(|p| covers(p, path, true));
    }
    let group = attrs["group"].as_str().unwrap_or_default();
    let resource = attrs["resource"].as_str().unwrap_or_default();
    let full = match attrs["subresource"].as_str().filter(|s| !s.is_empty()) {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_owned(),
    };
    let name = attrs["name"].as_str().unwrap_or_default();
    let names = strings(&rule["resourceNames"]);
    strings(&rule["apiGroups"])
        .iter()
        .any(|g| covers(g, group, false))
        && strings(&rule["resources"]).iter().any(|r| {
            *r == "*"
                || *r == full
                || r.strip_prefix("*/")
                    .is_some_and(|sub| full.split_once('/').is_some_and(|(_, s)| s == sub))
        })
        && (names.is_empty() || names.contains(&name))
}

fn subject_matches(subject: &Value, user: &str, groups: &[&str]) -> bool {
    let name = subject["name"].as_str().unwrap_or_default();
    match subject["kind"].as_str() {
        Some("User") => name == user,
        Some("Group") => groups.contains(&name),
        Some("ServiceAccount") => {
            let ns = subject["namespace"].as_str().unwrap_or_default();
            user == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

/// The SubjectAccessReview decision and its reason.
fn decide(st: &State, spec: &Value) -> (bool, String) {
    let user = spec["user"].as_str().unwrap_or_default();
    let groups = strings(&spec["groups"]);
    if groups.contains(&"system:masters") {
        return (true, String::new());
    }
    let (attrs, non_resource) = if spec["nonResourceAttributes"].is_object() {
        (&spec["nonResourceAttributes"], true)
    } else {
        (&spec["resourceAttributes"], false)
    };
    if non_resource && groups.contains(&"system:authenticated") {
        let discovery = json!({"verbs": ["get"], "nonResourceURLs": DISCOVERY_URLS});
        if rule_allows(&discovery, attrs, true) {
            return (
                true,
                "RBAC: allowed by ClusterRoleBinding \"system:discovery\" of ClusterRole \"system:discovery\" to Group \"system:authenticated\"".into(),
            );
        }
    }
    let (bindings, _) = st.store.list(&(RBAC.into(), "clusterrolebindings".into()), None);
    for b in &bindings {
        if b["roleRef"]["kind"] != "ClusterRole" {
            continue;
        }
        let Some(subject) = b["subjects"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| subject_matches(s, user, &groups))
        else {
            continue;
        };
        let role_name = b["roleRef"]["name"].as_str().unwrap_or_default();
        let Some(role) = st.store.get(&(RBAC.into(), "clusterroles".into()), "", role_name) else {
            continue;
        };
        if role["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| rule_allows(r, attrs, non_resource))
        {
            return (
                true,
                format!(
                    "RBAC: allowed by ClusterRoleBinding \"{}\" of ClusterRole \"{role_name}\" to {} \"{}\"",
                    b["metadata"]["name"].as_str().unwrap_or_default(),
                    subject["kind"].as_str().unwrap_or_default(),
                    subject["name"].as_str().unwrap_or_default(),
                ),
            );
        }
    }
    (false, String::new())
}

fn access_review(st: &State, mut req: Value) -> Response<Body> {
    let (allowed, reason) = decide(st, &req["spec"]);
    let mut status = json!({"allowed": allowed});
    if !reason.is_empty() {
        status["reason"] = json!(reason);
    }
    req["status"] = status;
    req["metadata"] = json!({"creationTimestamp": null});
    json_response(201, &req)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_match_like_rbac() {
        let metrics = json!({"verbs": ["get"], "nonResourceURLs": ["/metrics"]});
        let np = |path: &str, verb: &str| json!({"path": path, "verb": verb});
        assert!(rule_allows(&metrics, &np("/metrics", "get"), true));
        assert!(!rule_allows(&metrics, &np("/metrics", "post"), true));
        assert!(!rule_allows(&metrics, &np("/metricsx", "get"), true));
        let star = json!({"verbs": ["*"], "nonResourceURLs": ["/debug/*"]});
        assert!(rule_allows(&star, &np("/debug/pprof/", "get"), true));
        let pods = json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "*/status"], "resourceNames": ["a"]});
        let ra = |res: &str, sub: &str, name: &str| json!({"verb": "get", "group": "", "resource": res, "subresource": sub, "name": name});
        assert!(rule_allows(&pods, &ra("pods", "", "a"), false));
        assert!(!rule_allows(&pods, &ra("pods", "", "b"), false));
        assert!(rule_allows(&pods, &ra("nodes", "status", "a"), false));
        assert!(!rule_allows(&pods, &ra("nodes", "", "a"), false));
    }

    #[test]
    fn subjects_match_users_groups_and_service_accounts() {
        let groups = ["system:serviceaccounts"];
        let user = "system:serviceaccount:mon:prom";
        assert!(subject_matches(
            &json!({"kind": "ServiceAccount", "name": "prom", "namespace": "mon"}),
            user,
            &groups
        ));
        assert!(!subject_matches(
            &json!({"kind": "ServiceAccount", "name": "prom", "namespace": "other"}),
            user,
            &groups
        ));
        assert!(subject_matches(
            &json!({"kind": "Group", "name": "system:serviceaccounts"}),
            user,
            &groups
        ));
        assert!(subject_matches(
            &json!({"kind": "User", "name": user}),
            user,
            &groups
        ));
    }
}
