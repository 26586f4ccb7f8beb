//! The provisioning controller: batches pods kube-scheduler could not place,
//! schedules them against the cluster state (existing nodes, in-flight
//! NodeClaims, then new NodeClaims from NodePools by weight, within their
//! limits), creates the NodeClaims the solve asks for and nominates the pods
//! to them, so the next round does not provision for them again. Pods it
//! cannot place get one `FailedScheduling` event per round with the
//! scheduler's reason.
//!
//! While a batch is open and its pods pause for half the idle window, the
//! round is planned ahead (see `plan.rs`); when the batch closes with nothing
//! changed since, that plan is the round's, so a large batch does not wait
//! for its solve after the window.

mod batcher;
mod node_claims;
mod plan;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::events::{Event, EventType};
use kube::{Client, Resource, ResourceExt};

pub use batcher::{BatchWindows, Batcher};
pub use node_claims::{count_created, generate_name, node_claim_object};

use super::ControllerError;
use crate::apis::{NodeClaim, NodePool};
use crate::aws::instance_types::InstanceTypeProvider;
use crate::cluster::pods::is_provisionable;
use crate::cluster::{ClusterState, pod_key};
use crate::controllers::recorder::Recorder;
use crate::metrics::{labels, metrics};
use crate::scheduling::{NewNodeClaim, PodKey, SchedulerOptions, SchedulingResult};
use plan::{Ahead, Plan, Planner};

/// NodeClaims created at once.
const CREATE_CONCURRENCY: usize = 16;

/// Longest event note the API server accepts.
const MAX_NOTE_BYTES: usize = 1024;

/// How provisioning behaves.
#[derive(Debug, Clone)]
pub struct ProvisioningSettings {
    /// The batch windows.
    pub batch: BatchWindows,
    /// Scheduler options (preference policy, min-values policy, options kept per claim).
    pub scheduler: SchedulerOptions,
    /// How often pods that are still provisionable trigger a round without
    /// changing (Karpenter requeues each such pod every 10 seconds), so a
    /// pod a round could not place is tried again once, say, its NodePool
    /// becomes ready.
    pub requeue: Duration,
}

impl Default for ProvisioningSettings {
    fn default() -> Self {
        ProvisioningSettings {
            batch: BatchWindows::default(),
            scheduler: SchedulerOptions::default(),
            requeue: Duration::from_secs(10),
        }
    }
}

impl ProvisioningSettings {
    /// How long pods stay nominated to a NodeClaim: twice the longest batch,
    /// at least 20 seconds — long enough for the claim to launch and show
    /// its capacity in the cluster state.
    pub fn nomination_period(&self) -> Duration {
        (self.batch.max * 2).max(Duration::from_secs(20))
    }
}

/// What one provisioning round did.
#[derive(Debug, Default, Clone)]
pub struct Round {
    /// Pods the round tried to place.
    pub pending: usize,
    /// NodeClaims created (names).
    pub created: Vec<String>,
    /// Pods placed on existing or in-flight nodes.
    pub placed_on_existing: usize,
    /// Pods that could not be placed, with the reason.
    pub unschedulable: Vec<(PodKey, String)>,
    /// How long reading the cluster state into the scheduler's input took.
    pub prepare: Duration,
    /// How long the solve took.
    pub solve: Duration,
    /// Whether the round's plan was made ahead, while its batch was open.
    pub planned_ahead: bool,
}

/// The provisioning controller.
pub struct Provisioner {
    client: Client,
    state: Arc<ClusterState>,
    settings: ProvisioningSettings,
    recorder: Recorder,
    batcher: Batcher,
    planner: Arc<Planner>,
    ahead: Ahead,
}

impl Provisioner {
    /// A provisioner acting on `state` through `client`.
    pub fn new(
        client: Client,
        state: Arc<ClusterState>,
        instance_types: Arc<InstanceTypeProvider>,
        settings: ProvisioningSettings,
        recorder: Recorder,
    ) -> Self {
        Provisioner {
            client,
            planner: Arc::new(Planner {
                state: state.clone(),
                instance_types,
                options: settings.scheduler.clone(),
                converted: Arc::default(),
            }),
            state,
            batcher: Batcher::new(settings.batch),
            settings,
            recorder,
            ahead: Ahead::default(),
        }
    }

    /// Runs until the pod feed ends: every provisionable pod change is
    /// converted for the scheduler and triggers the batcher, and so do
    /// every [`ProvisioningSettings::requeue`] and every NodePool or
    /// EC2NodeClass change while a pod stays provisionable; every closed batch runs one round, planned ahead
    /// when its pods pause for half the idle window.
    pub async fn run(self: Arc<Self>) {
        let feeder = {
            let this = self.clone();
            async move {
                let mut changes = std::pin::pin!(this.state.pods.changes());
                while let Some(pod) = changes.next().await {
                    if is_provisionable(&pod) {
                        this.planner.converted.refresh(&pod);
                        this.batcher.trigger();
                    }
                }
            }
        };
        // A NodePool or EC2NodeClass that changes (becomes ready, is
        // widened) may place pods a round just left pending.
        let templates = async {
            self.state.synced().await;
            let pools = self.state.node_pools.changes().map(|_| ());
            let classes = self.state.node_classes.changes().map(|_| ());
            let mut changes = std::pin::pin!(futures::stream::select(pools, classes));
            while changes.next().await.is_some() {
                if self.state.pods.all().iter().any(|p| is_provisionable(p)) {
                    self.batcher.trigger();
                }
            }
        };
        let requeue = async {
            self.state.synced().await;
            let mut every = tokio::time::interval(self.settings.requeue);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            every.tick().await;
            loop {
                every.tick().await;
                if self.state.pods.all().iter().any(|p| is_provisionable(p)) {
                    self.batcher.trigger();
                }
            }
        };
        let rounds = async {
            self.state.synced().await;
            // Pods already pending when the controller starts.
            if self.state.pods.all().iter().any(|p| is_provisionable(p)) {
                self.batcher.trigger();
            }
            loop {
                self.ahead.clear();
                self.batcher.wait(|| self.plan_ahead()).await;
                match self.provision().await {
                    Ok(round) if round.pending > 0 => tracing::info!(
                        pending = round.pending,
                        created = round.created.len(),
                        placed_on_existing = round.placed_on_existing,
                        unschedulable = round.unschedulable.len(),
                        prepare_ms = round.prepare.as_millis() as u64,
                        solve_ms = round.solve.as_millis() as u64,
                        planned_ahead = round.planned_ahead,
                        "provisioned"
                    ),
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(%error, "provisioning round failed; retrying");
                        self.batcher.trigger();
                    }
                }
            }
        };
        tokio::select! {
            _ = feeder => {}
            _ = templates => {}
            _ = requeue => {}
            _ = rounds => {}
        }
    }

    /// Starts planning the next round now, on a blocking thread; the round
    /// uses that plan if nothing it read changes before the round starts.
    /// [`Provisioner::run`] calls it when pods pause for half the idle window.
    pub fn plan_ahead(&self) {
        self.ahead.start(&self.planner);
    }

    /// One provisioning round on the cluster state as it is now (or as it
    /// was when the plan made ahead began, if nothing changed since).
    pub async fn provision(&self) -> Result<Round, ControllerError> {
        let (plan, planned_ahead) = match self.ahead.take(&self.planner).await {
            Some(plan) => (plan, true),
            None => {
                let planner = self.planner.clone();
                (
                    tokio::task::spawn_blocking(move || planner.plan()).await?,
                    false,
                )
            }
        };
        // Pods converted since the last round that it did not read (another
        // scheduler placed them, or they are gone).
        self.planner.converted.sweep();
        let Plan {
            pending,
            unschedulable_since,
            pools,
            solved: Some(solved),
        } = plan
        else {
            return Ok(Round::default());
        };
        for problem in &solved.problems {
            tracing::warn!(%problem, "left out of provisioning");
        }
        let result = solved.result;
        let created = self.create_node_claims(&pools, &result).await;
        record_round(
            &pending,
            &unschedulable_since,
            &result,
            solved.solve,
            solved.problems.len(),
        );
        self.report_unschedulable(&PendingPods::of(&pending), &result)
            .await;
        Ok(Round {
            pending: pending.len(),
            created,
            placed_on_existing: result.existing_node_placements.len(),
            unschedulable: result
                .errors
                .iter()
                .map(|e| (e.pod.clone(), e.reason.clone()))
                .collect(),
            prepare: solved.prepare,
            solve: solved.solve,
            planned_ahead,
        })
    }

    /// Creates the solve's NodeClaims and nominates their pods; returns the
    /// names created. A claim that cannot be created leaves its pods
    /// pending for the next round.
    async fn create_node_claims(
        &self,
        pools: &[Arc<NodePool>],
        result: &SchedulingResult,
    ) -> Vec<String> {
        let period = self.settings.nomination_period();
        for placement in &result.existing_node_placements {
            self.state.nominate(&placement.pod, &placement.node, period);
        }
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let objects: Vec<(usize, NodeClaim)> = result
            .new_node_claims
            .iter()
            .enumerate()
            .filter_map(|(i, planned)| {
                let pool = pools.iter().find(|p| p.name_any() == planned.node_pool)?;
                let name = generate_name(&planned.node_pool);
                Some((i, node_claim_object(pool, planned, name)))
            })
            .collect();
        let done: Vec<(usize, Result<NodeClaim, kube::Error>)> = futures::stream::iter(objects)
            .map(|(i, object)| {
                let api = api.clone();
                async move { (i, api.create(&PostParams::default(), &object).await) }
            })
            .buffer_unordered(CREATE_CONCURRENCY)
            .collect()
            .await;
        let done: Vec<(&NewNodeClaim, NodeClaim)> = done
            .into_iter()
            .filter_map(|(i, created)| {
                let planned = &result.new_node_claims[i];
                match created {
                    Ok(created) => Some((planned, created)),
                    Err(error) => {
                        tracing::warn!(%error, nodepool = %planned.node_pool, "cannot create NodeClaim");
                        None
                    }
                }
            })
            .collect();
        let mut names = Vec::new();
        for (planned, created) in done {
            let name = created.name_any();
            self.state.nominate_all(&planned.pods, &name, period);
            self.state.record_created(created);
            count_created(&planned.node_pool, "provisioning");
            tracing::info!(
                nodeclaim = %name,
                nodepool = %planned.node_pool,
                instance_type = %planned.instance_type,
                options = planned.instance_type_options.len(),
                pods = planned.pods.len(),
                "created NodeClaim"
            );
            names.push(name);
        }
        names
    }

    /// One `FailedScheduling` Warning per pod the solve could not place.
    async fn report_unschedulable(&self, pending: &PendingPods<'_>, result: &SchedulingResult) {
        for error in &result.errors {
            let Some(pod) = pending.get(&error.pod) else {
                continue;
            };
            let event = Event {
                type_: EventType::Warning,
                reason: "FailedScheduling".to_string(),
                note: Some(super::truncate(
                    format!("Failed to schedule pod, {}", error.reason),
                    MAX_NOTE_BYTES,
                )),
                action: "Provisioning".to_string(),
                secondary: None,
            };
            if let Err(error) = self.recorder.publish(&event, &pod.object_ref(&())).await {
                tracing::warn!(%error, "cannot publish event");
            }
        }
    }
}

/// The round's pending pods by key: a solve names pods by [`PodKey`], and
/// events about a pod need the pod.
struct PendingPods<'a>(HashMap<PodKey, &'a Arc<Pod>>);

impl<'a> PendingPods<'a> {
    fn of(pending: &'a [Arc<Pod>]) -> Self {
        PendingPods(pending.iter().map(|pod| (pod_key(pod), pod)).collect())
    }

    /// The pending pod of `key`.
    fn get(&self, key: &PodKey) -> Option<&'a Arc<Pod>> {
        self.0.get(key).copied()
    }
}

/// Scheduler metrics for one round: solve time, queue depth, unplaced and
/// ignored pods, and for each pending pod the time since kube-scheduler
/// marked it unschedulable (`unschedulable_since`, Unix seconds).
fn record_round(
    pending: &[Arc<Pod>],
    unschedulable_since: &[i64],
    result: &SchedulingResult,
    solve: Duration,
    ignored: usize,
) {
    let controller = labels(&[("controller", "provisioner")]);
    let m = metrics();
    m.scheduling_duration
        .get_or_create(&controller)
        .observe(solve.as_secs_f64());
    m.scheduler_queue_depth
        .get_or_create(&controller)
        .set(pending.len() as f64);
    m.scheduler_unschedulable_pods
        .get_or_create(&controller)
        .set(result.errors.len() as f64);
    m.scheduler_ignored_pods
        .get_or_create(&Vec::new())
        .set(ignored as f64);
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let decision_duration = m
        .pods_scheduling_decision_duration
        .get_or_create(&Vec::new());
    for since in unschedulable_since {
        decision_duration.observe((now - since).max(0) as f64);
    }
}
