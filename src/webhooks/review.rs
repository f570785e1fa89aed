//! `AdmissionReview` (`admission.k8s.io/v1`) handling: decode the request, run the kind's
//! defaulting or validation, answer with a JSON patch or a verdict. The request and response are
//! small serde types of our own: kube-core's admission types pin an older `json-patch` major.
//!
//! Like controller-runtime, a request that cannot be decoded is answered with `allowed: false` and
//! a 400 status; DELETE and CONNECT are allowed (capmox registers CREATE and UPDATE only).

use base64::Engine;
use capmox_api::v1alpha2;
use capmox_api::webhook::{AdmissionType, AdmissionWebhook, WEBHOOK_VERSION, WebhookKind};
use kube::core::Status;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::field::{Verdict, bad_request};
use super::{cluster, machine, machine_template};

const REVIEW_API_VERSION: &str = "admission.k8s.io/v1";

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review {
    #[serde(default)]
    request: Option<Request>,
}

#[derive(Debug, Deserialize)]
struct Gvk {
    #[serde(default)]
    group: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    kind: String,
}

/// The parts of an `AdmissionRequest` the webhooks read.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    uid: String,
    kind: Gvk,
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    operation: String,
    #[serde(default)]
    object: Option<Value>,
    #[serde(default)]
    old_object: Option<Value>,
    #[serde(default)]
    dry_run: Option<bool>,
}

/// What the handler answers, before it is wrapped in an `AdmissionReview`.
#[derive(Debug, Default)]
struct Answer {
    denial: Option<Status>,
    patch: Vec<Value>,
    warnings: Vec<String>,
}

impl From<Verdict> for Answer {
    fn from(v: Verdict) -> Self {
        Answer {
            denial: v.denial,
            patch: Vec::new(),
            warnings: v.warnings,
        }
    }
}

fn errored(code: u16, message: String) -> Status {
    let mut s = Status::failure(&message, "");
    s.code = code;
    s
}

fn decode<T: DeserializeOwned>(obj: Option<&Value>, what: &str) -> Result<T, Box<Status>> {
    let obj =
        obj.ok_or_else(|| Box::new(errored(400, format!("there is no content to decode in {what}"))))?;
    serde_json::from_value(obj.clone()).map_err(|e| Box::new(errored(400, format!("decoding {what}: {e}"))))
}

fn run(hook: &AdmissionWebhook, req: &Request) -> Result<Answer, Box<Status>> {
    let group = capmox_api::consts::GROUP;
    if req.kind.group != group || req.kind.version != WEBHOOK_VERSION || req.kind.kind != hook.kind.kind() {
        return Err(Box::new(bad_request(&format!(
            "expected a {}/{WEBHOOK_VERSION} {} but got a {}/{} {}",
            group,
            hook.kind.kind(),
            req.kind.group,
            req.kind.version,
            req.kind.kind
        ))));
    }
    let update = match req.operation.as_str() {
        "CREATE" => false,
        "UPDATE" => true,
        _ => return Ok(Answer::default()),
    };
    let obj = req.object.as_ref();
    let old = req.old_object.as_ref();
    match hook.admission {
        AdmissionType::Mutating => {
            let patch = match hook.kind {
                WebhookKind::Machine => machine::default_patch(obj.ok_or_else(|| {
                    Box::new(errored(400, "there is no content to decode in object".into()))
                })?),
                _ => Vec::new(),
            };
            Ok(Answer {
                patch,
                ..Answer::default()
            })
        }
        AdmissionType::Validating => {
            let verdict = match (hook.kind, update) {
                (WebhookKind::Cluster, false) => cluster::validate_cluster_create(&decode(obj, "object")?),
                (WebhookKind::Cluster, true) => cluster::validate_cluster_update(&decode(obj, "object")?),
                (WebhookKind::ClusterTemplate, false) => {
                    cluster::validate_template_create(&decode(obj, "object")?)
                }
                (WebhookKind::ClusterTemplate, true) => {
                    cluster::validate_template_update(&decode(obj, "object")?)
                }
                (WebhookKind::Machine, false) => {
                    machine::validate_create(&decode::<v1alpha2::ProxmoxMachine>(obj, "object")?)
                }
                (WebhookKind::Machine, true) => machine::validate_update(
                    &decode::<v1alpha2::ProxmoxMachine>(old, "oldObject")?,
                    &decode(obj, "object")?,
                ),
                (WebhookKind::MachineTemplate, false) => {
                    machine_template::validate_create(&decode(obj, "object")?)
                }
                (WebhookKind::MachineTemplate, true) => machine_template::validate_update(
                    &decode(old, "oldObject")?,
                    &decode(obj, "object")?,
                    req.dry_run.unwrap_or(false),
                ),
            };
            Ok(verdict.into())
        }
    }
}

fn review(uid: &str, answer: Answer) -> Value {
    let mut response = json!({"uid": uid, "allowed": answer.denial.is_none()});
    match &answer.denial {
        Some(status) => response["status"] = serde_json::to_value(status).unwrap_or(Value::Null),
        None => response["status"] = json!({"metadata": {}, "code": 200}),
    }
    if !answer.patch.is_empty() {
        let bytes = serde_json::to_vec(&answer.patch).unwrap_or_default();
        response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
        response["patchType"] = json!("JSONPatch");
    }
    if !answer.warnings.is_empty() {
        response["warnings"] = json!(answer.warnings);
    }
    json!({"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "response": response})
}

/// Answers one `AdmissionReview` for `hook`; always an `AdmissionReview` (HTTP 200).
pub fn handle(hook: &AdmissionWebhook, body: &[u8]) -> Value {
    let req = match serde_json::from_slice::<Review>(body) {
        Ok(Review { request: Some(req) }) => req,
        Ok(Review { request: None }) => {
            return review(
                "",
                Answer::from(Verdict::deny(errored(
                    400,
                    "AdmissionReview has no request".into(),
                ))),
            );
        }
        Err(e) => {
            return review(
                "",
                Answer::from(Verdict::deny(errored(
                    400,
                    format!("decoding the AdmissionReview: {e}"),
                ))),
            );
        }
    };
    let answer = run(hook, &req).unwrap_or_else(|status| Answer::from(Verdict::deny(*status)));
    tracing::debug!(
        webhook = %hook.name(),
        operation = %req.operation,
        namespace = req.namespace.as_deref().unwrap_or_default(),
        name = %req.name,
        allowed = answer.denial.is_none(),
        patched = !answer.patch.is_empty(),
        "admission review"
    );
    if let Some(status) = &answer.denial {
        tracing::info!(webhook = %hook.name(), name = %req.name, message = %status.message, "admission denied");
    }
    review(&req.uid, answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use capmox_api::webhook::ADMISSION_WEBHOOKS;

    fn request(kind: &str, op: &str, object: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u-1",
                "kind": {"group": "infrastructure.cluster.x-k8s.io", "version": "v1alpha2", "kind": kind},
                "resource": {"group": "infrastructure.cluster.x-k8s.io", "version": "v1alpha2", "resource": "x"},
                "name": "n", "namespace": "ns", "operation": op, "userInfo": {},
                "object": object, "oldObject": null, "dryRun": false,
            }
        }))
        .unwrap()
    }

    #[test]
    fn mutating_machine_answers_a_json_patch() {
        let hook = ADMISSION_WEBHOOKS[2];
        let obj = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2", "kind": "ProxmoxMachine",
            "metadata": {"name": "n"}, "spec": {"network": {"networkDevices": [{"name": "net0"}]}}});
        let r = handle(&hook, &request("ProxmoxMachine", "CREATE", obj));
        assert_eq!(r["response"]["uid"], "u-1");
        assert_eq!(r["response"]["allowed"], true);
        assert_eq!(r["response"]["patchType"], "JSONPatch");
        let patch = base64::engine::general_purpose::STANDARD
            .decode(r["response"]["patch"].as_str().unwrap())
            .unwrap();
        let patch: Value = serde_json::from_slice(&patch).unwrap();
        assert_eq!(patch[0]["path"], "/spec/network/networkDevices/0/defaultIPv4");
    }

    #[test]
    fn undecodable_and_foreign_requests_are_denied_with_400() {
        let hook = ADMISSION_WEBHOOKS[6];
        let r = handle(&hook, b"not json");
        assert_eq!(r["response"]["allowed"], false);
        assert_eq!(r["response"]["status"]["code"], 400);
        let r = handle(&hook, &request("ProxmoxCluster", "CREATE", json!({})));
        assert_eq!(r["response"]["status"]["reason"], "BadRequest");
        let r = handle(&hook, &request("ProxmoxMachine", "DELETE", json!({})));
        assert_eq!(r["response"]["allowed"], true);
    }
}
