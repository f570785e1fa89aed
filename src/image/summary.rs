//! What an image's status shows, summed up from its nodes' records: the least advanced node's
//! phase (`Failed` when one failed), the lowest download progress, the first node's template and
//! the `Ready` condition.

use capmox_api::vm::{IMAGE_READY_CONDITION, ImagePhase, ProxmoxVMImageStatus};

use crate::conditions::{self, Desired};

/// The image's template exists on every node (`Ready` true; also an event).
pub const TEMPLATE_READY_REASON: &str = "TemplateReady";

/// The image's phase, progress, template and `Ready` from its nodes' records.
pub fn summarize(status: &mut ProxmoxVMImageStatus, generation: Option<i64>) {
    let recs = status.templates.clone().unwrap_or_default();
    let phases: Vec<ImagePhase> = recs
        .iter()
        .map(|r| r.phase.unwrap_or(ImagePhase::Pending))
        .collect();
    let phase = if phases.contains(&ImagePhase::Failed) {
        ImagePhase::Failed
    } else if !phases.is_empty() && phases.iter().all(|p| *p == ImagePhase::Ready) {
        ImagePhase::Ready
    } else if phases.contains(&ImagePhase::Pending) {
        ImagePhase::Pending
    } else if phases.contains(&ImagePhase::Downloading) {
        ImagePhase::Downloading
    } else {
        ImagePhase::Importing
    };
    status.phase = Some(phase);
    status.progress = recs.iter().filter_map(|r| r.progress).min();
    let first = recs.first();
    let ready_first = first.filter(|r| r.phase == Some(ImagePhase::Ready));
    status.template_vmid = ready_first.and_then(|r| r.template_vmid);
    status.node = first.map(|r| r.node.clone());
    status.observed_generation = generation;
    let desired = match phase {
        ImagePhase::Ready => {
            let list: Vec<String> = recs
                .iter()
                .map(|r| format!("{} on {}", r.template_vmid.unwrap_or_default(), r.node))
                .collect();
            Desired::truthy(
                IMAGE_READY_CONDITION,
                TEMPLATE_READY_REASON,
                format!("template {}", list.join(", ")),
            )
        }
        ImagePhase::Failed => {
            let r = recs.iter().find(|r| r.phase == Some(ImagePhase::Failed));
            let reason = r
                .and_then(|r| r.reason.clone())
                .unwrap_or_else(|| "Failed".into());
            let message = r
                .map(|r| format!("{}: {}", r.node, r.message.clone().unwrap_or_default()))
                .unwrap_or_default();
            Desired::falsy(IMAGE_READY_CONDITION, &reason, message)
        }
        other => Desired::falsy(
            IMAGE_READY_CONDITION,
            other.as_str(),
            format!(
                "{} the image",
                match other {
                    ImagePhase::Downloading => "downloading",
                    ImagePhase::Importing => "importing",
                    _ => "about to make a template of",
                }
            ),
        ),
    };
    conditions::set(
        status.conditions.get_or_insert_with(Vec::new),
        &desired,
        generation,
        &conditions::now(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use capmox_api::vm::ImageTemplateStatus;

    #[test]
    fn the_summary_follows_the_least_advanced_node() {
        let rec = |node: &str, phase, vmid| ImageTemplateStatus {
            node: node.into(),
            phase: Some(phase),
            template_vmid: vmid,
            ..Default::default()
        };
        let mut s = ProxmoxVMImageStatus {
            templates: Some(vec![
                rec("pve1", ImagePhase::Ready, Some(900)),
                rec("pve2", ImagePhase::Downloading, Some(901)),
            ]),
            ..Default::default()
        };
        summarize(&mut s, Some(2));
        assert_eq!(s.phase, Some(ImagePhase::Downloading));
        assert_eq!(s.template_vmid, Some(900));
        if let Some(t) = s.templates.as_mut() {
            t[1].phase = Some(ImagePhase::Ready);
        }
        summarize(&mut s, Some(2));
        assert_eq!(s.phase, Some(ImagePhase::Ready));
        let c = &s.conditions.unwrap()[0];
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "TemplateReady"));
    }
}
