//! Subnets, security groups and instance profiles: created in moto and
//! selected, made and checked over the wire, then a whole class reconciled
//! against moto; pagination over thousands of items with SDK mocks (moto
//! ignores page sizes).

use std::collections::BTreeMap;
use std::time::Instant;

use aws_sdk_ec2::operation::describe_capacity_reservations::DescribeCapacityReservationsOutput;
use aws_sdk_ec2::operation::describe_security_groups::DescribeSecurityGroupsOutput;
use aws_sdk_ec2::operation::describe_subnets::DescribeSubnetsOutput;
use aws_sdk_ec2::types::{
    ArchitectureValues, CapacityReservation, CapacityReservationState, InstanceMatchCriteria,
    SecurityGroup, Subnet, Tag,
};
use aws_smithy_mocks::{RuleMode, mock, mock_client};
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodewright::apis::{ConditionStatus, EC2NodeClass};
use nodewright::aws::capacity_reservations::CapacityReservationProvider;
use nodewright::aws::clients::AwsClients;
use nodewright::aws::instance_profile::{InstanceProfileError, InstanceProfileProvider};
use nodewright::aws::security_groups::SecurityGroupProvider;
use nodewright::aws::subnets::SubnetProvider;
use nodewright::controllers::nodeclass::reconcile_node_class;
use serde_json::json;

use crate::moto::{create_role, moto_clients};
use crate::nodeclass::{condition, context_in};

/// A VPC in moto with subnets and security groups for one test; every tag
/// value carries the test's `label`, so tests sharing the server never
/// select each other's resources.
struct Network {
    subnets: BTreeMap<&'static str, String>,
    groups: BTreeMap<&'static str, String>,
}

async fn tag(clients: &AwsClients, id: &str, tags: &[(&str, &str)]) {
    let tags = tags
        .iter()
        .map(|(k, v)| Tag::builder().key(*k).value(*v).build());
    clients
        .ec2
        .create_tags()
        .resources(id)
        .set_tags(Some(tags.collect()))
        .send()
        .await
        .unwrap();
}

/// Subnets `big` (/24, us-east-1b), `small` (/27, us-east-1a), both tagged
/// `discovery=<label>`, and `other` (/26, us-east-1a) tagged only
/// `team-<label>`; groups `nodes` (tagged) and `<label>-named`.
async fn network(clients: &AwsClients, label: &str, octet: u8) -> Network {
    let vpc = clients
        .ec2
        .create_vpc()
        .cidr_block(format!("10.{octet}.0.0/16"))
        .send()
        .await
        .unwrap()
        .vpc
        .unwrap()
        .vpc_id
        .unwrap();
    let mut subnets = BTreeMap::new();
    for (name, cidr, zone) in [
        ("big", format!("10.{octet}.1.0/24"), "us-east-1b"),
        ("small", format!("10.{octet}.2.0/27"), "us-east-1a"),
        ("other", format!("10.{octet}.3.0/26"), "us-east-1a"),
    ] {
        let id = clients
            .ec2
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block(cidr)
            .availability_zone(zone)
            .send()
            .await
            .unwrap()
            .subnet
            .unwrap()
            .subnet_id
            .unwrap();
        if name == "other" {
            tag(clients, &id, &[(&format!("team-{label}"), "any")]).await;
        } else {
            tag(clients, &id, &[("discovery", label)]).await;
        }
        subnets.insert(name, id);
    }
    let mut groups = BTreeMap::new();
    for (name, group_name) in [
        ("nodes", format!("{label}-nodes")),
        ("named", format!("{label}-named")),
    ] {
        let id = clients
            .ec2
            .create_security_group()
            .vpc_id(&vpc)
            .group_name(group_name)
            .description("nodewright test")
            .send()
            .await
            .unwrap()
            .group_id
            .unwrap();
        if name == "nodes" {
            tag(
                clients,
                &id,
                &[("discovery", label), (&format!("team-{label}"), "x")],
            )
            .await;
        }
        groups.insert(name, id);
    }
    Network { subnets, groups }
}

fn terms<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Vec<T> {
    serde_json::from_value(value).unwrap()
}

#[tokio::test]
async fn subnets_and_security_groups_are_selected_by_tag_id_and_name_in_moto() {
    let clients = moto_clients().await;
    let label = "net-select";
    let net = network(&clients, label, 61).await;
    let subnets = SubnetProvider::new(clients.ec2.clone());

    let by_tag = subnets
        .list(&terms(json!([{"tags": {"discovery": label}}])))
        .await
        .unwrap();
    let ids: Vec<&str> = by_tag.subnets.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        ids,
        [net.subnets["big"].as_str(), net.subnets["small"].as_str()],
        "most available addresses first"
    );
    assert!(by_tag.subnets[0].available_ip_count > by_tag.subnets[1].available_ip_count);
    assert_eq!(by_tag.subnets[0].zone, "us-east-1b");
    assert!(by_tag.subnets[0].zone_id.is_some());

    // `*` asks only that the key exists; terms are ORed; an id term and a
    // term that matches nothing are told apart.
    let mixed = subnets
        .list(&terms(json!([
            {"tags": {format!("team-{label}"): "*"}},
            {"id": net.subnets["small"]},
            {"tags": {"discovery": label, "missing": "yes"}},
        ])))
        .await
        .unwrap();
    let mut ids: Vec<&str> = mixed.subnets.iter().map(|s| s.id.as_str()).collect();
    ids.sort();
    let mut expected = vec![net.subnets["other"].as_str(), net.subnets["small"].as_str()];
    expected.sort();
    assert_eq!(ids, expected);
    assert_eq!(mixed.unmatched_terms, [2], "tags in one term are ANDed");

    let groups = SecurityGroupProvider::new(clients.ec2.clone());
    let found = groups
        .list(&terms(json!([
            {"tags": {"discovery": label}},
            {"name": format!("{label}-named")},
        ])))
        .await
        .unwrap();
    let ids: Vec<&str> = found
        .security_groups
        .iter()
        .map(|g| g.id.as_str())
        .collect();
    let mut expected = vec![net.groups["nodes"].as_str(), net.groups["named"].as_str()];
    expected.sort();
    assert_eq!(ids, expected, "sorted by id");
    let named = found
        .security_groups
        .iter()
        .find(|g| g.id == net.groups["named"])
        .unwrap();
    assert_eq!(named.name.as_deref(), Some(&*format!("{label}-named")));

    let by_id_and_star = groups
        .list(&terms(json!([
            {"id": net.groups["named"]},
            {"tags": {format!("team-{label}"): "*"}},
            {"name": "no-such-group"},
        ])))
        .await
        .unwrap();
    assert_eq!(by_id_and_star.security_groups.len(), 2);
    assert_eq!(by_id_and_star.unmatched_terms, [2]);
}

#[tokio::test]
async fn an_instance_profile_is_made_reused_replaced_and_deleted_in_moto() {
    let clients = moto_clients().await;
    create_role(&clients, "net-profile-a").await;
    create_role(&clients, "net-profile-b").await;
    let server = nodewright::sim::double::server();
    let context = context_in("net-profile", &server, &clients);
    let api: Api<EC2NodeClass> = Api::all(server.client());
    let mut class = crate::nodeclass::class("profiled");
    class.spec.role = Some("net-profile-a".to_string());
    class.spec.tags = Some(BTreeMap::from([("team".to_string(), "infra".to_string())]));
    let created = api.create(&PostParams::default(), &class).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    reconcile_node_class(&context, &created).await.unwrap();

    let stored = api.get("profiled").await.unwrap();
    assert_eq!(
        condition(&stored, "InstanceProfileReady").status,
        ConditionStatus::True
    );
    let first = stored
        .status
        .as_ref()
        .unwrap()
        .instance_profile
        .clone()
        .unwrap();
    assert!(first.starts_with("net-profile_"), "{first}");
    let profile = clients
        .iam
        .get_instance_profile()
        .instance_profile_name(&first)
        .send()
        .await
        .unwrap()
        .instance_profile
        .unwrap();
    let path = format!("/karpenter/us-east-1/net-profile/{uid}/");
    assert_eq!(profile.path, path);
    let roles: Vec<&str> = profile.roles.iter().map(|r| r.role_name.as_str()).collect();
    assert_eq!(roles, ["net-profile-a"]);
    let tags: BTreeMap<String, String> = profile
        .tags
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|t| (t.key, t.value))
        .collect();
    for (key, value) in [
        ("team", "infra"),
        ("kubernetes.io/cluster/net-profile", "owned"),
        ("eks:eks-cluster-name", "net-profile"),
        ("karpenter.k8s.aws/ec2nodeclass", "profiled"),
        ("topology.kubernetes.io/region", "us-east-1"),
    ] {
        assert_eq!(
            tags.get(key).map(String::as_str),
            Some(value),
            "{key}: {tags:?}"
        );
    }

    // Reused on the next pass, also by a controller that cached nothing.
    let fresh = context_in("net-profile", &server, &clients);
    reconcile_node_class(&fresh, &stored).await.unwrap();
    let again = api.get("profiled").await.unwrap();
    assert_eq!(
        again.status.as_ref().unwrap().instance_profile.as_deref(),
        Some(&*first)
    );
    let provider = InstanceProfileProvider::new(clients.iam.clone());
    assert_eq!(provider.list(&path).await.unwrap().len(), 1);

    // A new role gets a new profile; the old one keeps serving its nodes.
    let change = json!({"spec": {"role": "net-profile-b"}});
    let changed = api
        .patch("profiled", &PatchParams::default(), &Patch::Merge(&change))
        .await
        .unwrap();
    reconcile_node_class(&context, &changed).await.unwrap();
    let moved = api.get("profiled").await.unwrap();
    assert_eq!(
        condition(&moved, "InstanceProfileReady").status,
        ConditionStatus::True
    );
    let second = moved
        .status
        .as_ref()
        .unwrap()
        .instance_profile
        .clone()
        .unwrap();
    assert_ne!(second, first);
    let mut listed: Vec<(String, Option<String>)> = provider
        .list(&path)
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.name, p.role))
        .collect();
    listed.sort();
    let mut expected = vec![
        (first.clone(), Some("net-profile-a".to_string())),
        (second.clone(), Some("net-profile-b".to_string())),
    ];
    expected.sort();
    assert_eq!(listed, expected);

    // Ensuring a profile that holds another role replaces that role.
    provider
        .ensure(&first, "net-profile-b", &BTreeMap::new(), &path)
        .await
        .unwrap();
    let replaced = clients
        .iam
        .get_instance_profile()
        .instance_profile_name(&first)
        .send()
        .await
        .unwrap()
        .instance_profile
        .unwrap();
    let roles: Vec<&str> = replaced
        .roles
        .iter()
        .map(|r| r.role_name.as_str())
        .collect();
    assert_eq!(roles, ["net-profile-b"]);

    // Deleted (role removed first); deleting again is no error.
    for name in [&first, &second, &first] {
        provider.delete(name).await.unwrap();
    }
    assert!(provider.list(&path).await.unwrap().is_empty());
    assert_eq!(provider.get(&first).await.unwrap(), None);
}

#[tokio::test]
async fn a_missing_role_and_a_missing_instance_profile_are_named_in_moto() {
    let clients = moto_clients().await;
    let server = nodewright::sim::double::server();
    let context = context_in("net-missing", &server, &clients);
    let api: Api<EC2NodeClass> = Api::all(server.client());

    let mut no_role = crate::nodeclass::class("no-role");
    no_role.spec.role = Some("net-no-such-role".to_string());
    let created = api.create(&PostParams::default(), &no_role).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    reconcile_node_class(&context, &created).await.unwrap();
    let stored = api.get("no-role").await.unwrap();
    let profile = condition(&stored, "InstanceProfileReady");
    assert_eq!(profile.status, ConditionStatus::False);
    assert_eq!(profile.reason.as_deref(), Some("RoleNotFound"));
    let message = profile.message.as_deref().unwrap();
    assert!(
        message.contains("spec.role") && message.contains("net-no-such-role"),
        "{message}"
    );
    assert_eq!(condition(&stored, "Ready").status, ConditionStatus::False);
    let provider = InstanceProfileProvider::new(clients.iam.clone());
    assert!(
        provider
            .list(&format!("/karpenter/us-east-1/net-missing/{uid}/"))
            .await
            .unwrap()
            .is_empty(),
        "the profile made for a missing role is deleted again"
    );
    let direct = provider
        .ensure("net-orphan", "net-no-such-role", &BTreeMap::new(), "/")
        .await
        .unwrap_err();
    assert!(
        matches!(direct, InstanceProfileError::RoleNotFound { .. }),
        "{direct}"
    );

    let mut given = crate::nodeclass::class("no-profile");
    given.spec.role = None;
    given.spec.instance_profile = Some("net-no-such-profile".to_string());
    let created = api.create(&PostParams::default(), &given).await.unwrap();
    reconcile_node_class(&context, &created).await.unwrap();
    let stored = api.get("no-profile").await.unwrap();
    let profile = condition(&stored, "InstanceProfileReady");
    assert_eq!(profile.status, ConditionStatus::False);
    assert_eq!(profile.reason.as_deref(), Some("InstanceProfileNotFound"));
    let message = profile.message.as_deref().unwrap();
    assert!(
        message.contains("spec.instanceProfile") && message.contains("net-no-such-profile"),
        "{message}"
    );
}

#[tokio::test]
async fn a_whole_class_reconciles_to_ready_against_moto() {
    let clients = moto_clients().await;
    let label = "net-whole";
    let net = network(&clients, label, 62).await;
    create_role(&clients, "net-whole-role").await;
    let image = crate::amis::register(
        &clients,
        "net-whole-golden",
        ArchitectureValues::X8664,
        &[("team", label)],
    )
    .await;
    let server = nodewright::sim::double::server();
    let context = context_in("net-whole", &server, &clients);
    let class: EC2NodeClass = serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": "whole"},
        "spec": {
            "role": "net-whole-role",
            "amiFamily": "AL2023",
            "amiSelectorTerms": [{"tags": {"team": label}}],
            "subnetSelectorTerms": [{"tags": {"discovery": label}}],
            "securityGroupSelectorTerms": [{"name": format!("{label}-nodes")}],
            "tags": {"team": "infra"},
        },
    }))
    .unwrap();
    let api: Api<EC2NodeClass> = Api::all(server.client());
    let created = api.create(&PostParams::default(), &class).await.unwrap();

    let start = Instant::now();
    let done = reconcile_node_class(&context, &created)
        .await
        .unwrap()
        .unwrap();
    let took = start.elapsed();
    println!("one full EC2NodeClass reconcile against moto: {took:?}");

    let stored = api.get("whole").await.unwrap();
    for type_ in nodewright::controllers::nodeclass::ready_dependencies().chain(["Ready"]) {
        let c = condition(&stored, type_);
        assert_eq!(c.status, ConditionStatus::True, "{c:?}");
    }
    assert!(done.is_ready());
    let status = stored.status.unwrap();
    let subnets: Vec<&str> = status
        .subnets
        .iter()
        .flatten()
        .map(|s| s.id.as_str())
        .collect();
    assert_eq!(
        subnets,
        [net.subnets["big"].as_str(), net.subnets["small"].as_str()]
    );
    assert_eq!(status.security_groups.unwrap()[0].id, net.groups["nodes"]);
    assert_eq!(status.amis.unwrap()[0].id, image);
    assert!(status.instance_profile.unwrap().starts_with("net-whole_"));
}

#[tokio::test]
async fn describe_subnets_is_read_to_the_last_page() {
    const TOTAL: usize = 3000;
    let pages = mock!(aws_sdk_ec2::Client::describe_subnets).then_compute_output(|req| {
        assert_eq!(req.max_results(), Some(500));
        let start: usize = req.next_token().map_or(0, |t| t.parse().unwrap());
        let end = (start + 500).min(TOTAL);
        let subnets = (start..end).map(|i| {
            Subnet::builder()
                .subnet_id(format!("subnet-{i:05}"))
                .availability_zone(["us-east-1a", "us-east-1b", "us-east-1c"][i % 3])
                .available_ip_address_count((i % 97) as i32)
                .build()
        });
        DescribeSubnetsOutput::builder()
            .set_subnets(Some(subnets.collect()))
            .set_next_token((end < TOTAL).then(|| end.to_string()))
            .build()
    });
    let ec2 = mock_client!(aws_sdk_ec2, RuleMode::MatchAny, [&pages]);
    let found = SubnetProvider::new(ec2)
        .list(&terms(json!([{"tags": {"karpenter.sh/discovery": "big"}}])))
        .await
        .unwrap();
    assert_eq!(pages.num_calls(), 6);
    assert_eq!(found.subnets.len(), TOTAL);
    assert!(found.subnets.windows(2).all(|w| {
        w[0].available_ip_count > w[1].available_ip_count
            || (w[0].available_ip_count == w[1].available_ip_count && w[0].id < w[1].id)
    }));
    assert_eq!(found.subnets[0].available_ip_count, 96);
    assert_eq!(found.subnets[0].id, "subnet-00096");
}

#[tokio::test]
async fn describe_security_groups_is_read_to_the_last_page() {
    const TOTAL: usize = 2500;
    let pages = mock!(aws_sdk_ec2::Client::describe_security_groups).then_compute_output(|req| {
        assert_eq!(req.max_results(), Some(500));
        let start: usize = req.next_token().map_or(0, |t| t.parse().unwrap());
        let end = (start + 500).min(TOTAL);
        let groups = (start..end).map(|i| {
            SecurityGroup::builder()
                .group_id(format!("sg-{:05}", TOTAL - i))
                .group_name(format!("group-{i}"))
                .build()
        });
        DescribeSecurityGroupsOutput::builder()
            .set_security_groups(Some(groups.collect()))
            .set_next_token((end < TOTAL).then(|| end.to_string()))
            .build()
    });
    let ec2 = mock_client!(aws_sdk_ec2, RuleMode::MatchAny, [&pages]);
    let found = SecurityGroupProvider::new(ec2)
        .list(&terms(json!([{"tags": {"karpenter.sh/discovery": "*"}}])))
        .await
        .unwrap();
    assert_eq!(pages.num_calls(), 5);
    assert_eq!(found.security_groups.len(), TOTAL);
    assert_eq!(found.security_groups[0].id, "sg-00001");
    assert!(found.security_groups.windows(2).all(|w| w[0].id < w[1].id));
}

#[tokio::test]
async fn describe_capacity_reservations_is_read_to_the_last_page() {
    const TOTAL: usize = 2200;
    let pages =
        mock!(aws_sdk_ec2::Client::describe_capacity_reservations).then_compute_output(|req| {
            assert_eq!(req.max_results(), Some(1000));
            let active = req
                .filters()
                .iter()
                .any(|f| f.name() == Some("state") && f.values() == ["active"]);
            assert!(active, "only active reservations are asked for");
            let start: usize = req.next_token().map_or(0, |t| t.parse().unwrap());
            let end = (start + 1000).min(TOTAL);
            let reservations = (start..end).map(|i| {
                CapacityReservation::builder()
                    .capacity_reservation_id(format!("cr-{i:05}"))
                    .instance_type("m5.large")
                    .availability_zone("us-east-1a")
                    .owner_id("012345678901")
                    .instance_match_criteria(InstanceMatchCriteria::Targeted)
                    .state(CapacityReservationState::Active)
                    .available_instance_count((i % 5) as i32)
                    .build()
            });
            DescribeCapacityReservationsOutput::builder()
                .set_capacity_reservations(Some(reservations.collect()))
                .set_next_token((end < TOTAL).then(|| end.to_string()))
                .build()
        });
    let ec2 = mock_client!(aws_sdk_ec2, RuleMode::MatchAny, [&pages]);
    let provider = CapacityReservationProvider::new(ec2, Default::default());
    let found = provider
        .list(&terms(json!([{"tags": {"team": "ml"}}])))
        .await
        .unwrap();
    assert_eq!(pages.num_calls(), 3);
    assert_eq!(found.reservations.len(), TOTAL);
    assert!(found.unmatched_terms.is_empty());
    assert_eq!(provider.availability().available("cr-02199"), Some(4));
    // The answer is cached: no second round of calls.
    provider
        .list(&terms(json!([{"tags": {"team": "ml"}}])))
        .await
        .unwrap();
    assert_eq!(pages.num_calls(), 3);
}
