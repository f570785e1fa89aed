//! Admission webhooks, called the way kube-apiserver calls them: on CREATE and UPDATE of a
//! resource, and for the validating ones on DELETE of one object (`object` null, `oldObject` the
//! stored one, `options` a `DeleteOptions`; not CONNECT, not deletecollection), every configured
//! webhook whose rules, scope and selectors match gets an `AdmissionReview` (v1, or v1beta1 when
//! only that is accepted) over HTTPS at `clientConfig.url` trusting `clientConfig.caBundle`.
//!
//! * Mutating webhooks run first (configurations by name, webhooks in order), on the object
//!   after the request version's defaulting; their JSON patches are applied and the object is
//!   pruned, defaulted and validated again by the caller. Validating webhooks run after that.
//! * `matchPolicy: Equivalent`: a request through another served version of the same resource
//!   is sent converted to the first version the rules name (through the CRD's conversion), and a
//!   mutated object is converted back. `Exact` only matches the request's version.
//! * A denial becomes the API server's error: `admission webhook "<name>" denied the request:
//!   <message>` with the webhook's code (at least 400), reason and details. A webhook that
//!   cannot be called (or answers nonsense) fails the request with a 500 under
//!   `failurePolicy: Fail` and is skipped under `Ignore`.
//! * `warnings` become `Warning` headers (through the request's warning list); `dryRun` is passed on.
//!
//! Not implemented: `reinvocationPolicy: IfNeeded` (mutating webhooks run once),
//! `matchConditions`, audit annotations, and webhooks for the configurations themselves (the real
//! server never calls them either).

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use super::crds::{ResourceDef, version_priority};
use super::fieldval::Warnings;
use super::routes::ResourceReq;
use super::status::{ApiError, ApiResult};
use super::webhook_configs::{MUTATING, VALIDATING, configurations, is_config};
use super::{State, conversion, crud};

/// One admission request as the webhooks see it.
pub struct Attrs<'a> {
    /// The kind.
    pub def: &'a ResourceDef,
    /// The version the request was made through.
    pub version: &'a str,
    /// Subresource (`status`), if any.
    pub sub: Option<&'a str>,
    /// `CREATE` or `UPDATE`.
    pub operation: &'a str,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// Where the webhooks' warnings go (the response's `Warning` headers).
    pub warnings: &'a Warnings,
}

impl<'a> Attrs<'a> {
    /// A create through `version`.
    pub fn create(def: &'a ResourceDef, version: &'a str, dry_run: bool, warnings: &'a Warnings) -> Self {
        Self {
            def,
            version,
            sub: None,
            operation: "CREATE",
            dry_run,
            warnings,
        }
    }

    /// An update (or patch, or apply) of `rr`.
    pub fn update(rr: &'a ResourceReq, warnings: &'a Warnings) -> Self {
        Self {
            def: rr.def.as_ref(),
            version: &rr.version,
            sub: rr.sub.as_deref(),
            operation: "UPDATE",
            dry_run: rr.dry_run(),
            warnings,
        }
    }
}

fn strs(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn resource_matches(pattern: &str, plural: &str, sub: Option<&str>) -> bool {
    let (p_res, p_sub) = match pattern.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (pattern, None),
    };
    let res_ok = p_res == "*" || p_res == plural;
    let sub_ok = match (p_sub, sub) {
        (None, None) => true,
        (Some("*"), _) => true,
        (Some(p), Some(s)) => p == s,
        _ => false,
    };
    res_ok && sub_ok
}

fn rule_matches(rule: &Value, a: &Attrs<'_>, version: &str) -> bool {
    let any = |list: Vec<&str>, v: &str| list.iter().any(|x| *x == "*" || *x == v);
    let scope_ok = match rule.get("scope").and_then(Value::as_str).unwrap_or("*") {
        "Cluster" => !a.def.namespaced,
        "Namespaced" => a.def.namespaced,
        _ => true,
    };
    scope_ok
        && any(strs(rule.get("operations")), a.operation)
        && any(strs(rule.get("apiGroups")), &a.def.group)
        && any(strs(rule.get("apiVersions")), version)
        && strs(rule.get("resources"))
            .iter()
            .any(|r| resource_matches(r, &a.def.plural, a.sub))
}

/// The version a webhook is called with for this request, if it matches at all.
fn matched_version(hook: &Value, a: &Attrs<'_>) -> Option<String> {
    let rules: Vec<&Value> = hook
        .get("rules")
        .and_then(Value::as_array)
        .map(|r| r.iter().collect())?;
    if rules.iter().any(|r| rule_matches(r, a, a.version)) {
        return Some(a.version.to_owned());
    }
    if hook.get("matchPolicy").and_then(Value::as_str) == Some("Exact") {
        return None;
    }
    let mut versions: Vec<&str> = a
        .def
        .versions
        .iter()
        .filter(|v| v.served && v.name != a.version)
        .map(|v| v.name.as_str())
        .collect();
    versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    versions
        .into_iter()
        .find(|v| rules.iter().any(|r| rule_matches(r, a, v)))
        .map(str::to_owned)
}

fn labels(obj: Option<&Value>) -> serde_json::Map<String, Value> {
    obj.and_then(|o| o.pointer("/metadata/labels"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// Whether a `LabelSelector` (`matchLabels`, `matchExpressions`) selects `labels`.
fn selects(selector: Option<&Value>, labels: &serde_json::Map<String, Value>) -> bool {
    let Some(sel) = selector.filter(|s| !s.is_null()) else {
        return true;
    };
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    let ml_ok = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| m.iter().all(|(k, v)| get(k) == v.as_str()));
    let exprs = sel.get("matchExpressions").and_then(Value::as_array);
    let ex_ok = exprs.is_none_or(|es| {
        es.iter().all(|e| {
            let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
            let values = strs(e.get("values"));
            match e.get("operator").and_then(Value::as_str).unwrap_or_default() {
                "In" => get(key).is_some_and(|v| values.contains(&v)),
                "NotIn" => get(key).is_none_or(|v| !values.contains(&v)),
                "Exists" => get(key).is_some(),
                "DoesNotExist" => get(key).is_none(),
                _ => false,
            }
        })
    });
    ml_ok && ex_ok
}

fn selectors_match(st: &State, hook: &Value, a: &Attrs<'_>, obj: &Value, old: Option<&Value>) -> bool {
    let object_ok = selects(hook.get("objectSelector"), &labels(Some(obj)))
        || old.is_some_and(|o| selects(hook.get("objectSelector"), &labels(Some(o))));
    let ns_labels = if a.def.namespaced {
        let ns = crud::meta_str(obj, "namespace");
        labels(
            st.store
                .get(&(String::new(), "namespaces".into()), "", ns)
                .as_ref(),
        )
    } else if a.def.plural == "namespaces" && a.def.group.is_empty() {
        labels(Some(obj))
    } else {
        return object_ok;
    };
    object_ok && selects(hook.get("namespaceSelector"), &ns_labels)
}

fn hook_name(hook: &Value) -> String {
    hook.get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Interns a `reason` string (the API error type keeps `&'static str` reasons).
fn intern(s: &str) -> &'static str {
    static SEEN: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut seen = SEEN
        .get_or_init(|| Mutex::new(HashSet::new()))
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(known) = seen.get(s) {
        return known;
    }
    let leaked: &'static str = Box::leak(s.to_owned().into_boxed_str());
    seen.insert(leaked);
    leaked
}

/// The API server's error for a denial (`webhookerrors.ToStatusErr`).
fn denial(name: &str, status: Option<&Value>) -> ApiError {
    let status = status.cloned().unwrap_or(json!({}));
    let code = status.get("code").and_then(Value::as_u64).unwrap_or(0);
    let code = u16::try_from(code).ok().filter(|c| *c >= 400).unwrap_or(400);
    let message = status.get("message").and_then(Value::as_str).unwrap_or_default();
    let reason = status.get("reason").and_then(Value::as_str).unwrap_or_default();
    let denied = format!("admission webhook {name:?} denied the request");
    let message = if !message.is_empty() {
        format!("{denied}: {message}")
    } else if !reason.is_empty() {
        format!("{denied}: {reason}")
    } else {
        format!("{denied} without explanation")
    };
    ApiError {
        code,
        reason: intern(reason),
        message,
        details: status.get("details").filter(|d| !d.is_null()).cloned(),
    }
}

/// A webhook that could not be called or answered nonsense.
struct CallError(String);

fn ca_roots(hook: &Value) -> Result<rustls::RootCertStore, CallError> {
    let mut roots = rustls::RootCertStore::empty();
    let Some(b64) = hook.pointer("/clientConfig/caBundle").and_then(Value::as_str) else {
        return Ok(roots);
    };
    let pem = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| CallError(format!("caBundle is not base64: {e}")))?;
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(&pem) {
        let cert: rustls::pki_types::CertificateDer<'static> =
            cert.map_err(|e| CallError(format!("caBundle: {e}")))?;
        roots.add(cert).map_err(|e| CallError(format!("caBundle: {e}")))?;
    }
    Ok(roots)
}

fn url_of(hook: &Value) -> String {
    if let Some(u) = hook.pointer("/clientConfig/url").and_then(Value::as_str) {
        return u.to_owned();
    }
    let s = |p: &str| hook.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let port = hook
        .pointer("/clientConfig/service/port")
        .and_then(Value::as_i64)
        .unwrap_or(443);
    format!(
        "https://{}.{}.svc:{port}{}",
        s("/clientConfig/service/name"),
        s("/clientConfig/service/namespace"),
        s("/clientConfig/service/path")
    )
}

/// Sends one review; returns its `response`, checked the way the API server checks it.
async fn call(hook: &Value, review: &Value, uid: &str, mutating: bool) -> Result<Value, CallError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let timeout = hook.get("timeoutSeconds").and_then(Value::as_u64).unwrap_or(10);
    let cfg = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| CallError(e.to_string()))?
    .with_root_certificates(ca_roots(hook)?)
    .with_no_client_auth();
    let client = reqwest::Client::builder()
        .tls_backend_preconfigured(cfg)
        .timeout(Duration::from_secs(timeout))
        .build()
        .map_err(|e| CallError(format!("building the webhook client: {e}")))?;
    let url = url_of(hook);
    let sep = if url.contains('?') { '&' } else { '?' };
    let full = format!("{url}{sep}timeout={timeout}s");
    let resp = client
        .post(&full)
        .json(review)
        .send()
        .await
        .map_err(|e| CallError(format!("failed to call webhook: Post {full:?}: {e}")))?;
    let code = resp.status();
    let body = resp
        .bytes()
        .await
        .map_err(|e| CallError(format!("failed to call webhook: {e}")))?;
    if !code.is_success() {
        return Err(CallError(format!(
            "failed to call webhook: the server responded with the status code {} ({})",
            code.as_u16(),
            String::from_utf8_lossy(&body).trim()
        )));
    }
    let answer: Value = serde_json::from_slice(&body)
        .map_err(|e| CallError(format!("received invalid webhook response: {e}")))?;
    let invalid = |m: String| CallError(format!("received invalid webhook response: {m}"));
    let want_av = review["apiVersion"].as_str().unwrap_or_default();
    if answer.get("apiVersion").and_then(Value::as_str) != Some(want_av)
        || answer.get("kind").and_then(Value::as_str) != Some("AdmissionReview")
    {
        return Err(invalid(format!(
            "expected webhook response of {want_av}, Kind=AdmissionReview, got {}, Kind={}",
            answer
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            answer.get("kind").and_then(Value::as_str).unwrap_or_default()
        )));
    }
    let response = answer
        .get("response")
        .filter(|r| !r.is_null())
        .cloned()
        .ok_or_else(|| invalid("webhook response was absent".into()))?;
    let got_uid = response.get("uid").and_then(Value::as_str).unwrap_or_default();
    if got_uid != uid {
        return Err(invalid(format!("expected response.uid={uid:?}, got {got_uid:?}")));
    }
    let has_patch = response.get("patch").is_some_and(|p| !p.is_null());
    if has_patch && !mutating {
        return Err(invalid("validating webhooks may not return patches".into()));
    }
    if has_patch && response.get("patchType").and_then(Value::as_str) != Some("JSONPatch") {
        return Err(invalid(
            "webhook returned response.patch but not response.patchType JSONPatch".into(),
        ));
    }
    Ok(response)
}

struct Sent {
    uid: String,
    review: Value,
}

fn build_review(hook: &Value, a: &Attrs<'_>, call_version: &str, obj: &Value, old: Option<&Value>) -> Sent {
    let uid = uuid::Uuid::new_v4().to_string();
    let review_av = if strs(hook.get("admissionReviewVersions")).contains(&"v1") {
        "admission.k8s.io/v1"
    } else {
        "admission.k8s.io/v1beta1"
    };
    let gvk = |v: &str| json!({"group": a.def.group, "version": v, "kind": a.def.kind});
    let gvr = |v: &str| json!({"group": a.def.group, "version": v, "resource": a.def.plural});
    let options_kind = match a.operation {
        "CREATE" => "CreateOptions",
        "DELETE" => "DeleteOptions",
        _ => "UpdateOptions",
    };
    // A DELETE has no new object: the review carries the stored one as `oldObject` only.
    let (object, old) = if a.operation == "DELETE" {
        (Value::Null, Some(obj))
    } else {
        (obj.clone(), old)
    };
    let mut request = json!({
        "uid": uid,
        "kind": gvk(call_version),
        "resource": gvr(call_version),
        "requestKind": gvk(a.version),
        "requestResource": gvr(a.version),
        "name": crud::meta_str(obj, "name"),
        "operation": a.operation,
        "userInfo": {"username": "testenv-admin", "uid": "testenv-admin-uid",
                     "groups": ["system:masters", "system:authenticated"]},
        "object": object,
        "oldObject": old.cloned().unwrap_or(Value::Null),
        "dryRun": a.dry_run,
        "options": {"kind": options_kind, "apiVersion": "meta.k8s.io/v1"},
    });
    if a.def.namespaced {
        request["namespace"] = json!(crud::meta_str(obj, "namespace"));
    }
    if let Some(sub) = a.sub {
        request["subResource"] = json!(sub);
        request["requestSubResource"] = json!(sub);
    }
    Sent {
        uid,
        review: json!({"apiVersion": review_av, "kind": "AdmissionReview", "request": request}),
    }
}

async fn at_version(def: &ResourceDef, obj: &Value, version: &str) -> ApiResult<Value> {
    conversion::convert(def, obj.clone(), &def.api_version(version)).await
}

/// Calls one webhook; `Ok(None)` when it was skipped (`failurePolicy: Ignore` after a failure).
async fn invoke(
    hook: &Value,
    a: &Attrs<'_>,
    version: &str,
    obj: &Value,
    old: Option<&Value>,
    mutating: bool,
) -> ApiResult<Option<(Value, Value)>> {
    let name = hook_name(hook);
    let sent_obj = at_version(a.def, obj, version).await?;
    let sent_old = match old {
        Some(o) => Some(at_version(a.def, o, version).await?),
        None => None,
    };
    let Sent { uid, review } = build_review(hook, a, version, &sent_obj, sent_old.as_ref());
    match call(hook, &review, &uid, mutating).await {
        Ok(response) => {
            for w in strs(response.get("warnings")) {
                a.warnings.push(w.to_owned());
            }
            if response.get("allowed").and_then(Value::as_bool) != Some(true) {
                return Err(denial(&name, response.get("status")));
            }
            Ok(Some((response, sent_obj)))
        }
        Err(CallError(reason)) => {
            if hook.get("failurePolicy").and_then(Value::as_str) == Some("Ignore") {
                tracing::warn!(webhook = %name, %reason, "admission webhook failed; ignored (failurePolicy: Ignore)");
                return Ok(None);
            }
            Err(ApiError::internal(format!(
                "failed calling webhook {name:?}: {reason}"
            )))
        }
    }
}

fn matching<'v>(
    st: &State,
    configs: &'v [std::sync::Arc<Value>],
    a: &Attrs<'_>,
    obj: &Value,
    old: Option<&Value>,
) -> Vec<(&'v Value, String)> {
    configs
        .iter()
        .flat_map(|c| c.get("webhooks").and_then(Value::as_array).into_iter().flatten())
        .filter_map(|hook| {
            let v = matched_version(hook, a)?;
            selectors_match(st, hook, a, obj, old).then_some((hook, v))
        })
        .collect()
}

/// Runs the mutating webhooks on `obj` (in `a.version`); returns the object to admit.
pub async fn mutate(st: &State, a: &Attrs<'_>, obj: Value, old: Option<&Value>) -> ApiResult<Value> {
    if is_config(a.def) {
        return Ok(obj);
    }
    let configs = configurations(st, MUTATING);
    if configs.is_empty() {
        return Ok(obj);
    }
    let mut obj = obj;
    if let Some(schema) = a.def.version(a.version).and_then(|v| v.schema.clone()) {
        schema.prune_and_default(&mut obj);
    }
    for (hook, version) in matching(st, &configs, a, &obj, old) {
        let Some((response, mut sent)) = invoke(hook, a, &version, &obj, old, true).await? else {
            continue;
        };
        let Some(patch_b64) = response.get("patch").and_then(Value::as_str) else {
            continue;
        };
        let name = hook_name(hook);
        let bad = |m: String| ApiError::internal(format!("failed calling webhook {name:?}: {m}"));
        let raw = base64::engine::general_purpose::STANDARD
            .decode(patch_b64)
            .map_err(|e| {
                bad(format!(
                    "received invalid webhook response: patch is not base64: {e}"
                ))
            })?;
        let patch: json_patch::Patch = serde_json::from_slice(&raw)
            .map_err(|e| bad(format!("received invalid webhook response: {e}")))?;
        json_patch::patch(&mut sent, &patch).map_err(|e| {
            ApiError::internal(format!(
                "admission webhook {name:?} returned a patch that does not apply: {e}"
            ))
        })?;
        obj = at_version(a.def, &sent, a.version).await?;
    }
    Ok(obj)
}

/// Runs the validating webhooks on the DELETE of `stored` (one object, in `version`).
pub async fn validate_delete(
    st: &State,
    def: &ResourceDef,
    version: &str,
    stored: &Value,
    dry_run: bool,
) -> ApiResult<()> {
    let warnings = Warnings::default();
    let a = Attrs {
        def,
        version,
        sub: None,
        operation: "DELETE",
        dry_run,
        warnings: &warnings,
    };
    validate(st, &a, stored, None).await
}

/// Runs the validating webhooks on the admitted `obj` (in `a.version`).
pub async fn validate(st: &State, a: &Attrs<'_>, obj: &Value, old: Option<&Value>) -> ApiResult<()> {
    if is_config(a.def) {
        return Ok(());
    }
    let configs = configurations(st, VALIDATING);
    for (hook, version) in matching(st, &configs, a, obj, old) {
        invoke(hook, a, &version, obj, old, false).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_match_like_the_apiserver() {
        assert!(resource_matches("widgets", "widgets", None));
        assert!(!resource_matches("widgets", "widgets", Some("status")));
        assert!(resource_matches("*", "widgets", None));
        assert!(!resource_matches("*", "widgets", Some("status")));
        assert!(resource_matches("*/*", "widgets", Some("status")));
        assert!(resource_matches("widgets/status", "widgets", Some("status")));
        assert!(!resource_matches("gadgets", "widgets", None));
    }

    #[test]
    fn selectors() {
        let l = serde_json::from_value(json!({"a": "1", "b": "2"})).unwrap();
        assert!(selects(Some(&json!({})), &l));
        assert!(selects(Some(&json!({"matchLabels": {"a": "1"}})), &l));
        assert!(!selects(Some(&json!({"matchLabels": {"a": "2"}})), &l));
        assert!(selects(
            Some(&json!({"matchExpressions": [{"key": "c", "operator": "DoesNotExist"}]})),
            &l
        ));
        assert!(!selects(
            Some(&json!({"matchExpressions": [{"key": "b", "operator": "NotIn", "values": ["2"]}]})),
            &l
        ));
    }

    #[test]
    fn denials_read_like_the_apiserver() {
        let e = denial(
            "v.example.io",
            Some(&json!({"code": 403, "reason": "Forbidden", "message": "no"})),
        );
        assert_eq!(
            e.message,
            "admission webhook \"v.example.io\" denied the request: no"
        );
        assert_eq!((e.code, e.reason), (403, "Forbidden"));
        let e = denial("v.example.io", Some(&json!({"code": 200})));
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "admission webhook \"v.example.io\" denied the request without explanation"
        );
    }
}
