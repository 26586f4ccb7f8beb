//! The disruption vocabulary (Karpenter's `types.go`): the methods, the
//! candidate a method may take, the command it returns, where a displaced
//! pod goes, and why a node is kept. Plain data: the other modules build
//! and read these.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::apis::nodepool::DisruptionReason;
use crate::apis::{NodeClaim, NodePool};
use crate::scheduling::{CapacityType, NewNodeClaim, PodKey};

/// How a node is disrupted, in the order the methods run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    /// `expireAfter` passed (forceful, not budgeted).
    Expiration,
    /// Nodes without reschedulable pods.
    Emptiness,
    /// Nodes whose NodeClaim is `Drifted`.
    Drift,
    /// Several nodes replaced by at most one.
    MultiNodeConsolidation,
    /// One node deleted or replaced by a cheaper one.
    SingleNodeConsolidation,
}

impl Method {
    /// The method as `simulate --disruption` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Expiration => "expiration",
            Method::Emptiness => "emptiness",
            Method::Drift => "drift",
            Method::MultiNodeConsolidation => "multi-node-consolidation",
            Method::SingleNodeConsolidation => "single-node-consolidation",
        }
    }

    /// The budget reason it counts against (`None`: expiration, which is
    /// not budgeted).
    pub fn budget_reason(self) -> Option<DisruptionReason> {
        match self {
            Method::Expiration => None,
            Method::Emptiness => Some(DisruptionReason::Empty),
            Method::Drift => Some(DisruptionReason::Drifted),
            Method::MultiNodeConsolidation | Method::SingleNodeConsolidation => {
                Some(DisruptionReason::Underutilized)
            }
        }
    }

    /// The reason it disrupts for, as NodePools and events spell it
    /// (`Expired`, `Empty`, `Drifted`, `Underutilized`).
    pub fn reason(self) -> &'static str {
        self.budget_reason()
            .map_or("Expired", DisruptionReason::as_str)
    }

    /// The `reason` label of Karpenter's disruption metrics.
    pub fn metric_reason(self) -> &'static str {
        self.budget_reason()
            .map_or("expired", DisruptionReason::metric_label)
    }

    /// Karpenter's `consolidation_type` metric label (empty for drift and
    /// expiration).
    pub fn consolidation_type(self) -> &'static str {
        match self {
            Method::Emptiness => "empty",
            Method::MultiNodeConsolidation => "multi",
            Method::SingleNodeConsolidation => "single",
            Method::Expiration | Method::Drift => "",
        }
    }

    /// Whether the method is `eventual` (Karpenter's disruption class):
    /// a node whose pods block eviction is still taken when its NodeClaim
    /// has a `terminationGracePeriod`, which then bounds the drain. The
    /// others are `graceful`: such a node is kept.
    pub fn is_eventual(self) -> bool {
        matches!(self, Method::Expiration | Method::Drift)
    }
}

/// What the disruption marks say of a NodeClaim (read from its conditions
/// in the controller, recomputed offline).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Marks {
    /// `Consolidatable` holds.
    pub consolidatable: bool,
    /// `Drifted` holds, with this reason.
    pub drifted: Option<String>,
    /// `expireAfter` has passed.
    pub expired: bool,
}

/// A NodeClaim's marks, by name (what `simulate --disruption` reports and
/// the events read).
#[derive(Clone, Debug, PartialEq)]
pub struct Marked {
    /// The NodeClaim.
    pub node_claim: String,
    /// Its marks.
    pub marks: Marks,
}

/// A node a disruption method may take (Karpenter's `Candidate`), made
/// from its pass's [`NodeRecord`](super::record::NodeRecord).
#[derive(Clone, Debug)]
pub struct Candidate {
    /// The Node's name: what pods are bound by.
    pub name: String,
    /// Its NodeClaim.
    pub node_claim: Arc<NodeClaim>,
    /// Its NodePool.
    pub node_pool: Arc<NodePool>,
    /// The NodePool's name.
    pub pool: String,
    /// `node.kubernetes.io/instance-type`, from the Node or its NodeClaim
    /// (consolidation needs it; emptiness and drift do not).
    pub instance_type: Option<String>,
    /// `karpenter.sh/capacity-type`, likewise.
    pub capacity_type: Option<CapacityType>,
    /// `topology.kubernetes.io/zone`, likewise.
    pub zone: Option<String>,
    /// Hourly price of its offering (0 when the catalog has none).
    pub price: f64,
    /// The pods that need room elsewhere before it goes.
    pub pods: Vec<PodKey>,
    /// Karpenter's disruption cost: the pods' eviction costs times the
    /// share of its lifetime left; cheaper candidates go first.
    pub disruption_cost: f64,
    /// Karpenter's `RescheduleDisruptionCost`, what `Balanced` and the
    /// savings ratio weigh: 1 for the node plus its reschedulable pods'
    /// positive eviction costs.
    pub reschedule_cost: f64,
    /// Its marks.
    pub marks: Marks,
    /// The kind of interruption message the node was cordoned for under
    /// its NodePool's `Cordon` policy, while it stays cordoned:
    /// consolidation leaves it.
    pub interruption_cordon: Option<String>,
    /// A pod that blocks eviction (`do-not-disrupt`, a PodDisruptionBudget):
    /// graceful methods keep the node for it; eventual ones take it when
    /// the NodeClaim has a `terminationGracePeriod`.
    pub blocked: Option<Verdict>,
}

impl Candidate {
    /// Karpenter's `SavingsRatio`: price per unit of disruption (higher
    /// goes first in consolidation).
    pub fn savings_ratio(&self) -> f64 {
        self.price / self.reschedule_cost
    }

    /// Whether its NodeClaim sets `terminationGracePeriod`, which bounds an
    /// eventual disruption's drain.
    pub fn has_termination_grace_period(&self) -> bool {
        self.node_claim.spec.termination_grace_period.is_some()
    }

    /// Why `method` may not take it because of a blocking pod, if so.
    pub fn blocked_for(&self, method: Method) -> Option<&Verdict> {
        let eventual = method.is_eventual() && self.has_termination_grace_period();
        self.blocked.as_ref().filter(|_| !eventual)
    }
}

/// Where a displaced pod goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// An existing, initialized node, by name.
    Node(String),
    /// The command's replacement at this index.
    Replacement(usize),
    /// Nowhere yet: an expired node's pod, placed by provisioning once it
    /// is pending (expiration does not wait for room), or a pod of a static
    /// NodePool's drifted node, which kube-scheduler places on the
    /// replacement (static drift does not plan pods, as in Karpenter).
    Pending,
}

/// One decision: the candidates go, replaced by `replacements`.
#[derive(Clone, Debug)]
pub struct Command {
    /// The method that decided it.
    pub method: Method,
    /// The nodes that go.
    pub candidates: Vec<Candidate>,
    /// NodeClaims launched first (empty: a delete).
    pub replacements: Vec<NewNodeClaim>,
    /// Each displaced pod's destination.
    pub moves: Vec<(PodKey, Destination)>,
}

impl Command {
    /// `delete` or `replace`.
    pub fn decision(&self) -> &'static str {
        if self.replacements.is_empty() {
            "delete"
        } else {
            "replace"
        }
    }

    /// What the candidates cost per hour.
    pub fn price_before(&self) -> f64 {
        // Folded from +0.0: the sum of no f64s is -0.0.
        self.candidates.iter().fold(0.0, |total, c| total + c.price)
    }

    /// What the replacements cost per hour.
    pub fn price_after(&self) -> f64 {
        self.replacements
            .iter()
            .fold(0.0, |total, r| total + r.price)
    }
}

/// Why a node is in no disruption decision (the `kept[].reason` of
/// `simulate --disruption`), in the order they are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeptReason {
    /// No NodePool label, an unknown NodePool, no NodeClaim, or a NodeClaim
    /// of another provider's node class.
    NotManaged,
    /// Not initialized yet.
    NotInitialized,
    /// Being deleted, or marked for deletion by another command.
    AlreadyDisrupting,
    /// `karpenter.sh/do-not-disrupt` on the node or one of its pods.
    DoNotDisrupt,
    /// A PodDisruptionBudget keeps one of its pods.
    Pdb,
    /// The NodePool's policy keeps it (`WhenEmpty` on a non-empty node,
    /// `consolidateAfter: Never`, a static NodePool).
    Policy,
    /// Not `Consolidatable` (`consolidateAfter` has not passed).
    NotConsolidatable,
    /// Its price cannot be known (instance type not among its NodePool's,
    /// no capacity-type or zone label), so it is not consolidated.
    UnknownOffering,
    /// The NodePool's disruption budget is used up.
    Budget,
    /// Its pods would not all fit elsewhere.
    PodsDoNotFit,
    /// No replacement would be cheaper.
    NoCheaperOption,
    /// A spot node would only be replaced by spot (needs the
    /// `SpotToSpotConsolidation` gate and enough cheaper types).
    SpotToSpot,
    /// A replacement would break the NodePool's `minValues`.
    MinValues,
}

impl KeptReason {
    /// The reason as `simulate --disruption` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            KeptReason::NotManaged => "not-managed",
            KeptReason::NotInitialized => "not-initialized",
            KeptReason::AlreadyDisrupting => "already-disrupting",
            KeptReason::DoNotDisrupt => "do-not-disrupt",
            KeptReason::Pdb => "pdb",
            KeptReason::Policy => "policy",
            KeptReason::NotConsolidatable => "not-consolidatable",
            KeptReason::UnknownOffering => "unknown-offering",
            KeptReason::Budget => "budget",
            KeptReason::PodsDoNotFit => "pods-do-not-fit",
            KeptReason::NoCheaperOption => "no-cheaper-option",
            KeptReason::SpotToSpot => "spot-to-spot",
            KeptReason::MinValues => "min-values",
        }
    }
}

/// A node no decision takes, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Kept {
    /// The Node's name (the NodeClaim's when it has no Node).
    pub node: String,
    /// The NodeClaim, if any.
    pub node_claim: Option<String>,
    /// Its NodePool, if known.
    pub node_pool: Option<String>,
    /// The first reason that kept it.
    pub reason: KeptReason,
    /// What a user would change.
    pub message: String,
}

/// A candidate a method looked at and left, and why.
pub type Verdict = (KeptReason, String);

/// Nodes each NodePool may still disrupt, per budget reason.
pub type Allowed = BTreeMap<(String, DisruptionReason), usize>;
