//! A round's decision, made from one snapshot of the cluster state: which
//! pods are pending and where the scheduler puts them. A round plans when
//! its batch closes, or uses the plan made ahead while the batch was still
//! open ([`Ahead`]) — kept only while the cluster state and the instance
//! types read the same as when that plan began ([`Stamp`]), so it is the
//! plan the round would have made, from a snapshot taken a little earlier.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use tokio::task::JoinHandle;

use crate::apis::NodePool;
use crate::aws::instance_types::InstanceTypeProvider;
use crate::cluster::pods::is_provisionable;
use crate::cluster::{ClusterState, ConvertedPods, InputError, cluster_input, pool_specs};
use crate::scheduling::{Scheduler, SchedulerOptions, SchedulingResult};

/// What a plan was made from: equal stamps mean nothing a plan reads
/// changed in between (only time passed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    state: u64,
    instance_types: u64,
}

/// One round's decision.
pub(super) struct Plan {
    /// Pods kube-scheduler gave up on and nothing is nominated for.
    pub pending: Vec<Arc<Pod>>,
    /// When kube-scheduler marked each of them unschedulable (Unix
    /// seconds), where it says; read while the pods are at hand, for the
    /// round's metrics.
    pub unschedulable_since: Vec<i64>,
    /// The NodePools the solve saw.
    pub pools: Vec<Arc<NodePool>>,
    /// The solve; `None` when nothing is pending.
    pub solved: Option<Solved>,
}

/// A solve and what it took.
pub(super) struct Solved {
    pub result: SchedulingResult,
    /// Objects left out of the scheduler's input.
    pub problems: Vec<InputError>,
    /// Reading the snapshot into the scheduler's input.
    pub prepare: Duration,
    pub solve: Duration,
}

/// Makes plans; shared with the blocking threads they are made on.
pub(super) struct Planner {
    pub state: Arc<ClusterState>,
    pub instance_types: Arc<InstanceTypeProvider>,
    pub options: SchedulerOptions,
    /// Provisionable pods converted as they arrive, so a plan copies them
    /// rather than converting them all at its start.
    pub converted: Arc<ConvertedPods>,
}

impl Planner {
    /// What a plan made now would be made from.
    pub fn stamp(&self) -> Stamp {
        Stamp {
            state: self.state.change_count(),
            instance_types: self.instance_types.version(),
        }
    }

    /// A plan from the cluster state as it is now. Blocking: it converts
    /// pods, may run extension modules, and solves.
    pub fn plan(&self) -> Plan {
        let started = Instant::now();
        let mut snapshot = self.state.snapshot();
        // Only pods kube-scheduler gave up on are placed; other unbound pods
        // are its to place (nominated ones stay: they count where they go).
        // One pass over the pods: with 10,000 of them, each pass costs milliseconds.
        let mut pending: Vec<Arc<Pod>> = Vec::new();
        let mut unschedulable_since = Vec::new();
        let mut pods = std::mem::take(&mut snapshot.pods);
        pods.retain(|p| {
            if p.spec.as_ref().is_some_and(|s| s.node_name.is_some()) {
                return true;
            }
            let nominated = snapshot.nomination(p).is_some();
            let provisionable = is_provisionable(p);
            if provisionable && !nominated {
                pending.push(p.clone());
                unschedulable_since.extend(unschedulable_since_of(p));
            }
            nominated || provisionable
        });
        snapshot.pods = pods;
        let pools = snapshot.node_pools.clone();
        if pending.is_empty() {
            return Plan {
                pending,
                unschedulable_since,
                pools,
                solved: None,
            };
        }
        let specs = pool_specs(&snapshot, &self.instance_types);
        let cluster = cluster_input(&snapshot, &self.converted, &HashSet::new());
        let prepared = specs.prepare(cluster, self.options.clone());
        let prepare = started.elapsed();
        let result = Scheduler::new(prepared.input).solve();
        let solve = started.elapsed() - prepare;
        Plan {
            pending,
            unschedulable_since,
            pools,
            solved: Some(Solved {
                result,
                problems: prepared.problems,
                prepare,
                solve,
            }),
        }
    }
}

/// When kube-scheduler marked `pod` unschedulable (the `PodScheduled`
/// condition's transition), in Unix seconds.
fn unschedulable_since_of(pod: &Pod) -> Option<i64> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0.as_second())
}

/// The plan being made ahead of the open batch's close, with its stamp.
#[derive(Default)]
pub(super) struct Ahead {
    slot: Mutex<Option<(Stamp, JoinHandle<Plan>)>>,
}

impl Ahead {
    fn slot(&self) -> MutexGuard<'_, Option<(Stamp, JoinHandle<Plan>)>> {
        // A handle and its stamp: consistent even if a holder panicked.
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts planning on a blocking thread, unless a plan of the current
    /// stamp is already made or being made.
    pub fn start(&self, planner: &Arc<Planner>) {
        // Read before the plan's snapshot: a change in between makes the
        // plan look older than it is, never newer.
        let stamp = planner.stamp();
        let mut slot = self.slot();
        if slot.as_ref().is_some_and(|(made, _)| *made == stamp) {
            return;
        }
        let planner = planner.clone();
        *slot = Some((stamp, tokio::task::spawn_blocking(move || planner.plan())));
    }

    /// Forgets any plan made ahead (a new batch begins).
    pub fn clear(&self) {
        self.slot().take();
    }

    /// The plan made ahead, once made, if nothing it read changed since it
    /// began; `None` otherwise (a stale plan is dropped, even unfinished).
    pub async fn take(&self, planner: &Planner) -> Option<Plan> {
        let (stamp, handle) = self.slot().take()?;
        if stamp != planner.stamp() {
            return None;
        }
        handle.await.ok()
    }
}
