//! The webhooks capmox-rs serves, as one table: which kinds get a defaulting and a validating
//! admission webhook, at which path and under which name, with which `matchPolicy`, plus the
//! conversion webhook's path. The manager's HTTPS router (`capmox::webhooks`) and the generated
//! manifests under `config/` ([`manifests`]) are both built from this table, so they cannot drift.
//!
//! Paths and names are capmox v0.9's (controller-runtime's scheme:
//! `/mutate-<group with dashes>-<version>-<kind lowercased>` and
//! `default.<kind lowercased>.<group>`; `validate-` / `validation.` for the validating ones).

pub mod manifests;
pub mod registration;
pub mod vm;

use crate::consts::GROUP;

/// The API version every admission webhook is registered for (`rules[].apiVersions`).
pub const WEBHOOK_VERSION: &str = "v1alpha2";

/// Path of the conversion webhook (`ConversionReview` `apiextensions.k8s.io/v1`).
pub const CONVERSION_PATH: &str = "/convert";

/// The four kinds of this provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WebhookKind {
    /// `ProxmoxCluster`.
    Cluster,
    /// `ProxmoxClusterTemplate`.
    ClusterTemplate,
    /// `ProxmoxMachine`.
    Machine,
    /// `ProxmoxMachineTemplate`.
    MachineTemplate,
}

impl WebhookKind {
    /// All kinds, in capmox's manifest order.
    pub const ALL: [WebhookKind; 4] = [
        WebhookKind::Cluster,
        WebhookKind::ClusterTemplate,
        WebhookKind::Machine,
        WebhookKind::MachineTemplate,
    ];

    /// The kind name (`ProxmoxMachine`).
    pub fn kind(self) -> &'static str {
        match self {
            WebhookKind::Cluster => "ProxmoxCluster",
            WebhookKind::ClusterTemplate => "ProxmoxClusterTemplate",
            WebhookKind::Machine => "ProxmoxMachine",
            WebhookKind::MachineTemplate => "ProxmoxMachineTemplate",
        }
    }

    /// The plural resource name (`proxmoxmachines`).
    pub fn plural(self) -> &'static str {
        match self {
            WebhookKind::Cluster => "proxmoxclusters",
            WebhookKind::ClusterTemplate => "proxmoxclustertemplates",
            WebhookKind::Machine => "proxmoxmachines",
            WebhookKind::MachineTemplate => "proxmoxmachinetemplates",
        }
    }

    /// The CRD name (`proxmoxmachines.infrastructure.cluster.x-k8s.io`).
    pub fn crd_name(self) -> String {
        format!("{}.{GROUP}", self.plural())
    }

    /// The kind for a kind name, if it is one of the four.
    pub fn from_kind(kind: &str) -> Option<WebhookKind> {
        Self::ALL.into_iter().find(|k| k.kind() == kind)
    }
}

/// Mutating (defaulting) or validating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AdmissionType {
    /// A `MutatingWebhookConfiguration` entry; answers with a JSON patch.
    Mutating,
    /// A `ValidatingWebhookConfiguration` entry; allows or denies.
    Validating,
}

/// How the API server matches requests made through another version of the same resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatchPolicy {
    /// Only requests made through `v1alpha2` are sent.
    Exact,
    /// Requests made through `v1alpha1` are converted to `v1alpha2` and sent too.
    Equivalent,
}

impl MatchPolicy {
    /// The manifest spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            MatchPolicy::Exact => "Exact",
            MatchPolicy::Equivalent => "Equivalent",
        }
    }
}

/// One admission webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AdmissionWebhook {
    /// The kind it admits.
    pub kind: WebhookKind,
    /// Mutating or validating.
    pub admission: AdmissionType,
    /// capmox's match policy for the kind (`Exact` only for ProxmoxClusterTemplate).
    pub match_policy: MatchPolicy,
}

impl AdmissionWebhook {
    const fn new(kind: WebhookKind, admission: AdmissionType) -> Self {
        let match_policy = match kind {
            WebhookKind::ClusterTemplate => MatchPolicy::Exact,
            _ => MatchPolicy::Equivalent,
        };
        Self {
            kind,
            admission,
            match_policy,
        }
    }

    /// The HTTPS path, e.g. `/validate-infrastructure-cluster-x-k8s-io-v1alpha2-proxmoxmachine`.
    pub fn path(&self) -> String {
        let verb = match self.admission {
            AdmissionType::Mutating => "mutate",
            AdmissionType::Validating => "validate",
        };
        format!(
            "/{verb}-{}-{WEBHOOK_VERSION}-{}",
            GROUP.replace('.', "-"),
            self.kind.kind().to_ascii_lowercase()
        )
    }

    /// The webhook name, e.g. `validation.proxmoxmachine.infrastructure.cluster.x-k8s.io`; the API
    /// server quotes it in denials (`admission webhook "<name>" denied the request: ...`).
    pub fn name(&self) -> String {
        let prefix = match self.admission {
            AdmissionType::Mutating => "default",
            AdmissionType::Validating => "validation",
        };
        format!("{prefix}.{}.{GROUP}", self.kind.kind().to_ascii_lowercase())
    }
}

/// Every admission webhook, in capmox's manifest order (mutating first).
pub const ADMISSION_WEBHOOKS: [AdmissionWebhook; 8] = [
    AdmissionWebhook::new(WebhookKind::Cluster, AdmissionType::Mutating),
    AdmissionWebhook::new(WebhookKind::ClusterTemplate, AdmissionType::Mutating),
    AdmissionWebhook::new(WebhookKind::Machine, AdmissionType::Mutating),
    AdmissionWebhook::new(WebhookKind::MachineTemplate, AdmissionType::Mutating),
    AdmissionWebhook::new(WebhookKind::Cluster, AdmissionType::Validating),
    AdmissionWebhook::new(WebhookKind::ClusterTemplate, AdmissionType::Validating),
    AdmissionWebhook::new(WebhookKind::Machine, AdmissionType::Validating),
    AdmissionWebhook::new(WebhookKind::MachineTemplate, AdmissionType::Validating),
];

/// The admission webhooks of one type, in manifest order.
pub fn admission_webhooks(admission: AdmissionType) -> impl Iterator<Item = &'static AdmissionWebhook> {
    ADMISSION_WEBHOOKS
        .iter()
        .filter(move |w| w.admission == admission)
}

/// Every path the webhook server answers: the eight admission paths and [`CONVERSION_PATH`].
pub fn served_paths() -> Vec<String> {
    let mut paths: Vec<String> = ADMISSION_WEBHOOKS.iter().map(AdmissionWebhook::path).collect();
    paths.push(CONVERSION_PATH.to_owned());
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capmox_paths_and_names() {
        let m = ADMISSION_WEBHOOKS[2];
        assert_eq!(
            m.path(),
            "/mutate-infrastructure-cluster-x-k8s-io-v1alpha2-proxmoxmachine"
        );
        assert_eq!(m.name(), "default.proxmoxmachine.infrastructure.cluster.x-k8s.io");
        let v = ADMISSION_WEBHOOKS[5];
        assert_eq!(
            v.path(),
            "/validate-infrastructure-cluster-x-k8s-io-v1alpha2-proxmoxclustertemplate"
        );
        assert_eq!(
            v.name(),
            "validation.proxmoxclustertemplate.infrastructure.cluster.x-k8s.io"
        );
        assert_eq!(v.match_policy, MatchPolicy::Exact);
        assert_eq!(served_paths().len(), 9);
        assert_eq!(admission_webhooks(AdmissionType::Validating).count(), 4);
        assert_eq!(
            WebhookKind::from_kind("ProxmoxMachineTemplate"),
            Some(WebhookKind::MachineTemplate)
        );
        assert_eq!(WebhookKind::from_kind("Machine"), None);
    }
}
