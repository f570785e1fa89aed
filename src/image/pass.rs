//! One pass of a ProxmoxVMImage: for each node, the facts read from Proxmox (the recorded task,
//! the VM at the recorded VMID, a reusable template, the downloaded file), the decision
//! ([`super::decide`]) and its execution — at most one Proxmox write per pass, recorded in the
//! working copy's status (which the controller persists before the next pass), and the
//! summary the status shows (phase, progress, template, `Ready`).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use capmox_api::vm::{ImagePhase, ImageTemplateStatus, ProxmoxVMImage};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::decide::{self, Facts, FailReason, Step, TaskState, VmAt};
use super::{ImageError, file_name, image_key, image_tag, template_name};
use crate::proxmox::types::{ConfigUpdate, DeleteVmOptions, DownloadUrlRequest};
use crate::proxmox::view::{Freshness, ProxmoxView};
use crate::proxmox::{Client, ErrorClass, Upid};
use crate::vm::{Next, Settings};

pub use super::summary::{TEMPLATE_READY_REASON, summarize};
/// A template of the image's name and image (its tag) existed and was taken over: nothing was
/// downloaded.
pub const TEMPLATE_REUSED_REASON: &str = "TemplateReused";

/// Inputs of a pass besides the object.
pub struct Inputs<'a> {
    /// The view of the image's Proxmox cluster.
    pub view: &'a Arc<ProxmoxView>,
    /// Timing.
    pub settings: &'a Settings,
    /// VMIDs other images recorded.
    pub taken: Vec<i64>,
}

/// What a pass did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// When to look again.
    pub next: Next,
    /// Events: `(warning, reason, message)`.
    pub events: Vec<(bool, String, String)>,
    /// All is done (deletion: the finalizer may go).
    pub finished: bool,
}

/// What the image asks of each node.
struct Want {
    key: String,
    tag: String,
    name: String,
    storage: String,
    volid: String,
    generation: i64,
}

impl Want {
    fn of(img: &ProxmoxVMImage) -> Self {
        let key = image_key(img);
        let file = file_name(img, &key);
        Self {
            tag: image_tag(&key),
            name: template_name(img),
            storage: img.spec.storage.clone(),
            volid: format!("{}:import/{file}", img.spec.storage),
            generation: img.metadata.generation.unwrap_or(0),
            key,
        }
    }
}

fn to_time(t: SystemTime) -> Time {
    Time(k8s_openapi::jiff::Timestamp::try_from(t).unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now()))
}

fn left(t: &Time) -> Option<Duration> {
    let at = SystemTime::from(t.0);
    at.duration_since(SystemTime::now()).ok().filter(|d| !d.is_zero())
}

/// The node records of the spec's nodes: kept by node, started anew for a new node or a
/// changed image (its old template is left as it is).
fn records(img: &ProxmoxVMImage, want: &Want) -> Vec<ImageTemplateStatus> {
    let old = img
        .status
        .as_ref()
        .and_then(|s| s.templates.clone())
        .unwrap_or_default();
    img.spec
        .node_list()
        .into_iter()
        .map(|node| {
            old.iter()
                .find(|r| r.node == node && r.key.as_deref() == Some(want.key.as_str()))
                .cloned()
                .unwrap_or_else(|| ImageTemplateStatus {
                    node,
                    phase: Some(ImagePhase::Pending),
                    key: Some(want.key.clone()),
                    ..Default::default()
                })
        })
        .collect()
}

/// Percent done from a download's log (wget's `dot:giga` lines end in `NN% …`).
pub fn progress_of(lines: &[String]) -> Option<i32> {
    lines.iter().rev().find_map(|l| {
        l.split_whitespace()
            .find_map(|w| w.strip_suffix('%').and_then(|n| n.parse::<i32>().ok()))
    })
}

async fn task_state(client: &Client, task: &str) -> Result<TaskState, ImageError> {
    let Ok(upid) = Upid::parse(task) else {
        return Ok(TaskState::Unknown);
    };
    let status = match client.task_status(&upid).await {
        Ok(s) => s,
        Err(e) if e.is_not_found() || e.class() == ErrorClass::ParameterVerification => {
            return Ok(TaskState::Unknown);
        }
        Err(e) => return Err(ImageError::proxmox("reading a task's status")(e)),
    };
    let kind = upid.task_type.clone();
    if !status.is_finished() {
        let progress = if kind == "download" {
            let log = client
                .task_log(&upid, 0, 1000)
                .await
                .map_err(ImageError::proxmox("reading the download's log"))?;
            progress_of(&log.into_iter().map(|l| l.t).collect::<Vec<_>>())
        } else {
            None
        };
        return Ok(TaskState::Running { kind, progress });
    }
    Ok(if status.is_success() {
        TaskState::Succeeded { kind }
    } else {
        TaskState::Failed {
            kind,
            exitstatus: status.exitstatus.unwrap_or_default(),
        }
    })
}

/// The VM at `vmid` as seen on `node` (`None`: none there).
async fn vm_at(client: &Client, node: &str, vmid: u32, want: &Want) -> Result<Option<VmAt>, ImageError> {
    match client.vm_config(node, vmid).await {
        Ok(c) => Ok(Some(VmAt {
            ours: c.name.as_deref() == Some(want.name.as_str())
                && c.tags.iter().any(|t| t.eq_ignore_ascii_case(&want.tag)),
            template: c.template,
            lock: c.lock.clone(),
        })),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(ImageError::proxmox(format!("reading VM {vmid}'s config"))(e)),
    }
}

async fn file_present(client: &Client, node: &str, want: &Want) -> Result<bool, ImageError> {
    match client.storage_content(node, &want.storage, Some("import")).await {
        Ok(list) => Ok(list.iter().any(|v| v.volid == want.volid)),
        Err(e) if matches!(e.class(), ErrorClass::Network | ErrorClass::Auth) => {
            Err(ImageError::proxmox("listing the import storage")(e))
        }
        // An unknown storage or one without `import`: the download will say so.
        Err(_) => Ok(false),
    }
}

/// A reusable template: on `node`, named and tagged for this image.
async fn reusable(inp: &Inputs<'_>, node: &str, want: &Want) -> Result<Option<u32>, ImageError> {
    let (_, snap) = inp
        .view
        .snapshot(Freshness::within(inp.settings.observe_interval))
        .await?;
    Ok(snap
        .resources
        .iter()
        .filter(|r| r.is_qemu() && r.template && r.node.as_deref() == Some(node))
        .filter(|r| r.name.as_deref() == Some(want.name.as_str()))
        .filter(|r| {
            r.tags
                .as_deref()
                .map(crate::proxmox::types::split_tags)
                .unwrap_or_default()
                .iter()
                .any(|t| t.eq_ignore_ascii_case(&want.tag))
        })
        .filter_map(|r| r.vmid)
        .min())
}

async fn facts(
    inp: &Inputs<'_>,
    img: &ProxmoxVMImage,
    r: &ImageTemplateStatus,
    want: &Want,
) -> Result<Facts, ImageError> {
    let client = inp.view.client();
    let task = match &r.task_ref {
        Some(t) => Some(task_state(client, t).await?),
        None => None,
    };
    let quiet =
        task.is_none() || matches!(task, Some(TaskState::Succeeded { .. }) | Some(TaskState::Unknown));
    let vmid = r.template_vmid.and_then(|v| u32::try_from(v).ok());
    let failed = r.phase == Some(ImagePhase::Failed);
    let (vm, file) = if quiet && (vmid.is_some() || failed) {
        let vm = match vmid {
            Some(v) => vm_at(client, &r.node, v, want).await?,
            None => None,
        };
        (vm, file_present(client, &r.node, want).await?)
    } else {
        (None, false)
    };
    let reusable = if quiet && vmid.is_none() && !failed {
        reusable(inp, &r.node, want).await?
    } else {
        None
    };
    Ok(Facts {
        task,
        vmid,
        vm,
        reusable,
        file_present: file,
        failed,
        retry_left: r.retry_after.as_ref().and_then(left),
        final_failure: r.failed_generation == Some(want.generation),
        fixed_vmid: img.spec.template_vmid.is_some(),
    })
}

/// Records a failure on `r`.
fn fail(r: &mut ImageTemplateStatus, reason: FailReason, message: String, want: &Want, retry: Duration) {
    r.task_ref = None;
    r.phase = Some(ImagePhase::Failed);
    r.reason = Some(reason.as_str().to_owned());
    r.message = Some(message);
    r.progress = None;
    if reason.is_final() {
        r.failed_generation = Some(want.generation);
        r.retry_after = None;
    } else {
        r.failed_generation = None;
        r.retry_after = Some(to_time(crate::vm::spec::later(retry)));
    }
}

/// A Proxmox refusal of a write is the image's failure; a transport or auth problem is an error.
fn refusal(e: crate::proxmox::Error, action: &str) -> Result<String, ImageError> {
    match e.class() {
        ErrorClass::Network | ErrorClass::Auth | ErrorClass::Decode => Err(ImageError::proxmox(action)(e)),
        _ => Ok(e.message()),
    }
}

/// The template's VMID: the spec's, one of its range or Proxmox's next free one, never one
/// another image recorded or a VM uses.
async fn reserve(inp: &Inputs<'_>, img: &ProxmoxVMImage) -> Result<Result<u32, String>, ImageError> {
    if let Some(v) = img.spec.template_vmid {
        return Ok(u32::try_from(v).map_err(|_| format!("templateVMID {v} is not a VMID")));
    }
    let client = inp.view.client();
    let (_, snap) = inp.view.snapshot(Freshness::within(Duration::ZERO)).await?;
    let used = |v: u32| snap.vm(v).is_some() || inp.taken.contains(&i64::from(v));
    if let Some(range) = &img.spec.vm_id_range {
        for v in range.start..=range.end {
            let Ok(v) = u32::try_from(v) else { continue };
            if !used(v)
                && client
                    .is_vmid_free(v)
                    .await
                    .map_err(ImageError::proxmox("probing a VMID"))?
            {
                return Ok(Ok(v));
            }
        }
        return Ok(Err(format!("no free VMID in {}-{}", range.start, range.end)));
    }
    let mut v = client
        .next_id()
        .await
        .map_err(ImageError::proxmox("asking for the next VMID"))?;
    while used(v) {
        v += 1;
    }
    Ok(Ok(v))
}

/// The new VM's config: the hardware, the disk imported from the file, name and tag.
fn create_config(img: &ProxmoxVMImage, want: &Want) -> ConfigUpdate {
    let hw = img.spec.hardware.clone().unwrap_or_default();
    let disk = hw.disk.clone().unwrap_or_else(|| "scsi0".to_owned());
    let storage = hw.disk_storage.clone().unwrap_or_else(|| "local-lvm".to_owned());
    let positive = |v: Option<i32>, d: u32| {
        v.and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n > 0)
            .unwrap_or(d)
    };
    let ns = kube::ResourceExt::namespace(img).unwrap_or_default();
    ConfigUpdate::new()
        .set("name", want.name.clone())
        .set("tags", want.tag.clone())
        .set(
            "description",
            format!(
                "Made by capmox-rs from {} (ProxmoxVMImage {ns}/{}).",
                img.spec.url,
                kube::ResourceExt::name_any(img)
            ),
        )
        .sockets(positive(hw.num_sockets, 1))
        .cores(positive(hw.num_cores, 1))
        .memory_mib(u64::from(positive(hw.memory_mib, 2048)))
        .set("ostype", hw.os_type.map_or("l26", |o| o.as_str()))
        .set("agent", if hw.agent == Some(false) { "0" } else { "1" })
        .set("scsihw", "virtio-scsi-single")
        .set(disk.clone(), format!("{storage}:0,import-from={}", want.volid))
        .set(
            "net0",
            format!(
                "{},bridge={}",
                hw.network_model.unwrap_or_default().as_str(),
                hw.bridge.clone().unwrap_or_else(|| "vmbr0".to_owned())
            ),
        )
        .set("boot", format!("order={disk}"))
}

/// Carries out `step` for the node of `r`; returns when to look again.
async fn execute(
    inp: &Inputs<'_>,
    img: &ProxmoxVMImage,
    r: &mut ImageTemplateStatus,
    want: &Want,
    step: Step,
    events: &mut Vec<(bool, String, String)>,
) -> Result<Next, ImageError> {
    let s = inp.settings;
    let retry = s.retry_delay;
    let node = r.node.clone();
    let vmid = r.template_vmid.and_then(|v| u32::try_from(v).ok()).unwrap_or(0);
    Ok(match step {
        Step::WaitTask { kind, progress } => {
            if kind == "download" {
                r.phase = Some(ImagePhase::Downloading);
                r.progress = progress.or(r.progress);
            } else if r.phase != Some(ImagePhase::Failed) {
                r.phase = Some(ImagePhase::Importing);
            }
            Next::After(s.task_poll_initial.max(Duration::from_millis(50)))
        }
        Step::Fail { reason, message } => {
            events.push((true, reason.as_str().to_owned(), format!("{node}: {message}")));
            fail(r, reason, message, want, retry);
            Next::Now
        }
        Step::ForgetTask => {
            if r.task_ref.as_deref().is_some_and(|t| t.contains(":download:")) {
                r.progress = Some(100);
            }
            r.task_ref = None;
            Next::Now
        }
        Step::Reuse(v) => {
            r.template_vmid = Some(i64::from(v));
            r.reused = Some(true);
            r.phase = Some(ImagePhase::Ready);
            events.push((
                false,
                TEMPLATE_REUSED_REASON.into(),
                format!("template {v} on {node} has this name and image"),
            ));
            Next::Now
        }
        Step::Reserve => match reserve(inp, img).await? {
            Ok(v) => {
                r.template_vmid = Some(i64::from(v));
                r.reused = Some(false);
                Next::Now
            }
            Err(message) => {
                fail(r, FailReason::VmidTaken, message, want, retry);
                Next::Now
            }
        },
        Step::ForgetVmid => {
            r.template_vmid = None;
            Next::Now
        }
        Step::WaitForUnlock => Next::After(s.task_poll_initial.max(Duration::from_millis(50))),
        step @ (Step::Download | Step::Create | Step::Convert | Step::DeleteFile | Step::DestroyVm) => {
            write(inp, img, r, want, step).await?
        }
        Step::WaitForRetry(left) => Next::After(left),
        Step::Retry => {
            r.phase = Some(ImagePhase::Pending);
            r.reason = None;
            r.message = None;
            r.retry_after = None;
            r.failed_generation = None;
            Next::Now
        }
        Step::StayFailed => Next::Watch,
        Step::Ready => {
            if r.phase != Some(ImagePhase::Ready) {
                events.push((
                    false,
                    TEMPLATE_READY_REASON.into(),
                    format!("template {vmid} on {node}"),
                ));
            }
            r.phase = Some(ImagePhase::Ready);
            r.message = None;
            r.reason = None;
            Next::Watch
        }
    })
}

/// Carries out a step that writes to Proxmox: the task it starts is recorded in `r` (a refusal
/// becomes `r`'s failure).
async fn write(
    inp: &Inputs<'_>,
    img: &ProxmoxVMImage,
    r: &mut ImageTemplateStatus,
    want: &Want,
    step: Step,
) -> Result<Next, ImageError> {
    let client = inp.view.client();
    let s = inp.settings;
    let retry = s.retry_delay;
    let node = r.node.clone();
    let vmid = r.template_vmid.and_then(|v| u32::try_from(v).ok()).unwrap_or(0);
    let started = |r: &mut ImageTemplateStatus, upid: Upid, phase: ImagePhase| {
        r.task_ref = Some(upid.as_str().to_owned());
        r.phase = Some(phase);
        Next::Now
    };
    Ok(match step {
        Step::Download => {
            let req = DownloadUrlRequest {
                url: img.spec.url.clone(),
                content: "import".into(),
                filename: want.volid.rsplit('/').next().unwrap_or_default().to_owned(),
                checksum: img.spec.checksum.clone(),
                checksum_algorithm: img.spec.checksum_algorithm.map(|a| a.as_str().to_owned()),
                verify_certificates: (img.spec.verify_certificates == Some(false)).then_some(false),
            };
            match client.download_url(&node, &want.storage, &req).await {
                Ok(upid) => {
                    r.progress = Some(0);
                    started(r, upid, ImagePhase::Downloading)
                }
                Err(e) => {
                    let m = refusal(e, "starting the download")?;
                    fail(r, FailReason::DownloadFailed, m, want, retry);
                    Next::Now
                }
            }
        }
        Step::Create => match client.create_vm(&node, vmid, &create_config(img, want)).await {
            Ok(upid) => started(r, upid, ImagePhase::Importing),
            Err(e) if e.class() == ErrorClass::AlreadyExists => Next::After(s.task_poll_initial),
            Err(e) => {
                let m = refusal(e, "creating the VM")?;
                fail(r, FailReason::ImportFailed, m, want, retry);
                Next::Now
            }
        },
        Step::Convert => match client.convert_to_template(&node, vmid).await {
            Ok(upid) => started(r, upid, ImagePhase::Importing),
            Err(e) if matches!(e.class(), ErrorClass::Locked | ErrorClass::WrongState) => {
                Next::After(s.task_poll_initial)
            }
            Err(e) => {
                let m = refusal(e, "converting the VM to a template")?;
                fail(r, FailReason::TemplateFailed, m, want, retry);
                Next::Now
            }
        },
        Step::DeleteFile => match client
            .delete_storage_volume(&node, &want.storage, &want.volid)
            .await
        {
            Ok(Some(upid)) => {
                r.task_ref = Some(upid.as_str().to_owned());
                Next::Now
            }
            Ok(None) => Next::Now,
            Err(e) if e.is_not_found() => Next::Now,
            Err(e) => return Err(ImageError::proxmox("removing the downloaded file")(e)),
        },
        Step::DestroyVm => {
            let opts = DeleteVmOptions {
                purge: Some(true),
                destroy_unreferenced_disks: Some(true),
            };
            match client.delete_vm(&node, vmid, &opts).await {
                Ok(upid) => {
                    r.task_ref = Some(upid.as_str().to_owned());
                    Next::Now
                }
                Err(e) if e.is_not_found() => Next::Now,
                Err(e) => return Err(ImageError::proxmox(format!("destroying VM {vmid}"))(e)),
            }
        }
        _ => Next::Now,
    })
}

/// The earlier of two `Next`s.
fn sooner(a: Next, b: Next) -> Next {
    match (a, b) {
        (Next::Now, _) | (_, Next::Now) => Next::Now,
        (Next::After(x), Next::After(y)) => Next::After(x.min(y)),
        (Next::After(x), Next::Watch) | (Next::Watch, Next::After(x)) => Next::After(x),
        (Next::Watch, Next::Watch) => Next::Watch,
    }
}

/// One pass of an image that is not being deleted: one step on each node whose step writes
/// nothing, and at most one Proxmox write (then the controller persists and passes again).
pub async fn provision(inp: &Inputs<'_>, img: &mut ProxmoxVMImage) -> Result<Outcome, ImageError> {
    let want = Want::of(img);
    let mut recs = records(img, &want);
    let mut next = Next::Watch;
    let mut events = Vec::new();
    for r in &mut recs {
        let f = facts(inp, img, r, &want).await?;
        let step = decide::decide(&f);
        let writes = matches!(
            step,
            Step::Download
                | Step::Create
                | Step::Convert
                | Step::DeleteFile
                | Step::DestroyVm
                | Step::Reserve
        );
        next = sooner(next, execute(inp, img, r, &want, step, &mut events).await?);
        if writes {
            break;
        }
    }
    let status = img.status.get_or_insert_with(Default::default);
    status.templates = Some(recs);
    summarize(status, img.metadata.generation);
    Ok(Outcome {
        next,
        events,
        finished: false,
    })
}

/// One deletion pass: per node, the template goes (policy `Delete`, made for this image) and
/// so do a half-made VM and the file; `finished` once nothing is left.
pub async fn delete(inp: &Inputs<'_>, img: &mut ProxmoxVMImage) -> Result<Outcome, ImageError> {
    let want = Want::of(img);
    let destroy = img.spec.deletion_policy() == capmox_api::vm::DeletionPolicy::Delete;
    let mut recs = img
        .status
        .as_ref()
        .and_then(|s| s.templates.clone())
        .unwrap_or_default();
    let mut next = Next::Watch;
    let mut events = Vec::new();
    let mut finished = true;
    for r in &mut recs {
        let rec_want = Want {
            key: r.key.clone().unwrap_or_else(|| want.key.clone()),
            tag: image_tag(r.key.as_deref().unwrap_or(&want.key)),
            volid: format!(
                "{}:import/{}",
                want.storage,
                file_name(img, r.key.as_deref().unwrap_or(&want.key))
            ),
            name: want.name.clone(),
            storage: want.storage.clone(),
            generation: want.generation,
        };
        let mut f = facts(inp, img, r, &rec_want).await?;
        if f.task.is_none() && !f.failed {
            f.file_present = file_present(inp.view.client(), &r.node, &rec_want).await?;
        }
        let Some(step) = decide::decide_delete(&f, destroy && r.reused != Some(true)) else {
            continue;
        };
        finished = false;
        next = sooner(next, execute(inp, img, r, &rec_want, step, &mut events).await?);
        break;
    }
    let status = img.status.get_or_insert_with(Default::default);
    status.templates = Some(recs);
    Ok(Outcome {
        next: if finished { Next::Watch } else { next },
        events,
        finished,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_comes_from_the_last_wget_line() {
        let lines = vec![
            "Length: 100".to_owned(),
            "     0K ........ ........ ........ ........  25% 10.0M 0s".to_owned(),
            " 32768K ........ ........ ........ ........  50% 10.0M 0s".to_owned(),
        ];
        assert_eq!(progress_of(&lines), Some(50));
        assert_eq!(progress_of(&["downloading x".to_owned()]), None);
    }
}
