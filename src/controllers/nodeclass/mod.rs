//! The EC2NodeClass status controller. One pass over a class runs its
//! sub-reconcilers, one file each:
//!
//! - [`subnets`] → `status.subnets`, `SubnetsReady`;
//! - [`security_groups`] → `status.securityGroups`, `SecurityGroupsReady`;
//! - [`capacity_reservations`] → `status.capacityReservations`,
//!   `CapacityReservationsReady`;
//! - [`instance_profile`] → `status.instanceProfile`, `InstanceProfileReady`;
//! - [`placement_group`] → `status.placementGroup`, `PlacementGroupReady`;
//! - [`ami`] → `status.amis`, `AMIsReady`;
//! - [`extensions`] → `ExtensionsReady` (the class's instance filters and
//!   priority scorers, run with the status resolved above);
//! - [`validation`] → `ValidationSucceeded` (dry-run permission checks);
//! - [`readiness`] → `Ready`;
//!
//! and writes all of it in one status patch that carries the stored
//! resourceVersion, so another writer's change is never lost (the pass is
//! retried instead). Conditions of other types are left as they are. A
//! fault worth waiting out (throttling, a server error) leaves a part's
//! status and condition as they were. [`events`] are published when a
//! condition changes.
//!
//! Classes are reconciled when they or their NodePools change, when one of
//! their NodeClaims is deleted, every 5 minutes while `Ready`, and every
//! minute while not (or sooner when a capacity reservation ends or a lookup
//! hit a fault). [`termination`] keeps a finalizer on every class and,
//! when a class is deleted, removes its launch templates and instance
//! profiles once no NodeClaim uses it; [`garbage_collection`] deletes the
//! profiles a live class replaced once nothing names them.

mod ami;
mod capacity_reservations;
mod conditions;
mod events;
mod extensions;
pub mod garbage_collection;
pub mod hash;
mod instance_profile;
pub mod placement_group;
mod readiness;
mod security_groups;
mod subnets;
pub mod termination;
mod validation;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use serde_json::{Map, Value};
use tracing::Instrument;

use super::{Context, ControllerError};
use crate::apis::conditions::{READY, find_condition};
use crate::apis::{Condition, EC2NodeClass, EC2NodeClassStatus};

pub use ami::amis_ready_condition;
pub use capacity_reservations::{EXPIRING_WINDOW, to_status as capacity_reservation_status};
pub use conditions::{RETRY_AFTER_FAULT, Resolved, Stamp};
pub use extensions::extensions_ready;
pub use readiness::dependencies as ready_dependencies;

/// How soon a `Ready` class is looked at again.
pub const READY_REQUEUE: Duration = Duration::from_secs(300);
/// How soon a class that is not `Ready` is looked at again.
pub const NOT_READY_REQUEUE: Duration = Duration::from_secs(60);

/// What one reconcile wrote.
#[derive(Debug, Clone)]
pub struct Reconciled {
    /// Every condition on the class after the write.
    pub conditions: Vec<Condition>,
    /// The status as this pass resolved it (unchanged parts as stored).
    pub status: EC2NodeClassStatus,
    /// When to look at the class again.
    pub requeue_after: Duration,
}

impl Reconciled {
    /// The condition of `type_`, if the class has one.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        find_condition(&self.conditions, type_)
    }

    /// Whether the class is `Ready`.
    pub fn is_ready(&self) -> bool {
        self.condition(READY).is_some_and(Condition::is_true)
    }
}

/// Runs the controller until the cluster state's feeds end. A class is
/// reconciled when it changes, when a NodePool that uses it changes, and
/// when one of its NodeClaims is deleted (a class being deleted waits for
/// its last claim) — all from the shared cluster state's stores.
pub async fn run(context: Arc<Context>) {
    let state = context.state.clone();
    let class_of_pool = state
        .node_pools
        .changes()
        .map(|pool| pool.spec.template.spec.node_class_ref.name.clone());
    // A deleted claim is sent as last seen and is no longer stored.
    let class_of_deleted_claim = {
        let claims = state.node_claims.store().clone();
        state.node_claims.changes().filter_map(move |claim| {
            let gone = claims.get(&ObjectRef::from_obj(claim.as_ref())).is_none();
            std::future::ready(gone.then(|| claim.spec.node_class_ref.name.clone()))
        })
    };
    let classes = state.node_classes.store().clone();
    let referenced = futures::stream::select(class_of_pool, class_of_deleted_claim)
        .filter_map(move |name| std::future::ready(classes.get(&ObjectRef::new(&name))));
    let trigger = futures::stream::select(state.node_classes.changes(), referenced)
        .map(|class| Ok::<EC2NodeClass, watcher::Error>(EC2NodeClass::clone(&class)));
    Controller::for_stream(trigger, state.node_classes.store().clone())
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            match result {
                Ok((class, _)) => tracing::debug!(nodeclass = %class.name, "reconciled"),
                Err(error) => tracing::warn!(%error, "EC2NodeClass reconcile failed"),
            }
        })
        .await;
}

async fn reconcile(
    class: Arc<EC2NodeClass>,
    context: Arc<Context>,
) -> Result<Action, ControllerError> {
    if class.metadata.deletion_timestamp.is_some() {
        return Ok(match termination::finalize(&context, &class).await? {
            termination::Finalized::Waiting(_) => Action::requeue(termination::WAITING_REQUEUE),
            termination::Finalized::Done { .. } | termination::Finalized::NotOurs => {
                Action::await_change()
            }
        });
    }
    if !termination::ensure_finalizer(&context, &class).await? {
        return Ok(Action::await_change());
    }
    Ok(match reconcile_node_class(&context, &class).await? {
        None => Action::await_change(),
        Some(done) => Action::requeue(done.requeue_after),
    })
}

fn error_policy(
    class: Arc<EC2NodeClass>,
    error: &ControllerError,
    _context: Arc<Context>,
) -> Action {
    tracing::warn!(nodeclass = %class.name_any(), %error, "retrying in 30s");
    Action::requeue(Duration::from_secs(30))
}

/// Reconciles one class: resolves every part of its status, writes them
/// in one patch (other conditions are left as they are), and publishes
/// events for conditions that changed. `None` when the class no longer
/// exists.
pub async fn reconcile_node_class(
    context: &Context,
    class: &EC2NodeClass,
) -> Result<Option<Reconciled>, ControllerError> {
    let span = tracing::info_span!(
        "nodeclass",
        nodeclass = %class.name_any(),
        generation = class.metadata.generation
    );
    reconcile_in_span(context, class).instrument(span).await
}

/// The status fields a pass writes, and the conditions it sets.
#[derive(Default)]
struct Draft {
    status: EC2NodeClassStatus,
    fields: Map<String, Value>,
    updates: Vec<Condition>,
    requeue_after: Option<Duration>,
}

impl Draft {
    /// Takes a sub-reconciler's result: `field` in the patch (`null` for an
    /// empty list), `set` on the working status, the condition in `updates`.
    fn take<T: serde::Serialize>(
        &mut self,
        field: &str,
        resolved: Resolved<T>,
        set: impl FnOnce(&mut EC2NodeClassStatus, T),
    ) {
        if let Some(value) = resolved.value {
            let json = serde_json::to_value(&value).unwrap_or(Value::Null);
            let empty = json.as_array().is_some_and(Vec::is_empty);
            self.fields
                .insert(field.to_string(), if empty { Value::Null } else { json });
            set(&mut self.status, value);
        }
        self.condition(resolved.condition, resolved.requeue_after);
    }

    fn condition(&mut self, condition: Option<Condition>, requeue_after: Option<Duration>) {
        self.updates.extend(condition);
        if let Some(after) = requeue_after {
            self.requeue_after = Some(self.requeue_after.map_or(after, |r| r.min(after)));
        }
    }
}

/// `Some(list)` unless empty, as the CRD stores an absent list.
fn non_empty<T>(list: Vec<T>) -> Option<Vec<T>> {
    (!list.is_empty()).then_some(list)
}

async fn reconcile_in_span(
    context: &Context,
    class: &EC2NodeClass,
) -> Result<Option<Reconciled>, ControllerError> {
    let name = class.name_any();
    let stamp = Stamp::new(class.metadata.generation);
    // NodePools and ConfigMaps as the shared stores hold them, once they
    // hold their first lists (a pass before would see no pools).
    context.state.synced().await;
    let config_maps = context.state.config_maps_of(class);
    let pools = context.state.node_pools_of(&name);

    let (subnets, security_groups, reservations, profile, placement, found_amis) = tokio::join!(
        subnets::resolve(context, class, &stamp),
        security_groups::resolve(context, class, &stamp),
        capacity_reservations::resolve(context, class, &stamp),
        instance_profile::resolve(context, class, &stamp),
        placement_group::resolve(context, class, &stamp),
        ami::discover(context, class),
    );
    let mut draft = Draft {
        status: class.status.clone().unwrap_or_default(),
        ..Draft::default()
    };
    draft.take("subnets", subnets, |s, v| s.subnets = non_empty(v));
    draft.take("securityGroups", security_groups, |s, v| {
        s.security_groups = non_empty(v)
    });
    draft.take("capacityReservations", reservations, |s, v| {
        s.capacity_reservations = non_empty(v)
    });
    draft.take("instanceProfile", profile, |s, v| {
        s.instance_profile = Some(v)
    });
    draft.take("placementGroup", placement, |s, v| s.placement_group = v);

    // The rest sees the class with this pass's subnets, reservations,
    // profile and placement group: its instance types, its validation.
    let mut resolved = class.clone();
    resolved.status = Some(draft.status.clone());
    let amis = ami::select(context, &resolved, found_amis, &config_maps, &stamp).await?;
    draft.take("amis", amis.resolved, |s, v| s.amis = non_empty(v));
    resolved.status = Some(draft.status.clone());

    let outcomes = extensions::run(context, &resolved, pools, &config_maps).await?;
    draft.updates.push(extensions::condition(
        &resolved,
        &outcomes,
        amis.selection.as_ref(),
        &stamp,
    ));

    let seen = class
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let so_far = conditions::merge_conditions(&seen, &draft.updates);
    let validated = validation::resolve(context, &resolved, &so_far, &stamp).await;
    draft.condition(validated.condition, validated.requeue_after);

    // Conditions are merged into the stored list, so the write carries the
    // resourceVersion it was merged from: if another controller wrote in
    // between, the API server refuses it and the pass is retried.
    let classes: Api<EC2NodeClass> = Api::all(context.client.clone());
    let Some(stored) = classes.get_opt(&name).await? else {
        return Ok(None);
    };
    let previous = stored
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let merged = conditions::merge_conditions(&previous, &draft.updates);
    let ready = readiness::ready(&merged, &stamp);
    draft.updates.push(ready);
    let merged = conditions::merge_conditions(&previous, &draft.updates);

    let mut status = draft.fields;
    status.insert(
        "conditions".to_string(),
        serde_json::to_value(&merged).unwrap_or(Value::Null),
    );
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": stored.metadata.resource_version},
        "status": status,
    });
    match classes
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(None),
        other => {
            other?;
        }
    }

    events::publish(
        context,
        class,
        &previous,
        &draft.updates,
        &outcomes,
        amis.selection.as_ref(),
    )
    .await;

    let mut written = draft.status;
    written.conditions = Some(merged.clone());
    let settled = if find_condition(&merged, READY).is_some_and(Condition::is_true) {
        READY_REQUEUE
    } else {
        NOT_READY_REQUEUE
    };
    Ok(Some(Reconciled {
        conditions: merged,
        status: written,
        requeue_after: draft.requeue_after.map_or(settled, |r| r.min(settled)),
    }))
}
