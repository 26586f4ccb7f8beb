//! The EC2NodeClass hash controller (Karpenter's `nodeclass.hash`): writes
//! the class's static-spec hash and its version
//! (`karpenter.k8s.aws/ec2nodeclass-hash`, `…-hash-version`) on the class,
//! and when the class carried another version (Karpenter's, after a
//! migration) re-stamps its NodeClaims first, so a hash-version change is
//! never taken for drift. It needs only the API server, so it runs with
//! either cloud provider.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

use crate::apis::EC2NodeClass;
use crate::apis::ec2nodeclass::EC2_NODE_CLASS_HASH_VERSION;
use crate::apis::labels::{
    EC2_NODE_CLASS_HASH_ANNOTATION_KEY, EC2_NODE_CLASS_HASH_VERSION_ANNOTATION_KEY,
};
use crate::cloudprovider::restamped_class_annotations;
use crate::cluster::ClusterState;
use crate::controllers::ControllerError;
use crate::controllers::nodeclaim::patch_annotations;

/// What the hash controller needs.
pub struct HashContext {
    /// The API server.
    pub client: Client,
    /// The shared cluster view.
    pub state: Arc<ClusterState>,
}

/// Runs the controller until the cluster state's feeds end: each class is
/// reconciled when it changes.
pub async fn run(ctx: Arc<HashContext>) {
    let trigger = ctx
        .state
        .node_classes
        .changes()
        .map(|class| Ok::<EC2NodeClass, watcher::Error>(EC2NodeClass::clone(&class)));
    Controller::for_stream(trigger, ctx.state.node_classes.store().clone())
        .run(
            |class, ctx| async move { reconcile(&ctx, &class).await },
            |class, error, _| {
                tracing::warn!(nodeclass = %class.name_any(), %error, "EC2NodeClass hash not written; retrying");
                Action::requeue(error.retry_after(Duration::from_secs(10)))
            },
            ctx,
        )
        .for_each(|_| async {})
        .await;
}

/// One pass over a class: its NodeClaims re-stamped if the class's hash
/// version is not ours, then the class's hash annotations written if they
/// differ.
pub async fn reconcile(ctx: &HashContext, class: &EC2NodeClass) -> Result<Action, ControllerError> {
    if class.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let annotations = class.annotations();
    let version = annotations.get(EC2_NODE_CLASS_HASH_VERSION_ANNOTATION_KEY);
    if version.map(String::as_str) != Some(EC2_NODE_CLASS_HASH_VERSION) {
        restamp_node_claims(ctx, class).await?;
    }
    let hash = class.hash();
    if annotations.get(EC2_NODE_CLASS_HASH_ANNOTATION_KEY) != Some(&hash)
        || version.map(String::as_str) != Some(EC2_NODE_CLASS_HASH_VERSION)
    {
        let patch = serde_json::json!({"metadata": {"annotations": {
            EC2_NODE_CLASS_HASH_ANNOTATION_KEY: hash,
            EC2_NODE_CLASS_HASH_VERSION_ANNOTATION_KEY: EC2_NODE_CLASS_HASH_VERSION,
        }}});
        let api: Api<EC2NodeClass> = Api::all(ctx.client.clone());
        match api
            .patch(
                &class.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(Action::await_change())
}

/// Stamps the class's hash onto its NodeClaims that carry a class hash of
/// another version (a `Drifted` one keeps its old hash).
async fn restamp_node_claims(
    ctx: &HashContext,
    class: &EC2NodeClass,
) -> Result<(), ControllerError> {
    let name = class.name_any();
    for claim in ctx.state.node_claims.all() {
        if claim.spec.node_class_ref.name != name {
            continue;
        }
        let annotations = restamped_class_annotations(&claim, class);
        if annotations.is_empty() {
            continue;
        }
        patch_annotations(&ctx.client, &claim.name_any(), &annotations).await?;
    }
    Ok(())
}
