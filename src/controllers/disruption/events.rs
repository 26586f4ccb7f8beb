//! Karpenter's disruption events on the nodes a pass kept: `DisruptionBlocked`
//! when something holds a node the marks would let go (a `do-not-disrupt`
//! annotation, a PDB, the budget, another command, not initialized), and
//! `Unconsolidatable` when consolidation found nothing to do with it (its
//! pods fit nowhere else, no cheaper option, spot-to-spot, minValues).
//! Each goes on the Node and its NodeClaim, at most once per
//! [`DEDUPE`] for the same text, as Karpenter deduplicates them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType};

use super::balanced::ScoredMove;
use super::types::{Kept, KeptReason, Marked};
use crate::controllers::recorder::Recorder;

/// How long the same event on the same node is not repeated.
pub const DEDUPE: Duration = Duration::from_secs(15 * 60);

/// The event reason for a kept node, if it gets one.
pub fn event_reason(reason: KeptReason) -> Option<&'static str> {
    match reason {
        KeptReason::NotInitialized
        | KeptReason::AlreadyDisrupting
        | KeptReason::DoNotDisrupt
        | KeptReason::Pdb
        | KeptReason::Budget => Some("DisruptionBlocked"),
        KeptReason::UnknownOffering
        | KeptReason::PodsDoNotFit
        | KeptReason::NoCheaperOption
        | KeptReason::SpotToSpot
        | KeptReason::MinValues => Some("Unconsolidatable"),
        KeptReason::NotManaged | KeptReason::Policy | KeptReason::NotConsolidatable => None,
    }
}

/// The events a pass's kept nodes get: `(node, NodeClaim, kept reason,
/// event reason, note)`.
/// Only NodeClaims the marks would let go (consolidatable or drifted) get
/// one, as in Karpenter.
pub fn kept_events<'a>(
    kept: &'a [Kept],
    marked: &[Marked],
) -> Vec<(&'a str, Option<&'a str>, KeptReason, &'static str, &'a str)> {
    let disruptable = |claim: &str| {
        marked
            .iter()
            .any(|m| m.node_claim == claim && (m.marks.consolidatable || m.marks.drifted.is_some()))
    };
    kept.iter()
        .filter(|k| k.node_claim.as_deref().is_some_and(disruptable))
        .filter_map(|k| {
            let reason = event_reason(k.reason)?;
            Some((
                k.node.as_str(),
                k.node_claim.as_deref(),
                k.reason,
                reason,
                k.message.as_str(),
            ))
        })
        .collect()
}

/// Karpenter's `ConsolidationApproved` events for a pass's scored moves:
/// `(api version, kind, name, note)`. An approved single-node move of a
/// `Balanced` pool goes on its Node and NodeClaim; a multi-node move, on
/// each `Balanced` NodePool that approved its part.
pub fn approved_events(moves: &[ScoredMove]) -> Vec<(&'static str, &'static str, String, String)> {
    let mut out = Vec::new();
    for m in moves {
        for part in &m.pools {
            let Some(note) = part.message().filter(|_| part.approved()) else {
                continue;
            };
            if m.multi_node {
                out.push(("karpenter.sh/v1", "NodePool", part.pool.clone(), note));
            } else if m.approved {
                for (node, claim) in &m.candidates {
                    out.push(("v1", "Node", node.clone(), note.clone()));
                    if claim != node {
                        out.push(("karpenter.sh/v1", "NodeClaim", claim.clone(), note.clone()));
                    }
                }
            }
        }
    }
    out
}

/// Publishes events, leaving out repeats within [`DEDUPE`].
pub struct Publisher {
    recorder: Recorder,
    sent: Mutex<HashMap<(String, String), Instant>>,
}

impl Publisher {
    /// A publisher through `recorder`.
    pub fn new(recorder: Recorder) -> Self {
        Publisher {
            recorder,
            sent: Mutex::default(),
        }
    }

    /// Publishes the events for `kept` nodes that were not sent lately.
    pub async fn publish_kept(&self, kept: &[Kept], marked: &[Marked]) {
        for (node, claim, kept_reason, reason, note) in kept_events(kept, marked) {
            if !self.fresh(node, note) {
                continue;
            }
            let event = Event {
                type_: EventType::Normal,
                reason: reason.to_string(),
                note: Some(crate::controllers::truncate(note.to_string(), 1024)),
                // The recorder folds events of the same object, reason and
                // action into one series and keeps the first note: a new
                // hold needs an action of its own to be seen.
                action: kept_reason.as_str().to_string(),
                secondary: None,
            };
            let mut references = vec![reference("v1", "Node", node)];
            if let Some(claim) = claim.filter(|c| *c != node) {
                references.push(reference("karpenter.sh/v1", "NodeClaim", claim));
            }
            for reference in references {
                if let Err(error) = self.recorder.publish(&event, &reference).await {
                    tracing::warn!(%error, "cannot publish event");
                }
            }
        }
    }

    /// Publishes `ConsolidationApproved` for the pass's approved
    /// `Balanced` moves, each text once per object within [`DEDUPE`].
    pub async fn publish_approved(&self, moves: &[ScoredMove]) {
        for (api_version, kind, name, note) in approved_events(moves) {
            if !self.fresh(&format!("{kind}/{name}"), &note) {
                continue;
            }
            let event = Event {
                type_: EventType::Normal,
                reason: "ConsolidationApproved".to_string(),
                note: Some(note),
                action: "Consolidate".to_string(),
                secondary: None,
            };
            let reference = reference(api_version, kind, &name);
            if let Err(error) = self.recorder.publish(&event, &reference).await {
                tracing::warn!(%error, "cannot publish event");
            }
        }
    }

    /// Whether `note` on `node` was not sent within [`DEDUPE`]; records it.
    fn fresh(&self, node: &str, note: &str) -> bool {
        let now = Instant::now();
        let mut sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        sent.retain(|_, at| now.duration_since(*at) < DEDUPE);
        let key = (node.to_string(), note.to_string());
        if sent.contains_key(&key) {
            return false;
        }
        sent.insert(key, now);
        true
    }
}

fn reference(api_version: &str, kind: &str, name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.to_string()),
        kind: Some(kind.to_string()),
        name: Some(name.to_string()),
        ..ObjectReference::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(node: &str, reason: KeptReason) -> Kept {
        Kept {
            node: node.to_string(),
            node_claim: Some(format!("{node}-claim")),
            node_pool: Some("default".to_string()),
            reason,
            message: format!("{} holds it", reason.as_str()),
        }
    }

    fn marked(node: &str, consolidatable: bool, drifted: bool) -> Marked {
        Marked {
            node_claim: format!("{node}-claim"),
            marks: crate::controllers::disruption::types::Marks {
                consolidatable,
                drifted: drifted.then(|| "NodePoolDrifted".to_string()),
                expired: false,
            },
        }
    }

    fn scored(multi_node: bool, approved: bool, pools: &[(&str, Option<f64>)]) -> ScoredMove {
        use crate::controllers::disruption::balanced::{PoolScore, Score};
        ScoredMove {
            multi_node,
            candidates: vec![("node-a".to_string(), "claim-a".to_string())],
            pools: pools
                .iter()
                .map(|(pool, savings)| PoolScore {
                    pool: pool.to_string(),
                    policy: if savings.is_some() {
                        "Balanced"
                    } else {
                        "WhenEmptyOrUnderutilized"
                    },
                    score: savings.map(|s| Score {
                        savings_fraction: s,
                        disruption_fraction: 0.1,
                    }),
                    savings: 0.1,
                })
                .collect(),
            approved,
        }
    }

    #[test]
    fn approved_balanced_moves_get_consolidation_approved() {
        let moves = [
            // Approved single-node Balanced move: on the Node and NodeClaim.
            scored(false, true, &[("balanced", Some(0.1))]),
            // Rejected (score 0.2 < 0.5): nothing.
            scored(false, false, &[("balanced", Some(0.02))]),
            // Not Balanced: not scored, nothing.
            scored(false, true, &[("default", None)]),
            // Multi-node: on each Balanced pool that approved its part.
            scored(true, true, &[("balanced", Some(0.1)), ("default", None)]),
        ];
        let events = approved_events(&moves);
        let got: Vec<(&str, &str)> = events.iter().map(|(_, k, n, _)| (*k, n.as_str())).collect();
        assert_eq!(
            got,
            [
                ("Node", "node-a"),
                ("NodeClaim", "claim-a"),
                ("NodePool", "balanced")
            ]
        );
        assert_eq!(
            events[0].3,
            "score 1.00 >= threshold 0.50 (k: 2, savings 10.0%, disruption 10.0%)"
        );
    }

    #[test]
    fn blocked_and_unconsolidatable_nodes_get_karpenters_events() {
        let kept = [
            kept("a", KeptReason::DoNotDisrupt),
            kept("b", KeptReason::Pdb),
            kept("c", KeptReason::NoCheaperOption),
            kept("d", KeptReason::Policy),
            kept("e", KeptReason::PodsDoNotFit),
        ];
        let marks = [
            marked("a", true, false),
            marked("b", false, true),
            marked("c", true, false),
            marked("d", true, false),
            marked("e", false, false),
        ];
        let events = kept_events(&kept, &marks);
        let got: Vec<(&str, &str)> = events.iter().map(|(n, _, _, r, _)| (*n, *r)).collect();
        // d: a policy is the user's choice; e: nothing would disrupt it.
        assert_eq!(
            got,
            [
                ("a", "DisruptionBlocked"),
                ("b", "DisruptionBlocked"),
                ("c", "Unconsolidatable")
            ]
        );
        assert_eq!(events[0].4, "do-not-disrupt holds it");
        assert_eq!(events[0].1, Some("a-claim"));
    }
}
