//! The image lifecycle of one node as one pure decision: [`decide`] maps what a pass observed
//! ([`Facts`]) to the single next [`Step`], [`decide_delete`] does the same while the image is
//! being deleted.
//!
//! ```text
//! Reuse (a template of that name and image exists) → Ready
//! Reserve (VMID) → Download (task) → Create (import-from; task) → Convert (template; task)
//!   → DeleteFile (the download is no longer needed) → Ready
//! a failure: DestroyVm / DeleteFile (nothing half-made stays) → Failed → (retry time) → again
//! ```
//!
//! Only facts read from Proxmox and the record written *before* acting are looked at, so every
//! step is safe to repeat after a crash: a VM at the recorded VMID that is still locked (a
//! create in flight) is waited for, never mistaken for someone else's.

use std::time::Duration;

/// A VM found at the recorded VMID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmAt {
    /// Its name carries the template name and its tags the image's tag: made for this image.
    pub ours: bool,
    /// It is a template.
    pub template: bool,
    /// Its config lock (`create` while the create task runs).
    pub lock: Option<String>,
}

/// The recorded task and what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskState {
    /// Still running; `progress` in percent from a download's log.
    Running {
        /// Task type.
        kind: String,
        /// Percent done (downloads).
        progress: Option<i32>,
    },
    /// Ended well.
    Succeeded {
        /// Task type.
        kind: String,
    },
    /// Ended with `exitstatus`.
    Failed {
        /// Task type.
        kind: String,
        /// Proxmox's exit status.
        exitstatus: String,
    },
    /// Proxmox does not know it.
    Unknown,
}

/// What a pass knows about one node's template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// The recorded task.
    pub task: Option<TaskState>,
    /// The recorded VMID.
    pub vmid: Option<u32>,
    /// The VM at the recorded VMID (`None`: none).
    pub vm: Option<VmAt>,
    /// A template of this name and image on the node (only looked for without a VMID).
    pub reusable: Option<u32>,
    /// The downloaded file is on the storage.
    pub file_present: bool,
    /// A failure is recorded (the image is `Failed` on this node).
    pub failed: bool,
    /// The recorded failure waits this much longer before a retry (`None`: retry now, unless
    /// `final_failure`).
    pub retry_left: Option<Duration>,
    /// The recorded failure is final for this spec (e.g. a checksum mismatch).
    pub final_failure: bool,
    /// The VMID is fixed by the spec (`templateVMID`).
    pub fixed_vmid: bool,
}

/// The downloaded image does not match `spec.checksum` (Proxmox's `checksum mismatch`); the
/// image stays `Failed` until its spec changes.
pub const CHECKSUM_MISMATCH_REASON: &str = "ChecksumMismatch";
/// Proxmox could not download the image (unreachable URL, an HTTP error, a file that is not an
/// image of `spec.format`, a storage that cannot take it); retried after the retry delay.
pub const DOWNLOAD_FAILED_REASON: &str = "DownloadFailed";
/// Creating the VM with its disk imported from the downloaded file failed; the file is removed
/// and the import retried after the retry delay.
pub const IMPORT_FAILED_REASON: &str = "ImportFailed";
/// Converting the imported VM to a template failed; retried after the retry delay.
pub const TEMPLATE_FAILED_REASON: &str = "TemplateFailed";
/// The image's VMID (`spec.templateVMID`) belongs to another VM, or `vmIDRange` has no free one.
pub const IMAGE_VMID_TAKEN_REASON: &str = "ImageVMIDTaken";

/// Why a template failed: the condition reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailReason {
    /// The downloaded file does not match `checksum`.
    ChecksumMismatch,
    /// The download failed (unreachable URL, HTTP error, not an image of that format).
    DownloadFailed,
    /// Creating the VM from the file failed.
    ImportFailed,
    /// The conversion to a template failed.
    TemplateFailed,
    /// The VMID is someone else's.
    VmidTaken,
    /// Proxmox refused a request (bad storage, bad parameters).
    Refused,
}

impl FailReason {
    /// The condition reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ChecksumMismatch => CHECKSUM_MISMATCH_REASON,
            Self::DownloadFailed => DOWNLOAD_FAILED_REASON,
            Self::ImportFailed => IMPORT_FAILED_REASON,
            Self::TemplateFailed => TEMPLATE_FAILED_REASON,
            Self::VmidTaken => IMAGE_VMID_TAKEN_REASON,
            Self::Refused => IMPORT_FAILED_REASON,
        }
    }

    /// Whether it waits for a changed spec rather than a retry time.
    pub fn is_final(self) -> bool {
        matches!(self, Self::ChecksumMismatch | Self::VmidTaken)
    }
}

/// The next thing to do for one node's template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Wait for the running task (its progress shown).
    WaitTask {
        /// The task's type.
        kind: String,
        /// Percent done.
        progress: Option<i32>,
    },
    /// Record the failed task as the failure.
    Fail {
        /// Why.
        reason: FailReason,
        /// Proxmox's words.
        message: String,
    },
    /// Forget the recorded task (ended well, or unknown) and decide again.
    ForgetTask,
    /// Take the existing template over.
    Reuse(u32),
    /// Choose and record the VMID.
    Reserve,
    /// The recorded VMID is someone else's: forget it.
    ForgetVmid,
    /// Proxmox downloads the image.
    Download,
    /// Create the VM from the file.
    Create,
    /// The VM is locked (its create runs): wait.
    WaitForUnlock,
    /// Convert the VM to a template.
    Convert,
    /// Remove the downloaded file.
    DeleteFile,
    /// Destroy our VM at the VMID (a half-made import, or the template on deletion).
    DestroyVm,
    /// Wait for the retry time of a failure.
    WaitForRetry(Duration),
    /// Clear the failure and start over.
    Retry,
    /// Failed for good until the spec changes.
    StayFailed,
    /// The template exists.
    Ready,
}

/// The reason of a failed task of type `kind`.
pub fn fail_reason(kind: &str, exitstatus: &str) -> FailReason {
    match kind {
        "download" if exitstatus.starts_with("checksum mismatch") => FailReason::ChecksumMismatch,
        "download" => FailReason::DownloadFailed,
        "qmtemplate" => FailReason::TemplateFailed,
        _ => FailReason::ImportFailed,
    }
}

/// The next step for a node's template of an image that is not being deleted.
pub fn decide(f: &Facts) -> Step {
    match &f.task {
        Some(TaskState::Running { kind, progress }) => {
            return Step::WaitTask {
                kind: kind.clone(),
                progress: *progress,
            };
        }
        Some(TaskState::Failed { kind, exitstatus })
            if matches!(kind.as_str(), "download" | "qmcreate" | "qmtemplate") =>
        {
            return Step::Fail {
                reason: fail_reason(kind, exitstatus),
                message: exitstatus.clone(),
            };
        }
        Some(_) => return Step::ForgetTask,
        None => {}
    }
    if f.failed {
        // Nothing half-made stays: a VM of ours that is not a template, then the file.
        if let Some(vm) = &f.vm
            && vm.ours
            && !vm.template
        {
            return if vm.lock.is_some() {
                Step::WaitForUnlock
            } else {
                Step::DestroyVm
            };
        }
        if f.file_present {
            return Step::DeleteFile;
        }
        if f.final_failure {
            return Step::StayFailed;
        }
        return match f.retry_left {
            Some(left) => Step::WaitForRetry(left),
            None => Step::Retry,
        };
    }
    let Some(_) = f.vmid else {
        return match f.reusable {
            Some(v) => Step::Reuse(v),
            None => Step::Reserve,
        };
    };
    match &f.vm {
        Some(vm) if vm.lock.is_some() => Step::WaitForUnlock,
        Some(vm) if vm.ours && vm.template => {
            if f.file_present {
                Step::DeleteFile
            } else {
                Step::Ready
            }
        }
        Some(vm) if vm.ours => Step::Convert,
        Some(_) if f.fixed_vmid => Step::Fail {
            reason: FailReason::VmidTaken,
            message: "the VMID belongs to another VM".to_owned(),
        },
        Some(_) => Step::ForgetVmid,
        None if f.file_present => Step::Create,
        None => Step::Download,
    }
}

/// The next step while the image is being deleted (`None`: nothing is left to do).
/// `destroy_template`: the policy is `Delete` and the template was made for this image.
pub fn decide_delete(f: &Facts, destroy_template: bool) -> Option<Step> {
    match &f.task {
        Some(TaskState::Running { kind, progress }) => {
            return Some(Step::WaitTask {
                kind: kind.clone(),
                progress: *progress,
            });
        }
        Some(_) => return Some(Step::ForgetTask),
        None => {}
    }
    if let Some(vm) = &f.vm
        && vm.ours
        && (!vm.template || destroy_template)
    {
        return Some(if vm.lock.is_some() {
            Step::WaitForUnlock
        } else {
            Step::DestroyVm
        });
    }
    f.file_present.then_some(Step::DeleteFile)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts {
        Facts {
            task: None,
            vmid: None,
            vm: None,
            reusable: None,
            file_present: false,
            failed: false,
            retry_left: None,
            final_failure: false,
            fixed_vmid: false,
        }
    }

    fn vm(ours: bool, template: bool, lock: Option<&str>) -> Option<VmAt> {
        Some(VmAt {
            ours,
            template,
            lock: lock.map(str::to_owned),
        })
    }

    #[test]
    fn the_import_goes_reserve_download_create_convert_cleanup_ready() {
        assert_eq!(decide(&facts()), Step::Reserve);
        let f = Facts {
            vmid: Some(900),
            ..facts()
        };
        assert_eq!(decide(&f), Step::Download);
        let f = Facts {
            file_present: true,
            ..f
        };
        assert_eq!(decide(&f), Step::Create);
        let f = Facts {
            vm: vm(true, false, Some("create")),
            ..f
        };
        assert_eq!(decide(&f), Step::WaitForUnlock);
        let f = Facts {
            vm: vm(true, false, None),
            ..f
        };
        assert_eq!(decide(&f), Step::Convert);
        let f = Facts {
            vm: vm(true, true, None),
            ..f
        };
        assert_eq!(decide(&f), Step::DeleteFile);
        let f = Facts {
            file_present: false,
            ..f
        };
        assert_eq!(decide(&f), Step::Ready);
    }

    #[test]
    fn a_template_of_that_name_and_image_is_reused() {
        let f = Facts {
            reusable: Some(123),
            ..facts()
        };
        assert_eq!(decide(&f), Step::Reuse(123));
    }

    #[test]
    fn tasks_come_first() {
        let running = Facts {
            task: Some(TaskState::Running {
                kind: "download".into(),
                progress: Some(40),
            }),
            ..facts()
        };
        assert_eq!(
            decide(&running),
            Step::WaitTask {
                kind: "download".into(),
                progress: Some(40)
            }
        );
        let bad = Facts {
            task: Some(TaskState::Failed {
                kind: "download".into(),
                exitstatus: "checksum mismatch: got 'a' != expect 'b'".into(),
            }),
            ..facts()
        };
        assert!(matches!(
            decide(&bad),
            Step::Fail {
                reason: FailReason::ChecksumMismatch,
                ..
            }
        ));
        let gone = Facts {
            task: Some(TaskState::Unknown),
            ..facts()
        };
        assert_eq!(decide(&gone), Step::ForgetTask);
        assert!(FailReason::ChecksumMismatch.is_final() && !FailReason::ImportFailed.is_final());
        assert_eq!(
            fail_reason("qmcreate", "unable to create VM 1 - x"),
            FailReason::ImportFailed
        );
    }

    #[test]
    fn a_failure_removes_what_was_half_made_then_waits() {
        let f = Facts {
            failed: true,
            vmid: Some(900),
            vm: vm(true, false, None),
            file_present: true,
            ..facts()
        };
        assert_eq!(decide(&f), Step::DestroyVm);
        let f = Facts { vm: None, ..f };
        assert_eq!(decide(&f), Step::DeleteFile);
        let f = Facts {
            file_present: false,
            retry_left: Some(Duration::from_secs(3)),
            ..f
        };
        assert_eq!(decide(&f), Step::WaitForRetry(Duration::from_secs(3)));
        let f = Facts {
            retry_left: None,
            ..f
        };
        assert_eq!(decide(&f), Step::Retry);
        let f = Facts {
            final_failure: true,
            ..f
        };
        assert_eq!(decide(&f), Step::StayFailed);
    }

    #[test]
    fn someone_elses_vm_at_the_vmid() {
        let f = Facts {
            vmid: Some(900),
            vm: vm(false, false, None),
            ..facts()
        };
        assert_eq!(decide(&f), Step::ForgetVmid);
        let f = Facts {
            fixed_vmid: true,
            ..f
        };
        assert!(matches!(
            decide(&f),
            Step::Fail {
                reason: FailReason::VmidTaken,
                ..
            }
        ));
    }

    #[test]
    fn deletion_removes_the_template_only_when_asked() {
        let f = Facts {
            vmid: Some(900),
            vm: vm(true, true, None),
            file_present: true,
            ..facts()
        };
        assert_eq!(decide_delete(&f, true), Some(Step::DestroyVm));
        assert_eq!(decide_delete(&f, false), Some(Step::DeleteFile));
        let f = Facts {
            vm: vm(true, false, None),
            ..f
        };
        assert_eq!(
            decide_delete(&f, false),
            Some(Step::DestroyVm),
            "a half-made VM always goes"
        );
        let f = Facts {
            vm: None,
            file_present: false,
            ..f
        };
        assert_eq!(decide_delete(&f, true), None);
    }
}
