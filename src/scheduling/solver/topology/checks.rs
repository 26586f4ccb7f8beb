//! Whether a candidate node or claim satisfies a pod's topology spread, pod
//! affinity and anti-affinity, narrowing its domain when it is a new claim.

use crate::scheduling::index::{Ids, Set};
use crate::scheduling::labels;
use crate::scheduling::requirements::ValueSet;

use super::super::overlay::Overlay;
use super::super::{Current, State};
use super::groups::{GroupKind, host_count};

impl State<'_> {
    /// Hostname-keyed topology: counts live on the node or claim itself.
    pub(in crate::scheduling::solver) fn check_hostname_groups(
        &self,
        explain: bool,
        pi: usize,
        cur: &Current,
        counts: &[(u32, i32)],
    ) -> Result<(), String> {
        let p = &self.pods[pi];
        for &g in &cur.groups {
            let group = &self.groups[g as usize];
            if !group.hostname {
                continue;
            }
            let count = host_count(counts, g);
            let selecting = i32::from(p.counted_by.contains(&g));
            match group.id.kind {
                GroupKind::Spread { max_skew, .. } => {
                    if count + selecting > max_skew {
                        return Err(why!(
                            explain,
                            "topology spread on {} (maxSkew {max_skew}) would be exceeded",
                            labels::HOSTNAME
                        ));
                    }
                }
                GroupKind::Affinity => {
                    if count == 0 && !(group.total == 0 && selecting == 1) {
                        return Err(why!(
                            explain,
                            "pod affinity on {} has no matching pod on this node",
                            labels::HOSTNAME
                        ));
                    }
                }
                GroupKind::AntiAffinity => {
                    if count > 0 {
                        return Err(why!(
                            explain,
                            "pod anti-affinity on {} rejects this node",
                            labels::HOSTNAME
                        ));
                    }
                }
                GroupKind::InverseAntiAffinity => {}
            }
        }
        for &g in &p.blocked_by {
            if self.groups[g as usize].hostname && host_count(counts, g) > 0 {
                return Err(why!(
                    explain,
                    "the anti-affinity of a pod on this node rejects the pod"
                ));
            }
        }
        Ok(())
    }

    /// Zone and other non-hostname topology: narrows the candidate's domain.
    pub(in crate::scheduling::solver) fn topology_narrow(
        &self,
        explain: bool,
        pi: usize,
        cur: &Current,
        ov: &mut Overlay,
    ) -> Result<(), String> {
        let p = &self.pods[pi];
        let number = |v: &u32| self.values.number(*v);
        let empty = Vec::new();
        for &g in &cur.groups {
            let group = &self.groups[g as usize];
            if group.hostname {
                continue;
            }
            let key = group.id.key;
            let key_name = self.keys.name(key);
            let universe = self.universe.get(&key).unwrap_or(&empty);
            let node_set = ov.get(key).map(|r| r.set.clone());
            let node_has = |d: &u32| node_set.as_ref().is_none_or(|s| s.has(d, &number));
            let pod_set = cur.strict.get(key).map(|r| &r.set);
            let pod_has = |d: &u32| pod_set.is_none_or(|s| s.has(d, &number));
            let selecting = i32::from(p.counted_by.contains(&g));
            let allowed: Set = match group.id.kind {
                GroupKind::Spread {
                    max_skew,
                    min_domains,
                    honor,
                } => {
                    let eligible = |d: &u32| {
                        (!honor || pod_has(d))
                            && group
                                .eligible_domains
                                .as_ref()
                                .is_none_or(|t| t.contains(d))
                    };
                    let mut min = i32::MAX;
                    let mut n = 0;
                    for d in universe.iter().filter(|d| eligible(d)) {
                        n += 1;
                        min = min.min(group.count(*d));
                    }
                    if min_domains.is_some_and(|md| n < md) {
                        min = 0;
                    }
                    let mut best: Option<(i32, u32)> = None;
                    for d in universe.iter().filter(|d| eligible(d) && node_has(d)) {
                        let c = group.count(*d) + selecting;
                        if c - min <= max_skew && best.is_none_or(|(bc, _)| c < bc) {
                            best = Some((c, *d));
                        }
                    }
                    match best {
                        Some((_, d)) => ValueSet::of(vec![d]),
                        None => {
                            return Err(why!(
                                explain,
                                "topology spread on {key_name} (maxSkew {max_skew}) cannot be met in any allowed domain"
                            ));
                        }
                    }
                }
                GroupKind::Affinity => {
                    let mut options: Vec<u32> = universe
                        .iter()
                        .copied()
                        .filter(|d| group.count(*d) > 0 && pod_has(d))
                        .collect();
                    if options.is_empty() && selecting == 1 {
                        let first = universe
                            .iter()
                            .find(|d| pod_has(d) && node_has(d))
                            .or_else(|| universe.iter().find(|d| pod_has(d)));
                        options.extend(first.copied());
                    }
                    if options.is_empty() {
                        return Err(why!(
                            explain,
                            "pod affinity on {key_name} has no domain with a matching pod"
                        ));
                    }
                    ValueSet::of(options)
                }
                GroupKind::AntiAffinity => {
                    let options: Vec<u32> = universe
                        .iter()
                        .copied()
                        .filter(|d| group.count(*d) == 0 && pod_has(d))
                        .collect();
                    if options.is_empty() {
                        return Err(why!(
                            explain,
                            "pod anti-affinity on {key_name} leaves no domain without a matching pod"
                        ));
                    }
                    ValueSet::of(options)
                }
                GroupKind::InverseAntiAffinity => continue,
            };
            if !ov.narrow(key, &allowed, None, &self.values) {
                return Err(if !explain {
                    String::new()
                } else {
                    match group.id.kind {
                        GroupKind::AntiAffinity => {
                            format!("pod anti-affinity on {key_name} leaves no domain")
                        }
                        GroupKind::Affinity => {
                            format!(
                                "pod affinity on {key_name} needs a domain this node cannot be in"
                            )
                        }
                        _ => format!(
                            "topology spread on {key_name} needs a domain this node cannot be in"
                        ),
                    }
                });
            }
        }
        // The required anti-affinity of other pods: only domains where none
        // of their owners are (Karpenter's inverse groups). Like Karpenter,
        // this pins a new claim to those domains even when the pod has no
        // topology of its own, so the owners see where it may land.
        for &g in &p.blocked_by {
            let group = &self.groups[g as usize];
            if group.hostname {
                continue;
            }
            let key = group.id.key;
            let pod_set = cur.strict.get(key).map(|r| &r.set);
            let allowed: Vec<u32> = self
                .universe
                .get(&key)
                .unwrap_or(&empty)
                .iter()
                .copied()
                .filter(|d| group.count(*d) == 0 && pod_set.is_none_or(|s| s.has(d, &number)))
                .collect();
            if !ov.narrow(key, &ValueSet::of(allowed), None, &self.values) {
                return Err(why!(
                    explain,
                    "the anti-affinity of another pod excludes every {} this node can be in",
                    self.keys.name(key)
                ));
            }
        }
        Ok(())
    }
}
