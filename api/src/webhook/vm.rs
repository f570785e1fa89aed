//! The admission webhook of `ProxmoxVirtualMachine` (`vm.capmox-rs.io/v1alpha1`): one validating
//! webhook for CREATE, UPDATE and DELETE (a protected VM's object cannot be deleted), in its own
//! `ValidatingWebhookConfiguration` beside capmox's (which keeps capmox's eight webhooks exactly).

use k8s_openapi::api::admissionregistration::v1::{
    RuleWithOperations, ValidatingWebhook, ValidatingWebhookConfiguration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::manifests::Target;
use crate::vm::{GROUP, PLURAL, VERSION};

/// The HTTPS path of the validating webhook.
pub const VM_VALIDATE_PATH: &str = "/validate-vm-capmox-rs-io-v1alpha1-proxmoxvirtualmachine";
/// The webhook's name (quoted by the API server in denials).
pub const VM_WEBHOOK_NAME: &str = "validation.proxmoxvirtualmachine.vm.capmox-rs.io";
/// Name of its `ValidatingWebhookConfiguration` before the release's name prefix.
pub const VM_VALIDATING_CONFIGURATION: &str = "vm-validating-webhook-configuration";

/// The configuration named `name` sending to `target`.
pub fn vm_validating_configuration(name: &str, target: &Target) -> ValidatingWebhookConfiguration {
    ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        webhooks: Some(vec![ValidatingWebhook {
            admission_review_versions: vec!["v1".to_owned()],
            client_config: target.admission_client_config(VM_VALIDATE_PATH),
            failure_policy: Some("Fail".to_owned()),
            match_policy: Some("Equivalent".to_owned()),
            name: VM_WEBHOOK_NAME.to_owned(),
            rules: Some(vec![RuleWithOperations {
                api_groups: Some(vec![GROUP.to_owned()]),
                api_versions: Some(vec![VERSION.to_owned()]),
                operations: Some(vec![
                    "CREATE".to_owned(),
                    "UPDATE".to_owned(),
                    "DELETE".to_owned(),
                ]),
                resources: Some(vec![PLURAL.to_owned()]),
                scope: None,
            }]),
            side_effects: "None".to_owned(),
            ..ValidatingWebhook::default()
        }]),
    }
}
