//! Instance profiles nodewright made that nothing uses any more (Karpenter's
//! `instanceprofile.garbagecollection`): a class whose `spec.role` changed
//! gets a new profile and leaves the old one to the nodes launched with it.
//! Every [`INTERVAL`], the profiles under the cluster's IAM path
//! `/karpenter/<region>/<cluster>/` are listed, and one is deleted when no
//! EC2NodeClass has it in `status.instanceProfile`, no NodeClaim names it in
//! its `karpenter.k8s.aws/instance-profile-name` annotation, and it was not
//! made or replaced within the last hour (protected: the class or claim
//! naming it may not be in the watch yet). Profiles outside that path —
//! other clusters', or one given in `spec.instanceProfile` — are never
//! looked at. A failed pass is tried again after [`RETRY`].

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use super::super::Context;
use crate::apis::labels::INSTANCE_PROFILE_ANNOTATION_KEY;
use crate::apis::{EC2NodeClass, NodeClaim};
use crate::aws::instance_profile::{InstanceProfileError, cluster_instance_profile_path};

/// How often unused profiles are looked for (Karpenter: 30 minutes).
pub const INTERVAL: Duration = Duration::from_secs(30 * 60);
/// How soon a pass that failed is tried again.
pub const RETRY: Duration = Duration::from_secs(60);

/// Runs until the process ends: one pass once the cluster state is synced,
/// then one every [`INTERVAL`].
pub async fn run(context: Arc<Context>) {
    let state = context.state.clone();
    state.synced().await;
    loop {
        let classes = state.node_classes.all();
        let claims = state.node_claims.all();
        let wait = match collect(&context, &classes, &claims).await {
            Ok(deleted) => {
                if !deleted.is_empty() {
                    tracing::info!(profiles = ?deleted, "deleted unused instance profiles");
                }
                INTERVAL
            }
            Err(error) => {
                tracing::warn!(%error, "instance profile garbage collection failed; retrying");
                RETRY
            }
        };
        tokio::time::sleep(wait).await;
    }
}

/// One pass over `classes` and `claims` as they are now; returns the
/// profiles deleted. Stops at the first profile IAM will not delete.
pub async fn collect(
    context: &Context,
    classes: &[Arc<EC2NodeClass>],
    claims: &[Arc<NodeClaim>],
) -> Result<Vec<String>, InstanceProfileError> {
    let in_use = in_use(classes, claims);
    let path = cluster_instance_profile_path(&context.region(), &context.cluster_name);
    let profiles = context.instance_profiles.list(&path).await?;
    let mut deleted = Vec::new();
    for profile in profiles {
        if in_use.contains(profile.name.as_str())
            || context.instance_profiles.is_protected(&profile.name)
        {
            continue;
        }
        context.instance_profiles.delete(&profile.name).await?;
        tracing::info!(profile = %profile.name, "deleted unused instance profile");
        deleted.push(profile.name);
    }
    Ok(deleted)
}

/// The profiles a class uses now or a NodeClaim was launched with.
fn in_use<'a>(classes: &'a [Arc<EC2NodeClass>], claims: &'a [Arc<NodeClaim>]) -> HashSet<&'a str> {
    let current = classes
        .iter()
        .filter_map(|c| c.status.as_ref()?.instance_profile.as_deref());
    let launched = claims.iter().filter_map(|c| {
        c.metadata
            .annotations
            .as_ref()?
            .get(INSTANCE_PROFILE_ANNOTATION_KEY)
            .map(String::as_str)
    });
    current.chain(launched).filter(|p| !p.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn profiles_in_a_class_status_or_a_claim_annotation_are_in_use() {
        let class: EC2NodeClass = serde_json::from_value(json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "a"},
            "spec": {"role": "R", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"id": "s"}], "securityGroupSelectorTerms": [{"id": "g"}]},
            "status": {"instanceProfile": "current"},
        }))
        .unwrap();
        let claim = |annotations: serde_json::Value| -> Arc<NodeClaim> {
            Arc::new(
                serde_json::from_value(json!({
                    "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                    "metadata": {"name": "c", "annotations": annotations},
                    "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "a"},
                        "requirements": []},
                }))
                .unwrap(),
            )
        };
        let claims = [
            claim(json!({INSTANCE_PROFILE_ANNOTATION_KEY: "launched"})),
            claim(json!({INSTANCE_PROFILE_ANNOTATION_KEY: ""})),
            claim(json!({"other": "x"})),
        ];
        let classes = [Arc::new(class)];
        let used = in_use(&classes, &claims);
        let mut used: Vec<&str> = used.into_iter().collect();
        used.sort();
        assert_eq!(used, ["current", "launched"]);
    }
}
