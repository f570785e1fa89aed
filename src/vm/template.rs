//! Template selection: which Proxmox template (node, VMID) a VM is cloned from.
//!
//! Either the owner names the template directly (a VMID on a node) or it selects one by its
//! Proxmox tags (`templateSelector`). Tag matching follows capmox (only qemu templates with tags are
//! considered; tags are split on `;`, `,` or whitespace, trimmed and lower-cased; a candidate must carry
//! every `matchTags` entry), but `bestSubset` first computes the minimum number of surplus tags over all
//! candidates and then requires exactly one template at that minimum, so the answer never depends on
//! the order of `/cluster/resources`.

use std::collections::BTreeSet;

use crate::proxmox::types::{ClusterResource, split_tags};

/// The template a VM is cloned from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TemplateRef {
    /// Node holding the template (the clone request is sent there).
    pub node: String,
    /// VMID of the template.
    pub vmid: u32,
}

/// How a template's tags are compared with the wanted tags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MatchPolicy {
    /// The template's tags equal the wanted tags.
    #[default]
    Exact,
    /// Exactly one template carries every wanted tag (and maybe more).
    UniqueSubset,
    /// Of the templates carrying every wanted tag, the one with the fewest others.
    BestSubset,
}

/// Choosing a template by its tags.
#[derive(Debug, Clone, Copy)]
pub struct Selector<'a> {
    /// The tags the template must carry.
    pub tags: &'a [String],
    /// How they are compared (`None`: [`MatchPolicy::Exact`]).
    pub policy: Option<MatchPolicy>,
}

/// Why no template could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// No template carries the requested tags (under the match policy).
    #[error("VM template not found: found 0 VM templates with tags \"{tags}\"")]
    NotFound {
        /// The normalised `matchTags`, joined with `;`.
        tags: String,
        /// The match policy that was applied.
        policy: MatchPolicy,
    },
    /// More than one template matches equally well.
    #[error("VM template not found: found {} VM templates with tags \"{tags}\"", .candidates.len())]
    Ambiguous {
        /// The normalised `matchTags`, joined with `;`.
        tags: String,
        /// The match policy that was applied.
        policy: MatchPolicy,
        /// The equally good templates, sorted by node and VMID.
        candidates: Vec<TemplateRef>,
    },
    /// `templateID` is set but `sourceNode` is not (the CRD rules normally prevent this).
    #[error("templateID {template_id} is set but sourceNode is missing")]
    MissingSourceNode {
        /// The configured template VMID.
        template_id: i32,
    },
    /// `templateID` is not a valid Proxmox VMID.
    #[error("templateID {template_id} is not a valid VMID")]
    InvalidTemplateId {
        /// The configured template VMID.
        template_id: i32,
    },
    /// Neither `templateID` nor `templateSelector` is set (the CRD rules normally prevent this).
    #[error("neither templateID nor templateSelector is set")]
    NoTemplateSource,
    /// `templateSelector.matchTags` holds no non-empty tag.
    #[error("templateSelector.matchTags is empty")]
    EmptyMatchTags,
}

/// Where the template comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateSource {
    /// A fixed template on a fixed node.
    Fixed(TemplateRef),
    /// A template chosen by its tags.
    Selector {
        /// Normalised (trimmed, lower-cased, sorted, deduplicated) tags the template must carry.
        match_tags: BTreeSet<String>,
        /// How the template's tags are compared with `match_tags`.
        policy: MatchPolicy,
    },
}

impl TemplateSource {
    /// Builds the template source: a template VMID (with its node) wins over a selector.
    pub fn new(
        template_id: Option<i32>,
        source_node: Option<&str>,
        selector: Option<Selector<'_>>,
    ) -> Result<Self, TemplateError> {
        if let Some(template_id) = template_id {
            let vmid = u32::try_from(template_id)
                .ok()
                .filter(|v| *v > 0)
                .ok_or(TemplateError::InvalidTemplateId { template_id })?;
            let node = source_node
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .ok_or(TemplateError::MissingSourceNode { template_id })?;
            return Ok(Self::Fixed(TemplateRef {
                node: node.to_owned(),
                vmid,
            }));
        }
        let selector = selector.ok_or(TemplateError::NoTemplateSource)?;
        let match_tags = normalise_tags(selector.tags.iter().map(String::as_str));
        if match_tags.is_empty() {
            return Err(TemplateError::EmptyMatchTags);
        }
        Ok(Self::Selector {
            match_tags,
            policy: selector.policy.unwrap_or_default(),
        })
    }

    /// Chooses the template; `resources` is the answer of `GET /cluster/resources?type=vm`
    /// (only consulted for a selector).
    pub fn select(&self, resources: &[ClusterResource]) -> Result<TemplateRef, TemplateError> {
        match self {
            Self::Fixed(template) => Ok(template.clone()),
            Self::Selector { match_tags, policy } => select_by_tags(match_tags, *policy, resources),
        }
    }
}

/// Trims, lower-cases and deduplicates tags (each entry may itself hold several tags separated by
/// `;`, `,` or whitespace, as Proxmox accepts); empty tags are dropped.
pub fn normalise_tags<'a>(tags: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    tags.into_iter()
        .flat_map(split_tags)
        .map(|t| t.trim().to_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Chooses the single template matching `match_tags` under `policy`.
///
/// Candidates are qemu resources with `template == 1`, a node, a VMID and at least one tag, whose tag
/// set contains every entry of `match_tags`. `exact` keeps candidates without surplus tags,
/// `uniqueSubset` keeps all, `bestSubset` keeps those with the minimum surplus; exactly one must remain.
pub fn select_by_tags(
    match_tags: &BTreeSet<String>,
    policy: MatchPolicy,
    resources: &[ClusterResource],
) -> Result<TemplateRef, TemplateError> {
    let tags = match_tags
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(";");
    // (surplus tag count, template) of every template carrying all match tags.
    let mut candidates: Vec<(usize, TemplateRef)> = resources
        .iter()
        .filter_map(|r| {
            if !r.template || !r.is_qemu() {
                return None;
            }
            let node = r.node.as_deref().map(str::trim).filter(|n| !n.is_empty())?;
            let vmid = r.vmid?;
            let have = normalise_tags(r.tags.as_deref());
            if have.is_empty() || !match_tags.is_subset(&have) {
                return None;
            }
            let template = TemplateRef {
                node: node.to_owned(),
                vmid,
            };
            Some((have.len() - match_tags.len(), template))
        })
        .collect();
    candidates.sort();
    candidates.dedup();
    let wanted_surplus = match policy {
        MatchPolicy::Exact => Some(0),
        MatchPolicy::UniqueSubset => None,
        MatchPolicy::BestSubset => candidates.first().map(|(surplus, _)| *surplus),
    };
    let mut chosen: Vec<TemplateRef> = candidates
        .into_iter()
        .filter(|(surplus, _)| wanted_surplus.is_none_or(|w| *surplus == w))
        .map(|(_, t)| t)
        .collect();
    chosen.sort();
    chosen.dedup();
    match chosen.len() {
        0 => Err(TemplateError::NotFound { tags, policy }),
        1 => Ok(chosen.remove(0)),
        _ => Err(TemplateError::Ambiguous {
            tags,
            policy,
            candidates: chosen,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn res(kind: &str, node: &str, vmid: u32, template: bool, tags: Option<&str>) -> ClusterResource {
        serde_json::from_value(serde_json::json!({
            "id": format!("{kind}/{vmid}"),
            "type": kind,
            "vmid": vmid,
            "node": node,
            "template": u8::from(template),
            "tags": tags,
        }))
        .unwrap()
    }

    fn tpl(node: &str, vmid: u32, tags: &str) -> ClusterResource {
        res("qemu", node, vmid, true, Some(tags))
    }

    fn tref(node: &str, vmid: u32) -> TemplateRef {
        TemplateRef {
            node: node.into(),
            vmid,
        }
    }

    fn selector(tags: &[&str], policy: Option<MatchPolicy>) -> TemplateSource {
        let tags: Vec<String> = tags.iter().map(|t| (*t).to_owned()).collect();
        TemplateSource::new(None, None, Some(Selector { tags: &tags, policy })).unwrap()
    }

    #[test]
    fn template_id_wins_over_selector() {
        let tags = vec!["x".to_owned()];
        let sel = Selector {
            tags: &tags,
            policy: None,
        };
        let src = TemplateSource::new(Some(104), Some("pve1"), Some(sel)).unwrap();
        assert_eq!(src.select(&[]).unwrap(), tref("pve1", 104));
    }

    #[test]
    fn template_id_needs_source_node_and_valid_vmid() {
        assert_eq!(
            TemplateSource::new(Some(104), None, None),
            Err(TemplateError::MissingSourceNode { template_id: 104 })
        );
        assert_eq!(
            TemplateSource::new(Some(104), Some("  "), None),
            Err(TemplateError::MissingSourceNode { template_id: 104 })
        );
        assert_eq!(
            TemplateSource::new(Some(-1), Some("pve"), None),
            Err(TemplateError::InvalidTemplateId { template_id: -1 })
        );
        assert_eq!(
            TemplateSource::new(Some(0), Some("pve"), None),
            Err(TemplateError::InvalidTemplateId { template_id: 0 })
        );
        assert_eq!(
            TemplateSource::new(None, Some("pve"), None),
            Err(TemplateError::NoTemplateSource)
        );
    }

    #[test]
    fn match_tags_are_normalised() {
        let src = selector(&[" Template", "capmox", "CAPMOX", "v1.29.2;extra"], None);
        let TemplateSource::Selector { match_tags, policy } = &src else {
            panic!("expected selector");
        };
        assert_eq!(policy, &MatchPolicy::Exact);
        assert_eq!(
            match_tags.iter().cloned().collect::<Vec<_>>(),
            vec!["capmox", "extra", "template", "v1.29.2"]
        );
        let blank = vec![" ".to_owned(), String::new()];
        let sel = Selector {
            tags: &blank,
            policy: None,
        };
        assert_eq!(
            TemplateSource::new(None, None, Some(sel)),
            Err(TemplateError::EmptyMatchTags)
        );
    }

    #[test]
    fn exact_requires_equal_sets() {
        let resources = [
            tpl("pve1", 100, "capmox;template;v1.29.2;extra"),
            tpl("pve2", 101, "V1.29.2, Template capmox"),
            tpl("pve3", 102, "capmox;template"),
        ];
        let src = selector(&["capmox", "template", "v1.29.2"], None);
        assert_eq!(src.select(&resources).unwrap(), tref("pve2", 101));
    }

    #[test]
    fn ignores_non_templates_untagged_and_lxc() {
        let resources = [
            res("qemu", "pve1", 100, false, Some("a")),
            res("lxc", "pve1", 101, true, Some("a")),
            res("qemu", "pve1", 102, true, None),
            res("qemu", "pve1", 103, true, Some("")),
            res("qemu", "pve1", 104, true, Some("a")),
        ];
        let src = selector(&["a"], Some(MatchPolicy::UniqueSubset));
        assert_eq!(src.select(&resources).unwrap(), tref("pve1", 104));
    }

    #[test]
    fn not_found_message_matches_capmox() {
        let src = selector(&["v1.29.2", "capmox", "template"], None);
        let err = src.select(&[tpl("pve1", 100, "capmox")]).unwrap_err();
        assert!(matches!(err, TemplateError::NotFound { .. }));
        assert_eq!(
            err.to_string(),
            "VM template not found: found 0 VM templates with tags \"capmox;template;v1.29.2\""
        );
    }

    #[test]
    fn ambiguous_message_matches_capmox() {
        let resources = [
            tpl("pve2", 101, "capmox;template;v1.29.2"),
            tpl("pve1", 100, "template;capmox;v1.29.2"),
        ];
        let src = selector(&["capmox", "template", "v1.29.2"], None);
        let err = src.select(&resources).unwrap_err();
        assert_eq!(
            err.to_string(),
            "VM template not found: found 2 VM templates with tags \"capmox;template;v1.29.2\""
        );
        let TemplateError::Ambiguous { candidates, .. } = err else {
            panic!("expected ambiguous");
        };
        assert_eq!(candidates, vec![tref("pve1", 100), tref("pve2", 101)]);
    }

    #[test]
    fn unique_subset_requires_exactly_one_superset() {
        let src = selector(&["ubuntu"], Some(MatchPolicy::UniqueSubset));
        let one = [tpl("pve1", 100, "ubuntu;v1.30"), tpl("pve1", 101, "flatcar")];
        assert_eq!(src.select(&one).unwrap(), tref("pve1", 100));
        let two = [tpl("pve1", 100, "ubuntu;v1.30"), tpl("pve1", 101, "ubuntu")];
        let err = src.select(&two).unwrap_err();
        assert!(matches!(err, TemplateError::Ambiguous { ref candidates, .. } if candidates.len() == 2));
    }

    #[test]
    fn best_subset_is_order_independent() {
        // capmox answers "found 2" when the closer template is listed after the worse one.
        let worse_first = [
            tpl("pve1", 100, "ubuntu;v1.30;gpu;big"),
            tpl("pve1", 101, "ubuntu;v1.30;gpu"),
        ];
        let src = selector(&["ubuntu", "v1.30"], Some(MatchPolicy::BestSubset));
        assert_eq!(src.select(&worse_first).unwrap(), tref("pve1", 101));
        let mut better_first = worse_first.clone();
        better_first.reverse();
        assert_eq!(src.select(&better_first).unwrap(), tref("pve1", 101));
    }

    #[test]
    fn best_subset_ties_are_ambiguous() {
        let resources = [
            tpl("pve1", 100, "ubuntu;gpu"),
            tpl("pve2", 101, "ubuntu;big"),
            tpl("pve3", 102, "ubuntu;big;gpu"),
        ];
        let src = selector(&["ubuntu"], Some(MatchPolicy::BestSubset));
        let err = src.select(&resources).unwrap_err();
        assert_eq!(
            err,
            TemplateError::Ambiguous {
                tags: "ubuntu".into(),
                policy: MatchPolicy::BestSubset,
                candidates: vec![tref("pve1", 100), tref("pve2", 101)],
            }
        );
    }

    #[test]
    fn best_subset_prefers_exact_match() {
        let resources = [tpl("pve1", 100, "ubuntu;gpu"), tpl("pve2", 101, "Ubuntu")];
        let src = selector(&["ubuntu"], Some(MatchPolicy::BestSubset));
        assert_eq!(src.select(&resources).unwrap(), tref("pve2", 101));
    }

    const TAG_POOL: [&str; 5] = ["a", "b", "c", "d", "e"];

    fn arb_resource() -> impl Strategy<Value = ClusterResource> {
        (
            prop::sample::select(vec!["pve1", "pve2", "pve3"]),
            100u32..130,
            any::<bool>(),
            prop::sample::subsequence(TAG_POOL.to_vec(), 0..=TAG_POOL.len()),
        )
            .prop_map(|(node, vmid, template, tags)| res("qemu", node, vmid, template, Some(&tags.join(";"))))
    }

    fn arb_policy() -> impl Strategy<Value = MatchPolicy> {
        prop::sample::select(vec![
            MatchPolicy::Exact,
            MatchPolicy::UniqueSubset,
            MatchPolicy::BestSubset,
        ])
    }

    proptest! {
        #[test]
        fn result_is_independent_of_resource_order(
            resources in prop::collection::vec(arb_resource(), 0..12),
            match_tags in prop::sample::subsequence(TAG_POOL.to_vec(), 1..=3),
            policy in arb_policy(),
            seed in any::<u64>(),
        ) {
            let wanted = normalise_tags(match_tags.iter().copied());
            let expected = select_by_tags(&wanted, policy, &resources);
            let mut shuffled = resources.clone();
            // Deterministic Fisher-Yates driven by the seed.
            let mut state = seed | 1;
            for i in (1..shuffled.len()).rev() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let j = usize::try_from(state % (i as u64 + 1)).unwrap();
                shuffled.swap(i, j);
            }
            prop_assert_eq!(select_by_tags(&wanted, policy, &shuffled), expected.clone());
            let mut reversed = resources.clone();
            reversed.reverse();
            prop_assert_eq!(select_by_tags(&wanted, policy, &reversed), expected);
        }

        #[test]
        fn best_subset_picks_unique_minimal_surplus(
            resources in prop::collection::vec(arb_resource(), 0..12),
            match_tags in prop::sample::subsequence(TAG_POOL.to_vec(), 1..=3),
        ) {
            let wanted = normalise_tags(match_tags.iter().copied());
            let matching: Vec<(usize, TemplateRef)> = resources
                .iter()
                .filter(|r| r.template)
                .filter_map(|r| {
                    let have = normalise_tags(r.tags.as_deref());
                    (!have.is_empty() && wanted.is_subset(&have)).then(|| {
                        (have.len() - wanted.len(), tref(r.node.as_deref().unwrap(), r.vmid.unwrap()))
                    })
                })
                .collect();
            let result = select_by_tags(&wanted, MatchPolicy::BestSubset, &resources);
            match matching.iter().map(|(s, _)| *s).min() {
                None => prop_assert!(
                    matches!(result, Err(TemplateError::NotFound { .. })),
                    "expected NotFound, got {:?}",
                    result
                ),
                Some(min) => {
                    let mut at_min: Vec<TemplateRef> = matching
                        .iter()
                        .filter(|(s, _)| *s == min)
                        .map(|(_, t)| t.clone())
                        .collect();
                    at_min.sort();
                    at_min.dedup();
                    if at_min.len() == 1 {
                        prop_assert_eq!(result, Ok(at_min[0].clone()));
                    } else {
                        prop_assert_eq!(
                            result,
                            Err(TemplateError::Ambiguous {
                                tags: match_tags.join(";"),
                                policy: MatchPolicy::BestSubset,
                                candidates: at_min,
                            })
                        );
                    }
                }
            }
        }

        #[test]
        fn chosen_template_carries_all_match_tags(
            resources in prop::collection::vec(arb_resource(), 0..12),
            match_tags in prop::sample::subsequence(TAG_POOL.to_vec(), 1..=3),
            policy in arb_policy(),
        ) {
            let wanted = normalise_tags(match_tags.iter().copied());
            if let Ok(chosen) = select_by_tags(&wanted, policy, &resources) {
                let carriers: Vec<&ClusterResource> = resources
                    .iter()
                    .filter(|r| r.template && r.node.as_deref() == Some(chosen.node.as_str()) && r.vmid == Some(chosen.vmid))
                    .collect();
                prop_assert!(!carriers.is_empty());
                prop_assert!(carriers.iter().any(|r| wanted.is_subset(&normalise_tags(r.tags.as_deref()))));
            }
        }
    }
}
