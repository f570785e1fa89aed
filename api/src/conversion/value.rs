//! Conversion of untyped objects (as a conversion webhook receives them).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{ConversionError, Convertible};
use crate::{v1alpha1, v1alpha2};

/// Converts `obj` (one of the four Proxmox kinds in v1alpha1 or v1alpha2 of
/// `infrastructure.cluster.x-k8s.io`) to `desired_api_version`. An object already in the
/// desired version is returned unchanged.
pub fn convert_value(obj: Value, desired_api_version: &str) -> Result<Value, ConversionError> {
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or(ConversionError::MissingField { field: "apiVersion" })?
        .to_string();
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .ok_or(ConversionError::MissingField { field: "kind" })?
        .to_string();
    let to_hub = match (api_version.as_str(), desired_api_version) {
        (from, to) if from == to && is_known(from) => return Ok(obj),
        (v1alpha1::API_VERSION, v1alpha2::API_VERSION) => true,
        (v1alpha2::API_VERSION, v1alpha1::API_VERSION) => false,
        (from, to) => {
            let bad = if is_known(from) { to } else { from };
            return Err(ConversionError::UnsupportedVersion(bad.to_string()));
        }
    };
    match kind.as_str() {
        "ProxmoxCluster" => convert::<v1alpha1::ProxmoxCluster>(obj, to_hub, &kind),
        "ProxmoxClusterTemplate" => convert::<v1alpha1::ProxmoxClusterTemplate>(obj, to_hub, &kind),
        "ProxmoxMachine" => convert::<v1alpha1::ProxmoxMachine>(obj, to_hub, &kind),
        "ProxmoxMachineTemplate" => convert::<v1alpha1::ProxmoxMachineTemplate>(obj, to_hub, &kind),
        _ => Err(ConversionError::UnsupportedKind(kind)),
    }
}

fn is_known(api_version: &str) -> bool {
    api_version == v1alpha1::API_VERSION || api_version == v1alpha2::API_VERSION
}

fn convert<S>(obj: Value, to_hub: bool, kind: &str) -> Result<Value, ConversionError>
where
    S: Convertible + Serialize + DeserializeOwned,
    S::Hub: Serialize + DeserializeOwned,
{
    let decode = |api_version: &str| {
        let kind = kind.to_string();
        let api_version = api_version.to_string();
        move |source| ConversionError::Decode {
            kind,
            api_version,
            source,
        }
    };
    let encode = |source| ConversionError::Encode {
        kind: kind.to_string(),
        source,
    };
    if to_hub {
        let spoke: S = serde_json::from_value(obj).map_err(decode(v1alpha1::API_VERSION))?;
        serde_json::to_value(spoke.to_hub()?).map_err(encode)
    } else {
        let hub: S::Hub = serde_json::from_value(obj).map_err(decode(v1alpha2::API_VERSION))?;
        serde_json::to_value(S::from_hub(&hub)?).map_err(encode)
    }
}
