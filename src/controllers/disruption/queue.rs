//! Carrying out a replace command (Karpenter's orchestration queue). Each
//! command in flight is in the [`Queue`], so passes and the stale-taint
//! cleanup know its nodes. The
//! candidates are marked for deletion and tainted
//! `karpenter.sh/disrupted:NoSchedule`, so no new pod lands on them, and the
//! replacement NodeClaims are created. Only once every replacement is
//! initialized are the candidates' NodeClaims deleted — the termination
//! controller drains them — and the replacements stay held (no disruption
//! candidate) while the candidates' pods move over. A replacement that is
//! deleted, or not initialized within [`REPLACEMENT_TIMEOUT`], rolls the
//! command back: the taint comes off and the candidates stay; a
//! replacement that did come up is left to consolidation like any node.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};

use super::types::{Candidate, Command, Method};
use crate::apis::conditions::{NODE_CLAIM_INITIALIZED, is_condition_true};
use crate::apis::{NodeClaim, NodePool};
use crate::cluster::ClusterState;
use crate::controllers::ControllerError;
use crate::controllers::node::with_disrupted_taint;
use crate::controllers::nodeclaim::{delete_claim, nodes_of, record_disrupted};
use crate::controllers::provisioning::{count_created, generate_name, node_claim_object};
use crate::metrics::{labels, metrics};

/// How long replacements may take to initialize before the command is
/// rolled back (Karpenter's queue: at least 10 minutes).
pub const REPLACEMENT_TIMEOUT: Duration = Duration::from_secs(600);
/// How often a command in flight looks at its replacements.
const POLL: Duration = Duration::from_secs(1);
/// How long a replacement stays held after its candidates are gone, for
/// their pods to bind.
const HOLD_AFTER: Duration = Duration::from_secs(30);
/// The longest a replacement is held while its candidates drain (a drain
/// that takes longer leaves it to the usual marks).
const HOLD_MAX: Duration = Duration::from_secs(3600);

/// The replace commands in flight, by id: what Karpenter's orchestration
/// queue holds. A node of a command here is not a candidate and keeps its
/// `karpenter.sh/disrupted` taint.
#[derive(Default)]
pub struct Queue {
    next: AtomicU64,
    commands: Mutex<BTreeMap<u64, Vec<String>>>,
}

impl Queue {
    /// Adds a command's candidates (Node names); its id.
    pub fn add(&self, started: &Started) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let nodes = started.candidates.iter().map(|c| c.name.clone()).collect();
        self.lock().insert(id, nodes);
        id
    }

    /// Takes a command out once it is done or rolled back.
    pub fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Whether a command in flight disrupts Node `name`.
    pub fn has(&self, name: &str) -> bool {
        self.lock()
            .values()
            .any(|nodes| nodes.iter().any(|n| n == name))
    }

    /// How many commands are in flight.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no command is in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Vec<String>>> {
        self.commands.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A replace command whose replacements were created.
pub struct Started {
    /// The method that decided it.
    pub method: Method,
    /// The nodes that go once the replacements are initialized.
    pub candidates: Vec<Candidate>,
    /// The replacement NodeClaims' names.
    pub replacements: Vec<String>,
}

/// Marks and taints `command`'s candidates and creates its replacements
/// (NodeClaims of `pools`, created with `client`). If a replacement cannot
/// be created, the candidates are released and the error returned.
pub async fn start(
    client: &Client,
    state: &ClusterState,
    pools: &[Arc<NodePool>],
    command: Command,
) -> Result<Started, ControllerError> {
    for candidate in &command.candidates {
        state.mark_for_deletion(&candidate.name);
    }
    let created = async {
        for candidate in &command.candidates {
            set_disrupted_taint(client, &candidate.name, true).await?;
        }
        create_replacements(client, state, pools, &command).await
    }
    .await;
    match created {
        Ok(replacements) => Ok(Started {
            method: command.method,
            candidates: command.candidates,
            replacements,
        }),
        Err(error) => {
            release(client, state, &command.candidates).await;
            Err(error)
        }
    }
}

/// Waits for `started`'s replacements to initialize, then deletes its
/// candidates' NodeClaims; rolls back if a replacement is deleted or
/// `timeout` passes. Whether the candidates were deleted (then
/// [`hold_while_draining`] keeps the replacements for their pods).
pub async fn finish(
    client: &Client,
    state: &ClusterState,
    started: &Started,
    timeout: Duration,
) -> bool {
    let deadline = Instant::now() + timeout;
    let ready = loop {
        match replacements_ready(state, &started.replacements) {
            Some(true) => break true,
            Some(false) if Instant::now() < deadline => tokio::time::sleep(POLL).await,
            _ => break false,
        }
    };
    if !ready {
        tracing::warn!(
            replacements = ?started.replacements,
            candidates = ?started.candidates.iter().map(|c| &c.name).collect::<Vec<_>>(),
            "a replacement did not initialize; the disruption is rolled back"
        );
        metrics()
            .disruption_queue_failures
            .get_or_create(&labels(&[
                ("decision", "replace"),
                ("reason", started.method.metric_reason()),
                ("consolidation_type", started.method.consolidation_type()),
            ]))
            .inc();
        release(client, state, &started.candidates).await;
        return false;
    }
    let mut deleted = false;
    for candidate in &started.candidates {
        // A refused delete is tried again until the command's deadline, as
        // Karpenter's queue requeues a command: its replacement is up.
        loop {
            match delete_claim(client, &candidate.node_claim).await {
                Ok(true) => {
                    record_disrupted(&candidate.node_claim, started.method.metric_reason());
                    deleted = true;
                }
                Ok(false) => {}
                Err(error) if Instant::now() < deadline => {
                    tracing::warn!(%error, nodeclaim = %candidate.node_claim.name_any(), "cannot delete a disrupted NodeClaim; retrying");
                    tokio::time::sleep(POLL).await;
                    continue;
                }
                Err(error) => {
                    tracing::warn!(%error, nodeclaim = %candidate.node_claim.name_any(), "cannot delete a disrupted NodeClaim; it stays tainted for the next pass");
                }
            }
            break;
        }
    }
    deleted
}

/// Keeps the replacements out of disruption while any candidate's Node is
/// still there (at most [`HOLD_MAX`]), and [`HOLD_AFTER`] longer.
pub async fn hold_while_draining(state: &ClusterState, started: &Started) {
    let deadline = Instant::now() + HOLD_MAX;
    loop {
        let hold = |period| {
            for name in &started.replacements {
                state.nominate_node(name, period);
                if let Some(claim) = state.node_claims.store().get(&ObjectRef::new(name)) {
                    for node in nodes_of(state, &claim) {
                        state.nominate_node(&node.name_any(), period);
                    }
                }
            }
        };
        let draining = started
            .candidates
            .iter()
            .any(|c| state.nodes.store().get(&ObjectRef::new(&c.name)).is_some());
        if !draining || Instant::now() >= deadline {
            hold(HOLD_AFTER);
            return;
        }
        hold(POLL * 10);
        tokio::time::sleep(POLL * 5).await;
    }
}

/// Whether every replacement is initialized (`Some(true)`), still coming
/// (`Some(false)`), or gone or being deleted (`None`). A replacement the
/// watch has not shown yet is still coming.
fn replacements_ready(state: &ClusterState, replacements: &[String]) -> Option<bool> {
    let mut all = true;
    for name in replacements {
        let Some(claim) = state.node_claims.store().get(&ObjectRef::new(name)) else {
            // Not watched yet, or deleted.
            if state.is_created_unwatched(name) {
                all = false;
                continue;
            }
            return None;
        };
        if claim.metadata.deletion_timestamp.is_some() {
            return None;
        }
        let conditions = claim
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default();
        all &= is_condition_true(conditions, NODE_CLAIM_INITIALIZED);
    }
    Some(all)
}

/// Creates `command`'s replacements; their names.
async fn create_replacements(
    client: &Client,
    state: &ClusterState,
    pools: &[Arc<NodePool>],
    command: &Command,
) -> Result<Vec<String>, ControllerError> {
    let api: Api<NodeClaim> = Api::all(client.clone());
    let mut names = Vec::new();
    for planned in &command.replacements {
        let Some(pool) = pools.iter().find(|p| p.name_any() == planned.node_pool) else {
            return Err(ControllerError::Disruption(format!(
                "NodePool {:?} of a replacement is gone",
                planned.node_pool
            )));
        };
        let object = node_claim_object(pool, planned, generate_name(&planned.node_pool));
        let created = api.create(&PostParams::default(), &object).await?;
        let name = created.name_any();
        state.record_created(created);
        count_created(&planned.node_pool, command.method.metric_reason());
        tracing::info!(
            nodeclaim = %name,
            nodepool = %planned.node_pool,
            instance_type = %planned.instance_type,
            method = command.method.as_str(),
            "created replacement NodeClaim"
        );
        names.push(name);
    }
    Ok(names)
}

/// Takes a command back: the candidates lose the taint and the mark.
async fn release(client: &Client, state: &ClusterState, candidates: &[Candidate]) {
    for candidate in candidates {
        if let Err(error) = set_disrupted_taint(client, &candidate.name, false).await {
            tracing::warn!(%error, node = %candidate.name, "cannot remove the disrupted taint");
        }
        state.unmark_for_deletion(&candidate.name);
    }
}

/// Adds or removes `karpenter.sh/disrupted:NoSchedule` on Node `name` (a
/// Node that is gone needs neither).
pub async fn set_disrupted_taint(
    client: &Client,
    name: &str,
    on: bool,
) -> Result<(), ControllerError> {
    let api: Api<Node> = Api::all(client.clone());
    for _ in 0..3 {
        let Some(node) = api.get_opt(name).await? else {
            return Ok(());
        };
        let current: Vec<Taint> = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        let Some(taints) = with_disrupted_taint(&current, on) else {
            return Ok(());
        };
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": node.metadata.resource_version},
            "spec": {"taints": taints},
        });
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
            Err(error) => return Err(error.into()),
        }
    }
    Err(ControllerError::Disruption(format!(
        "Node {name:?} kept changing while its disrupted taint was set"
    )))
}
