//! IPAM claims of an owner outside Cluster API (a ProxmoxVirtualMachine): one claim per NIC with
//! an `ipPoolRef`, named as a machine's (`<owner>-<netN>-00-inet`), with a controller owner
//! reference and no cluster name; released (deleted) by the owner when it goes.

use std::collections::BTreeMap;

use capmox_api::capi::IPAM_GROUP;
use capmox_api::capi::ipam_claims::{IpPoolReference, v1beta1, v1beta2};
use capmox_api::consts::POOL_REF_COUNTER_ANNOTATION;
use k8s_openapi::api::core::v1::TypedLocalObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams};

use super::{DesiredClaim, IpamApiVersion, IpamError, claim_name};

/// The claims of `owner_name` (controlled by `owner`): one per `(device index, NIC slot, pool)`.
pub fn owned_claims<'a>(
    owner_name: &str,
    owner: &OwnerReference,
    nics: impl IntoIterator<Item = (usize, &'a str, &'a TypedLocalObjectReference)>,
) -> Vec<DesiredClaim> {
    nics.into_iter()
        .map(|(device_index, net, pool)| DesiredClaim {
            name: claim_name(owner_name, net, 0),
            net: net.to_owned(),
            device_index,
            pool_offset: 0,
            pool: IpPoolReference {
                api_group: pool
                    .api_group
                    .clone()
                    .filter(|g| !g.is_empty())
                    .unwrap_or_else(|| IPAM_GROUP.to_owned()),
                kind: pool.kind.clone(),
                name: pool.name.clone(),
            },
            is_default_pool: false,
            family: None,
            cluster_name: String::new(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::from([(POOL_REF_COUNTER_ANNOTATION.to_owned(), "0".to_owned())]),
            owner: owner.clone(),
        })
        .collect()
}

/// Deletes the claims named `names` in `namespace` (the IPAM provider then releases their
/// addresses and lets the claims go); claims already gone are fine.
pub async fn release_claims(
    client: &kube::Client,
    version: IpamApiVersion,
    namespace: &str,
    names: &[String],
) -> Result<(), IpamError> {
    let v2: Api<v1beta2::IPAddressClaim> = Api::namespaced(client.clone(), namespace);
    let v1: Api<v1beta1::IPAddressClaim> = Api::namespaced(client.clone(), namespace);
    let dp = DeleteParams::default();
    for name in names {
        let res = match version {
            IpamApiVersion::V1beta2 => v2.delete(name, &dp).await.map(|_| ()),
            IpamApiVersion::V1beta1 => v1.delete(name, &dp).await.map(|_| ()),
        };
        match res {
            Ok(()) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(source) => {
                return Err(IpamError::Kube {
                    action: "delete IPAddressClaim",
                    namespace: namespace.to_owned(),
                    name: name.clone(),
                    source: Box::new(source),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_claim_per_pool_nic_named_like_a_machines() {
        let owner = OwnerReference {
            api_version: "vm.capmox-rs.io/v1alpha1".into(),
            kind: "ProxmoxVirtualMachine".into(),
            name: "db-1".into(),
            uid: "u1".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let pool = TypedLocalObjectReference {
            api_group: None,
            kind: "GlobalInClusterIPPool".into(),
            name: "shared".into(),
        };
        let c = owned_claims("db-1", &owner, [(1, "net1", &pool)]);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].name, "db-1-net1-00-inet");
        assert_eq!(c[0].pool.api_group, IPAM_GROUP);
        let claim = c[0].to_claim("apps");
        assert_eq!(claim.spec.cluster_name, None);
        assert_eq!(claim.metadata.owner_references, Some(vec![owner]));
        assert_eq!(claim.metadata.labels, None);
    }
}
