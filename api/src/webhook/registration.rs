//! Registering the webhooks with an API server by URL (`clientConfig.url` + `caBundle`), the way
//! tests and local runs reach a manager outside the cluster, e.g.
//! `https://127.0.0.1:9443`. In a cluster the release manifests reach it through the Service
//! (see [`super::manifests`]).

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, WebhookClientConfig, WebhookConversion,
};

use super::CONVERSION_PATH;
use super::manifests::{
    MUTATING_CONFIGURATION, RELEASE_NAME_PREFIX, Target, VALIDATING_CONFIGURATION, mutating_configuration,
    validating_configuration,
};
use crate::crd::CrdError;

/// The mutating and validating configurations as released (`capmox-mutating-webhook-configuration`,
/// `capmox-validating-webhook-configuration`), sending to `base_url` (e.g.
/// `https://127.0.0.1:9443`) and trusting the PEM `ca_bundle`.
pub fn admission_configurations(
    base_url: &str,
    ca_bundle: &[u8],
) -> (MutatingWebhookConfiguration, ValidatingWebhookConfiguration) {
    let target = Target::Url {
        base: base_url.to_owned(),
        ca_bundle: ca_bundle.to_vec(),
    };
    (
        mutating_configuration(&format!("{RELEASE_NAME_PREFIX}{MUTATING_CONFIGURATION}"), &target),
        validating_configuration(
            &format!("{RELEASE_NAME_PREFIX}{VALIDATING_CONFIGURATION}"),
            &target,
        ),
    )
}

/// The ProxmoxVirtualMachine validating configuration as released
/// (`capmox-vm-validating-webhook-configuration`), sending to `base_url` and trusting `ca_bundle`.
pub fn vm_admission_configuration(base_url: &str, ca_bundle: &[u8]) -> ValidatingWebhookConfiguration {
    let target = Target::Url {
        base: base_url.to_owned(),
        ca_bundle: ca_bundle.to_vec(),
    };
    super::vm::vm_validating_configuration(
        &format!("{RELEASE_NAME_PREFIX}{}", super::vm::VM_VALIDATING_CONFIGURATION),
        &target,
    )
}

/// The `spec.conversion` sending ConversionReviews to `<base_url>/convert`, trusting `ca_bundle`.
pub fn conversion(base_url: &str, ca_bundle: &[u8]) -> CustomResourceConversion {
    CustomResourceConversion {
        strategy: "Webhook".to_owned(),
        webhook: Some(WebhookConversion {
            client_config: Some(WebhookClientConfig {
                url: Some(format!("{}{CONVERSION_PATH}", base_url.trim_end_matches('/'))),
                ca_bundle: Some(k8s_openapi::ByteString(ca_bundle.to_vec())),
                service: None,
            }),
            conversion_review_versions: vec!["v1".to_owned()],
        }),
    }
}

/// Our four CRDs with conversion through the webhook at `base_url`.
pub fn crds_with_conversion(
    base_url: &str,
    ca_bundle: &[u8],
) -> Result<Vec<CustomResourceDefinition>, CrdError> {
    let mut crds = crate::crd::all()?;
    for crd in &mut crds {
        crd.spec.conversion = Some(conversion(base_url, ca_bundle));
    }
    Ok(crds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_registration_uses_the_table() {
        let (m, v) = admission_configurations("https://127.0.0.1:9443/", b"PEM");
        assert_eq!(
            m.metadata.name.as_deref(),
            Some("capmox-mutating-webhook-configuration")
        );
        let hooks = v.webhooks.unwrap();
        assert_eq!(hooks.len(), 4);
        assert_eq!(
            hooks[2].client_config.url.as_deref(),
            Some("https://127.0.0.1:9443/validate-infrastructure-cluster-x-k8s-io-v1alpha2-proxmoxmachine")
        );
        let c = conversion("https://127.0.0.1:9443", b"PEM");
        let url = c.webhook.unwrap().client_config.unwrap().url.unwrap();
        assert_eq!(url, "https://127.0.0.1:9443/convert");
    }
}
