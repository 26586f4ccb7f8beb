//! `status.instanceProfile` and `InstanceProfileReady`.
//!
//! With `spec.role`, the class keeps the profile in its status while that
//! profile holds the role. When there is none yet, or `spec.role` changed,
//! a new profile is made for the role (Karpenter's name, path and tags) and
//! the status points at it; the old profile stays for the nodes that use it,
//! until the garbage collector finds nothing naming it (see
//! `garbage_collection`) or the class is deleted (see `termination`). The new
//! and the replaced profile are protected from the collector for an hour.
//! With `spec.instanceProfile`, the profile is used as given once IAM
//! confirms it exists (a profile nodewright made before is protected too).
//!
//! `False` reasons: `RoleNotFound` (names `spec.role`),
//! `InstanceProfileNotFound` (names `spec.instanceProfile`),
//! `InstanceProfileCreationFailed`, `InvalidNodeClass` (neither field set).

use crate::apis::EC2NodeClass;
use crate::apis::conditions::EC2_NODE_CLASS_INSTANCE_PROFILE_READY as INSTANCE_PROFILE_READY;
use crate::aws::instance_profile::{
    InstanceProfileError, instance_profile_path, instance_profile_tags, new_instance_profile_name,
    role_name,
};

use super::super::Context;
use super::conditions::{Resolved, Stamp};

/// The class's instance profile and `InstanceProfileReady`.
pub async fn resolve(context: &Context, class: &EC2NodeClass, stamp: &Stamp) -> Resolved<String> {
    match (&class.spec.role, &class.spec.instance_profile) {
        (Some(role), _) => for_role(context, class, role, stamp).await,
        (None, Some(profile)) => given(context, class, profile, stamp).await,
        (None, None) => Resolved::condition(stamp.not_ready(
            INSTANCE_PROFILE_READY,
            "InvalidNodeClass",
            "set spec.role (nodewright makes the instance profile) or spec.instanceProfile",
        )),
    }
}

/// `spec.instanceProfile`: used as given if it exists.
async fn given(
    context: &Context,
    class: &EC2NodeClass,
    profile: &str,
    stamp: &Stamp,
) -> Resolved<String> {
    match context.instance_profiles.get(profile).await {
        Ok(Some(_)) => {
            // A profile made for `spec.role` before may still be on nodes.
            if let Some(previous) = class.status.as_ref().and_then(|s| s.instance_profile.as_deref())
                && previous != profile
            {
                context.instance_profiles.protect(previous);
            }
            Resolved::to(profile.to_string(), stamp.ready(INSTANCE_PROFILE_READY, ""))
        }
        Ok(None) => Resolved::condition(stamp.not_ready(
            INSTANCE_PROFILE_READY,
            "InstanceProfileNotFound",
            format!(
                "spec.instanceProfile: instance profile {profile:?} does not exist; create it or set spec.role instead"
            ),
        )),
        Err(e) if e.is_transient() => {
            tracing::warn!(error = %e, "instance profile lookup failed; keeping the stored profile");
            Resolved::keep()
        }
        Err(e) => Resolved::condition(stamp.not_ready(
            INSTANCE_PROFILE_READY,
            "InstanceProfileLookupFailed",
            format!("spec.instanceProfile: {e}"),
        )),
    }
}

/// `spec.role`: the stored profile if it holds the role, else a new one.
async fn for_role(
    context: &Context,
    class: &EC2NodeClass,
    role: &str,
    stamp: &Stamp,
) -> Resolved<String> {
    let uid = class.metadata.uid.clone().unwrap_or_default();
    let stored = context
        .instance_profiles
        .recently_created(&uid, role)
        .or_else(|| {
            class
                .status
                .as_ref()
                .and_then(|s| s.instance_profile.clone())
        });
    if let Some(name) = &stored {
        match context.instance_profiles.get(name).await {
            Ok(Some(profile)) if profile.role.as_deref() == Some(role_name(role)) => {
                return Resolved::to(name.clone(), stamp.ready(INSTANCE_PROFILE_READY, ""));
            }
            Ok(_) => {}
            Err(e) if e.is_transient() => {
                tracing::warn!(error = %e, "instance profile lookup failed; keeping the stored profile");
                return Resolved::keep();
            }
            Err(e) => return failed(e, stamp),
        }
    }

    let region = context.region();
    let cluster = &context.cluster_name;
    let class_name = class.metadata.name.clone().unwrap_or_default();
    let name = new_instance_profile_name(cluster, &region, &class_name);
    let tags = instance_profile_tags(class, cluster, &region);
    let path = instance_profile_path(&region, cluster, &uid);
    // Until the class's status and the claims launched with the profiles
    // are in the watch, the collector must not take them: protected before
    // IAM makes the new one, as a collection pass may list it at once.
    context.instance_profiles.protect(&name);
    match context
        .instance_profiles
        .ensure(&name, role, &tags, &path)
        .await
    {
        Ok(()) => {
            tracing::info!(profile = %name, role, "created instance profile");
            context
                .instance_profiles
                .remember_created(&uid, role, &name);
            if let Some(previous) = &stored {
                context.instance_profiles.protect(previous);
            }
            Resolved::to(name, stamp.ready(INSTANCE_PROFILE_READY, ""))
        }
        Err(e) if e.is_transient() => {
            tracing::warn!(error = %e, "creating the instance profile failed; trying again soon");
            Resolved::keep()
        }
        Err(e) => failed(e, stamp),
    }
}

fn failed(error: InstanceProfileError, stamp: &Stamp) -> Resolved<String> {
    let condition = match &error {
        InstanceProfileError::RoleNotFound { role, .. } => stamp.not_ready(
            INSTANCE_PROFILE_READY,
            "RoleNotFound",
            format!("spec.role: IAM role {role:?} does not exist; create it or fix spec.role"),
        ),
        InstanceProfileError::Aws { .. } => stamp.not_ready(
            INSTANCE_PROFILE_READY,
            "InstanceProfileCreationFailed",
            format!("spec.role: {error}"),
        ),
    };
    Resolved::condition(condition)
}
