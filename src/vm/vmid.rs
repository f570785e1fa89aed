//! VMID choice: which VMIDs of a `vmIDRange` may be tried for a new VM.
//!
//! capmox walks `start..=end`, skips VMIDs already recorded in `spec.virtualMachineID` of the cluster's
//! `ProxmoxMachine`s, and asks Proxmox (`GET /cluster/nextid?vmid=N`) whether each remaining VMID is free.
//! This module is the pure part: it also skips VMIDs that `/cluster/resources` shows to exist and yields
//! the remaining candidates lazily, in ascending order. The final free-check stays with the caller, which
//! returns [`VmidError::NoFreeVmid`] when every candidate turned out to be taken. Without a range the caller
//! lets Proxmox choose (`GET /cluster/nextid`).

use std::collections::BTreeSet;

use crate::proxmox::types::ClusterResource;

/// The VMIDs a VM may get (inclusive), as the owner's spec says (validated by [`validate_range`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VmidRange {
    /// First VMID.
    pub start: i64,
    /// Last VMID.
    pub end: i64,
}

/// Lowest VMID Proxmox accepts for a guest.
pub const MIN_VMID: u32 = 100;
/// Highest VMID Proxmox accepts for a guest.
pub const MAX_VMID: u32 = 999_999_999;

/// Why no VMID could be offered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VmidError {
    /// Every VMID of the range is taken (message as in capmox).
    #[error("No free vmid found in vmIDRange")]
    NoFreeVmid {
        /// First VMID of the range.
        start: u32,
        /// Last VMID of the range.
        end: u32,
    },
    /// The range is outside 100..=999999999 or `end < start` (the CRD rules normally prevent this).
    #[error("invalid vmIDRange {start}..={end}: must satisfy 100 <= start <= end <= 999999999")]
    InvalidRange {
        /// Configured start.
        start: i64,
        /// Configured end.
        end: i64,
    },
}

/// How the VMID of a new VM is chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VmidChoice {
    /// No range configured: let Proxmox pick one (`GET /cluster/nextid`).
    ProxmoxNext,
    /// Try these VMIDs in order, checking each with `GET /cluster/nextid?vmid=N`.
    Candidates(VmidCandidates),
}

/// Ascending VMIDs of a range that are neither recorded on a `ProxmoxMachine` nor known to Proxmox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmidCandidates {
    start: u32,
    next: u32,
    end: u32,
    exhausted: bool,
    taken: BTreeSet<u32>,
}

impl VmidCandidates {
    /// The whole range, `(start, end)`, both inclusive.
    pub fn range(&self) -> (u32, u32) {
        (self.start, self.end)
    }

    /// The error to report when every candidate turned out to be taken in Proxmox.
    pub fn no_free_vmid(&self) -> VmidError {
        VmidError::NoFreeVmid {
            start: self.start,
            end: self.end,
        }
    }
}

impl Iterator for VmidCandidates {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        while !self.exhausted {
            let current = self.next;
            if current >= self.end {
                self.exhausted = true;
            } else {
                self.next = current + 1;
            }
            if !self.taken.contains(&current) {
                return Some(current);
            }
        }
        None
    }
}

/// Validates a `vmIDRange` and converts it to VMIDs.
pub fn validate_range(range: &VmidRange) -> Result<(u32, u32), VmidError> {
    let invalid = || VmidError::InvalidRange {
        start: range.start,
        end: range.end,
    };
    let start = u32::try_from(range.start).map_err(|_| invalid())?;
    let end = u32::try_from(range.end).map_err(|_| invalid())?;
    if start < MIN_VMID || end > MAX_VMID || end < start {
        return Err(invalid());
    }
    Ok((start, end))
}

/// Plans the VMID choice.
///
/// `recorded` are the `spec.virtualMachineID` values of the other `ProxmoxMachine`s of the same cluster
/// (values outside the VMID range, e.g. `-1`, are ignored); `resources` is `GET /cluster/resources?type=vm`
/// (every entry with a VMID counts as existing, templates and containers included).
/// Fails with [`VmidError::NoFreeVmid`] when nothing in the range is left to try.
pub fn plan_vmid(
    range: Option<&VmidRange>,
    recorded: impl IntoIterator<Item = i64>,
    resources: &[ClusterResource],
) -> Result<VmidChoice, VmidError> {
    let Some(range) = range else {
        return Ok(VmidChoice::ProxmoxNext);
    };
    let (start, end) = validate_range(range)?;
    let in_range = |v: &u32| (start..=end).contains(v);
    let taken: BTreeSet<u32> = recorded
        .into_iter()
        .filter_map(|v| u32::try_from(v).ok())
        .chain(resources.iter().filter_map(|r| r.vmid))
        .filter(in_range)
        .collect();
    // Range sizes fit in u64; `taken` only holds VMIDs of the range, so equality means nothing is left.
    let size = u64::from(end - start) + 1;
    if u64::try_from(taken.len()).is_ok_and(|n| n >= size) {
        return Err(VmidError::NoFreeVmid { start, end });
    }
    Ok(VmidChoice::Candidates(VmidCandidates {
        start,
        next: start,
        end,
        exhausted: false,
        taken,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn vm(vmid: u32) -> ClusterResource {
        serde_json::from_value(serde_json::json!({
            "id": format!("qemu/{vmid}"), "type": "qemu", "vmid": vmid, "node": "pve1"
        }))
        .unwrap()
    }

    fn range(start: i64, end: i64) -> VmidRange {
        VmidRange { start, end }
    }

    fn candidates(choice: VmidChoice) -> Vec<u32> {
        match choice {
            VmidChoice::Candidates(c) => c.collect(),
            VmidChoice::ProxmoxNext => panic!("expected candidates"),
        }
    }

    #[test]
    fn no_range_lets_proxmox_choose() {
        assert_eq!(
            plan_vmid(None, [100, 101], &[vm(102)]).unwrap(),
            VmidChoice::ProxmoxNext
        );
    }

    #[test]
    fn skips_recorded_and_existing() {
        let choice = plan_vmid(Some(&range(200, 206)), [201, -1, 5, 204], &[vm(202), vm(300)]).unwrap();
        assert_eq!(candidates(choice), vec![200, 203, 205, 206]);
    }

    #[test]
    fn single_vmid_range() {
        assert_eq!(
            candidates(plan_vmid(Some(&range(150, 150)), [], &[]).unwrap()),
            vec![150]
        );
        let err = plan_vmid(Some(&range(150, 150)), [150], &[]).unwrap_err();
        assert_eq!(err, VmidError::NoFreeVmid { start: 150, end: 150 });
    }

    #[test]
    fn full_range_message_matches_capmox() {
        let err = plan_vmid(Some(&range(100, 102)), [100, 102], &[vm(101)]).unwrap_err();
        assert_eq!(err.to_string(), "No free vmid found in vmIDRange");
    }

    #[test]
    fn range_up_to_max_vmid_terminates() {
        let c = candidates(plan_vmid(Some(&range(999_999_997, 999_999_999)), [999_999_998], &[]).unwrap());
        assert_eq!(c, vec![999_999_997, 999_999_999]);
    }

    #[test]
    fn huge_range_is_lazy() {
        let VmidChoice::Candidates(mut c) =
            plan_vmid(Some(&range(100, 999_999_999)), [100], &[vm(101)]).unwrap()
        else {
            panic!("expected candidates");
        };
        assert_eq!(c.next(), Some(102));
        assert_eq!(c.next(), Some(103));
        assert_eq!(c.range(), (100, 999_999_999));
        assert_eq!(
            c.no_free_vmid(),
            VmidError::NoFreeVmid {
                start: 100,
                end: 999_999_999
            }
        );
    }

    #[test]
    fn invalid_ranges_are_rejected() {
        for (s, e) in [
            (99, 200),
            (300, 200),
            (100, 1_000_000_000),
            (-5, 200),
            (100, i64::MAX),
        ] {
            assert_eq!(
                plan_vmid(Some(&range(s, e)), [], &[]).unwrap_err(),
                VmidError::InvalidRange { start: s, end: e },
                "{s}..={e}"
            );
        }
    }

    proptest! {
        #[test]
        fn candidates_are_exactly_the_free_vmids_in_order(
            start in 100u32..140,
            len in 0u32..40,
            recorded in prop::collection::vec(-5i64..200, 0..30),
            existing in prop::collection::vec(100u32..200, 0..30),
        ) {
            let end = start + len;
            let resources: Vec<ClusterResource> = existing.iter().copied().map(vm).collect();
            let expected: Vec<u32> = (start..=end)
                .filter(|v| !recorded.contains(&i64::from(*v)) && !existing.contains(v))
                .collect();
            let result = plan_vmid(Some(&range(start.into(), end.into())), recorded.clone(), &resources);
            if expected.is_empty() {
                prop_assert_eq!(result, Err(VmidError::NoFreeVmid { start, end }));
            } else {
                let got = candidates(result.unwrap());
                prop_assert_eq!(got, expected);
            }
        }
    }
}
