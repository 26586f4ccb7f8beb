//! `ValidationSucceeded`, as Karpenter's validation sub-reconciler decides
//! it:
//!
//! 1. `spec.tags` may not use a key nodewright sets itself
//!    (`TagValidationFailed`);
//! 2. it waits for `AMIsReady`, `InstanceProfileReady`,
//!    `SecurityGroupsReady` and `SubnetsReady` (`DependenciesNotReady`:
//!    `False` when one of them is `False`, `Unknown` while one is unknown);
//! 3. unless dry runs are disabled (`--disable-dry-run`), it dry-runs
//!    `CreateLaunchTemplate`, `CreateFleet` and `RunInstances` with the
//!    class's image, instance profile, subnets, security groups, metadata
//!    options and launch tags (answers cached 30 minutes per request):
//!    `UnauthorizedOperation` sets `CreateLaunchTemplateAuthCheckFailed`,
//!    `CreateFleetAuthCheckFailed` or `RunInstancesAuthCheckFailed`; an
//!    unknown `spec.instanceProfile` sets `InstanceProfileNotFound` (a
//!    profile nodewright made is given time to appear, and looked up in
//!    IAM again, to be made anew if it is gone); any other
//!    refusal sets `DryRunFailed` with EC2's error.
//!
//! Throttling and server faults (after the SDK's retries with backoff)
//! never change the condition: the previous one stays and the class is
//! looked at again within a minute.

use std::collections::{BTreeMap, BTreeSet};

use crate::apis::conditions::{
    EC2_NODE_CLASS_AMIS_READY, EC2_NODE_CLASS_INSTANCE_PROFILE_READY,
    EC2_NODE_CLASS_SECURITY_GROUPS_READY, EC2_NODE_CLASS_SUBNETS_READY,
    EC2_NODE_CLASS_VALIDATION_SUCCEEDED as VALIDATION_SUCCEEDED, find_condition,
};
use crate::apis::ec2nodeclass::AMIStatus;
use crate::apis::labels::{
    ARCH_LABEL_KEY, EC2_NODE_CLASS_LABEL_KEY, INSTANCE_ACCELERATOR_COUNT_LABEL_KEY,
    INSTANCE_GPU_COUNT_LABEL_KEY, NODE_POOL_LABEL_KEY,
};
use crate::apis::{Condition, ConditionStatus, EC2NodeClass};
use crate::aws::dry_run::{DryRunRequest, DryRunVerdict, LaunchCall};
use crate::aws::instance_profile::EKS_CLUSTER_NAME_TAG_KEY;

use super::super::Context;
use super::conditions::{Resolved, Stamp};

/// The conditions a launch needs before its permissions are worth checking.
pub const REQUIRED: [&str; 4] = [
    EC2_NODE_CLASS_AMIS_READY,
    EC2_NODE_CLASS_INSTANCE_PROFILE_READY,
    EC2_NODE_CLASS_SECURITY_GROUPS_READY,
    EC2_NODE_CLASS_SUBNETS_READY,
];

/// The tag keys nodewright sets on what it launches (Karpenter's
/// `RestrictedTagPatterns`; `kubernetes.io/cluster/<name>` is checked apart).
const RESTRICTED_TAGS: [&str; 4] = [
    NODE_POOL_LABEL_KEY,
    EKS_CLUSTER_NAME_TAG_KEY,
    EC2_NODE_CLASS_LABEL_KEY,
    "karpenter.sh/nodeclaim",
];

/// `ValidationSucceeded` for `class` (its status as this pass resolved it),
/// given the conditions so far.
pub async fn resolve(
    context: &Context,
    class: &EC2NodeClass,
    conditions: &[Condition],
    stamp: &Stamp,
) -> Resolved<()> {
    let tags = class.spec.tags.clone().unwrap_or_default();
    let restricted: Vec<&String> = tags.keys().filter(|k| is_restricted(k)).collect();
    if !restricted.is_empty() {
        return Resolved::condition(stamp.not_ready(
            VALIDATION_SUCCEEDED,
            "TagValidationFailed",
            format!(
                "spec.tags: {restricted:?} are set by nodewright itself; remove them from spec.tags"
            ),
        ));
    }

    let waiting = |status: ConditionStatus| -> Vec<&str> {
        REQUIRED
            .iter()
            .copied()
            .filter(|t| {
                let found = find_condition(conditions, t);
                match status {
                    ConditionStatus::False => {
                        found.is_some_and(|c| c.status == ConditionStatus::False)
                    }
                    _ => found.is_none_or(|c| c.status == ConditionStatus::Unknown),
                }
            })
            .collect()
    };
    for status in [ConditionStatus::False, ConditionStatus::Unknown] {
        let pending = waiting(status);
        if !pending.is_empty() {
            return Resolved::condition(stamp.condition(
                VALIDATION_SUCCEEDED,
                status,
                "DependenciesNotReady",
                format!(
                    "Awaiting AMI, Instance Profile, Security Group, and Subnet resolution ({} not True)",
                    pending.join(", ")
                ),
            ));
        }
    }

    if context.disable_dry_run {
        return Resolved::condition(stamp.ready(
            VALIDATION_SUCCEEDED,
            "dry-run permission checks are disabled (--disable-dry-run)",
        ));
    }
    let Some(request) = request(context, class, tags) else {
        return Resolved::condition(stamp.condition(
            VALIDATION_SUCCEEDED,
            ConditionStatus::Unknown,
            "DependenciesNotReady",
            "Awaiting AMI, Instance Profile, Security Group, and Subnet resolution",
        ));
    };
    match context.dry_run.check(&request).await {
        Ok(DryRunVerdict::Authorized) => Resolved::condition(stamp.ready(VALIDATION_SUCCEEDED, "")),
        Ok(DryRunVerdict::Unauthorized { call, message }) => {
            let reason = match call {
                LaunchCall::CreateLaunchTemplate => "CreateLaunchTemplateAuthCheckFailed",
                LaunchCall::CreateFleet => "CreateFleetAuthCheckFailed",
                LaunchCall::RunInstances => "RunInstancesAuthCheckFailed",
            };
            tracing::warn!(call = call.action(), message, "not authorized");
            Resolved::condition(stamp.not_ready(
                VALIDATION_SUCCEEDED,
                reason,
                format!(
                    "Controller isn't authorized to call {}: {}",
                    call.action(),
                    unauthorized_detail(&message)
                ),
            ))
        }
        Ok(DryRunVerdict::InstanceProfileNotFound { message }) => {
            match &class.spec.instance_profile {
                Some(profile) => Resolved::condition(stamp.not_ready(
                    VALIDATION_SUCCEEDED,
                    "InstanceProfileNotFound",
                    format!(
                        "spec.instanceProfile: instance profile {profile:?} not found ({message})"
                    ),
                )),
                // A profile just made may take a while to be seen by EC2;
                // one deleted behind nodewright's back is made again once
                // IAM, not the cache, is asked whether it exists.
                None => {
                    let profile = class
                        .status
                        .as_ref()
                        .and_then(|s| s.instance_profile.as_deref());
                    tracing::warn!(
                        profile,
                        message,
                        "EC2 does not know the class's instance profile; looking it up in IAM again"
                    );
                    if let Some(profile) = profile {
                        context.instance_profiles.forget(profile);
                    }
                    Resolved::keep()
                }
            }
        }
        Ok(DryRunVerdict::Rejected { call, error }) => Resolved::condition(stamp.not_ready(
            VALIDATION_SUCCEEDED,
            "DryRunFailed",
            format!("{} dry run failed: {error}", call.action()),
        )),
        Err(e) => {
            tracing::warn!(error = %e, "dry run hit a fault; keeping ValidationSucceeded as it is");
            Resolved::keep()
        }
    }
}

/// Whether a `spec.tags` key is one nodewright sets itself.
fn is_restricted(key: &str) -> bool {
    if RESTRICTED_TAGS.contains(&key) {
        return true;
    }
    // `kubernetes.io/cluster/<cluster name>`, cluster names as EKS allows them.
    key.strip_prefix("kubernetes.io/cluster/")
        .is_some_and(|name| {
            name.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric())
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
}

/// The tags a launch for `class` carries: `spec.tags` plus
/// `kubernetes.io/cluster/<cluster>=owned`, `karpenter.sh/nodepool` (empty
/// here: no NodePool is involved), `eks:eks-cluster-name` and
/// `karpenter.k8s.aws/ec2nodeclass`.
fn launch_tags(
    mut tags: BTreeMap<String, String>,
    cluster: &str,
    class_name: &str,
) -> BTreeMap<String, String> {
    tags.insert(
        format!("kubernetes.io/cluster/{cluster}"),
        "owned".to_string(),
    );
    tags.insert(NODE_POOL_LABEL_KEY.to_string(), String::new());
    tags.insert(EKS_CLUSTER_NAME_TAG_KEY.to_string(), cluster.to_string());
    tags.insert(EC2_NODE_CLASS_LABEL_KEY.to_string(), class_name.to_string());
    tags
}

/// The dry-run request for the class's resolved status, or `None` while a
/// part of it is missing.
fn request(
    context: &Context,
    class: &EC2NodeClass,
    tags: BTreeMap<String, String>,
) -> Option<DryRunRequest> {
    let status = class.status.as_ref()?;
    let (image_id, instance_type) = pick_image(status.amis.as_deref().unwrap_or_default())?;
    let instance_profile = status.instance_profile.clone()?;
    let mut zones = BTreeSet::new();
    // Status order is most free addresses first: the subnet a launch uses.
    let subnet_ids: Vec<String> = status
        .subnets
        .iter()
        .flatten()
        .filter(|s| zones.insert(s.zone.clone()))
        .map(|s| s.id.clone())
        .collect();
    let security_group_ids: Vec<String> = status
        .security_groups
        .iter()
        .flatten()
        .map(|g| g.id.clone())
        .collect();
    if subnet_ids.is_empty() || security_group_ids.is_empty() {
        return None;
    }
    let class_name = class.metadata.name.clone().unwrap_or_default();
    Some(DryRunRequest {
        tags: launch_tags(tags, &context.cluster_name, &class_name),
        class_name,
        image_id,
        instance_type: instance_type.to_string(),
        instance_profile,
        subnet_ids,
        security_group_ids,
        metadata_options: (&class.spec.effective_metadata_options()).into(),
    })
}

/// The image to dry-run with and a type it boots: the first image that
/// needs no accelerator (GPU images may need larger volumes), else the
/// first; `m6g.large` for arm64 images, `m5.large` otherwise.
fn pick_image(amis: &[AMIStatus]) -> Option<(String, &'static str)> {
    let needs_accelerator = |ami: &&AMIStatus| {
        ami.requirements.iter().any(|r| {
            (r.key == INSTANCE_GPU_COUNT_LABEL_KEY || r.key == INSTANCE_ACCELERATOR_COUNT_LABEL_KEY)
                && r.operator == "Exists"
        })
    };
    let ami = amis
        .iter()
        .find(|a| !needs_accelerator(a))
        .or_else(|| amis.first())?;
    let arm64 = ami
        .requirements
        .iter()
        .any(|r| r.key == ARCH_LABEL_KEY && r.values.iter().flatten().any(|v| v == "arm64"));
    Some((ami.id.clone(), if arm64 { "m6g.large" } else { "m5.large" }))
}

/// Karpenter's plain words for an `UnauthorizedOperation` message.
fn unauthorized_detail(message: &str) -> &'static str {
    if message.contains("with an explicit deny in a permissions boundary") {
        "User is not authorized to perform this operation due to a permission boundary"
    } else if message.contains("with an explicit deny in a service control policy") {
        "User is not authorized to perform this operation due to a service control policy"
    } else if message.contains("Not authorized for images") {
        "User is not authorized for AMI used in instance launch"
    } else {
        "User is not authorized to perform this operation because no identity-based policy allows it"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apis::ec2nodeclass::AMIRequirement;

    fn ami(id: &str, arch: &str, gpu: bool) -> AMIStatus {
        let mut requirements = vec![AMIRequirement {
            key: ARCH_LABEL_KEY.into(),
            operator: "In".into(),
            values: Some(vec![arch.into()]),
        }];
        if gpu {
            requirements.push(AMIRequirement {
                key: INSTANCE_GPU_COUNT_LABEL_KEY.into(),
                operator: "Exists".into(),
                values: None,
            });
        }
        AMIStatus {
            id: id.into(),
            name: None,
            deprecated: None,
            requirements,
        }
    }

    #[test]
    fn the_dry_run_prefers_a_standard_image_and_matches_its_architecture() {
        let amis = [
            ami("ami-gpu", "amd64", true),
            ami("ami-arm", "arm64", false),
        ];
        assert_eq!(pick_image(&amis), Some(("ami-arm".into(), "m6g.large")));
        assert_eq!(pick_image(&amis[..1]), Some(("ami-gpu".into(), "m5.large")));
        assert_eq!(pick_image(&[]), None);
    }

    #[test]
    fn tags_nodewright_sets_are_restricted() {
        for key in [
            "kubernetes.io/cluster/demo",
            "karpenter.sh/nodepool",
            "eks:eks-cluster-name",
            "karpenter.k8s.aws/ec2nodeclass",
            "karpenter.sh/nodeclaim",
        ] {
            assert!(is_restricted(key), "{key}");
        }
        for key in ["team", "kubernetes.io/cluster/", "kubernetes.io/cluster/-x"] {
            assert!(!is_restricted(key), "{key}");
        }
        let tags = launch_tags(
            BTreeMap::from([("team".to_string(), "infra".to_string())]),
            "demo",
            "default",
        );
        assert_eq!(
            tags.get("kubernetes.io/cluster/demo").map(String::as_str),
            Some("owned")
        );
        assert_eq!(
            tags.get("karpenter.sh/nodepool").map(String::as_str),
            Some("")
        );
        assert_eq!(tags.len(), 5);
    }

    #[test]
    fn denials_are_explained_as_karpenter_does() {
        assert!(
            unauthorized_detail("... with an explicit deny in a service control policy")
                .contains("service control policy")
        );
        assert!(
            unauthorized_detail("... with an explicit deny in a permissions boundary")
                .contains("permission boundary")
        );
        assert!(unauthorized_detail("nope").contains("no identity-based policy"));
    }
}
