//! The class's finalizer, `karpenter.k8s.aws/termination`: every class the
//! controller sees gets it, so that deleting a class cleans up what
//! nodewright made for it. A class being deleted
//!
//! 1. waits while NodeClaims still reference it (their nodes use its launch
//!    templates and instance profiles), publishing
//!    `WaitingOnNodeClaimTermination` and looking again every 10 minutes
//!    or when a claim goes;
//! 2. deletes its launch templates (found by the cluster and class tags);
//! 3. deletes the instance profiles nodewright made for it (those under the
//!    class's IAM path; a profile named in `spec.instanceProfile` is the
//!    user's and stays);
//! 4. removes the finalizer, so the API server deletes the class.
//!
//! A failing AWS call leaves the finalizer in place and publishes
//! `FinalizeFailed` naming the call; the pass is retried.

use std::time::Duration;

use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::apis::labels::AWS_TERMINATION_FINALIZER;
use crate::apis::{EC2NodeClass, NodeClaim};
use crate::aws::instance_profile::instance_profile_path;

use super::super::{Context, ControllerError, truncate};

/// How often a class waiting on its NodeClaims says so again.
pub const WAITING_REQUEUE: Duration = Duration::from_secs(600);
/// Claims named in the waiting event at most.
const NAMED_CLAIMS: usize = 5;

/// What finalizing a class did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finalized {
    /// NodeClaims (named) still use the class; nothing was deleted.
    Waiting(Vec<String>),
    /// The class's launch templates and instance profiles were deleted
    /// (how many of each) and the finalizer removed.
    Done {
        /// Launch templates deleted.
        launch_templates: usize,
        /// Instance profiles deleted.
        instance_profiles: usize,
    },
    /// The class has no finalizer of ours (or is gone): nothing to do.
    NotOurs,
}

/// Adds the finalizer to `class` unless it has it. `false` when the class
/// is gone or changed in between (the controller sees it again).
pub async fn ensure_finalizer(
    context: &Context,
    class: &EC2NodeClass,
) -> Result<bool, ControllerError> {
    if has_finalizer(class) {
        return Ok(true);
    }
    let mut finalizers = class.finalizers().to_vec();
    finalizers.push(AWS_TERMINATION_FINALIZER.to_string());
    write_finalizers(context, class, finalizers).await
}

/// Finalizes a class being deleted: see the module documentation.
pub async fn finalize(
    context: &Context,
    class: &EC2NodeClass,
) -> Result<Finalized, ControllerError> {
    if !has_finalizer(class) {
        return Ok(Finalized::NotOurs);
    }
    let claims = claims_of(context, &class.name_any()).await?;
    if !claims.is_empty() {
        publish(
            context,
            class,
            EventType::Normal,
            "WaitingOnNodeClaimTermination",
            waiting_note(&claims),
        )
        .await;
        return Ok(Finalized::Waiting(claims));
    }
    let cleaned = match clean_up(context, class).await {
        Ok(cleaned) => cleaned,
        Err(error) => {
            publish(context, class, EventType::Warning, "FinalizeFailed", format!(
                "cannot delete what nodewright made for this class, retrying: {error}; grant the controller's role the permission named"
            ))
            .await;
            return Err(error);
        }
    };
    let finalizers = class
        .finalizers()
        .iter()
        .filter(|f| *f != AWS_TERMINATION_FINALIZER)
        .cloned()
        .collect();
    if !write_finalizers(context, class, finalizers).await? {
        return Ok(Finalized::NotOurs);
    }
    tracing::info!(
        nodeclass = %class.name_any(),
        launch_templates = cleaned.0,
        instance_profiles = cleaned.1,
        "deleted the class's launch templates and instance profiles"
    );
    Ok(Finalized::Done {
        launch_templates: cleaned.0,
        instance_profiles: cleaned.1,
    })
}

fn has_finalizer(class: &EC2NodeClass) -> bool {
    class
        .finalizers()
        .iter()
        .any(|f| f == AWS_TERMINATION_FINALIZER)
}

/// The NodeClaims whose `spec.nodeClassRef` names the class, sorted.
async fn claims_of(context: &Context, class: &str) -> Result<Vec<String>, ControllerError> {
    let claims: Api<NodeClaim> = Api::all(context.client.clone());
    let group = EC2NodeClass::group(&());
    let kind = EC2NodeClass::kind(&());
    let mut names: Vec<String> = claims
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|claim| {
            let reference = &claim.spec.node_class_ref;
            reference.name == class && reference.group == group && reference.kind == kind
        })
        .map(|claim| claim.name_any())
        .collect();
    names.sort();
    Ok(names)
}

fn waiting_note(claims: &[String]) -> String {
    let shown = claims[..claims.len().min(NAMED_CLAIMS)].join(", ");
    match claims.len().checked_sub(NAMED_CLAIMS) {
        Some(more) if more > 0 => {
            format!("Waiting on NodeClaim termination for {shown} and {more} other(s)")
        }
        _ => format!("Waiting on NodeClaim termination for {shown}"),
    }
}

/// Deletes the class's launch templates, then the profiles under its IAM
/// path; returns how many of each.
async fn clean_up(
    context: &Context,
    class: &EC2NodeClass,
) -> Result<(usize, usize), ControllerError> {
    let templates = context
        .launch_templates
        .delete_for_class(&class.name_any())
        .await?;
    let uid = class.metadata.uid.clone().unwrap_or_default();
    if uid.is_empty() {
        return Ok((templates, 0));
    }
    let path = instance_profile_path(&context.region(), &context.cluster_name, &uid);
    let profiles = context.instance_profiles.list(&path).await?;
    for profile in &profiles {
        context.instance_profiles.delete(&profile.name).await?;
        tracing::info!(nodeclass = %class.name_any(), profile = %profile.name, "deleted instance profile");
    }
    Ok((templates, profiles.len()))
}

/// Writes the finalizer list with the class's resourceVersion, so a list
/// changed by someone else in between is not overwritten. `false` when the
/// class is gone or changed.
async fn write_finalizers(
    context: &Context,
    class: &EC2NodeClass,
    finalizers: Vec<String>,
) -> Result<bool, ControllerError> {
    let classes: Api<EC2NodeClass> = Api::all(context.client.clone());
    let patch = json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": class.metadata.resource_version,
    }});
    match classes
        .patch(
            &class.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(false),
        Err(error) => Err(error.into()),
    }
}

async fn publish(
    context: &Context,
    class: &EC2NodeClass,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.to_string(),
        note: Some(truncate(note, 1024)),
        action: "Finalize".to_string(),
        secondary: None,
    };
    if let Err(error) = context
        .recorder
        .publish(&event, &class.object_ref(&()))
        .await
    {
        tracing::warn!(%error, reason, "cannot publish event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_waiting_note_names_five_claims_and_counts_the_rest() {
        let claims: Vec<String> = (1..=7).map(|i| format!("c{i}")).collect();
        assert_eq!(
            waiting_note(&claims),
            "Waiting on NodeClaim termination for c1, c2, c3, c4, c5 and 2 other(s)"
        );
        assert_eq!(
            waiting_note(&claims[..2]),
            "Waiting on NodeClaim termination for c1, c2"
        );
    }
}
