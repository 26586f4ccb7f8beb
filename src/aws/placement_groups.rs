//! The placement group an EC2NodeClass's `placementGroupSelector` names,
//! looked up as Karpenter's placement group provider does: one
//! `DescribePlacementGroups` call by id (`GroupIds`) or else by name
//! (`GroupNames`, even for a name that starts with `pg-`), filtered to
//! `state=available`; the first group listed wins. EC2 answers an unknown
//! name or id with `InvalidPlacementGroup.Unknown`, which is "not found"
//! here, as an empty list is.
//!
//! Caches, as Karpenter's two: an answer (a group or none) is reused for
//! [`PLACEMENT_GROUP_TTL`] (1 minute); the last group found for a selector
//! is kept [`PLACEMENT_GROUP_AVAILABILITY_TTL`] (24 hours) and handed back,
//! with the error, when a later lookup fails.

use std::time::Duration;

use super::errors::AwsError;
use super::filters::filter;
use super::ttl_cache;
use crate::apis::ec2nodeclass::{
    PlacementGroupSelector, PlacementGroupStatus, PlacementGroupStrategy,
};

/// How long an answer is reused before EC2 is asked again (Karpenter's `DefaultTTL`).
pub const PLACEMENT_GROUP_TTL: Duration = Duration::from_secs(60);
/// How long the last group found for a selector is kept for failed lookups
/// (Karpenter's `PlacementGroupAvailabilityTTL`).
pub const PLACEMENT_GROUP_AVAILABILITY_TTL: Duration = Duration::from_secs(24 * 3600);
/// Distinct selectors cached at once.
const MAX_CACHED: u64 = 1024;
/// EC2's error code for a name or id it does not know.
const UNKNOWN_GROUP: &str = "InvalidPlacementGroup.Unknown";

/// Why the placement group could not be looked up.
#[derive(Debug, thiserror::Error)]
pub enum PlacementGroupError {
    /// The selector names neither a group id nor a name.
    #[error(
        "spec.placementGroupSelector has neither id nor name: name the placement group by one of them"
    )]
    EmptySelector,
    /// EC2 refused or failed the lookup. `stale` is the group found last
    /// for this selector, if one was found within the last 24 hours.
    #[error("looking up placement group {selector}: {source}")]
    Describe {
        /// The id or name asked for.
        selector: String,
        /// The call's error.
        #[source]
        source: AwsError,
        /// The last group found for the selector.
        stale: Option<PlacementGroupStatus>,
    },
}

impl PlacementGroupError {
    /// Whether waiting may help (throttling, a server fault).
    pub fn is_transient(&self) -> bool {
        matches!(self, PlacementGroupError::Describe { source, .. } if source.is_transient())
    }
}

/// What one selector asks EC2 for: an id wins over a name, as in Karpenter.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PlacementGroupQuery {
    /// `GroupIds=[id]`.
    Id(String),
    /// `GroupNames=[name]`.
    Name(String),
}

impl PlacementGroupQuery {
    /// The query `selector` makes, or `None` when it names nothing.
    pub fn of(selector: &PlacementGroupSelector) -> Option<Self> {
        let given = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
        given(&selector.id)
            .map(PlacementGroupQuery::Id)
            .or_else(|| given(&selector.name).map(PlacementGroupQuery::Name))
    }

    /// The id or name, for messages.
    pub fn value(&self) -> &str {
        match self {
            PlacementGroupQuery::Id(v) | PlacementGroupQuery::Name(v) => v,
        }
    }
}

/// Finds placement groups.
pub struct PlacementGroupProvider {
    ec2: aws_sdk_ec2::Client,
    /// The last answer per query: a group, or `None` for not found.
    answers: moka::sync::Cache<PlacementGroupQuery, Option<PlacementGroupStatus>>,
    /// The last group found per query, for failed lookups.
    found: moka::sync::Cache<PlacementGroupQuery, PlacementGroupStatus>,
    /// One lookup at a time, so concurrent reconciles share an answer.
    lookup: tokio::sync::Mutex<()>,
}

impl PlacementGroupProvider {
    /// A provider over `ec2` (real AWS or SDK mocks; moto has no placement groups).
    pub fn new(ec2: aws_sdk_ec2::Client) -> Self {
        Self::with_answer_ttl(ec2, PLACEMENT_GROUP_TTL)
    }

    /// A provider reusing answers for `ttl` instead of [`PLACEMENT_GROUP_TTL`]
    /// (tests that need a lookup to reach EC2 again).
    pub fn with_answer_ttl(ec2: aws_sdk_ec2::Client, ttl: Duration) -> Self {
        PlacementGroupProvider {
            ec2,
            answers: ttl_cache(ttl, MAX_CACHED),
            found: ttl_cache(PLACEMENT_GROUP_AVAILABILITY_TTL, MAX_CACHED),
            lookup: tokio::sync::Mutex::new(()),
        }
    }

    /// The available group `selector` names, `None` when there is none
    /// (or no selector).
    pub async fn get(
        &self,
        selector: Option<&PlacementGroupSelector>,
    ) -> Result<Option<PlacementGroupStatus>, PlacementGroupError> {
        let Some(selector) = selector else {
            return Ok(None);
        };
        let query = PlacementGroupQuery::of(selector).ok_or(PlacementGroupError::EmptySelector)?;
        if let Some(hit) = self.answers.get(&query) {
            return Ok(hit);
        }
        let _one_at_a_time = self.lookup.lock().await;
        if let Some(hit) = self.answers.get(&query) {
            return Ok(hit);
        }
        let answer = match self.describe(&query).await {
            Ok(answer) => answer,
            Err(source) => {
                return Err(PlacementGroupError::Describe {
                    selector: query.value().to_string(),
                    source,
                    stale: self.found.get(&query),
                });
            }
        };
        if let Some(group) = &answer {
            self.found.insert(query.clone(), group.clone());
        }
        self.answers.insert(query, answer.clone());
        Ok(answer)
    }

    async fn describe(
        &self,
        query: &PlacementGroupQuery,
    ) -> Result<Option<PlacementGroupStatus>, AwsError> {
        let request = self
            .ec2
            .describe_placement_groups()
            .filters(filter("state", ["available"]));
        let request = match query {
            PlacementGroupQuery::Id(id) => request.group_ids(id),
            PlacementGroupQuery::Name(name) => request.group_names(name),
        };
        let output = match request.send().await {
            Ok(output) => output,
            Err(e) => {
                let error = AwsError::from_sdk("ec2:DescribePlacementGroups", &e);
                if error.code.as_deref() == Some(UNKNOWN_GROUP) {
                    return Ok(None);
                }
                return Err(error);
            }
        };
        Ok(output
            .placement_groups
            .unwrap_or_default()
            .iter()
            .find_map(status_of))
    }
}

/// A group as the class status records it; `None` for an entry EC2 would
/// never send (no id, or a strategy nodewright does not know).
pub fn status_of(group: &aws_sdk_ec2::types::PlacementGroup) -> Option<PlacementGroupStatus> {
    let strategy = PlacementGroupStrategy::parse(group.strategy.as_ref()?.as_str())?;
    Some(PlacementGroupStatus {
        id: group.group_id.clone()?,
        name: group.group_name.clone().unwrap_or_default(),
        strategy,
        partition_count: group
            .partition_count
            .filter(|_| strategy == PlacementGroupStrategy::Partition),
        spread_level: group
            .spread_level
            .as_ref()
            .filter(|_| strategy == PlacementGroupStrategy::Spread)
            .map(|l| l.as_str().to_string()),
    })
}
