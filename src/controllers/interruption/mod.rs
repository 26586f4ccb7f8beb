//! The interruption controller (Karpenter's `interruption`): long-polls the
//! SQS queue named by `--interruption-queue`, into which EventBridge rules
//! deliver EC2 and AWS Health events, and acts on the NodeClaims whose
//! instances they name — found by `status.providerID` in the cluster state,
//! with no API LIST per message:
//!
//! | kind | action |
//! |---|---|
//! | spot interruption warning | forceful: termination timestamp now, NodeClaim deleted, the spot offering marked unavailable |
//! | instance stopping, stopped, shutting down, terminated | NodeClaim deleted (drained) |
//! | capacity-reservation interruption | NodeClaim deleted, the reservation marked full |
//! | AWS Health scheduled change | the NodePool's policy: `Drain` (default), `Cordon` or `Ignore` |
//! | rebalance recommendation | the NodePool's policy: `Ignore` (default: an event), `Cordon` or `Drain` |
//! | instance or system status check failed for 2 minutes ([`instance_status`]) | forceful, as a spot interruption |
//! | scheduled instance event ([`instance_status`]) | as an AWS Health scheduled change |
//!
//! Each gets Karpenter's event on the Node and the NodeClaim. A message is
//! deleted once handled; one that names no NodeClaim of ours, an unknown
//! kind or a malformed body is counted, logged once per kind and deleted.
//! An outage of the queue costs nothing: the other controllers go on, the
//! poller backs off (with jitter) and resumes by itself, and
//! `nodewright_interruption_queue_healthy` says which state it is in.

pub mod instance_status;
pub mod policy;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use interruption::{Kind, Parsed};
use interruption_queue::{Backoff, Queue, Received};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event as KubeEvent, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use self::policy::{Policy, policies};
use crate::apis::NodeClaim;
use crate::apis::labels::{
    CAPACITY_RESERVATION_ID_LABEL_KEY, INSTANCE_TYPE_LABEL_KEY,
    INTERRUPTION_CORDONED_ANNOTATION_KEY, NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION_KEY,
    NODE_POOL_LABEL_KEY, ZONE_LABEL_KEY,
};
use crate::aws::instance_types::InstanceTypeProvider;
use crate::cloudprovider::{OfferingKey, ProviderId};
use crate::cluster::ClusterState;
use crate::controllers::ControllerError;
use crate::controllers::nodeclaim::{delete_claim, record_disrupted};
use crate::controllers::recorder::Recorder;
use crate::metrics::{labels, metrics};

/// Messages handled at once (Karpenter: 10).
const CONCURRENCY: usize = 10;

/// What is done with one NodeClaim a message names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Termination timestamp set to now, then deleted: the drain does not
    /// wait on PodDisruptionBudgets past the two-minute warning.
    Forceful,
    /// Deleted: tainted, drained and removed as any deleted NodeClaim.
    Drain,
    /// The Node cordoned; its pods stay.
    Cordon,
    /// An event only.
    Ignore,
}

impl Action {
    /// The action as a metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Forceful => "ForcefulTermination",
            Action::Drain => "Drain",
            Action::Cordon => "Cordon",
            Action::Ignore => "Ignore",
        }
    }
}

/// The action for a message of `kind` on a node of a NodePool whose
/// annotations are `pool` (absent or invalid: Karpenter's defaults).
pub fn action_for(kind: Kind, pool: Option<&std::collections::BTreeMap<String, String>>) -> Action {
    let policies = pool.map(|a| policies(a).0).unwrap_or_default();
    let of = |policy: Policy| match policy {
        Policy::Drain => Action::Drain,
        Policy::Cordon => Action::Cordon,
        Policy::Ignore => Action::Ignore,
    };
    match kind {
        Kind::SpotInterrupted => Action::Forceful,
        Kind::InstanceStopped | Kind::InstanceTerminated | Kind::CapacityReservationInterrupted => {
            Action::Drain
        }
        Kind::InstanceStatus | Kind::SystemStatus => Action::Forceful,
        Kind::ScheduledChange | Kind::EventStatus => of(policies.scheduled_change),
        Kind::RebalanceRecommendation => of(policies.rebalance),
    }
}

/// Karpenter's event for a message of `kind`: type, reason, note.
fn event_of(kind: Kind) -> (EventType, &'static str, &'static str) {
    match kind {
        Kind::SpotInterrupted => (
            EventType::Warning,
            "SpotInterrupted",
            "Spot interruption warning was triggered",
        ),
        Kind::RebalanceRecommendation => (
            EventType::Normal,
            "SpotRebalanceRecommendation",
            "Spot rebalance recommendation was triggered",
        ),
        Kind::ScheduledChange | Kind::InstanceStatus | Kind::SystemStatus | Kind::EventStatus => (
            EventType::Warning,
            "InstanceUnhealthy",
            "An unhealthy warning was triggered for the instance",
        ),
        Kind::InstanceStopped => (
            EventType::Warning,
            "InstanceStopping",
            "Instance is stopping",
        ),
        Kind::InstanceTerminated => (
            EventType::Warning,
            "InstanceTerminating",
            "Instance is terminating",
        ),
        Kind::CapacityReservationInterrupted => (
            EventType::Warning,
            "CapacityReservationInstanceInterrupted",
            "Capacity Reservation interruption warning was triggered",
        ),
    }
}

/// A NodeClaim an interruption names, with its Nodes.
pub(crate) struct Target {
    /// The NodeClaim.
    pub claim: Arc<NodeClaim>,
    /// Its Nodes (one, or none before it registered).
    pub nodes: Vec<Arc<Node>>,
}

/// The interruption controller: the queue's poller and the handler.
pub struct InterruptionController {
    /// The queue.
    pub queue: Arc<Queue>,
    /// What acts on the messages.
    pub handler: InterruptionHandler,
}

/// Acts on interruption messages, from the queue or (in the sandbox)
/// injected.
pub struct InterruptionHandler {
    /// The API server.
    pub client: kube::Client,
    /// The shared cluster view: NodeClaims by provider ID, Nodes, NodePools.
    pub state: Arc<ClusterState>,
    /// The ICE cache and the reservations' availability.
    pub instance_types: Arc<InstanceTypeProvider>,
    /// Events.
    pub recorder: Recorder,
    /// Kinds of unhandled messages already logged.
    logged: Mutex<BTreeSet<String>>,
}

impl InterruptionController {
    /// A controller polling `queue`.
    pub fn new(
        client: kube::Client,
        state: Arc<ClusterState>,
        queue: Arc<Queue>,
        instance_types: Arc<InstanceTypeProvider>,
        recorder: Recorder,
    ) -> Self {
        InterruptionController {
            queue,
            handler: InterruptionHandler::new(client, state, instance_types, recorder),
        }
    }

    /// Polls until the process ends.
    pub async fn run(self: Arc<Self>) {
        self.handler.state.synced().await;
        let healthy = metrics()
            .interruption_queue_healthy
            .get_or_create(&labels(&[("queue", self.queue.name())]))
            .clone();
        let mut backoff = Backoff::default();
        tracing::info!(queue = self.queue.name(), "watching the interruption queue");
        loop {
            match self.queue.receive().await {
                Ok(received) => {
                    healthy.set(1.0);
                    if let Some(failures) = backoff.success() {
                        tracing::info!(
                            queue = self.queue.name(),
                            failures,
                            "the interruption queue is available again"
                        );
                    }
                    self.handle_batch(received).await;
                }
                Err(error) => {
                    healthy.set(0.0);
                    let failure = backoff.failure();
                    if failure.first {
                        tracing::warn!(
                            queue = self.queue.name(),
                            operation = error.operation().as_str(),
                            code = error.label(),
                            %error,
                            "the interruption queue cannot be read; provisioning and disruption go on, polling resumes when it can"
                        );
                    }
                    tokio::time::sleep(jittered(failure.delay)).await;
                }
            }
        }
    }

    /// Handles one receive's messages and deletes those handled; a message
    /// whose action failed stays, and comes back after its visibility
    /// timeout.
    pub async fn handle_batch(&self, received: Vec<Received>) {
        if received.is_empty() {
            return;
        }
        let instances = instances_of(received.iter().map(|m| &m.parsed));
        let claims = Arc::new(self.handler.claims_by_instance(Some(&instances)));
        let handled: Vec<Received> = futures::stream::iter(received)
            .map(|message| {
                let claims = claims.clone();
                async move {
                    let ok = self
                        .handler
                        .handle(
                            &message.message_id,
                            &message.parsed,
                            message.body_len,
                            &claims,
                        )
                        .await;
                    ok.then_some(message)
                }
            })
            .buffer_unordered(CONCURRENCY)
            .filter_map(std::future::ready)
            .collect()
            .await;
        match self.queue.delete(&handled).await {
            Ok(outcome) => {
                metrics()
                    .interruption_deleted_messages
                    .get_or_create(&Vec::new())
                    .inc_by(outcome.deleted as u64);
                for failed in outcome.failed {
                    tracing::warn!(message = %failed.message_id, code = %failed.code, "cannot delete an interruption message; it will be handled again");
                }
            }
            Err(error) => {
                tracing::warn!(%error, code = error.label(), "cannot delete interruption messages; they will be handled again");
            }
        }
    }
}

impl InterruptionHandler {
    /// A handler acting through `client` on what `state` holds.
    pub fn new(
        client: kube::Client,
        state: Arc<ClusterState>,
        instance_types: Arc<InstanceTypeProvider>,
        recorder: Recorder,
    ) -> Self {
        InterruptionHandler {
            client,
            state,
            instance_types,
            recorder,
            logged: Mutex::default(),
        }
    }

    /// Handles one parsed message body; whether it may be deleted (false:
    /// an action failed, and the message should be handled again).
    pub async fn handle_parsed(&self, id: &str, parsed: &Parsed, body_len: usize) -> bool {
        let claims = self.claims_by_instance(Some(&instances_of([parsed])));
        self.handle(id, parsed, body_len, &claims).await
    }

    /// The NodeClaims of `instances` (of every instance with `None`) by EC2
    /// instance ID, each with its Node: looked up in the cluster state's
    /// index once per batch of messages.
    pub(crate) fn claims_by_instance(
        &self,
        instances: Option<&HashSet<String>>,
    ) -> HashMap<String, Vec<Target>> {
        let found = match instances {
            Some(ids) => self
                .state
                .claims_of_instances(ids.iter().map(String::as_str)),
            None => self
                .state
                .claims_with_provider_id(|id| ProviderId::parse(id).is_some()),
        };
        let mut out: HashMap<String, Vec<Target>> = HashMap::new();
        for (claim, node) in found {
            let Some(id) = claim
                .status
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .and_then(ProviderId::parse)
                .map(|p| p.instance_id().to_string())
            else {
                continue;
            };
            let nodes = node.into_iter().collect();
            out.entry(id).or_default().push(Target { claim, nodes });
        }
        out
    }

    /// Handles one message; whether it may be deleted.
    async fn handle(
        &self,
        message_id: &str,
        parsed: &Parsed,
        body_len: usize,
        claims: &HashMap<String, Vec<Target>>,
    ) -> bool {
        let m = metrics();
        let event = match parsed {
            Parsed::Known(event) => event,
            Parsed::Unknown(unknown) => {
                m.interruption_received_messages
                    .get_or_create(&labels(&[("message_type", interruption::NO_OP_KIND)]))
                    .inc();
                let kind = format!("{} / {}", unknown.source(), unknown.detail_type());
                self.log_once(&kind, || {
                    tracing::info!(message = %message_id, kind = %kind, reason = %unknown.reason, "interruption message of a kind nodewright does not act on; deleted (logged once per kind)");
                });
                return true;
            }
            Parsed::Malformed(error) => {
                m.interruption_received_messages
                    .get_or_create(&labels(&[("message_type", "malformed")]))
                    .inc();
                let kind = format!("malformed: {error}");
                self.log_once(&kind, || {
                    tracing::warn!(message = %message_id, bytes = body_len, %error, "malformed interruption message; deleted (logged once per problem)");
                });
                return true;
            }
        };
        m.interruption_received_messages
            .get_or_create(&labels(&[("message_type", event.kind().as_str())]))
            .inc();
        let mut ok = true;
        for id in event.instance_ids() {
            for target in claims.get(id).into_iter().flatten() {
                if let Err(error) = self.act(event.kind(), target).await {
                    tracing::warn!(%error, nodeclaim = %target.claim.name_any(), kind = event.kind().as_str(), "cannot act on an interruption message; it will be handled again");
                    ok = false;
                }
            }
        }
        if ok && let Some(time) = event.time() {
            let now = k8s_openapi::jiff::Timestamp::now().as_millisecond();
            let waited = (now - time.as_millisecond()).max(0) as f64 / 1000.0;
            m.interruption_message_queue_duration
                .get_or_create(&Vec::new())
                .observe(waited);
        }
        ok
    }

    /// Acts on a NodeClaim and its Nodes for a signal of `kind`.
    pub(crate) async fn act(&self, kind: Kind, target: &Target) -> Result<(), ControllerError> {
        let (claim, nodes) = (target.claim.as_ref(), target.nodes.as_slice());
        let pool = claim
            .labels()
            .get(NODE_POOL_LABEL_KEY)
            .and_then(|p| self.state.node_pools.store().get(&ObjectRef::new(p)));
        let action = action_for(kind, pool.as_ref().map(|p| p.annotations()));
        self.publish(kind, claim, nodes).await;
        self.mark_unavailable(kind, claim);
        metrics()
            .interruption_actions
            .get_or_create(&labels(&[
                ("message_type", kind.as_str()),
                ("action", action.as_str()),
            ]))
            .inc();
        // A forceful interruption bounds the drain even of a claim already
        // being deleted: the instance goes whatever the drain waits for.
        if action == Action::Forceful {
            self.annotate_termination_now(claim).await?;
        }
        if claim.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        match action {
            Action::Forceful => self.delete(kind, claim, nodes).await,
            Action::Drain => self.delete(kind, claim, nodes).await,
            Action::Cordon => {
                for node in nodes {
                    cordon(&self.client, node, kind).await?;
                }
                Ok(())
            }
            Action::Ignore => Ok(()),
        }
    }

    /// A spot interruption makes its offering unavailable for launches; a
    /// capacity-reservation interruption its reservation.
    fn mark_unavailable(&self, kind: Kind, claim: &NodeClaim) {
        let label = |key: &str| claim.labels().get(key).cloned();
        match kind {
            Kind::SpotInterrupted => {
                if let (Some(instance_type), Some(zone)) =
                    (label(INSTANCE_TYPE_LABEL_KEY), label(ZONE_LABEL_KEY))
                {
                    self.instance_types.unavailable().mark(OfferingKey {
                        instance_type,
                        zone,
                        capacity_type: "spot".to_string(),
                    });
                }
            }
            Kind::CapacityReservationInterrupted => {
                if let Some(id) = label(CAPACITY_RESERVATION_ID_LABEL_KEY) {
                    self.instance_types
                        .reservation_availability()
                        .mark_unavailable(&id);
                }
            }
            _ => {}
        }
    }

    async fn annotate_termination_now(&self, claim: &NodeClaim) -> Result<(), ControllerError> {
        let now = k8s_openapi::jiff::Timestamp::now().round(k8s_openapi::jiff::Unit::Second);
        // A deadline already set and no later than now stands; a later one
        // (a drain bounded by terminationGracePeriod) is brought forward.
        let set = claim
            .annotations()
            .get(NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION_KEY)
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok());
        if let (Some(set), Ok(now)) = (set, &now)
            && set <= *now
        {
            return Ok(());
        }
        let patch = serde_json::json!({"metadata": {"annotations": {
            NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION_KEY: now.map(|t| t.to_string()).unwrap_or_default(),
        }}});
        match Api::<NodeClaim>::all(self.client.clone())
            .patch(
                &claim.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    async fn delete(
        &self,
        kind: Kind,
        claim: &NodeClaim,
        nodes: &[Arc<Node>],
    ) -> Result<(), ControllerError> {
        if delete_claim(&self.client, claim).await? {
            record_disrupted(claim, kind.as_str());
            tracing::info!(nodeclaim = %claim.name_any(), kind = kind.as_str(), "deleting a NodeClaim on an interruption message");
            let event = KubeEvent {
                type_: EventType::Warning,
                reason: "TerminatingOnInterruption".to_string(),
                note: Some("Interruption triggered termination for the NodeClaim".to_string()),
                action: "Interruption".to_string(),
                secondary: None,
            };
            self.publish_to(&event, claim, nodes).await;
        }
        Ok(())
    }

    async fn publish(&self, kind: Kind, claim: &NodeClaim, nodes: &[Arc<Node>]) {
        let (type_, reason, note) = event_of(kind);
        let event = KubeEvent {
            type_,
            reason: reason.to_string(),
            note: Some(note.to_string()),
            action: "Interruption".to_string(),
            secondary: None,
        };
        self.publish_to(&event, claim, nodes).await;
    }

    async fn publish_to(&self, event: &KubeEvent, claim: &NodeClaim, nodes: &[Arc<Node>]) {
        let mut references = vec![claim.object_ref(&())];
        references.extend(nodes.iter().map(|n| n.object_ref(&())));
        for reference in references {
            if let Err(error) = self.recorder.publish(event, &reference).await {
                tracing::warn!(%error, "cannot publish event");
            }
        }
    }

    fn log_once(&self, kind: &str, log: impl FnOnce()) {
        let mut logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
        if logged.insert(kind.to_string()) {
            log();
        }
    }
}

/// Marks `node` unschedulable (as `kubectl cordon`).
async fn cordon(client: &kube::Client, node: &Node, kind: Kind) -> Result<(), ControllerError> {
    let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
    if cordoned
        && node
            .annotations()
            .contains_key(INTERRUPTION_CORDONED_ANNOTATION_KEY)
    {
        return Ok(());
    }
    // The annotation tells consolidation the cordon is this policy's: the
    // node's pods wait for an operator, so it is not drained for savings.
    let patch = serde_json::json!({
        "metadata": {"annotations": {INTERRUPTION_CORDONED_ANNOTATION_KEY: kind.as_str()}},
        "spec": {"unschedulable": true},
    });
    match Api::<Node>::all(client.clone())
        .patch(
            &node.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => {
            tracing::info!(node = %node.name_any(), "cordoned on an interruption message");
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// The instances some parsed messages are about.
fn instances_of<'a>(parsed: impl IntoIterator<Item = &'a Parsed>) -> HashSet<String> {
    parsed
        .into_iter()
        .filter_map(|p| match p {
            Parsed::Known(event) => Some(event.instance_ids()),
            _ => None,
        })
        .flatten()
        .cloned()
        .collect()
}

fn jittered(delay: Duration) -> Duration {
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let share = (random % 1000) as f64 / 2000.0;
    delay.mul_f64(1.0 - share)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forced_kinds_ignore_the_pool_and_the_others_follow_it() {
        let cordon = std::collections::BTreeMap::from([
            (
                policy::SCHEDULED_CHANGE_ANNOTATION_KEY.to_string(),
                "Cordon".to_string(),
            ),
            (
                policy::REBALANCE_ANNOTATION_KEY.to_string(),
                "Drain".to_string(),
            ),
        ]);
        assert_eq!(
            action_for(Kind::SpotInterrupted, Some(&cordon)),
            Action::Forceful
        );
        assert_eq!(
            action_for(Kind::InstanceStopped, Some(&cordon)),
            Action::Drain
        );
        assert_eq!(action_for(Kind::InstanceTerminated, None), Action::Drain);
        assert_eq!(
            action_for(Kind::CapacityReservationInterrupted, None),
            Action::Drain
        );
        assert_eq!(action_for(Kind::ScheduledChange, None), Action::Drain);
        assert_eq!(
            action_for(Kind::ScheduledChange, Some(&cordon)),
            Action::Cordon
        );
        assert_eq!(
            action_for(Kind::RebalanceRecommendation, None),
            Action::Ignore
        );
        assert_eq!(
            action_for(Kind::RebalanceRecommendation, Some(&cordon)),
            Action::Drain
        );
        // Polled statuses: failed checks are forced, events follow the
        // scheduled-change policy.
        assert_eq!(
            action_for(Kind::SystemStatus, Some(&cordon)),
            Action::Forceful
        );
        assert_eq!(action_for(Kind::InstanceStatus, None), Action::Forceful);
        assert_eq!(action_for(Kind::EventStatus, None), Action::Drain);
        assert_eq!(action_for(Kind::EventStatus, Some(&cordon)), Action::Cordon);
    }

    #[test]
    fn jitter_stays_within_half_the_delay() {
        for _ in 0..100 {
            let d = jittered(Duration::from_secs(8));
            assert!(
                d >= Duration::from_secs(4) && d <= Duration::from_secs(8),
                "{d:?}"
            );
        }
    }
}
