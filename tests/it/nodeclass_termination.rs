//! Deleting an EC2NodeClass: the finalizer holds the class while NodeClaims
//! use it, then its launch templates and the instance profiles nodewright
//! made for it are deleted in moto, and nothing else is. Ports Karpenter's
//! "NodeClass Termination" cases.

use std::time::Duration;

use apiserver_double::ApiServer;
use aws_sdk_ec2::types::{RequestLaunchTemplateData, ResourceType, Tag, TagSpecification};
use aws_smithy_mocks::{RuleMode, mock, mock_client};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use nodewright::apis::labels::AWS_TERMINATION_FINALIZER;
use nodewright::apis::{EC2NodeClass, NodeClaim};
use nodewright::aws::clients::AwsClients;
use nodewright::controllers::nodeclass::reconcile_node_class;
use nodewright::controllers::nodeclass::termination::{Finalized, ensure_finalizer, finalize};
use nodewright::controllers::{self, Context};
use serde_json::json;

use crate::fixture::eventually_within;
use crate::moto::{create_role, moto_clients, profile_exists};
use crate::nodeclass::context_in;

/// A class of cluster-unique `name` whose nodes take IAM role `role`.
fn class(name: &str, role: Option<&str>, profile: Option<&str>) -> EC2NodeClass {
    let mut spec = json!({
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"discovery": name}}],
        "securityGroupSelectorTerms": [{"tags": {"discovery": name}}],
    });
    if let Some(role) = role {
        spec["role"] = json!(role);
    }
    if let Some(profile) = profile {
        spec["instanceProfile"] = json!(profile);
    }
    serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

fn claim(name: &str, class: &str) -> NodeClaim {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class},
            "requirements": [],
        },
    }))
    .unwrap()
}

/// A launch template in moto tagged as nodewright tags a class's templates.
async fn create_template(clients: &AwsClients, name: &str, cluster: &str, class: &str) {
    let tags = [
        ("eks:eks-cluster-name", cluster),
        ("karpenter.k8s.aws/ec2nodeclass", class),
    ];
    clients
        .ec2
        .create_launch_template()
        .launch_template_name(name)
        .launch_template_data(
            RequestLaunchTemplateData::builder()
                .image_id("ami-1")
                .build(),
        )
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::LaunchTemplate)
                .set_tags(Some(
                    tags.iter()
                        .map(|(k, v)| Tag::builder().key(*k).value(*v).build())
                        .collect(),
                ))
                .build(),
        )
        .send()
        .await
        .unwrap();
}

async fn template_names(clients: &AwsClients, prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = clients
        .ec2
        .describe_launch_templates()
        .send()
        .await
        .unwrap()
        .launch_templates
        .unwrap_or_default()
        .into_iter()
        .filter_map(|t| t.launch_template_name)
        .filter(|n| n.starts_with(prefix))
        .collect();
    names.sort();
    names
}

fn reasons(server: &ApiServer, class: &str) -> Vec<(String, String)> {
    server
        .objects("events.k8s.io", "events")
        .iter()
        .filter(|e| e["regarding"]["name"] == class && e["regarding"]["kind"] == "EC2NodeClass")
        .map(|e| {
            let text = |field: &str| e[field].as_str().unwrap_or_default().to_string();
            (text("reason"), text("note"))
        })
        .collect()
}

/// Creates `class`, puts the finalizer on it, reconciles its status once
/// and returns the stored object.
async fn created(context: &Context, class: EC2NodeClass) -> EC2NodeClass {
    let api: Api<EC2NodeClass> = Api::all(context.client.clone());
    let name = class.metadata.name.clone().unwrap();
    let created = api.create(&PostParams::default(), &class).await.unwrap();
    assert!(ensure_finalizer(context, &created).await.unwrap());
    let with_finalizer = api.get(&name).await.unwrap();
    reconcile_node_class(context, &with_finalizer)
        .await
        .unwrap();
    api.get(&name).await.unwrap()
}

/// Deletes class `name` and returns it as stored afterwards (being deleted).
async fn delete(context: &Context, name: &str) -> EC2NodeClass {
    let api: Api<EC2NodeClass> = Api::all(context.client.clone());
    api.delete(name, &DeleteParams::default()).await.unwrap();
    let stored = api.get(name).await.unwrap();
    assert!(stored.metadata.deletion_timestamp.is_some());
    stored
}

#[tokio::test]
async fn a_class_waits_for_its_claims_then_loses_its_templates_and_profiles_in_moto() {
    let clients = moto_clients().await;
    create_role(&clients, "term-role").await;
    let server = nodewright::sim::double::server();
    let context = context_in("term-cluster", &server, &clients);
    let stored = created(&context, class("term", Some("term-role"), None)).await;
    assert_eq!(stored.finalizers(), [AWS_TERMINATION_FINALIZER]);
    let profile = stored.status.unwrap().instance_profile.unwrap();
    assert!(profile_exists(&clients, &profile).await);
    create_template(&clients, "term-lt-1", "term-cluster", "term").await;
    create_template(&clients, "term-lt-2", "term-cluster", "term").await;
    create_template(&clients, "term-lt-other-class", "term-cluster", "other").await;
    create_template(&clients, "term-lt-other-cluster", "elsewhere", "term").await;
    let claims: Api<NodeClaim> = Api::all(context.client.clone());
    for name in ["term-a", "term-b"] {
        claims
            .create(&PostParams::default(), &claim(name, "term"))
            .await
            .unwrap();
    }
    claims
        .create(&PostParams::default(), &claim("unrelated", "other"))
        .await
        .unwrap();

    // Claims use the class: nothing is deleted, the class stays.
    let deleting = delete(&context, "term").await;
    assert_eq!(
        finalize(&context, &deleting).await.unwrap(),
        Finalized::Waiting(vec!["term-a".to_string(), "term-b".to_string()])
    );
    assert!(reasons(&server, "term").contains(&(
        "WaitingOnNodeClaimTermination".to_string(),
        "Waiting on NodeClaim termination for term-a, term-b".to_string()
    )));
    claims
        .delete("term-a", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        finalize(&context, &deleting).await.unwrap(),
        Finalized::Waiting(vec!["term-b".to_string()])
    );
    assert!(profile_exists(&clients, &profile).await);
    assert_eq!(template_names(&clients, "term-lt").await.len(), 4);

    // The last claim goes: the class's templates and profile go with it.
    claims
        .delete("term-b", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(
        finalize(&context, &deleting).await.unwrap(),
        Finalized::Done {
            launch_templates: 2,
            instance_profiles: 1
        }
    );
    assert!(!profile_exists(&clients, &profile).await);
    assert_eq!(
        template_names(&clients, "term-lt").await,
        ["term-lt-other-class", "term-lt-other-cluster"]
    );
    let classes: Api<EC2NodeClass> = Api::all(context.client.clone());
    assert!(classes.get_opt("term").await.unwrap().is_none());
}

#[tokio::test]
async fn a_profile_named_in_spec_instance_profile_is_left_to_its_owner_in_moto() {
    let clients = moto_clients().await;
    create_role(&clients, "term-own-role").await;
    clients
        .iam
        .create_instance_profile()
        .instance_profile_name("term-own-profile")
        .send()
        .await
        .unwrap();
    clients
        .iam
        .add_role_to_instance_profile()
        .instance_profile_name("term-own-profile")
        .role_name("term-own-role")
        .send()
        .await
        .unwrap();
    let server = nodewright::sim::double::server();
    let context = context_in("term-own-cluster", &server, &clients);
    let stored = created(&context, class("term-own", None, Some("term-own-profile"))).await;
    assert_eq!(
        stored.status.unwrap().instance_profile.as_deref(),
        Some("term-own-profile")
    );

    let deleting = delete(&context, "term-own").await;
    assert_eq!(
        finalize(&context, &deleting).await.unwrap(),
        Finalized::Done {
            launch_templates: 0,
            instance_profiles: 0
        }
    );
    assert!(profile_exists(&clients, "term-own-profile").await);
    let classes: Api<EC2NodeClass> = Api::all(context.client.clone());
    assert!(classes.get_opt("term-own").await.unwrap().is_none());
}

#[tokio::test]
async fn a_class_whose_profile_is_already_gone_is_deleted_in_moto() {
    let clients = moto_clients().await;
    create_role(&clients, "term-gone-role").await;
    let server = nodewright::sim::double::server();
    let context = context_in("term-gone-cluster", &server, &clients);
    let stored = created(&context, class("term-gone", Some("term-gone-role"), None)).await;
    let profile = stored.status.unwrap().instance_profile.unwrap();
    context.instance_profiles.delete(&profile).await.unwrap();

    let deleting = delete(&context, "term-gone").await;
    assert_eq!(
        finalize(&context, &deleting).await.unwrap(),
        Finalized::Done {
            launch_templates: 0,
            instance_profiles: 0
        }
    );
    let classes: Api<EC2NodeClass> = Api::all(context.client.clone());
    assert!(classes.get_opt("term-gone").await.unwrap().is_none());
}

#[tokio::test]
async fn a_failed_template_deletion_keeps_the_class_and_says_why() {
    let listed = mock!(aws_sdk_ec2::Client::describe_launch_templates).then_output(|| {
        aws_sdk_ec2::operation::describe_launch_templates::DescribeLaunchTemplatesOutput::builder()
            .launch_templates(
                aws_sdk_ec2::types::LaunchTemplate::builder()
                    .launch_template_name("held-lt")
                    .launch_template_id("lt-1")
                    .build(),
            )
            .build()
    });
    let refused = mock!(aws_sdk_ec2::Client::delete_launch_template).then_error(|| {
        aws_sdk_ec2::operation::delete_launch_template::DeleteLaunchTemplateError::generic(
            aws_sdk_ec2::error::ErrorMetadata::builder()
                .code("UnauthorizedOperation")
                .message("not authorized to perform: ec2:DeleteLaunchTemplate")
                .build(),
        )
    });
    let mut clients = moto_clients().await;
    clients.ec2 = mock_client!(aws_sdk_ec2, RuleMode::MatchAny, [&listed, &refused]);
    let server = nodewright::sim::double::server();
    let context = context_in("term-held-cluster", &server, &clients);
    let api: Api<EC2NodeClass> = Api::all(context.client.clone());
    let created = api
        .create(&PostParams::default(), &class("held", None, Some("p")))
        .await
        .unwrap();
    assert!(ensure_finalizer(&context, &created).await.unwrap());

    let deleting = delete(&context, "held").await;
    let error = finalize(&context, &deleting).await.unwrap_err().to_string();
    assert!(
        error.contains("ec2:DeleteLaunchTemplate held-lt"),
        "{error}"
    );
    let kept = api.get("held").await.unwrap();
    assert_eq!(kept.finalizers(), [AWS_TERMINATION_FINALIZER]);
    let (_, note) = reasons(&server, "held")
        .into_iter()
        .find(|(reason, _)| reason == "FinalizeFailed")
        .expect("a FinalizeFailed event");
    assert!(note.contains("ec2:DeleteLaunchTemplate held-lt"), "{note}");
}

/// The running controller adds the finalizer, waits on the class's claim,
/// and finishes as soon as the claim is deleted (not at the 10-minute
/// requeue).
#[tokio::test]
async fn the_controller_finalizes_a_class_when_its_last_claim_goes_in_moto() {
    let clients = moto_clients().await;
    create_role(&clients, "term-loop-role").await;
    let server = nodewright::sim::double::server();
    let context = context_in("term-loop-cluster", &server, &clients);
    let running = tokio::spawn(controllers::nodeclass::run(context.clone()));
    let api: Api<EC2NodeClass> = Api::all(context.client.clone());
    api.create(
        &PostParams::default(),
        &class("term-loop", Some("term-loop-role"), None),
    )
    .await
    .unwrap();
    let limit = Duration::from_secs(30);
    let profile = eventually_within("the finalizer and a profile", limit, || async {
        let stored = api.get("term-loop").await.ok()?;
        let has = stored
            .finalizers()
            .iter()
            .any(|f| f == AWS_TERMINATION_FINALIZER);
        has.then_some(())?;
        stored.status?.instance_profile
    })
    .await;
    create_template(&clients, "term-loop-lt", "term-loop-cluster", "term-loop").await;
    let claims: Api<NodeClaim> = Api::all(context.client.clone());
    claims
        .create(
            &PostParams::default(),
            &claim("term-loop-claim", "term-loop"),
        )
        .await
        .unwrap();

    api.delete("term-loop", &DeleteParams::default())
        .await
        .unwrap();
    eventually_within("the waiting event", limit, || async {
        reasons(&server, "term-loop")
            .iter()
            .any(|(reason, _)| reason == "WaitingOnNodeClaimTermination")
            .then_some(())
    })
    .await;
    assert!(api.get_opt("term-loop").await.unwrap().is_some());
    claims
        .delete("term-loop-claim", &DeleteParams::default())
        .await
        .unwrap();
    eventually_within("the class deleted", limit, || async {
        api.get_opt("term-loop").await.ok()?.is_none().then_some(())
    })
    .await;
    running.abort();
    assert!(!profile_exists(&clients, &profile).await);
    assert!(template_names(&clients, "term-loop-lt").await.is_empty());
}
