//! The placement group provider (Karpenter's `Query` and `Placement Group
//! Provider` cases) over SDK mocks: moto serves no placement groups. The
//! fake EC2 here answers `DescribePlacementGroups` as EC2 does — by
//! `GroupIds` or `GroupNames`, only groups in the state filtered for, and
//! `InvalidPlacementGroup.Unknown` for a name or id it does not know.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_ec2::error::ErrorMetadata;
use aws_sdk_ec2::operation::describe_placement_groups::{
    DescribePlacementGroupsError, DescribePlacementGroupsInput, DescribePlacementGroupsOutput,
};
use aws_sdk_ec2::types::{PlacementGroup, PlacementGroupState, PlacementStrategy, SpreadLevel};
use aws_smithy_mocks::{MockResponse, Rule, RuleMode, mock, mock_client};
use nodewright::apis::ec2nodeclass::{
    PlacementGroupSelector, PlacementGroupStatus, PlacementGroupStrategy,
};
use nodewright::aws::placement_groups::{PlacementGroupError, PlacementGroupProvider};

/// The groups of the fake account.
pub fn groups() -> Vec<PlacementGroup> {
    let group = |id: &str, name: &str, strategy: PlacementStrategy| {
        PlacementGroup::builder()
            .group_id(id)
            .group_name(name)
            .state(PlacementGroupState::Available)
            .strategy(strategy)
    };
    vec![
        group("pg-cluster123", "my-cluster-pg", PlacementStrategy::Cluster).build(),
        group(
            "pg-partition456",
            "my-partition-pg",
            PlacementStrategy::Partition,
        )
        .partition_count(7)
        .build(),
        group("pg-spread789", "my-spread-pg", PlacementStrategy::Spread)
            .spread_level(SpreadLevel::Rack)
            .build(),
        group("pg-pending000", "my-pending-pg", PlacementStrategy::Cluster)
            .state(PlacementGroupState::Pending)
            .build(),
        group("pg-named111", "pg-mygroup", PlacementStrategy::Cluster).build(),
    ]
}

/// A `DescribePlacementGroups` rule over `groups` recording each request.
pub fn describe_rule(
    groups: Vec<PlacementGroup>,
    seen: Arc<Mutex<Vec<DescribePlacementGroupsInput>>>,
) -> Rule {
    mock!(aws_sdk_ec2::Client::describe_placement_groups).then_compute_response(move |r| {
        seen.lock().unwrap().push(r.clone());
        let named = |g: &PlacementGroup| {
            r.group_ids().iter().any(|id| g.group_id() == Some(id))
                || r.group_names().iter().any(|n| g.group_name() == Some(n))
        };
        let asked = r.group_ids().len() + r.group_names().len();
        if asked > 0 && !groups.iter().any(named) {
            return MockResponse::Error(DescribePlacementGroupsError::generic(
                ErrorMetadata::builder()
                    .code("InvalidPlacementGroup.Unknown")
                    .message("The Placement Group is unknown.")
                    .build(),
            ));
        }
        let states: Vec<String> = r
            .filters()
            .iter()
            .filter(|f| f.name() == Some("state"))
            .flat_map(|f| f.values().to_vec())
            .collect();
        let found = groups.iter().filter(|g| {
            (asked == 0 || named(g))
                && (states.is_empty()
                    || states
                        .iter()
                        .any(|s| g.state().map(PlacementGroupState::as_str) == Some(s)))
        });
        MockResponse::Output(
            DescribePlacementGroupsOutput::builder()
                .set_placement_groups(Some(found.cloned().collect()))
                .build(),
        )
    })
}

/// A provider over the fake account and the requests it made.
fn fake_provider() -> (
    PlacementGroupProvider,
    Arc<Mutex<Vec<DescribePlacementGroupsInput>>>,
) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let rule = describe_rule(groups(), seen.clone());
    let ec2 = mock_client!(aws_sdk_ec2, RuleMode::MatchAny, [&rule]);
    (PlacementGroupProvider::new(ec2), seen)
}

fn by_name(name: &str) -> PlacementGroupSelector {
    PlacementGroupSelector {
        name: Some(name.to_string()),
        id: None,
    }
}

fn by_id(id: &str) -> PlacementGroupSelector {
    PlacementGroupSelector {
        name: None,
        id: Some(id.to_string()),
    }
}

fn cluster_group() -> PlacementGroupStatus {
    PlacementGroupStatus {
        id: "pg-cluster123".to_string(),
        name: "my-cluster-pg".to_string(),
        strategy: PlacementGroupStrategy::Cluster,
        partition_count: None,
        spread_level: None,
    }
}

#[tokio::test]
async fn should_use_group_names_when_query_specifies_name() {
    let (provider, seen) = fake_provider();
    provider.get(Some(&by_name("my-cluster-pg"))).await.unwrap();
    let request = seen.lock().unwrap()[0].clone();
    assert_eq!(request.group_names(), ["my-cluster-pg"]);
    assert!(request.group_ids().is_empty());
    assert_eq!(request.filters().len(), 1);
    assert_eq!(request.filters()[0].name(), Some("state"));
    assert_eq!(request.filters()[0].values(), ["available"]);
}

#[tokio::test]
async fn should_use_group_ids_when_query_specifies_id() {
    let (provider, seen) = fake_provider();
    provider.get(Some(&by_id("pg-cluster123"))).await.unwrap();
    let request = seen.lock().unwrap()[0].clone();
    assert_eq!(request.group_ids(), ["pg-cluster123"]);
    assert!(request.group_names().is_empty());
    assert_eq!(request.filters()[0].values(), ["available"]);
}

#[tokio::test]
async fn should_use_group_names_even_when_name_has_pg_prefix() {
    let (provider, seen) = fake_provider();
    let found = provider.get(Some(&by_name("pg-mygroup"))).await.unwrap();
    assert_eq!(found.unwrap().id, "pg-named111");
    let request = seen.lock().unwrap()[0].clone();
    assert_eq!(request.group_names(), ["pg-mygroup"]);
    assert!(request.group_ids().is_empty());
}

#[tokio::test]
async fn should_return_a_placement_group_by_name_and_by_id_from_the_ec2_api() {
    let (provider, _) = fake_provider();
    assert_eq!(
        provider.get(Some(&by_name("my-cluster-pg"))).await.unwrap(),
        Some(cluster_group())
    );
    assert_eq!(
        provider.get(Some(&by_id("pg-cluster123"))).await.unwrap(),
        Some(cluster_group())
    );
    let partition = provider
        .get(Some(&by_name("my-partition-pg")))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(partition.strategy, PlacementGroupStrategy::Partition);
    assert_eq!(partition.partition_count, Some(7));
    let spread = provider
        .get(Some(&by_name("my-spread-pg")))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(spread.strategy, PlacementGroupStrategy::Spread);
    assert_eq!(spread.spread_level.as_deref(), Some("rack"));
}

#[tokio::test]
async fn should_return_nil_when_placement_group_is_not_found_or_not_available() {
    let (provider, _) = fake_provider();
    assert_eq!(
        provider
            .get(Some(&by_name("nonexistent-pg")))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        provider.get(Some(&by_id("pg-0000000000"))).await.unwrap(),
        None
    );
    assert_eq!(
        provider.get(Some(&by_name("my-pending-pg"))).await.unwrap(),
        None
    );
}

#[tokio::test]
async fn should_return_nil_when_no_placement_group_selector_is_set() {
    let (provider, seen) = fake_provider();
    assert_eq!(provider.get(None).await.unwrap(), None);
    assert!(seen.lock().unwrap().is_empty(), "no selector, no call");
}

#[tokio::test]
async fn should_cache_results_and_not_return_a_cached_entry_for_a_different_selector() {
    let (provider, seen) = fake_provider();
    for _ in 0..3 {
        assert_eq!(
            provider.get(Some(&by_name("my-cluster-pg"))).await.unwrap(),
            Some(cluster_group())
        );
    }
    assert_eq!(seen.lock().unwrap().len(), 1, "answered from the cache");
    let spread = provider.get(Some(&by_name("my-spread-pg"))).await.unwrap();
    assert_eq!(spread.unwrap().id, "pg-spread789");
    assert_eq!(seen.lock().unwrap().len(), 2);
    // "Not found" is cached too.
    provider
        .get(Some(&by_name("nonexistent-pg")))
        .await
        .unwrap();
    provider
        .get(Some(&by_name("nonexistent-pg")))
        .await
        .unwrap();
    assert_eq!(seen.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn should_return_the_first_placement_group_when_multiple_are_returned() {
    let two = mock!(aws_sdk_ec2::Client::describe_placement_groups).then_output(|| {
        let all = groups();
        DescribePlacementGroupsOutput::builder()
            .placement_groups(all[2].clone())
            .placement_groups(all[0].clone())
            .build()
    });
    let provider =
        PlacementGroupProvider::new(mock_client!(aws_sdk_ec2, RuleMode::MatchAny, [&two]));
    let found = provider.get(Some(&by_name("my-spread-pg"))).await.unwrap();
    assert_eq!(found.unwrap().id, "pg-spread789");
}

#[tokio::test]
async fn should_return_an_error_and_stale_data_when_the_ec2_api_returns_an_error() {
    let answers = mock!(aws_sdk_ec2::Client::describe_placement_groups)
        .sequence()
        .output(|| {
            DescribePlacementGroupsOutput::builder()
                .placement_groups(groups()[0].clone())
                .build()
        })
        .http_status(
            403,
            Some(crate::nodeclass::fake_aws::ec2_error(
                "UnauthorizedOperation",
                "You are not authorized to perform this operation.",
            )),
        )
        .repeatedly()
        .build();
    // Answers kept 10 ms, so the second lookup asks EC2 again.
    let provider = PlacementGroupProvider::with_answer_ttl(
        mock_client!(aws_sdk_ec2, RuleMode::Sequential, [&answers]),
        Duration::from_millis(10),
    );
    let selector = by_name("my-cluster-pg");
    assert_eq!(
        provider.get(Some(&selector)).await.unwrap(),
        Some(cluster_group())
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    match provider.get(Some(&selector)).await {
        Err(PlacementGroupError::Describe { stale, source, .. }) => {
            assert_eq!(stale, Some(cluster_group()));
            assert_eq!(source.code.as_deref(), Some("UnauthorizedOperation"));
        }
        other => panic!("expected a lookup error with stale data, got {other:?}"),
    }
}
