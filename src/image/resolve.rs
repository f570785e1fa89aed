//! `spec.imageRef`: the template a ProxmoxVirtualMachine or ProxmoxMachine clones when it names
//! a ProxmoxVMImage — the image's template on one of its nodes once that is `Ready` (preferring
//! a node the VM may go to), or the reason to wait (the image is missing, still downloading or
//! importing, or failed).

use std::time::Duration;

use capmox_api::vm::{ImagePhase, ImageRef, ProxmoxVMImage};
use kube::api::Api;

use crate::vm::decide::{Failure, Reason};
use crate::vm::template::TemplateRef;

/// The condition reason of a VM waiting for its image.
pub const WAITING_FOR_IMAGE_REASON: &str = "WaitingForImage";

/// How often an owner waiting for its image looks at it again (images are not watched).
pub const IMAGE_POLL: Duration = Duration::from_secs(2);

/// The template of `image` (`Err`: why there is none yet); a template on one of `prefer`
/// wins.
pub fn template_of(image: &ProxmoxVMImage, prefer: &[String]) -> Result<TemplateRef, String> {
    let name = kube::ResourceExt::name_any(image);
    let status = image.status.clone().unwrap_or_default();
    let ready: Vec<TemplateRef> = status
        .templates
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.phase == Some(ImagePhase::Ready))
        .filter_map(|r| {
            Some(TemplateRef {
                vmid: u32::try_from(r.template_vmid?).ok()?,
                node: r.node,
            })
        })
        .collect();
    if let Some(t) = ready
        .iter()
        .find(|t| prefer.contains(&t.node))
        .or_else(|| ready.first())
    {
        return Ok(t.clone());
    }
    let phase = status.phase.map_or("Pending", ImagePhase::as_str);
    let progress = status
        .progress
        .filter(|_| status.phase == Some(ImagePhase::Downloading))
        .map(|p| format!(", {p}%"))
        .unwrap_or_default();
    Err(format!("waiting for ProxmoxVMImage {name} ({phase}{progress})"))
}

/// Reads the image `image` names in `namespace` and resolves its template (`Err` inside: why
/// not yet); a template on one of `prefer` wins. `kube_error` wraps a failed read (with what was
/// being done) in the caller's error type.
pub async fn resolve<E>(
    kube: &kube::Client,
    namespace: &str,
    image: &ImageRef,
    prefer: &[String],
    kube_error: impl FnOnce(String, kube::Error) -> E,
) -> Result<Result<TemplateRef, String>, E> {
    let name = &image.name;
    let img = match Api::<ProxmoxVMImage>::namespaced(kube.clone(), namespace)
        .get_opt(name)
        .await
    {
        Ok(img) => img,
        Err(e) => {
            return Err(kube_error(
                format!("getting ProxmoxVMImage {namespace}/{name}"),
                e,
            ));
        }
    };
    Ok(match img {
        Some(img) => template_of(&img, prefer),
        None => Err(format!("ProxmoxVMImage {namespace}/{name} does not exist")),
    })
}

/// The refusal an owner waits with while its image has no template (`message`: why), looked at
/// again after `retry_delay` or [`IMAGE_POLL`], whichever comes first.
pub fn waiting(message: String, retry_delay: Duration) -> Failure {
    Failure {
        reason: Reason::Owner(WAITING_FOR_IMAGE_REASON),
        message,
        retry_after: Some(retry_delay.min(IMAGE_POLL)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_ready_template_is_chosen_and_a_pending_one_waited_for() {
        let mut img: ProxmoxVMImage = serde_json::from_value(json!({
            "apiVersion": "vm.capmox-rs.io/v1alpha1", "kind": "ProxmoxVMImage",
            "metadata": {"name": "noble", "namespace": "vms"},
            "spec": {"url": "http://x/a.qcow2", "nodes": ["pve1", "pve2"], "storage": "local"},
            "status": {"phase": "Downloading", "progress": 40, "templates": [
                {"node": "pve1", "phase": "Downloading", "templateVMID": 900},
                {"node": "pve2", "phase": "Ready", "templateVMID": 901}]}
        }))
        .unwrap();
        assert_eq!(
            template_of(&img, &[]),
            Ok(TemplateRef {
                node: "pve2".into(),
                vmid: 901
            })
        );
        if let Some(t) = img.status.as_mut().and_then(|s| s.templates.as_mut()) {
            t[1].phase = Some(ImagePhase::Importing);
        }
        assert_eq!(
            template_of(&img, &[]),
            Err("waiting for ProxmoxVMImage noble (Downloading, 40%)".into())
        );
    }
}
