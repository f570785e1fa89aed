//! The ProxmoxVirtualMachine admission webhook: bad input gets a clear error before it reaches
//! Proxmox (the same rules as the CRD's CEL where CEL can say them: several template sources, an
//! unknown run strategy, a VMID outside `vmIDRange`, a malformed MAC, less than 64 MiB of memory,
//! a disk shrink, a changed VMID), and deleting an object whose VM is protected is refused. Rules
//! read the request's JSON (an unknown enum value must be named, not fail decoding).

use capmox_api::vm::{GROUP, KIND, MIN_MEMORY_MIB};
use kube::core::Status;
use kube::core::response::{StatusCause, StatusDetails};
use serde_json::{Value, json};

use super::field::{FieldError, bad_request, denied};

const RUN_STRATEGIES: &[&str] = &["Always", "RerunOnFailure", "Halted", "Manual"];
const DELETION_POLICIES: &[&str] = &["Delete", "Retain"];
/// The pools a NIC's `ipPoolRef` may name (the in-cluster IPAM provider's).
const POOL_KINDS: [&str; 2] = ["InClusterIPPool", "GlobalInClusterIPPool"];

/// `<Kind>.vm.capmox-rs.io "<name>" is invalid: …` (422), one cause per error.
fn invalid(name: &str, errs: &[FieldError]) -> Status {
    let list: Vec<String> = errs.iter().map(ToString::to_string).collect();
    let body = match list.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    Status::failure(&format!("{KIND}.{GROUP} {name:?} is invalid: {body}"), "Invalid")
        .with_code(422)
        .with_details(StatusDetails {
            name: name.to_owned(),
            group: GROUP.to_owned(),
            kind: KIND.to_owned(),
            uid: String::new(),
            causes: errs
                .iter()
                .map(|e| StatusCause {
                    reason: match e.kind {
                        super::field::ErrorType::Invalid => "FieldValueInvalid",
                        super::field::ErrorType::Forbidden => "FieldValueForbidden",
                    }
                    .to_owned(),
                    message: e.body(),
                    field: e.field.clone(),
                })
                .collect(),
            retry_after_seconds: 0,
        })
}

fn is_mac(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
}

/// The rules on one object's spec.
pub fn validate_spec(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let has = |k: &str| spec.get(k).is_some_and(|v| !v.is_null());
    let sources = ["templateID", "templateSelector", "templateName", "imageRef"]
        .iter()
        .filter(|k| has(k))
        .count();
    let adopt = spec.get("adopt").and_then(Value::as_bool) == Some(true);
    if sources > 1 {
        errs.push(FieldError::invalid(
            "spec",
            Value::String("templateID, templateSelector, templateName, imageRef".into()),
            "set at most one of templateID, templateSelector, templateName and imageRef",
        ));
    }
    if adopt && !has("vmid") {
        errs.push(FieldError::invalid(
            "spec.vmid",
            Value::Null,
            "adopt: true needs the VMID of the VM to adopt",
        ));
    }
    if !adopt && sources == 0 {
        errs.push(FieldError::invalid(
            "spec",
            Value::Null,
            "set templateID, templateSelector, templateName or imageRef (or adopt: true with vmid)",
        ));
    }
    for (field, allowed) in [
        ("runStrategy", RUN_STRATEGIES),
        ("deletionPolicy", DELETION_POLICIES),
    ] {
        if let Some(v) = spec.get(field).and_then(Value::as_str)
            && !allowed.contains(&v)
        {
            errs.push(FieldError::invalid(
                format!("spec.{field}"),
                json!(v),
                format!("supported values: {}", allowed.join(", ")),
            ));
        }
    }
    if let (Some(vmid), Some(start), Some(end)) = (
        spec.get("vmid").and_then(Value::as_i64),
        spec.pointer("/vmIDRange/start").and_then(Value::as_i64),
        spec.pointer("/vmIDRange/end").and_then(Value::as_i64),
    ) && !(start..=end).contains(&vmid)
    {
        errs.push(FieldError::invalid(
            "spec.vmid",
            json!(vmid),
            format!("must lie within vmIDRange ({start}-{end})"),
        ));
    }
    if let Some(m) = spec.get("memoryMiB").and_then(Value::as_i64)
        && m < i64::from(MIN_MEMORY_MIB)
    {
        errs.push(FieldError::invalid(
            "spec.memoryMiB",
            json!(m),
            format!("must be at least {MIN_MEMORY_MIB} MiB"),
        ));
    }
    if let Some(t) = spec.get("shutdownTimeout").and_then(Value::as_str)
        && crate::duration::parse_duration(t).is_err()
    {
        errs.push(FieldError::invalid(
            "spec.shutdownTimeout",
            json!(t),
            "not a duration (e.g. 3m, 90s)",
        ));
    }
    let nics = spec
        .pointer("/network/networkDevices")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, nic) in nics.iter().enumerate() {
        let at = |f: &str| format!("spec.network.networkDevices[{i}].{f}");
        if let Some(mac) = nic.get("macAddress").and_then(Value::as_str)
            && !is_mac(mac)
        {
            errs.push(FieldError::invalid(
                at("macAddress"),
                json!(mac),
                "not a MAC address (six hex pairs separated by colons, e.g. BC:24:11:00:00:01)",
            ));
        }
        // The controller claims the NIC's address from the in-cluster IPAM provider's pools.
        if let Some(kind) = nic
            .get("ipPoolRef")
            .and_then(|r| r.get("kind"))
            .and_then(Value::as_str)
            && !POOL_KINDS.contains(&kind)
        {
            errs.push(FieldError::invalid(
                at("ipPoolRef.kind"),
                json!(kind),
                format!("supported values: {}", POOL_KINDS.join(", ")),
            ));
        }
        for key in ["ipv4Addresses", "ipv6Addresses"] {
            for a in nic.get(key).and_then(Value::as_array).into_iter().flatten() {
                let text = a.as_str().unwrap_or_default();
                if text.parse::<ipnet::IpNet>().is_err() {
                    errs.push(FieldError::invalid(
                        at(key),
                        a.clone(),
                        "not an address with a prefix length (e.g. 10.0.0.5/24)",
                    ));
                }
            }
        }
    }
    errs
}

/// The rules on an update: disks only grow, the VMID stays.
pub fn validate_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let size = |spec: &Value, p: &str| spec.pointer(p).and_then(Value::as_i64);
    if let (Some(was), Some(now)) = (
        size(old, "/disks/bootVolume/sizeGb"),
        size(new, "/disks/bootVolume/sizeGb"),
    ) && now < was
    {
        errs.push(FieldError::invalid(
            "spec.disks.bootVolume.sizeGb",
            json!(now),
            format!("disks cannot shrink (the boot volume has {was} GiB)"),
        ));
    }
    let volumes = |spec: &Value| {
        spec.pointer("/disks/additionalVolumes")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let old_volumes = volumes(old);
    for (i, v) in volumes(new).iter().enumerate() {
        let disk = v.get("disk");
        let was = old_volumes
            .iter()
            .find(|o| o.get("disk") == disk)
            .and_then(|o| o.get("sizeGb"))
            .and_then(Value::as_i64);
        if let (Some(was), Some(now)) = (was, v.get("sizeGb").and_then(Value::as_i64))
            && now < was
        {
            errs.push(FieldError::invalid(
                format!("spec.disks.additionalVolumes[{i}].sizeGb"),
                json!(now),
                format!("disks cannot shrink (it has {was} GiB)"),
            ));
        }
    }
    let vmid = |s: &Value| s.get("vmid").filter(|v| !v.is_null()).cloned();
    if vmid(old).is_some() && vmid(old) != vmid(new) {
        errs.push(FieldError::forbidden("spec.vmid", "the VMID cannot be changed"));
    }
    errs
}

/// The decision on one request: `None` allows it.
fn decide(operation: &str, name: &str, namespace: &str, obj: &Value, old: &Value) -> Option<Status> {
    let spec = |o: &Value| o.get("spec").cloned().unwrap_or(Value::Null);
    match operation {
        "DELETE" => (spec(old).get("protection").and_then(Value::as_bool) == Some(true)).then(|| {
            denied(&format!(
                "{KIND} {namespace}/{name} is protected (spec.protection: true): set spec.protection to false before deleting it"
            ))
        }),
        "CREATE" | "UPDATE" => {
            let mut errs = validate_spec(&spec(obj));
            if operation == "UPDATE" {
                errs.extend(validate_update(&spec(old), &spec(obj)));
            }
            (!errs.is_empty()).then(|| invalid(name, &errs))
        }
        _ => None,
    }
}

/// Answers one `AdmissionReview` (always an `AdmissionReview`).
pub fn handle(body: &[u8]) -> Value {
    let review: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let req = &review["request"];
    let uid = req["uid"].as_str().unwrap_or_default();
    let denial = if req.is_null() {
        Some(bad_request("AdmissionReview has no request"))
    } else if req["kind"]["group"] != GROUP || req["kind"]["kind"] != KIND {
        Some(bad_request(&format!(
            "expected a {GROUP} {KIND} but got a {} {}",
            req["kind"]["group"], req["kind"]["kind"]
        )))
    } else {
        let name = req["name"].as_str().unwrap_or_default();
        let obj = &req["object"];
        let name = if name.is_empty() {
            obj["metadata"]["name"].as_str().unwrap_or_default()
        } else {
            name
        };
        decide(
            req["operation"].as_str().unwrap_or_default(),
            name,
            req["namespace"].as_str().unwrap_or_default(),
            obj,
            &req["oldObject"],
        )
    };
    if let Some(d) = &denial {
        tracing::info!(webhook = capmox_api::webhook::vm::VM_WEBHOOK_NAME, message = %d.message, "admission denied");
    }
    let mut response = json!({"uid": uid, "allowed": denial.is_none()});
    response["status"] = match &denial {
        Some(s) => serde_json::to_value(s).unwrap_or(Value::Null),
        None => json!({"metadata": {}, "code": 200}),
    };
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_input_is_named() {
        let errs = validate_spec(&json!({
            "templateID": 100, "templateSelector": {"matchTags": ["a"]},
            "runStrategy": "Sometimes", "vmid": 50_000, "vmIDRange": {"start": 100, "end": 200},
            "memoryMiB": 32,
            "network": {"networkDevices": [{"name": "net0", "macAddress": "bc:24:11",
                "ipPoolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "SomePool", "name": "p"}}]}
        }));
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec",
                "spec.runStrategy",
                "spec.vmid",
                "spec.memoryMiB",
                "spec.network.networkDevices[0].macAddress",
                "spec.network.networkDevices[0].ipPoolRef.kind"
            ]
        );
        let shrink = validate_update(
            &json!({"disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 30}}, "vmid": 300}),
            &json!({"disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20}}, "vmid": 301}),
        );
        assert_eq!(shrink.len(), 2);
        assert!(shrink[0].to_string().contains("disks cannot shrink"));
        let d = decide(
            "DELETE",
            "db",
            "apps",
            &Value::Null,
            &json!({"spec": {"protection": true}}),
        )
        .unwrap();
        assert_eq!(d.code, 403);
        assert!(decide("DELETE", "db", "apps", &Value::Null, &json!({"spec": {}})).is_none());
        assert!(is_mac("BC:24:11:aa:bb:cc") && !is_mac("BC-24-11-AA-BB-CC"));
    }
}
