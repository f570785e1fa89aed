//! capmox's ProxmoxMachineTemplate webhooks (the defaulter is a no-op): on create
//! `spec.template.spec.providerID` is forbidden; on update the whole `spec` is immutable, except
//! for Cluster API topology dry-run requests (server-side-apply dry runs carrying the
//! `topology.cluster.x-k8s.io/dry-run` annotation, capmox #735/#832), which ClusterClass
//! rollouts need. capmox does not check the network of templates; our additive fields are.

use capmox_api::v1alpha2::ProxmoxMachineTemplate;

use super::field::{FieldError, Verdict, invalid};
use super::machine::{additive_errors, additive_warnings};

const KIND: &str = "ProxmoxMachineTemplate";

/// Annotation CAPI's topology controller puts on the objects of its dry-run requests.
pub const TOPOLOGY_DRY_RUN_ANNOTATION: &str = "topology.cluster.x-k8s.io/dry-run";

fn name_of(t: &ProxmoxMachineTemplate) -> &str {
    t.metadata.name.as_deref().unwrap_or_default()
}

/// ProxmoxMachineTemplate create.
pub fn validate_create(t: &ProxmoxMachineTemplate) -> Verdict {
    let name = name_of(t);
    let spec = &t.spec.template.spec;
    if spec.provider_id.as_deref().is_some_and(|p| !p.is_empty()) {
        let e = FieldError::forbidden("spec.template.spec.providerID", "cannot be set in templates");
        return Verdict::deny(invalid(KIND, name, &[e]));
    }
    if let Some(e) = additive_errors(spec, "spec.template.spec") {
        return Verdict::deny(invalid(KIND, name, &[e]));
    }
    Verdict::allow().warn_all(additive_warnings(spec, "spec.template.spec"))
}

/// Whether a request is CAPI's topology dry run (`dryRun` and the annotation on the new object).
pub fn is_topology_dry_run(dry_run: bool, new: &ProxmoxMachineTemplate) -> bool {
    dry_run
        && new
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(TOPOLOGY_DRY_RUN_ANNOTATION))
}

/// ProxmoxMachineTemplate update.
pub fn validate_update(old: &ProxmoxMachineTemplate, new: &ProxmoxMachineTemplate, dry_run: bool) -> Verdict {
    if !is_topology_dry_run(dry_run, new) && old.spec != new.spec {
        let e = FieldError::forbidden("spec", "ProxmoxMachineTemplate is immutable");
        return Verdict::deny(invalid(KIND, name_of(new), &[e]));
    }
    Verdict::allow()
}
