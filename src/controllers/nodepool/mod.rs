//! NodePool controllers, one reconcile per pool writing one status patch:
//! `ValidationSucceeded` (runtime validation), `NodeClassReady` (its
//! EC2NodeClass's `Ready`), `Ready` from both, `nodeClassObservedGeneration`,
//! `status.resources` and `status.nodes` (its NodeClaims' capacity and count);
//! and the template hash annotations (`karpenter.sh/nodepool-hash` and its
//! version) on the pool, re-stamped onto its NodeClaims when the hash
//! version changes so an upgrade is not mistaken for drift.

mod hash;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

pub use hash::{NODE_POOL_HASH_VERSION, node_pool_hash, restamped_annotations};

use super::ControllerError;
use super::nodeclaim::patch_annotations;
use crate::apis::conditions::{
    NODE_POOL_NODE_CLASS_READY, NODE_POOL_READY_DEPENDENCIES, NODE_POOL_VALIDATION_SUCCEEDED,
    READY, find_condition, is_condition_true, set_condition,
};
use crate::apis::labels::{
    NODE_POOL_HASH_ANNOTATION_KEY, NODE_POOL_HASH_VERSION_ANNOTATION_KEY, NODE_POOL_LABEL_KEY,
};
use crate::apis::validation::validate_node_pool;
use crate::apis::{ConditionStatus, NodePool};
use crate::cluster::ClusterState;
use crate::scheduling::Resources;

/// What the NodePool controller needs.
pub struct NodePoolContext {
    /// The API server.
    pub client: Client,
    /// The shared cluster view.
    pub state: Arc<ClusterState>,
}

/// Runs the controller until the cluster state's feeds end. Pools are
/// reconciled when they change, when their class changes, and when one of
/// their NodeClaims does (for the counters).
pub async fn run(ctx: Arc<NodePoolContext>) {
    let pools_of_class = {
        let state = ctx.state.clone();
        ctx.state.node_classes.changes().flat_map(move |class| {
            let name = class.name_any();
            futures::stream::iter(
                state
                    .node_pools
                    .all()
                    .into_iter()
                    .filter(move |p| p.spec.template.spec.node_class_ref.name == name),
            )
        })
    };
    let pool_of_claim = {
        let state = ctx.state.clone();
        ctx.state.node_claims.changes().filter_map(move |claim| {
            let pool = claim.labels().get(NODE_POOL_LABEL_KEY).and_then(|name| {
                state
                    .node_pools
                    .store()
                    .get(&kube::runtime::reflector::ObjectRef::new(name))
            });
            std::future::ready(pool)
        })
    };
    let trigger = futures::stream::select_all([
        ctx.state.node_pools.changes().boxed(),
        pools_of_class.boxed(),
        pool_of_claim.boxed(),
    ])
    .map(|pool| Ok::<NodePool, watcher::Error>(NodePool::clone(&pool)));
    Controller::for_stream(trigger, ctx.state.node_pools.store().clone())
        .run(
            |pool, ctx| async move { reconcile(&ctx, &pool).await },
            |pool, error, _| {
                if error.is_conflict() {
                    tracing::debug!(nodepool = %pool.name_any(), %error, "NodePool changed while reconciling; retrying");
                } else {
                    tracing::warn!(nodepool = %pool.name_any(), %error, "NodePool reconcile failed; retrying");
                }
                Action::requeue(error.retry_after(Duration::from_secs(10)))
            },
            ctx,
        )
        .for_each(|_| async {})
        .await;
}

/// One pass over a NodePool.
pub async fn reconcile(ctx: &NodePoolContext, pool: &NodePool) -> Result<Action, ControllerError> {
    if pool.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let api: Api<NodePool> = Api::all(ctx.client.clone());
    let name = pool.name_any();
    let hash = node_pool_hash(pool);
    let mut version = pool.metadata.resource_version.clone();
    let stamped_version = pool
        .annotations()
        .get(NODE_POOL_HASH_VERSION_ANNOTATION_KEY)
        .cloned();
    if pool.annotations().get(NODE_POOL_HASH_ANNOTATION_KEY) != Some(&hash)
        || stamped_version.as_deref() != Some(NODE_POOL_HASH_VERSION)
    {
        if stamped_version.as_deref() != Some(NODE_POOL_HASH_VERSION) {
            restamp_node_claims(ctx, &name, &hash).await?;
        }
        let patch = serde_json::json!({"metadata": {"annotations": {
            NODE_POOL_HASH_ANNOTATION_KEY: hash,
            NODE_POOL_HASH_VERSION_ANNOTATION_KEY: NODE_POOL_HASH_VERSION,
        }}});
        let written = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        version = written.metadata.resource_version;
    }

    let mut status = pool.status.clone().unwrap_or_default();
    let generation = pool.metadata.generation;
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let mut errors = validate_node_pool(&pool.spec).err().unwrap_or_default();
    if let Err(error) = crate::apis::validation::priority_migration(pool.annotations()) {
        errors.push(error);
    }
    if let Err(error) = crate::apis::validation::price_limit(pool.annotations()) {
        errors.push(error);
    }
    errors.extend(crate::controllers::interruption::policy::policies(pool.annotations()).1);
    let validated = if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    };
    match validated {
        Ok(()) => set_condition(
            conditions,
            NODE_POOL_VALIDATION_SUCCEEDED,
            ConditionStatus::True,
            "ValidationSucceeded",
            "",
            generation,
        ),
        Err(errors) => {
            let message: Vec<String> = errors.iter().map(ToString::to_string).collect();
            set_condition(
                conditions,
                NODE_POOL_VALIDATION_SUCCEEDED,
                ConditionStatus::False,
                "ValidationFailed",
                &message.join("; "),
                generation,
            )
        }
    };
    let class_name = &pool.spec.template.spec.node_class_ref.name;
    let class = ctx
        .state
        .node_classes
        .store()
        .get(&kube::runtime::reflector::ObjectRef::new(class_name));
    let (class_status, reason, message) = match &class {
        None => (
            ConditionStatus::False,
            "NodeClassNotFound",
            format!("EC2NodeClass {class_name:?} not found"),
        ),
        Some(class) if class.metadata.deletion_timestamp.is_some() => (
            ConditionStatus::False,
            "NodeClassTerminating",
            format!("EC2NodeClass {class_name:?} is being deleted"),
        ),
        Some(class) => {
            let ready = class
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_deref())
                .and_then(|c| find_condition(c, READY).cloned());
            match ready {
                Some(c) if c.is_true() => (ConditionStatus::True, "NodeClassReady", String::new()),
                Some(c) => (
                    ConditionStatus::False,
                    "NodeClassNotReady",
                    format!(
                        "EC2NodeClass {class_name:?} is not ready: {}",
                        c.message.unwrap_or_default()
                    ),
                ),
                None => (
                    ConditionStatus::Unknown,
                    "NodeClassReadinessUnknown",
                    format!("EC2NodeClass {class_name:?} has no Ready condition yet"),
                ),
            }
        }
    };
    set_condition(
        conditions,
        NODE_POOL_NODE_CLASS_READY,
        class_status,
        reason,
        &message,
        generation,
    );
    let missing = NODE_POOL_READY_DEPENDENCIES
        .iter()
        .find(|type_| !is_condition_true(conditions, type_));
    match missing {
        None => set_condition(
            conditions,
            READY,
            ConditionStatus::True,
            "Ready",
            "",
            generation,
        ),
        Some(type_) => {
            let why = find_condition(conditions, type_)
                .and_then(|c| c.message.clone())
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| format!("{type_} is not True"));
            set_condition(
                conditions,
                READY,
                ConditionStatus::False,
                "NotReady",
                &why,
                generation,
            )
        }
    };
    status.node_class_observed_generation = class.as_ref().and_then(|c| c.metadata.generation);
    let (count, resources) = counted(&ctx.state, &name);
    record_usage(&name, &resources, pool.spec.limits.as_ref());
    status.nodes = Some(count);
    status.resources = Some(resources);

    if pool.status.as_ref() != Some(&status) {
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": version},
            "status": status,
        });
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(Action::requeue(Duration::from_secs(300)))
}

/// How many NodeClaims the pool has and their summed capacity (a registered
/// claim's node capacity when known, else the claim's).
fn counted(state: &ClusterState, pool: &str) -> (i64, BTreeMap<String, Quantity>) {
    let mut total = Resources::zero();
    let mut count = 0;
    for claim in state.node_claims.all() {
        if claim.labels().get(NODE_POOL_LABEL_KEY).map(String::as_str) != Some(pool) {
            continue;
        }
        count += 1;
        let capacity = claim.status.as_ref().and_then(|s| s.capacity.as_ref());
        if let Ok(resources) = Resources::parse(
            capacity
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.as_str(), v.0.as_str())),
        ) {
            total.add(&resources);
        }
    }
    let resources = total
        .to_quantities()
        .into_iter()
        .map(|(k, v)| (k, Quantity(v)))
        .collect();
    (count, resources)
}

/// Stamps the pool's new hash onto its NodeClaims that carry a hash of
/// another version, so a hash-version change never reads as drift.
async fn restamp_node_claims(
    ctx: &NodePoolContext,
    pool: &str,
    hash: &str,
) -> Result<(), ControllerError> {
    for claim in ctx.state.node_claims.all() {
        let of_pool = claim.labels().get(NODE_POOL_LABEL_KEY).map(String::as_str) == Some(pool);
        let annotations = restamped_annotations(&claim, hash);
        if !of_pool || annotations.is_empty() {
            continue;
        }
        patch_annotations(&ctx.client, &claim.name_any(), &annotations).await?;
    }
    Ok(())
}

/// `karpenter_nodepools_usage` and `karpenter_nodepools_limit` for a pool.
fn record_usage(
    pool: &str,
    usage: &BTreeMap<String, Quantity>,
    limits: Option<&BTreeMap<String, Quantity>>,
) {
    let m = crate::metrics::metrics();
    for (family, list) in [
        (&m.nodepools_usage, Some(usage)),
        (&m.nodepools_limit, limits),
    ] {
        for (resource, quantity) in list.into_iter().flatten() {
            let Ok(amount) = Resources::parse([(resource.as_str(), quantity.0.as_str())]) else {
                continue;
            };
            let value = if resource == "cpu" {
                amount.get(resource) as f64 / 1000.0
            } else {
                amount.get(resource) as f64
            };
            family
                .get_or_create(&crate::metrics::labels(&[
                    ("resource_type", resource),
                    ("nodepool", pool),
                ]))
                .set(value);
        }
    }
}
