//! The disruption controller (Karpenter's `disruption`): one
//! [pass](super::pass) over the cluster state with the marks the
//! NodeClaims' conditions hold. A command found is started at once and the
//! next pass follows at once, as Karpenter requeues; a pass that finds
//! nothing waits [`POLL`]. Emptiness and consolidation commands are
//! computed again after Karpenter's 15-second wait and acted on only if
//! they still hold; drift is not (Karpenter does not validate drift). A
//! delete marks its nodes for deletion and deletes their NodeClaims — the
//! termination controller taints and drains them. A replace is handed to
//! the [`queue`](super::queue): candidates tainted, replacements created,
//! candidates deleted once the replacements are initialized; the passes go
//! on meanwhile, with those nodes counted as disrupting.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::events::Publisher;
use super::pass::{Pass, PassOptions, pass};
use super::queue::{self, Queue};
use super::record::marks_from_conditions;
use super::types::{Command, Marked, Method};
use crate::apis::NodePool;
use crate::apis::labels::DISRUPTED_TAINT_KEY;
use crate::aws::instance_types::InstanceTypeProvider;
use crate::cluster::ClusterState;
use crate::controllers::ControllerError;
use crate::controllers::nodeclaim::{delete_claim, record_disrupted};
use crate::controllers::recorder::Recorder;
use crate::metrics::{labels, metrics};
use crate::scheduling::SchedulerOptions;

/// How long a pass that found nothing waits for the next (Karpenter: 10 s).
pub const POLL: Duration = Duration::from_secs(10);
/// How long an emptiness or consolidation command waits before it is
/// checked again and acted on (Karpenter's validation: 15 s).
pub const VALIDATION_WAIT: Duration = Duration::from_secs(15);

/// What the disruption controller works with.
pub struct DisruptionController {
    /// The API server.
    pub client: kube::Client,
    /// The shared cluster view.
    pub state: Arc<ClusterState>,
    /// Each NodePool's instance types, as provisioning's.
    pub instance_types: Arc<InstanceTypeProvider>,
    /// The scheduler's options, as provisioning's.
    pub scheduler: SchedulerOptions,
    /// How long a command waits before it is acted on.
    pub validation_wait: Duration,
    /// How long replacements may take to initialize.
    pub replacement_timeout: Duration,
    /// `SpotToSpotConsolidation`.
    pub spot_to_spot: bool,
    /// `DisruptionBlocked` and `Unconsolidatable` events.
    pub events: Publisher,
    /// The replace commands in flight.
    pub queue: Arc<Queue>,
}

impl DisruptionController {
    /// A controller with Karpenter's timings.
    pub fn new(
        client: kube::Client,
        state: Arc<ClusterState>,
        instance_types: Arc<InstanceTypeProvider>,
        scheduler: SchedulerOptions,
        spot_to_spot: bool,
        recorder: Recorder,
    ) -> Self {
        DisruptionController {
            client,
            state,
            instance_types,
            scheduler,
            validation_wait: VALIDATION_WAIT,
            replacement_timeout: queue::REPLACEMENT_TIMEOUT,
            spot_to_spot,
            events: Publisher::new(recorder),
            queue: Arc::default(),
        }
    }

    /// Runs passes until the process ends: the next at once after one that
    /// started a command, [`POLL`] later otherwise.
    pub async fn run(self: Arc<Self>) {
        self.state.synced().await;
        loop {
            let wait = match self.pass().await {
                Ok(started) if !started.is_empty() => {
                    tracing::info!(nodeclaims = ?started, "disrupting nodes");
                    Duration::ZERO
                }
                Ok(_) => POLL,
                Err(error) => {
                    tracing::warn!(%error, "disruption pass failed; retrying");
                    POLL
                }
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// One pass: the NodeClaims whose disruption started (deleted, or
    /// waiting for their replacements); none when no command holds.
    pub async fn pass(self: &Arc<Self>) -> Result<Vec<String>, ControllerError> {
        self.clear_stale_taints().await;
        let Some((first, first_pools)) = self.decide(true).await? else {
            return Ok(Vec::new());
        };
        let (command, pools) = if needs_validation(first.method) {
            tokio::time::sleep(self.validation_wait).await;
            let again = self.decide(false).await?;
            let Some(command) = still_holds(&first, again.as_ref().map(|(c, _)| c)) else {
                metrics()
                    .disruption_failed_validations
                    .get_or_create(&labels(&[(
                        "consolidation_type",
                        first.method.consolidation_type(),
                    )]))
                    .inc();
                tracing::info!(
                    method = first.method.as_str(),
                    "disruption command no longer holds; dropped"
                );
                return Ok(Vec::new());
            };
            (command, again.map(|(_, pools)| pools).unwrap_or_default())
        } else {
            (first, first_pools)
        };
        metrics()
            .disruption_decisions
            .get_or_create(&labels(&[
                ("decision", command.decision()),
                ("reason", command.method.metric_reason()),
                ("consolidation_type", command.method.consolidation_type()),
            ]))
            .inc();
        let names: Vec<String> = command
            .candidates
            .iter()
            .map(|c| c.node_claim.name_any())
            .collect();
        if command.replacements.is_empty() {
            return self.delete(command).await;
        }
        let started = queue::start(&self.client, &self.state, &pools, command).await?;
        tracing::info!(replacements = ?started.replacements, nodeclaims = ?names, "replacing nodes");
        let id = self.queue.add(&started);
        let this = self.clone();
        tokio::spawn(async move {
            let deleted = queue::finish(
                &this.client,
                &this.state,
                &started,
                this.replacement_timeout,
            )
            .await;
            this.queue.remove(id);
            if deleted {
                queue::hold_while_draining(&this.state, &started).await;
            }
        });
        Ok(names)
    }

    /// Takes `karpenter.sh/disrupted:NoSchedule` off Nodes no command in
    /// the queue disrupts and no deletion is under way for (a command this
    /// process forgot when it restarted), as Karpenter's disruption loop
    /// does.
    async fn clear_stale_taints(&self) {
        let deleting: BTreeSet<String> = self
            .state
            .node_claims
            .all()
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_some())
            .filter_map(|c| c.status.as_ref()?.provider_id.clone())
            .collect();
        for node in self.state.nodes.all() {
            let tainted = node
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| t.iter().any(|t| t.key == DISRUPTED_TAINT_KEY));
            let provider_id = node.spec.as_ref().and_then(|s| s.provider_id.as_ref());
            if !tainted
                || self.queue.has(&node.name_any())
                || self.state.is_marked_for_deletion(&node)
                || provider_id.is_some_and(|id| deleting.contains(id))
            {
                continue;
            }
            if let Err(error) =
                queue::set_disrupted_taint(&self.client, &node.name_any(), false).await
            {
                tracing::warn!(%error, node = %node.name_any(), "cannot remove a stale disrupted taint");
            }
        }
    }

    /// Deletes the command's NodeClaims; the names deleted.
    async fn delete(&self, command: Command) -> Result<Vec<String>, ControllerError> {
        let mut deleted = Vec::new();
        for candidate in &command.candidates {
            let claim = &candidate.node_claim;
            self.state.mark_for_deletion(&candidate.name);
            match delete_claim(&self.client, claim).await {
                Ok(true) => {
                    record_disrupted(claim, command.method.metric_reason());
                    deleted.push(claim.name_any());
                }
                Ok(false) => self.state.unmark_for_deletion(&candidate.name),
                Err(error) => {
                    self.state.unmark_for_deletion(&candidate.name);
                    return Err(error.into());
                }
            }
        }
        Ok(deleted)
    }

    /// The command of a pass over the cluster as it stands, with the
    /// NodePools it read. `report`: record the pass's gauges and events (the
    /// pass that finds a command, not its validation).
    async fn decide(
        &self,
        report: bool,
    ) -> Result<Option<(Command, Vec<Arc<NodePool>>)>, ControllerError> {
        let snapshot = self.state.snapshot();
        let pools = snapshot.node_pools.clone();
        let provider = self.instance_types.clone();
        let options = PassOptions {
            at: Timestamp::now(),
            spot_to_spot: self.spot_to_spot,
            scheduler: self.scheduler.clone(),
            exhaustive: false,
        };
        let found = tokio::task::spawn_blocking(move || {
            let found = pass(
                &snapshot,
                &provider,
                &options,
                &marks_from_conditions,
                &BTreeSet::new(),
            );
            let marked: Vec<Marked> = snapshot
                .node_claims
                .iter()
                .map(|c| Marked {
                    node_claim: c.name_any(),
                    marks: marks_from_conditions(c),
                })
                .collect();
            (found, marked)
        })
        .await?;
        let (found, marked) = found;
        for problem in &found.problems {
            // The provisioner reports unusable objects; their pools' nodes
            // are kept and the others planned.
            tracing::debug!(%problem, "disruption pass leaves a NodePool out");
        }
        if report {
            record_pass(&found);
            self.events.publish_kept(&found.kept_nodes(), &marked).await;
            self.events.publish_approved(&found.moves).await;
        }
        Ok(found.command.map(|c| (c, pools)))
    }
}

/// Whether Karpenter checks a command of `method` again after
/// [`VALIDATION_WAIT`] (emptiness and consolidation; not drift).
fn needs_validation(method: Method) -> bool {
    !matches!(method, Method::Drift | Method::Expiration)
}

/// The command to act on after the validation wait, if `first` still
/// holds: the same method; a delete acts on those of its nodes the new
/// command also deletes; a replace needs the same nodes, as many
/// replacements and no higher price (Karpenter's validation), and acts on
/// the new command, which reflects the cluster now.
fn still_holds(first: &Command, again: Option<&Command>) -> Option<Command> {
    let again = again?;
    if again.method != first.method || again.decision() != first.decision() {
        return None;
    }
    let names =
        |c: &Command| -> BTreeSet<String> { c.candidates.iter().map(|c| c.name.clone()).collect() };
    if first.replacements.is_empty() {
        let still = names(again);
        let mut command = first.clone();
        command.candidates.retain(|c| still.contains(&c.name));
        return (!command.candidates.is_empty()).then_some(command);
    }
    let same = names(first) == names(again)
        && first.replacements.len() == again.replacements.len()
        && again.price_after() <= first.price_after() + 1e-9;
    same.then(|| again.clone())
}

/// The pass's gauges and evaluation times, with Karpenter's names and
/// labels.
fn record_pass(found: &Pass) {
    let m = metrics();
    for (reason, count) in &found.eligible {
        m.disruption_eligible_nodes
            .get_or_create(&labels(&[("reason", reason.metric_label())]))
            .set(*count as f64);
    }
    // Karpenter reports what the budgets allow before the nodes already
    // disrupting are taken off, capped as its int32 is, and labels the
    // reason as NodePools spell it.
    for ((pool, reason), allowed) in &found.budgets.allowed {
        m.nodepools_allowed_disruptions
            .get_or_create(&labels(&[("nodepool", pool), ("reason", reason.as_str())]))
            .set((*allowed).min(i32::MAX as usize) as f64);
    }
    for scored in &found.moves {
        for part in &scored.pools {
            // As Karpenter: a move counts as rejected only where a score refused it.
            let move_decision = if scored.approved {
                "approved"
            } else {
                "rejected"
            };
            let decision = if scored.multi_node {
                move_decision
            } else if part.approved() {
                "approved"
            } else {
                "rejected"
            };
            m.consolidation_moves
                .get_or_create(&labels(&[
                    ("decision", decision),
                    ("nodepool", &part.pool),
                    ("policy", part.policy),
                ]))
                .inc();
            if let Some(score) = part.score {
                let decision = if part.approved() {
                    "approved"
                } else {
                    "rejected"
                };
                m.consolidation_score
                    .get_or_create(&labels(&[
                        ("decision", decision),
                        ("nodepool", &part.pool),
                        ("policy", part.policy),
                    ]))
                    .observe(score.value());
            }
        }
    }
    for (method, took) in &found.evaluations {
        m.disruption_evaluation_duration
            .get_or_create(&labels(&[
                ("reason", method.metric_reason()),
                ("consolidation_type", method.consolidation_type()),
            ]))
            .observe(took.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apis::NodeClaim;
    use crate::controllers::disruption::types::{Candidate, Marks, Method};
    use crate::scheduling::{CapacityType, NewNodeClaim, Requirements, Resources};

    fn candidate(name: &str) -> Candidate {
        let claim: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": format!("claim-{name}")},
            "spec": {"requirements": [],
                     "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}
        }))
        .unwrap();
        let pool: NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"spec": {"requirements": [],
                     "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}
        }))
        .unwrap();
        Candidate {
            name: name.to_string(),
            node_claim: Arc::new(claim),
            node_pool: Arc::new(pool),
            pool: "default".to_string(),
            instance_type: Some("m5.xlarge".to_string()),
            capacity_type: Some(CapacityType::OnDemand),
            zone: Some("us-east-1a".to_string()),
            price: 0.192,
            pods: Vec::new(),
            disruption_cost: 1.0,
            reschedule_cost: 1.0,
            marks: Marks::default(),
            interruption_cordon: None,
            blocked: None,
        }
    }

    fn replacement(price: f64) -> NewNodeClaim {
        NewNodeClaim {
            node_pool: "default".to_string(),
            instance_type_options: Vec::new(),
            instance_type: "m5.large".to_string(),
            zone: "us-east-1a".to_string(),
            capacity_type: CapacityType::OnDemand,
            price,
            reservation_id: None,
            pods: Vec::new(),
            requests: Resources::default(),
            requirements: Requirements::new(),
            labels: Default::default(),
            taints: Vec::new(),
        }
    }

    fn command(method: Method, nodes: &[&str], replacements: &[f64]) -> Command {
        Command {
            method,
            candidates: nodes.iter().map(|n| candidate(n)).collect(),
            replacements: replacements.iter().map(|p| replacement(*p)).collect(),
            moves: Vec::new(),
        }
    }

    fn nodes(command: &Command) -> Vec<&str> {
        command.candidates.iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn a_delete_acts_on_the_nodes_both_passes_chose() {
        let first = command(Method::Emptiness, &["a", "b", "c"], &[]);
        let again = command(Method::Emptiness, &["b", "c", "d"], &[]);
        let acted = still_holds(&first, Some(&again)).unwrap();
        assert_eq!(nodes(&acted), ["b", "c"]);
        let elsewhere = command(Method::Emptiness, &["d"], &[]);
        assert!(still_holds(&first, Some(&elsewhere)).is_none());
        assert!(still_holds(&first, None).is_none());
        let other = command(Method::SingleNodeConsolidation, &["a"], &[]);
        assert!(still_holds(&first, Some(&other)).is_none());
    }

    #[test]
    fn a_replace_needs_the_same_nodes_and_no_dearer_replacement() {
        let method = Method::SingleNodeConsolidation;
        let first = command(method, &["a"], &[0.096]);
        let cheaper = command(method, &["a"], &[0.05]);
        let acted = still_holds(&first, Some(&cheaper)).unwrap();
        assert_eq!(acted.price_after(), 0.05, "the fresh command is acted on");
        for changed in [
            command(method, &["a"], &[0.2]),
            command(method, &["b"], &[0.096]),
            command(method, &["a"], &[0.03, 0.03]),
            command(method, &["a"], &[]),
        ] {
            assert!(still_holds(&first, Some(&changed)).is_none());
        }
    }
}
