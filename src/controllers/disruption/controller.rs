//! The disruption controller (Karpenter's `disruption`): every ten seconds,
//! one pass of the methods over the cluster state with the marks the
//! NodeClaims' conditions hold; when the command found deletes nodes (empty
//! nodes, drifted or underutilized nodes whose pods fit elsewhere), it is
//! computed again after Karpenter's 15-second wait and, if it still holds,
//! the nodes are marked for deletion and their NodeClaims deleted — the
//! termination controller taints and drains them. Commands that need a
//! replacement NodeClaim are not acted on yet (`simulate --disruption`
//! shows them).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::methods::Command;
use super::plan::{MarkSource, PlanOptions, plan};
use crate::aws::instance_types::InstanceTypeProvider;
use crate::cluster::ClusterState;
use crate::controllers::ControllerError;
use crate::controllers::nodeclaim::{delete_claim, record_disrupted};
use crate::scheduling::SchedulerOptions;

/// How often a pass runs (Karpenter: 10 s).
pub const POLL: Duration = Duration::from_secs(10);
/// How long a command waits before it is checked again and acted on
/// (Karpenter's consolidation validation: 15 s).
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
}

impl DisruptionController {
    /// Runs passes until the process ends.
    pub async fn run(self: Arc<Self>) {
        self.state.synced().await;
        loop {
            match self.pass().await {
                Ok(deleted) if !deleted.is_empty() => {
                    tracing::info!(nodeclaims = ?deleted, "disrupting nodes");
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "disruption pass failed; retrying"),
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// One pass: the NodeClaims deleted (none when no delete command holds).
    pub async fn pass(&self) -> Result<Vec<String>, ControllerError> {
        let Some(first) = self.decide().await? else {
            return Ok(Vec::new());
        };
        tokio::time::sleep(self.validation_wait).await;
        let Some(again) = self.decide().await? else {
            return Ok(Vec::new());
        };
        // Acted on only where the command still holds: the same method,
        // and of its nodes only those the new command also takes.
        if again.method != first.method {
            return Ok(Vec::new());
        }
        let still: BTreeSet<&str> = again.candidates.iter().map(|c| c.name.as_str()).collect();
        let mut deleted = Vec::new();
        for candidate in first
            .candidates
            .iter()
            .filter(|c| still.contains(c.name.as_str()))
        {
            let claim = &candidate.node_claim;
            self.state.mark_for_deletion(&candidate.name);
            match delete_claim(&self.client, claim).await {
                Ok(true) => {
                    record_disrupted(claim, &first.method.reason().to_lowercase());
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

    /// The first command of a pass over the cluster as it stands, if it
    /// is a delete.
    async fn decide(&self) -> Result<Option<Command>, ControllerError> {
        let snapshot = self.state.snapshot();
        let provider = self.instance_types.clone();
        let options = PlanOptions {
            at: Timestamp::now(),
            spot_to_spot: false,
            scheduler: self.scheduler.clone(),
            marks: MarkSource::Conditions,
            max_passes: Some(1),
        };
        let found =
            tokio::task::spawn_blocking(move || plan(&snapshot, &provider, &options)).await?;
        let found = match found {
            Ok(found) => found,
            Err(problem) => {
                // The provisioner reports unusable objects; the pass waits.
                tracing::debug!(%problem, "disruption pass skipped");
                return Ok(None);
            }
        };
        Ok(found
            .decisions
            .into_iter()
            .next()
            .map(|d| d.command)
            .filter(|c| c.replacements.is_empty()))
    }
}
