//! The EC2NodeClass status controller end to end against the in-process API
//! server, with AWS played by SDK mocks ([`fake_aws`]): every status field
//! and condition in one reconcile, selectors that match nothing, another
//! controller's condition, capacity reservations down to reserved
//! offerings, and throttled dry runs and AMI lookups that must not unready
//! a class.

pub mod fake_aws;
mod placement_group;

use std::sync::{Arc, Mutex, OnceLock};

use apiserver_double::ApiServer;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodewright::apis::{Condition, ConditionStatus, EC2NodeClass};
use nodewright::aws::catalog::Catalog;
use nodewright::aws::clients::AwsClients;
use nodewright::aws::instance_types::InstanceTypeProvider;
use nodewright::cluster::ClusterState;
use nodewright::controllers::nodeclass::reconcile_node_class;
use nodewright::controllers::{Context, ControllerSettings};
use nodewright::extensions::Extensions;
use nodewright_host::HostConfig;
use serde_json::json;

pub use fake_aws::{DryRun, FakeAws, Mocked, ROLE};

/// A controller context on `server` over `clients`, for cluster `demo`.
pub fn context_on(server: &ApiServer, clients: &AwsClients) -> Arc<Context> {
    context_in("demo", server, clients)
}

/// A controller context for cluster `cluster` (its instance profiles'
/// paths hold the cluster: tests sharing moto, whose API servers hand out
/// the same uids, keep apart by cluster), over a cluster state watching
/// `server` (its driver runs on the test's runtime).
pub fn context_in(cluster: &str, server: &ApiServer, clients: &AwsClients) -> Arc<Context> {
    context_with_host(cluster, server, clients, HostConfig::default())
}

/// [`context_in`] with the extension host configured by `host` (a
/// registry allowed over plain HTTP, signature keys).
pub fn context_with_host(
    cluster: &str,
    server: &ApiServer,
    clients: &AwsClients,
    host: HostConfig,
) -> Arc<Context> {
    let (state, driver) = ClusterState::start(server.client());
    tokio::spawn(driver);
    Arc::new(Context::new(
        server.client(),
        state,
        Arc::new(InstanceTypeProvider::new(
            Arc::new(Catalog::embedded("us-east-1").unwrap()),
            Arc::new(Extensions::new(host).unwrap()),
            Arc::default(),
        )),
        clients,
        ControllerSettings {
            kubernetes_version: "1.34".to_string(),
            cluster_name: cluster.to_string(),
            disable_dry_run: false,
        },
    ))
}

/// A class selecting the fake account's subnets and group by tag.
pub fn class(name: &str) -> EC2NodeClass {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "role": ROLE,
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        },
    }))
    .unwrap()
}

/// The condition `type_` of `class`.
pub fn condition<'a>(class: &'a EC2NodeClass, type_: &str) -> &'a Condition {
    class
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_))
        .unwrap_or_else(|| panic!("no {type_} condition on {:?}", class.metadata.name))
}

/// The instance profile in `class`'s status.
pub fn instance_profile_of(class: &EC2NodeClass) -> String {
    class
        .status
        .as_ref()
        .and_then(|s| s.instance_profile.clone())
        .unwrap_or_else(|| panic!("no status.instanceProfile on {:?}", class.metadata.name))
}

/// `(type, reason, note)` of every event about EC2NodeClass `name`.
pub fn events_about(server: &ApiServer, name: &str) -> Vec<(String, String, String)> {
    server
        .objects("events.k8s.io", "events")
        .iter()
        .filter(|e| e["regarding"]["name"] == name && e["regarding"]["kind"] == "EC2NodeClass")
        .map(|e| {
            let text = |field: &str| e[field].as_str().unwrap_or_default().to_string();
            (text("type"), text("reason"), text("note"))
        })
        .collect()
}

pub async fn create_and_reconcile(context: &Context, class: EC2NodeClass) -> EC2NodeClass {
    let api: Api<EC2NodeClass> = Api::all(context.client.clone());
    let created = api.create(&PostParams::default(), &class).await.unwrap();
    reconcile_node_class(context, &created).await.unwrap();
    api.get(&created.metadata.name.unwrap()).await.unwrap()
}

#[tokio::test]
async fn a_class_with_working_selectors_is_ready_with_every_status_field_in_one_reconcile() {
    let server = nodewright::sim::double::server();
    let fake = FakeAws::default();
    let context = context_on(&server, &fake.mocked().clients);
    let stored = create_and_reconcile(&context, class("default")).await;

    for type_ in [
        "SubnetsReady",
        "SecurityGroupsReady",
        "InstanceProfileReady",
        "CapacityReservationsReady",
        "AMIsReady",
        "ExtensionsReady",
        "PlacementGroupReady",
        "ValidationSucceeded",
        "Ready",
    ] {
        let c = condition(&stored, type_);
        assert_eq!(c.status, ConditionStatus::True, "{c:?}");
        assert_eq!(c.observed_generation, Some(1), "{c:?}");
    }
    let status = stored.status.as_ref().unwrap();
    let subnets: Vec<(&str, &str, Option<&str>)> = status
        .subnets
        .iter()
        .flatten()
        .map(|s| (s.id.as_str(), s.zone.as_str(), s.zone_id.as_deref()))
        .collect();
    assert_eq!(
        subnets,
        [
            ("subnet-a2", "us-east-1a", Some("use1-az1")),
            ("subnet-a1", "us-east-1a", Some("use1-az1")),
            ("subnet-b1", "us-east-1b", Some("use1-az2")),
        ],
        "most available addresses first"
    );
    let groups = status.security_groups.as_ref().unwrap();
    assert_eq!(groups[0].id, "sg-nodes");
    assert_eq!(groups[0].name.as_deref(), Some("nodes"));
    let profile = status.instance_profile.as_deref().unwrap();
    assert!(profile.starts_with("demo_"), "{profile}");
    assert_eq!(
        fake.profiles.lock().unwrap().get(profile),
        Some(&Some(ROLE.to_string()))
    );
    assert_eq!(
        status
            .amis
            .as_ref()
            .unwrap()
            .iter()
            .map(|a| a.id.as_str())
            .collect::<Vec<_>>(),
        ["ami-gpu"]
    );
    assert!(status.capacity_reservations.is_none());
    assert!(events_about(&server, "default").is_empty());
}

#[tokio::test]
async fn a_subnet_selector_that_matches_nothing_names_the_term_and_warns() {
    let server = nodewright::sim::double::server();
    let context = context_on(&server, &FakeAws::default().mocked().clients);
    let mut lost = class("lost");
    lost.spec.subnet_selector_terms = serde_json::from_value(json!([
        {"tags": {"karpenter.sh/discovery": "elsewhere"}},
        {"id": "subnet-gone"},
    ]))
    .unwrap();
    let stored = create_and_reconcile(&context, lost).await;

    let subnets = condition(&stored, "SubnetsReady");
    assert_eq!(subnets.status, ConditionStatus::False);
    assert_eq!(subnets.reason.as_deref(), Some("SubnetsNotFound"));
    let message = subnets.message.as_deref().unwrap();
    assert!(
        message.contains("subnetSelectorTerms[0] (tags karpenter.sh/discovery=elsewhere)")
            && message.contains("subnetSelectorTerms[1] (id subnet-gone)")
            && message.ends_with("matched no subnet"),
        "{message}"
    );
    let ready = condition(&stored, "Ready");
    assert_eq!(ready.status, ConditionStatus::False);
    assert_eq!(ready.reason.as_deref(), Some("UnhealthyDependents"));
    assert!(
        ready
            .message
            .as_deref()
            .unwrap()
            .contains("SubnetsReady=False"),
        "{ready:?}"
    );
    let validation = condition(&stored, "ValidationSucceeded");
    assert_eq!(validation.status, ConditionStatus::False);
    assert_eq!(validation.reason.as_deref(), Some("DependenciesNotReady"));
    assert!(stored.status.as_ref().unwrap().subnets.is_none());
    let events = events_about(&server, "lost");
    assert!(
        events.iter().any(|(t, r, note)| t == "Warning"
            && r == "SubnetsNotFound"
            && note.contains("subnetSelectorTerms[0]")),
        "{events:?}"
    );

    // One term matching is enough; the other is still named.
    let api: Api<EC2NodeClass> = Api::all(context.client.clone());
    let fix = json!({"spec": {"subnetSelectorTerms": [
        {"tags": {"karpenter.sh/discovery": "elsewhere"}},
        {"id": "subnet-b1"},
    ]}});
    let fixed = api
        .patch("lost", &PatchParams::default(), &Patch::Merge(&fix))
        .await
        .unwrap();
    reconcile_node_class(&context, &fixed).await.unwrap();
    let stored = api.get("lost").await.unwrap();
    let subnets = condition(&stored, "SubnetsReady");
    assert_eq!(subnets.status, ConditionStatus::True);
    assert!(
        subnets.message.as_deref().unwrap().contains(
            "subnetSelectorTerms[0] (tags karpenter.sh/discovery=elsewhere) matched no subnet"
        ),
        "{subnets:?}"
    );
    assert_eq!(condition(&stored, "Ready").status, ConditionStatus::True);
    assert!(
        events_about(&server, "lost")
            .iter()
            .any(|(t, r, _)| t == "Normal" && r == "Ready")
    );
}

#[tokio::test]
async fn another_controllers_condition_is_kept() {
    let server = nodewright::sim::double::server();
    let context = context_on(&server, &FakeAws::default().mocked().clients);
    let api: Api<EC2NodeClass> = Api::all(context.client.clone());
    api.create(&PostParams::default(), &class("shared"))
        .await
        .unwrap();
    let theirs = json!({"status": {"conditions": [{
        "type": "example.com/Audited", "status": "True", "reason": "Audited",
        "message": "checked by the auditor", "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]}});
    api.patch_status("shared", &PatchParams::default(), &Patch::Merge(&theirs))
        .await
        .unwrap();
    let current = api.get("shared").await.unwrap();
    reconcile_node_class(&context, &current).await.unwrap();

    let stored = api.get("shared").await.unwrap();
    let audited = condition(&stored, "example.com/Audited");
    assert_eq!(audited.message.as_deref(), Some("checked by the auditor"));
    assert_eq!(condition(&stored, "Ready").status, ConditionStatus::True);
}

#[tokio::test]
async fn a_condition_written_after_the_class_was_read_is_kept() {
    let server = nodewright::sim::double::server();
    let context = context_on(&server, &FakeAws::default().mocked().clients);
    let api: Api<EC2NodeClass> = Api::all(context.client.clone());
    let created = api
        .create(&PostParams::default(), &class("raced"))
        .await
        .unwrap();
    // Another writer changes the status after this pass read the class but
    // before it writes: the write carries the old resourceVersion.
    let theirs = json!({"status": {"conditions": [{
        "type": "example.com/Audited", "status": "True", "reason": "Audited",
        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]}});
    api.patch_status("raced", &PatchParams::default(), &Patch::Merge(&theirs))
        .await
        .unwrap();
    // The pass reads the stored class itself, so it merges with theirs.
    reconcile_node_class(&context, &created).await.unwrap();
    let stored = api.get("raced").await.unwrap();
    assert_eq!(
        condition(&stored, "example.com/Audited").status,
        ConditionStatus::True
    );
    assert_eq!(condition(&stored, "Ready").status, ConditionStatus::True);
}

/// Reconciles `stored` again as a restarted controller (nothing cached)
/// over `fake`, whose faults the pass waits out: it asks to be looked at
/// again after `RETRY_AFTER_FAULT`. The class as stored after the pass,
/// and the clients (to count their calls).
async fn reconcile_through_faults(
    server: &ApiServer,
    stored: &EC2NodeClass,
    fake: FakeAws,
) -> (EC2NodeClass, Mocked) {
    let mocked = fake.mocked();
    let context = context_on(server, &mocked.clients);
    let result = reconcile_node_class(&context, stored)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        result.requeue_after,
        nodewright::controllers::nodeclass::RETRY_AFTER_FAULT,
        "looked at again soon"
    );
    let api: Api<EC2NodeClass> = Api::all(server.client());
    let after = api.get(&stored.name_any()).await.unwrap();
    (after, mocked)
}

#[tokio::test]
async fn throttling_during_validation_keeps_the_class_ready() {
    let server = nodewright::sim::double::server();
    let fake = FakeAws::default();
    let first = context_on(&server, &fake.mocked().clients);
    let stored = create_and_reconcile(&first, class("steady")).await;
    assert_eq!(condition(&stored, "Ready").status, ConditionStatus::True);
    let validated = condition(&stored, "ValidationSucceeded").clone();

    // A restarted controller (nothing cached) whose dry runs are throttled.
    let throttled = FakeAws {
        dry_run: DryRun::Throttled,
        ..fake.clone()
    };
    let (after, mocked) = reconcile_through_faults(&server, &stored, throttled).await;
    assert!(
        mocked.launch_template_dry_runs.num_calls() >= 3,
        "the SDK retries a throttled call with backoff ({} attempts)",
        mocked.launch_template_dry_runs.num_calls()
    );
    assert_eq!(condition(&after, "ValidationSucceeded"), &validated);
    assert_eq!(condition(&after, "Ready").status, ConditionStatus::True);
    assert!(events_about(&server, "steady").is_empty());
}

/// An AMI lookup that fails after the SDK's retries (here throttled, as
/// once the process's retry quota is spent) leaves `status.amis` and
/// `AMIsReady` as they were: emptying them unreadied the class, so no node
/// could launch until a later pass happened to get through.
#[tokio::test]
async fn throttled_ami_lookups_keep_the_stored_amis() {
    let server = nodewright::sim::double::server();
    let fake = FakeAws::default();
    let first = context_on(&server, &fake.mocked().clients);
    let stored = create_and_reconcile(&first, class("imaged")).await;
    assert_eq!(condition(&stored, "Ready").status, ConditionStatus::True);
    let amis = stored.status.as_ref().and_then(|s| s.amis.clone());
    assert!(amis.as_ref().is_some_and(|a| !a.is_empty()), "{amis:?}");
    let amis_ready = condition(&stored, "AMIsReady").clone();

    let throttled = FakeAws {
        images_throttled: true,
        ..fake.clone()
    };
    let (after, _) = reconcile_through_faults(&server, &stored, throttled).await;
    assert_eq!(after.status.as_ref().and_then(|s| s.amis.clone()), amis);
    assert_eq!(condition(&after, "AMIsReady"), &amis_ready);
    assert_eq!(condition(&after, "Ready").status, ConditionStatus::True);
    assert!(events_about(&server, "imaged").is_empty());
}

#[tokio::test]
async fn an_unauthorized_dry_run_names_the_call() {
    let server = nodewright::sim::double::server();
    let fake = FakeAws {
        dry_run: DryRun::FleetUnauthorized,
        ..FakeAws::default()
    };
    let context = context_on(&server, &fake.mocked().clients);
    let stored = create_and_reconcile(&context, class("denied")).await;
    let validation = condition(&stored, "ValidationSucceeded");
    assert_eq!(validation.status, ConditionStatus::False);
    assert_eq!(
        validation.reason.as_deref(),
        Some("CreateFleetAuthCheckFailed")
    );
    assert_eq!(
        validation.message.as_deref(),
        Some(
            "Controller isn't authorized to call ec2:CreateFleet: User is not authorized to perform this operation due to a service control policy"
        )
    );
    assert_eq!(condition(&stored, "Ready").status, ConditionStatus::False);
}

/// The instance profile collector may run at any moment: a profile is
/// protected from it before IAM is asked to make it, or a pass that lists
/// it before the class's status names it deletes it.
#[tokio::test]
async fn a_profile_is_protected_from_the_collector_before_it_is_made() {
    let server = nodewright::sim::double::server();
    let context_cell: Arc<OnceLock<Arc<Context>>> = Arc::default();
    let seen: Arc<Mutex<Vec<(String, bool)>>> = Arc::default();
    let hook = {
        let (context_cell, seen) = (context_cell.clone(), seen.clone());
        move |name: &str| {
            let protected = context_cell
                .get()
                .is_some_and(|c| c.instance_profiles.is_protected(name));
            seen.lock().unwrap().push((name.to_string(), protected));
        }
    };
    let fake = FakeAws {
        on_create: Some(Arc::new(hook)),
        ..FakeAws::default()
    };
    let context = context_on(&server, &fake.mocked().clients);
    assert!(context_cell.set(context.clone()).is_ok());
    let stored = create_and_reconcile(&context, class("fresh")).await;
    let profile = instance_profile_of(&stored);
    assert_eq!(*seen.lock().unwrap(), [(profile, true)]);
}

/// A profile nodewright made and someone deleted: once a dry run shows
/// that EC2 no longer knows it (here the class's tags change, so the dry
/// runs are not answered from their cache), the next pass asks IAM rather
/// than its cache and makes a profile again, and the class is Ready again.
#[tokio::test]
async fn a_profile_deleted_behind_nodewrights_back_is_made_again() {
    let server = nodewright::sim::double::server();
    let fake = FakeAws::default();
    let context = context_on(&server, &fake.mocked().clients);
    let api: Api<EC2NodeClass> = Api::all(context.client.clone());
    let stored = create_and_reconcile(&context, class("robbed")).await;
    let profile = instance_profile_of(&stored);
    assert_eq!(condition(&stored, "Ready").status, ConditionStatus::True);

    fake.profiles.lock().unwrap().remove(&profile);
    let tags = json!({"spec": {"tags": {"team": "a"}}});
    let tagged = api
        .patch("robbed", &PatchParams::default(), &Patch::Merge(&tags))
        .await
        .unwrap();
    reconcile_node_class(&context, &tagged).await.unwrap();
    // Validation of the new generation waits for the profile: not False.
    let after = api.get("robbed").await.unwrap();
    assert_ne!(condition(&after, "Ready").status, ConditionStatus::False);
    assert!(!fake.profiles.lock().unwrap().contains_key(&profile));

    reconcile_node_class(&context, &after).await.unwrap();
    let again = api.get("robbed").await.unwrap();
    let made = instance_profile_of(&again);
    assert_eq!(
        fake.profiles.lock().unwrap().get(&made),
        Some(&Some(ROLE.to_string())),
        "{made} made with its role"
    );
    assert_eq!(condition(&again, "Ready").status, ConditionStatus::True);
}

#[tokio::test]
async fn dry_runs_can_be_disabled() {
    let server = nodewright::sim::double::server();
    let fake = FakeAws {
        dry_run: DryRun::FleetUnauthorized,
        ..FakeAws::default()
    };
    let mocked = fake.mocked();
    let mut context = Arc::try_unwrap(context_on(&server, &mocked.clients))
        .unwrap_or_else(|_| panic!("one owner"));
    context.disable_dry_run = true;
    let stored = create_and_reconcile(&context, class("trusting")).await;
    let validation = condition(&stored, "ValidationSucceeded");
    assert_eq!(validation.status, ConditionStatus::True);
    assert!(
        validation
            .message
            .as_deref()
            .unwrap()
            .contains("--disable-dry-run")
    );
    assert_eq!(mocked.launch_template_dry_runs.num_calls(), 0);
}

fn reservation(
    id: &str,
    instance_type: &str,
    zone: &str,
) -> aws_sdk_ec2::types::builders::CapacityReservationBuilder {
    aws_sdk_ec2::types::CapacityReservation::builder()
        .capacity_reservation_id(id)
        .instance_type(instance_type)
        .availability_zone(zone)
        .owner_id("012345678901")
        .instance_match_criteria(aws_sdk_ec2::types::InstanceMatchCriteria::Targeted)
        .state(aws_sdk_ec2::types::CapacityReservationState::Active)
        .available_instance_count(3)
}

#[tokio::test]
async fn capacity_reservations_reach_the_status_and_become_reserved_offerings() {
    use aws_sdk_ec2::primitives::DateTime as Ec2Time;
    use aws_sdk_ec2::types::CapacityReservationType;
    use nodewright::apis::ec2nodeclass::{
        CapacityReservationState, CapacityReservationType as Kind,
    };
    use nodewright::scheduling::CapacityType;

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let block = reservation("cr-block", "p5.48xlarge", "us-east-1a")
        .reservation_type(CapacityReservationType::CapacityBlock)
        .end_date(Ec2Time::from_secs(now + 30 * 60))
        .interruptible(true);
    let expired = reservation("cr-expired", "m5.large", "us-east-1a")
        .end_date(Ec2Time::from_secs(now - 60))
        .build();
    let odd = reservation("cr-odd", "m5.large", "us-east-1a")
        .reservation_type(CapacityReservationType::from("future-kind"))
        .build();
    let fake = FakeAws {
        reservations: vec![
            reservation("cr-default", "m5.large", "us-east-1a").build(),
            block.build(),
            expired,
            odd,
        ],
        ..FakeAws::default()
    };
    let server = nodewright::sim::double::server();
    let context = context_on(&server, &fake.mocked().clients);
    let mut reserved = class("reserved");
    reserved.spec.capacity_reservation_selector_terms =
        Some(serde_json::from_value(json!([{"tags": {"team": "ml"}}])).unwrap());
    let stored = create_and_reconcile(&context, reserved).await;

    let ready = condition(&stored, "CapacityReservationsReady");
    assert_eq!(ready.status, ConditionStatus::True);
    assert!(
        ready.message.as_deref().unwrap().contains(
            "capacity reservation cr-odd left out: unsupported reservation type \"future-kind\""
        ),
        "{ready:?}"
    );
    let entries = stored
        .status
        .as_ref()
        .unwrap()
        .capacity_reservations
        .clone()
        .unwrap();
    let ids: Vec<&str> = entries.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        ids,
        ["cr-block", "cr-default"],
        "expired and unsupported ones are left out"
    );
    assert_eq!(entries[0].state, Some(CapacityReservationState::Expiring));
    assert_eq!(entries[0].reservation_type, Some(Kind::CapacityBlock));
    assert_eq!(entries[0].interruptible, Some(true));
    assert!(entries[0].end_time.is_some());
    assert_eq!(entries[1].state, Some(CapacityReservationState::Active));
    assert_eq!(entries[1].owner_id, "012345678901");

    // The scheduler's view: a reserved offering for the reservation's type
    // and zone, with its free count, priced near zero.
    let outcome = context
        .instance_types
        .for_pool(&stored, "general", &Vec::new())
        .unwrap();
    let m5 = outcome
        .instance_types
        .iter()
        .find(|t| t.name == "m5.large")
        .unwrap();
    let on_demand = m5
        .offerings
        .iter()
        .find(|o| o.capacity_type == CapacityType::OnDemand && o.zone == "us-east-1a")
        .unwrap()
        .price;
    let reserved: Vec<_> = m5
        .offerings
        .iter()
        .filter(|o| o.capacity_type == CapacityType::Reserved)
        .collect();
    assert_eq!(reserved.len(), 1);
    assert_eq!(reserved[0].reservation_id.as_deref(), Some("cr-default"));
    assert_eq!(reserved[0].zone, "us-east-1a");
    assert_eq!(reserved[0].reservation_capacity, Some(3));
    assert!(reserved[0].available);
    assert_eq!(reserved[0].price, on_demand / 10_000_000.0);
    let labels = &m5.requirements;
    assert!(
        labels
            .get("karpenter.k8s.aws/capacity-reservation-id")
            .unwrap()
            .has("cr-default")
    );
    assert!(
        labels
            .get("karpenter.k8s.aws/capacity-reservation-type")
            .unwrap()
            .has("default")
    );
    assert!(
        labels
            .get("karpenter.k8s.aws/capacity-reservation-interruptible")
            .unwrap()
            .has("false")
    );
    if let Some(p5) = outcome
        .instance_types
        .iter()
        .find(|t| t.name == "p5.48xlarge")
    {
        let block = p5
            .offerings
            .iter()
            .find(|o| o.reservation_id.as_deref() == Some("cr-block"));
        assert!(
            block.is_none_or(|o| !o.available),
            "an expiring block takes no launches"
        );
    }
    let c5 = outcome
        .instance_types
        .iter()
        .find(|t| t.name == "c5.large")
        .unwrap();
    assert!(c5.offerings.iter().all(|o| o.reservation_id.is_none()));
}

#[tokio::test]
async fn dry_run_answers_are_cached_per_request() {
    let server = nodewright::sim::double::server();
    let mocked = FakeAws::default().mocked();
    let context = context_on(&server, &mocked.clients);
    let stored = create_and_reconcile(&context, class("cached")).await;
    reconcile_node_class(&context, &stored).await.unwrap();
    assert_eq!(mocked.launch_template_dry_runs.num_calls(), 1);

    // New tags are a new request: asked again.
    let api: Api<EC2NodeClass> = Api::all(server.client());
    let retag = json!({"spec": {"tags": {"team": "infra"}}});
    let retagged = api
        .patch("cached", &PatchParams::default(), &Patch::Merge(&retag))
        .await
        .unwrap();
    reconcile_node_class(&context, &retagged).await.unwrap();
    assert_eq!(mocked.launch_template_dry_runs.num_calls(), 2);
    let stored = api.get("cached").await.unwrap();
    assert_eq!(
        condition(&stored, "ValidationSucceeded").observed_generation,
        Some(2)
    );
}

#[tokio::test]
async fn restricted_tags_fail_validation_naming_them() {
    // The CRD's CEL rules refuse these tags; the controller must still
    // report them when the class reaches the cluster another way.
    let server = nodewright::sim::double::builder()
        .validate_custom_resources(false)
        .build();
    let mocked = FakeAws::default().mocked();
    let context = context_on(&server, &mocked.clients);
    let mut tagged = class("tagged");
    tagged.spec.tags = Some(
        [(
            "kubernetes.io/cluster/other".to_string(),
            "owned".to_string(),
        )]
        .into_iter()
        .collect(),
    );
    let stored = create_and_reconcile(&context, tagged).await;
    let validation = condition(&stored, "ValidationSucceeded");
    assert_eq!(validation.status, ConditionStatus::False);
    assert_eq!(validation.reason.as_deref(), Some("TagValidationFailed"));
    assert!(
        validation
            .message
            .as_deref()
            .unwrap()
            .contains("kubernetes.io/cluster/other"),
        "{validation:?}"
    );
    assert_eq!(mocked.launch_template_dry_runs.num_calls(), 0);
}
