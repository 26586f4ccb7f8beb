//! The EC2NodeClass status controller: discovers each class's AMIs and runs
//! its AMI selector (`status.amis`, `AMIsReady`), runs its instance filters
//! and priority scorers for every NodePool that uses it, and reports on
//! `ExtensionsReady` which module failed and why. Warning events name a
//! failing module (`ExtensionModuleFailed` for `failurePolicy: Fail`,
//! `ExtensionModuleSkipped` for `Ignore`); events are published when a
//! condition changes, not on every pass.
//!
//! Classes are reconciled when they or their NodePools change, and every 5
//! minutes (every minute while no AMI is found), as Karpenter does.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use tracing::Instrument;

use super::{Context, ControllerError};
use crate::apis::conditions::find_condition;
use crate::apis::ec2nodeclass::AMIStatus;
use crate::apis::{Condition, ConditionStatus, EC2NodeClass, FailurePolicy, NodePool};
use crate::aws::amis::{amis_ready_condition, status_amis};
use crate::aws::instance_types::InstanceTypeProvider;
use crate::extensions::{
    AmiSelection, ConfigMapSource, EXTENSIONS_READY, ModuleReport, Outcome, unix_now,
};

/// How a class whose instance types cannot be resolved is reported.
const UNRESOLVABLE: &str = "cannot resolve instance types";

/// Longest event note the API server accepts.
const MAX_NOTE_BYTES: usize = 1024;

/// What one reconcile decided for a class.
#[derive(Debug, Clone)]
pub struct Reconciled {
    /// The `ExtensionsReady` condition written.
    pub extensions_ready: Condition,
    /// The `AMIsReady` condition written.
    pub amis_ready: Condition,
    /// `status.amis` as written.
    pub amis: Vec<AMIStatus>,
}

/// Runs the controller until a shutdown signal.
pub async fn run(context: Arc<Context>) {
    let classes: Api<EC2NodeClass> = Api::all(context.client.clone());
    let pools: Api<NodePool> = Api::all(context.client.clone());
    Controller::new(classes, watcher::Config::default())
        .watches(pools, watcher::Config::default(), |pool: NodePool| {
            Some(ObjectRef::new(&pool.spec.template.spec.node_class_ref.name))
        })
        .shutdown_on_signal()
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
        return Ok(Action::await_change());
    }
    Ok(match reconcile_node_class(&context, &class).await? {
        None => Action::await_change(),
        Some(done) if done.amis_ready.is_true() => Action::requeue(Duration::from_secs(300)),
        Some(_) => Action::requeue(Duration::from_secs(60)),
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

/// Reconciles one class: computes its AMIs and extension status, writes
/// them to `status` (other conditions are left as they are), and publishes
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

async fn reconcile_in_span(
    context: &Context,
    class: &EC2NodeClass,
) -> Result<Option<Reconciled>, ControllerError> {
    let name = class.name_any();
    let generation = class.metadata.generation;
    let config_maps = referenced_config_maps(context, class).await?;
    let pools = node_pools_of(context, &name).await?;

    let (outcomes, unresolvable) = {
        let (class, config_maps) = (class.clone(), config_maps.clone());
        let provider = context.instance_types.clone();
        tokio::task::spawn_blocking(move || {
            instance_type_outcomes(&class, &pools, &provider, &config_maps)
        })
        .await?
    };

    let now = unix_now();
    let (selection, no_ami_reason) = match context
        .amis
        .discover(&class.spec, &context.kubernetes_version)
        .await
    {
        Ok(found) => {
            let (class, config_maps) = (class.clone(), config_maps.clone());
            let extensions = context.instance_types.extensions().clone();
            let region = context.instance_types.catalog().region().to_string();
            let selection = tokio::task::spawn_blocking(move || {
                extensions.select_amis(&class, &region, found, &config_maps, now)
            })
            .await?;
            let why = selection.blocked.clone();
            (Some(selection), why)
        }
        Err(e) => (None, Some(format!("discovering AMIs: {e}"))),
    };
    let amis = selection
        .as_ref()
        .map(|s| status_amis(&s.amis, now))
        .unwrap_or_default();

    let transition = Time(k8s_openapi::jiff::Timestamp::now());
    let combined_outcome = combined(&outcomes, selection.as_ref());
    let mut extensions_ready = combined_outcome.condition(generation, transition.clone());
    // A blocked class whose modules never ran says why in the reason too.
    if class.spec.effective_extensions().is_err() {
        extensions_ready.reason = Some("InvalidExtensions".to_string());
    } else if unresolvable {
        extensions_ready.reason = Some("InvalidNodeClass".to_string());
    }
    let amis_ready = amis_ready_condition(&amis, no_ami_reason.as_deref(), generation, transition);

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
    let conditions = merge_conditions(&previous, [extensions_ready.clone(), amis_ready.clone()]);
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": stored.metadata.resource_version},
        "status": {
            "conditions": conditions,
            "amis": if amis.is_empty() { serde_json::Value::Null } else { serde_json::to_value(&amis).unwrap_or_default() },
        }
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

    publish_changes(
        context,
        class,
        &previous,
        &extensions_ready,
        &amis_ready,
        &outcomes,
        selection.as_ref(),
    )
    .await;
    Ok(Some(Reconciled {
        extensions_ready,
        amis_ready,
        amis,
    }))
}

/// The ConfigMaps the class's extensions reference (those that exist; a
/// missing one is reported by the module that needs it).
async fn referenced_config_maps(
    context: &Context,
    class: &EC2NodeClass,
) -> Result<Vec<ConfigMap>, ControllerError> {
    let Ok(effective) = class.spec.effective_extensions() else {
        return Ok(Vec::new());
    };
    let mut found = Vec::new();
    for (namespace, name) in effective.config_map_references() {
        let api: Api<ConfigMap> = Api::namespaced(context.client.clone(), namespace);
        if let Some(config_map) = api.get_opt(name).await? {
            found.push(config_map);
        }
    }
    Ok(found)
}

/// Names of the NodePools whose template uses the class, sorted.
async fn node_pools_of(context: &Context, class: &str) -> Result<Vec<String>, ControllerError> {
    let pools = Api::<NodePool>::all(context.client.clone())
        .list(&ListParams::default())
        .await?;
    let mut names: Vec<String> = pools
        .items
        .iter()
        .filter(|p| p.spec.template.spec.node_class_ref.name == class)
        .map(ResourceExt::name_any)
        .collect();
    names.sort();
    Ok(names)
}

/// Runs the class's filters and scorers for each of its NodePools (or once,
/// for no pool, when none uses it yet, so a broken module shows up before
/// a NodePool does). The flag is set when the class's settings cannot be
/// resolved into instance types at all.
fn instance_type_outcomes(
    class: &EC2NodeClass,
    pools: &[String],
    provider: &InstanceTypeProvider,
    config_maps: &dyn ConfigMapSource,
) -> (Vec<Arc<Outcome>>, bool) {
    let no_pool = [String::new()];
    let pools = if pools.is_empty() {
        &no_pool[..]
    } else {
        pools
    };
    let mut outcomes = Vec::with_capacity(pools.len());
    for pool in pools {
        match provider.for_pool(class, pool, config_maps) {
            Ok(outcome) => outcomes.push(outcome),
            Err(e) => {
                let blocked = Outcome {
                    blocked: Some(format!("{UNRESOLVABLE}: {e}")),
                    ..Outcome::default()
                };
                return (vec![Arc::new(blocked)], true);
            }
        }
    }
    (outcomes, false)
}

/// One outcome for the condition: the first block, and every module report
/// once (a module fails the same way for every NodePool).
fn combined(outcomes: &[Arc<Outcome>], selection: Option<&AmiSelection>) -> Outcome {
    let mut reports: Vec<ModuleReport> = Vec::new();
    let all = outcomes
        .iter()
        .flat_map(|o| o.reports.iter())
        .chain(selection.and_then(|s| s.report.as_ref()));
    for report in all {
        let seen = reports
            .iter()
            .any(|r| r.name == report.name && r.role == report.role && r.error == report.error);
        if !seen {
            reports.push(report.clone());
        }
    }
    let blocked = outcomes
        .iter()
        .find_map(|o| o.blocked.clone())
        .or_else(|| selection.and_then(|s| s.blocked.clone()));
    Outcome {
        reports,
        blocked,
        ..Outcome::default()
    }
}

/// `previous` with `updates` replacing conditions of the same type. A
/// condition whose status did not change keeps its transition time.
fn merge_conditions<const N: usize>(
    previous: &[Condition],
    updates: [Condition; N],
) -> Vec<Condition> {
    let mut out: Vec<Condition> = previous
        .iter()
        .filter(|c| !updates.iter().any(|u| u.type_ == c.type_))
        .cloned()
        .collect();
    for mut update in updates {
        if let Some(old) = find_condition(previous, &update.type_)
            && old.status == update.status
        {
            update.last_transition_time = old.last_transition_time.clone();
        }
        out.push(update);
    }
    out.sort_by(|a, b| a.type_.cmp(&b.type_));
    out
}

/// Whether a condition's status, reason or message differs from before.
fn changed(previous: &[Condition], now: &Condition) -> bool {
    find_condition(previous, &now.type_).is_none_or(|old| {
        old.status != now.status || old.reason != now.reason || old.message != now.message
    })
}

/// Events for conditions that changed in this pass.
async fn publish_changes(
    context: &Context,
    class: &EC2NodeClass,
    previous: &[Condition],
    extensions_ready: &Condition,
    amis_ready: &Condition,
    outcomes: &[Arc<Outcome>],
    selection: Option<&AmiSelection>,
) {
    let mut events = Vec::new();
    if changed(previous, extensions_ready) {
        let combined = combined(outcomes, selection);
        if let Some(blocked) = &combined.blocked {
            events.push((EventType::Warning, "ExtensionModuleFailed", blocked.clone()));
        }
        for report in &combined.reports {
            if let (Some(error), FailurePolicy::Ignore) = (&report.error, report.failure_policy) {
                events.push((
                    EventType::Warning,
                    "ExtensionModuleSkipped",
                    format!("skipped with failurePolicy Ignore: {error}"),
                ));
            }
        }
        let before = find_condition(previous, EXTENSIONS_READY);
        let was_ready = before.is_some_and(|c| c.reason.as_deref() == Some("Ready"));
        if extensions_ready.reason.as_deref() == Some("Ready") && before.is_some() && !was_ready {
            events.push((
                EventType::Normal,
                "ExtensionsReady",
                "all extension modules ran".to_string(),
            ));
        }
    }
    if changed(previous, amis_ready) && amis_ready.status == ConditionStatus::False {
        events.push((
            EventType::Warning,
            "AMINotFound",
            amis_ready.message.clone().unwrap_or_default(),
        ));
    }
    let reference = class.object_ref(&());
    for (type_, reason, note) in events {
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(super::truncate(note, MAX_NOTE_BYTES)),
            action: "Reconcile".to_string(),
            secondary: None,
        };
        if let Err(error) = context.recorder.publish(&event, &reference).await {
            tracing::warn!(%error, reason, "cannot publish event");
        }
    }
}
