//! `/convert`: `ConversionReview` (`apiextensions.k8s.io/v1`) for the four kinds between
//! `v1alpha1` and `v1alpha2`, by [`capmox_api::conversion::convert_value`] (lossless through the
//! `cluster.x-k8s.io/conversion-data` annotation). All objects convert or none: an object that
//! cannot be converted makes the whole review `result.status: Failure` with a message naming it,
//! and `convertedObjects` empty.

use axum::http::StatusCode;
use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use serde_json::Value;

fn describe(obj: &Value) -> String {
    let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let (ns, name) = (s("/metadata/namespace"), s("/metadata/name"));
    let kind = match s("/kind") {
        "" => "object",
        k => k,
    };
    match (ns, name) {
        ("", "") => kind.to_owned(),
        ("", n) => format!("{kind} {n}"),
        (ns, n) => format!("{kind} {ns}/{n}"),
    }
}

fn convert_all(req: &ConversionRequest) -> Result<Vec<Value>, String> {
    let total = req.objects.len();
    req.objects
        .iter()
        .enumerate()
        .map(|(i, obj)| {
            capmox_api::conversion::convert_value(obj.clone(), &req.desired_api_version).map_err(|e| {
                format!(
                    "cannot convert {} (object {} of {total}) to {}: {e}",
                    describe(obj),
                    i + 1,
                    req.desired_api_version
                )
            })
        })
        .collect()
}

/// Answers one `ConversionReview`. Always a `ConversionReview`; HTTP 400 only when the body is
/// not one.
pub fn handle(body: &[u8]) -> (StatusCode, ConversionReview) {
    let review: ConversionReview = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => {
            let status = Status::failure(&format!("decoding the ConversionReview: {e}"), "BadRequest");
            return (
                StatusCode::BAD_REQUEST,
                ConversionResponse::invalid(status).into_review(),
            );
        }
    };
    let req = match ConversionRequest::from_review(review) {
        Ok(r) => r,
        Err(e) => {
            let status = Status::failure(&e.to_string(), "BadRequest");
            return (
                StatusCode::BAD_REQUEST,
                ConversionResponse::invalid(status).into_review(),
            );
        }
    };
    let result = convert_all(&req);
    let count = req.objects.len();
    let desired = req.desired_api_version.clone();
    let response = ConversionResponse::for_request(req);
    let response = match result {
        Ok(objects) => {
            tracing::debug!(count, %desired, "converted");
            response.success(objects)
        }
        Err(message) => {
            tracing::warn!(%message, "conversion failed");
            response.failure(Status::failure(&message, ""))
        }
    };
    (StatusCode::OK, response.into_review())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn review(objects: Vec<Value>, desired: &str) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "r-1", "desiredAPIVersion": desired, "objects": objects},
        }))
        .unwrap()
    }

    #[test]
    fn one_bad_object_fails_the_whole_review() {
        let good = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2", "kind": "ProxmoxClusterTemplate",
            "metadata": {"name": "t", "namespace": "ns"},
            "spec": {"template": {"spec": {"dnsServers": ["8.8.8.8"]}}}});
        let bad = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2", "kind": "ProxmoxCluster",
            "metadata": {"name": "c", "namespace": "ns"}, "spec": {"dnsServers": "not a list"}});
        let (code, out) = handle(&review(
            vec![good.clone(), bad],
            "infrastructure.cluster.x-k8s.io/v1alpha1",
        ));
        assert_eq!(code, StatusCode::OK);
        let resp = out.response.unwrap();
        assert_eq!(resp.uid, "r-1");
        assert!(resp.result.is_failure());
        assert!(resp.converted_objects.is_empty());
        assert!(
            resp.result.message.starts_with(
                "cannot convert ProxmoxCluster ns/c (object 2 of 2) to infrastructure.cluster.x-k8s.io/v1alpha1: "
            ),
            "{}",
            resp.result.message
        );
        let (_, ok) = handle(&review(vec![good], "infrastructure.cluster.x-k8s.io/v1alpha1"));
        let ok = ok.response.unwrap();
        assert!(ok.result.is_success());
        assert_eq!(
            ok.converted_objects[0]["apiVersion"],
            "infrastructure.cluster.x-k8s.io/v1alpha1"
        );
        let (code, _) = handle(b"{}");
        assert_eq!(code, StatusCode::BAD_REQUEST);
    }
}
