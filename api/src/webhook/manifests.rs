//! The webhook manifests under `config/`, rendered from the table in [`super`]:
//!
//! * `config/webhook/manifests.yaml`: capmox's `MutatingWebhookConfiguration` and
//!   `ValidatingWebhookConfiguration` (names before the release's `capmox-` name prefix, service
//!   `webhook-service` in namespace `system`, as kustomize expects them), plus
//!   `service.yaml`, `kustomization.yaml` and `kustomizeconfig.yaml` beside it;
//! * `config/crd/patches/webhook_in_<plural>.yaml`: conversion by webhook (`/convert` on
//!   `capmox-webhook-service` in `capmox-system`, `conversionReviewVersions: [v1]`);
//! * `config/crd/patches/cainjection_in_<plural>.yaml`: cert-manager CA injection.
//!
//! `make manifests` writes them (`manifestgen`); a test fails when the checked-in files differ.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde_json::{Value, json};

use super::{
    AdmissionType, AdmissionWebhook, CONVERSION_PATH, WEBHOOK_VERSION, WebhookKind, admission_webhooks,
};
use crate::consts::GROUP;

/// Name of the `MutatingWebhookConfiguration` before the release's name prefix.
pub const MUTATING_CONFIGURATION: &str = "mutating-webhook-configuration";
/// Name of the `ValidatingWebhookConfiguration` before the release's name prefix.
pub const VALIDATING_CONFIGURATION: &str = "validating-webhook-configuration";
/// Name of the webhook Service before the release's name prefix.
pub const SERVICE: &str = "webhook-service";
/// Namespace placeholder kustomize replaces with the release namespace.
pub const SERVICE_NAMESPACE: &str = "system";
/// Name prefix of the released objects (`config/default`'s `namePrefix`).
pub const RELEASE_NAME_PREFIX: &str = "capmox-";
/// Namespace of the released objects (`config/default`'s `namespace`).
pub const RELEASE_NAMESPACE: &str = "capmox-system";
/// The cert-manager `Certificate` whose CA is injected (`<namespace>/<name>`).
pub const INJECT_CA_FROM: &str = "capmox-system/capmox-serving-cert";
/// Annotation asking cert-manager's cainjector to fill in `caBundle`.
pub const INJECT_CA_ANNOTATION: &str = "cert-manager.io/inject-ca-from";
/// The Service's port.
pub const SERVICE_PORT: i32 = 443;
/// The manager's webhook port (the Service's `targetPort`, `--webhook-port`'s default).
pub const WEBHOOK_PORT: i32 = 9443;

const HEADER: &str = "# Generated from api/src/webhook/ by `make manifests`; do not edit.\n";

/// Errors while rendering or writing the manifests.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// An object could not be converted to JSON.
    #[error("converting {what} to JSON: {source}")]
    Json {
        /// The object.
        what: String,
        /// Underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// An object could not be serialised to YAML.
    #[error("serialising {what} to YAML: {source}")]
    Yaml {
        /// The object.
        what: String,
        /// Underlying error.
        #[source]
        source: serde_saphyr::ser::Error,
    },
    /// A file could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// Target file.
        path: PathBuf,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Where a webhook configuration sends its requests.
#[derive(Debug, Clone)]
pub enum Target {
    /// The in-cluster Service (`path` is each webhook's path).
    Service {
        /// Service name.
        name: String,
        /// Service namespace.
        namespace: String,
        /// Service port (`None`: the API server's default, 443).
        port: Option<i32>,
    },
    /// A base URL (`https://127.0.0.1:9443`) each webhook's path is appended to, trusting a CA.
    Url {
        /// The base URL, without a trailing slash.
        base: String,
        /// PEM bundle the API server trusts for this URL.
        ca_bundle: Vec<u8>,
    },
}

impl Target {
    /// The admissionregistration `clientConfig` for `path`.
    pub fn admission_client_config(&self, path: &str) -> WebhookClientConfig {
        match self {
            Target::Service {
                name,
                namespace,
                port,
            } => WebhookClientConfig {
                service: Some(ServiceReference {
                    name: name.clone(),
                    namespace: namespace.clone(),
                    path: Some(path.to_owned()),
                    port: *port,
                }),
                ..WebhookClientConfig::default()
            },
            Target::Url { base, ca_bundle } => WebhookClientConfig {
                url: Some(format!("{}{path}", base.trim_end_matches('/'))),
                ca_bundle: Some(k8s_openapi::ByteString(ca_bundle.clone())),
                ..WebhookClientConfig::default()
            },
        }
    }
}

fn rules(webhook: &AdmissionWebhook) -> Vec<RuleWithOperations> {
    vec![RuleWithOperations {
        api_groups: Some(vec![GROUP.to_owned()]),
        api_versions: Some(vec![WEBHOOK_VERSION.to_owned()]),
        operations: Some(vec!["CREATE".to_owned(), "UPDATE".to_owned()]),
        resources: Some(vec![webhook.kind.plural().to_owned()]),
        scope: None,
    }]
}

/// The `MutatingWebhookConfiguration` named `name` sending to `target`.
pub fn mutating_configuration(name: &str, target: &Target) -> MutatingWebhookConfiguration {
    MutatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        webhooks: Some(
            admission_webhooks(AdmissionType::Mutating)
                .map(|w| MutatingWebhook {
                    admission_review_versions: vec!["v1".to_owned()],
                    client_config: target.admission_client_config(&w.path()),
                    failure_policy: Some("Fail".to_owned()),
                    match_policy: Some(w.match_policy.as_str().to_owned()),
                    name: w.name(),
                    rules: Some(rules(w)),
                    side_effects: "None".to_owned(),
                    ..MutatingWebhook::default()
                })
                .collect(),
        ),
    }
}

/// The `ValidatingWebhookConfiguration` named `name` sending to `target`.
pub fn validating_configuration(name: &str, target: &Target) -> ValidatingWebhookConfiguration {
    ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        webhooks: Some(
            admission_webhooks(AdmissionType::Validating)
                .map(|w| ValidatingWebhook {
                    admission_review_versions: vec!["v1".to_owned()],
                    client_config: target.admission_client_config(&w.path()),
                    failure_policy: Some("Fail".to_owned()),
                    match_policy: Some(w.match_policy.as_str().to_owned()),
                    name: w.name(),
                    rules: Some(rules(w)),
                    side_effects: "None".to_owned(),
                    ..ValidatingWebhook::default()
                })
                .collect(),
        ),
    }
}

/// The kustomize `Target` of `config/webhook/manifests.yaml`.
fn kustomize_target() -> Target {
    Target::Service {
        name: SERVICE.to_owned(),
        namespace: SERVICE_NAMESPACE.to_owned(),
        port: None,
    }
}

fn with_ca_injection<T: Serialize>(what: &str, obj: &T) -> Result<Value, ManifestError> {
    let mut v = to_json(what, obj)?;
    v["metadata"]["annotations"] = json!({ INJECT_CA_ANNOTATION: INJECT_CA_FROM });
    Ok(v)
}

fn to_json<T: Serialize>(what: &str, obj: &T) -> Result<Value, ManifestError> {
    serde_json::to_value(obj).map_err(|source| ManifestError::Json {
        what: what.to_owned(),
        source,
    })
}

fn yaml(what: &str, v: &Value) -> Result<String, ManifestError> {
    serde_saphyr::to_string(v).map_err(|source| ManifestError::Yaml {
        what: what.to_owned(),
        source,
    })
}

/// `config/webhook/manifests.yaml`: both configurations, with the CA injection annotation.
pub fn webhook_manifests() -> Result<String, ManifestError> {
    let target = kustomize_target();
    let mutating = with_ca_injection(
        MUTATING_CONFIGURATION,
        &mutating_configuration(MUTATING_CONFIGURATION, &target),
    )?;
    let validating = with_ca_injection(
        VALIDATING_CONFIGURATION,
        &validating_configuration(VALIDATING_CONFIGURATION, &target),
    )?;
    Ok(format!(
        "{HEADER}---\n{}---\n{}",
        yaml(MUTATING_CONFIGURATION, &mutating)?,
        yaml(VALIDATING_CONFIGURATION, &validating)?
    ))
}

/// `config/webhook/vm_manifests.yaml`: the ProxmoxVirtualMachine validating configuration, with
/// the CA injection annotation.
pub fn vm_webhook_manifests() -> Result<String, ManifestError> {
    use super::vm::{VM_VALIDATING_CONFIGURATION, vm_validating_configuration};
    let v = with_ca_injection(
        VM_VALIDATING_CONFIGURATION,
        &vm_validating_configuration(VM_VALIDATING_CONFIGURATION, &kustomize_target()),
    )?;
    Ok(format!("{HEADER}---\n{}", yaml(VM_VALIDATING_CONFIGURATION, &v)?))
}

/// `config/webhook/service.yaml`: Service `webhook-service`, 443 → 9443, selecting the manager.
pub fn service() -> Result<String, ManifestError> {
    let svc = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": SERVICE, "namespace": SERVICE_NAMESPACE},
        "spec": {
            "ports": [{"port": SERVICE_PORT, "protocol": "TCP", "targetPort": WEBHOOK_PORT}],
            "selector": {"control-plane": "controller-manager"},
        },
    });
    Ok(format!("{HEADER}{}", yaml(SERVICE, &svc)?))
}

/// `config/webhook/kustomization.yaml`.
pub fn kustomization() -> Result<String, ManifestError> {
    let k = json!({
        "resources": ["manifests.yaml", "vm_manifests.yaml", "service.yaml"],
        "configurations": ["kustomizeconfig.yaml"],
    });
    Ok(format!("{HEADER}{}", yaml("kustomization", &k)?))
}

/// `config/webhook/kustomizeconfig.yaml`: teaches kustomize to prefix and re-namespace the
/// Service reference inside the webhook configurations.
pub fn kustomizeconfig() -> Result<String, ManifestError> {
    let reference = |kind: &str| json!({"kind": kind, "group": "admissionregistration.k8s.io", "path": "webhooks/clientConfig/service/name"});
    let namespace = |kind: &str| json!({"kind": kind, "group": "admissionregistration.k8s.io", "path": "webhooks/clientConfig/service/namespace", "create": true});
    let k = json!({
        "nameReference": [{
            "kind": "Service",
            "version": "v1",
            "fieldSpecs": [reference("MutatingWebhookConfiguration"), reference("ValidatingWebhookConfiguration")],
        }],
        "namespace": [namespace("MutatingWebhookConfiguration"), namespace("ValidatingWebhookConfiguration")],
    });
    Ok(format!("{HEADER}{}", yaml("kustomizeconfig", &k)?))
}

/// The `spec.conversion` of a CRD converted by the webhook at `client_config`.
pub fn conversion(client_config: Value) -> Value {
    json!({
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": client_config,
            "conversionReviewVersions": ["v1"],
        },
    })
}

/// `config/crd/patches/webhook_in_<plural>.yaml`.
pub fn conversion_patch(kind: WebhookKind) -> Result<String, ManifestError> {
    let service = json!({"service": {
        "name": format!("{RELEASE_NAME_PREFIX}{SERVICE}"),
        "namespace": RELEASE_NAMESPACE,
        "path": CONVERSION_PATH,
    }});
    let patch = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": kind.crd_name()},
        "spec": {"conversion": conversion(service)},
    });
    Ok(format!(
        "{HEADER}# Converts {} between v1alpha1 and v1alpha2 through the manager's webhook.\n{}",
        kind.kind(),
        yaml(&kind.crd_name(), &patch)?
    ))
}

/// `config/crd/patches/cainjection_in_<plural>.yaml`.
pub fn ca_injection_patch(kind: WebhookKind) -> Result<String, ManifestError> {
    let patch = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "annotations": {INJECT_CA_ANNOTATION: INJECT_CA_FROM},
            "name": kind.crd_name(),
        },
    });
    Ok(format!(
        "{HEADER}# Lets cert-manager inject the webhook CA into the {} CRD's conversion webhook.\n{}",
        kind.kind(),
        yaml(&kind.crd_name(), &patch)?
    ))
}

/// Every generated file, keyed by its path relative to `config/`.
pub fn files() -> Result<BTreeMap<PathBuf, String>, ManifestError> {
    let mut out = BTreeMap::new();
    out.insert(PathBuf::from("webhook/manifests.yaml"), webhook_manifests()?);
    out.insert(
        PathBuf::from("webhook/vm_manifests.yaml"),
        vm_webhook_manifests()?,
    );
    out.insert(PathBuf::from("webhook/service.yaml"), service()?);
    out.insert(PathBuf::from("webhook/kustomization.yaml"), kustomization()?);
    out.insert(PathBuf::from("webhook/kustomizeconfig.yaml"), kustomizeconfig()?);
    for kind in WebhookKind::ALL {
        out.insert(
            PathBuf::from(format!("crd/patches/webhook_in_{}.yaml", kind.plural())),
            conversion_patch(kind)?,
        );
        out.insert(
            PathBuf::from(format!("crd/patches/cainjection_in_{}.yaml", kind.plural())),
            ca_injection_patch(kind)?,
        );
    }
    Ok(out)
}

/// Writes every generated file below `config_dir` and returns the written paths.
pub fn write_all(config_dir: &Path) -> Result<Vec<PathBuf>, ManifestError> {
    let mut written = Vec::new();
    for (rel, text) in files()? {
        let path = config_dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| ManifestError::Write {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(&path, text).map_err(|source| ManifestError::Write {
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}
