//! The subnets an EC2NodeClass's `subnetSelectorTerms` select.
//!
//! Terms are ORed and the fields of one term ANDed; a tag value `*` matches
//! any value. Terms by id share one `DescribeSubnets` call, each term by tags
//! gets its own, every call is paginated to the end.
//!
//! **Order is a contract**: subnets come most available IPv4 addresses first
//! (ties by id), the order `status.subnets` keeps, because the launch path
//! takes the first subnet of each zone from the status.
//!
//! Cache: the selection per set of terms lives [`SUBNETS_TTL`] (1 minute,
//! Karpenter's `DefaultTTL` and default `--subnet-refresh-interval`), so
//! classes that share terms share one lookup.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_ec2::types::Filter;

use super::errors::AwsError;
use super::filters::{describe_tags, filter, tag_filters};
use super::ttl_cache;
use crate::apis::ec2nodeclass::SubnetSelectorTerm;

/// How long a selection is reused before EC2 is asked again.
pub const SUBNETS_TTL: Duration = Duration::from_secs(60);
/// `MaxResults` of each `DescribeSubnets` page.
const PAGE_SIZE: i32 = 500;
/// Distinct sets of terms cached at once.
const MAX_CACHED: u64 = 1024;

/// A subnet a class may launch into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subnet {
    /// `subnet-…`.
    pub id: String,
    /// Availability zone name.
    pub zone: String,
    /// Availability zone id (`use1-az1`), when EC2 reported it.
    pub zone_id: Option<String>,
    /// Free IPv4 addresses when EC2 was asked.
    pub available_ip_count: i32,
}

/// What a class's subnet terms selected.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SubnetSelection {
    /// Every selected subnet once, most available addresses first, then by id.
    pub subnets: Vec<Subnet>,
    /// Indexes of the terms that matched no subnet.
    pub unmatched_terms: Vec<usize>,
}

/// Why the subnets could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum SubnetError {
    /// A term selects nothing in particular (it would match every subnet).
    #[error(
        "subnetSelectorTerms[{index}] has neither tags nor id: select subnets by tags or by id"
    )]
    EmptyTerm {
        /// The term's index.
        index: usize,
    },
    /// EC2 refused or failed the lookup.
    #[error("looking up {terms}: {source}")]
    Describe {
        /// The terms the call served (`subnetSelectorTerms[1]`).
        terms: String,
        /// The call's error.
        #[source]
        source: AwsError,
    },
}

impl SubnetError {
    /// Whether waiting may help (throttling, a server fault).
    pub fn is_transient(&self) -> bool {
        matches!(self, SubnetError::Describe { source, .. } if source.is_transient())
    }
}

/// Finds subnets by selector terms.
pub struct SubnetProvider {
    ec2: aws_sdk_ec2::Client,
    cache: moka::sync::Cache<String, Arc<SubnetSelection>>,
}

impl SubnetProvider {
    /// A provider over `ec2` (real AWS, moto, or SDK mocks).
    pub fn new(ec2: aws_sdk_ec2::Client) -> Self {
        SubnetProvider {
            ec2,
            // Each selection lives SUBNETS_TTL; at most MAX_CACHED sets of terms.
            cache: ttl_cache(SUBNETS_TTL, MAX_CACHED),
        }
    }

    /// The subnets `terms` select (see the module documentation for order).
    pub async fn list(
        &self,
        terms: &[SubnetSelectorTerm],
    ) -> Result<Arc<SubnetSelection>, SubnetError> {
        let key = serde_json::to_string(terms).unwrap_or_default();
        if let Some(hit) = self.cache.get(&key) {
            return Ok(hit);
        }
        let mut by_id: Vec<(usize, &str)> = Vec::new();
        let mut by_tags: Vec<(usize, Vec<Filter>)> = Vec::new();
        for (index, term) in terms.iter().enumerate() {
            match (&term.id, &term.tags) {
                (Some(id), _) => by_id.push((index, id.as_str())),
                (None, Some(tags)) if !tags.is_empty() => by_tags.push((index, tag_filters(tags))),
                _ => return Err(SubnetError::EmptyTerm { index }),
            }
        }

        let mut found: BTreeMap<String, Subnet> = BTreeMap::new();
        let mut matched = vec![false; terms.len()];
        for (index, filters) in by_tags {
            let label = match &terms[index].tags {
                Some(tags) => format!(
                    "subnetSelectorTerms[{index}] (tags {})",
                    describe_tags(tags)
                ),
                None => format!("subnetSelectorTerms[{index}]"),
            };
            for subnet in self.describe(filters, &label).await? {
                matched[index] = true;
                found.insert(subnet.id.clone(), subnet);
            }
        }
        if !by_id.is_empty() {
            let indexes: Vec<String> = by_id.iter().map(|(i, _)| i.to_string()).collect();
            let label = format!("subnetSelectorTerms[{}] (ids)", indexes.join(", "));
            let ids = by_id.iter().map(|(_, id)| *id);
            for subnet in self
                .describe(vec![filter("subnet-id", ids)], &label)
                .await?
            {
                for (index, id) in &by_id {
                    if subnet.id == *id {
                        matched[*index] = true;
                    }
                }
                found.insert(subnet.id.clone(), subnet);
            }
        }

        let mut subnets: Vec<Subnet> = found.into_values().collect();
        subnets.sort_by(|a, b| {
            b.available_ip_count
                .cmp(&a.available_ip_count)
                .then_with(|| a.id.cmp(&b.id))
        });
        let selection = Arc::new(SubnetSelection {
            subnets,
            unmatched_terms: (0..terms.len()).filter(|i| !matched[*i]).collect(),
        });
        self.cache.insert(key, selection.clone());
        Ok(selection)
    }

    /// Every page of one `DescribeSubnets` call. Subnets without an id or
    /// zone (never sent by EC2) are skipped.
    async fn describe(
        &self,
        filters: Vec<Filter>,
        label: &str,
    ) -> Result<Vec<Subnet>, SubnetError> {
        let mut pages = self
            .ec2
            .describe_subnets()
            .set_filters(Some(filters))
            .max_results(PAGE_SIZE)
            .into_paginator()
            .send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| SubnetError::Describe {
                terms: label.to_string(),
                source: AwsError::from_sdk("ec2:DescribeSubnets", &e),
            })?;
            for subnet in page.subnets.unwrap_or_default() {
                let (Some(id), Some(zone)) = (subnet.subnet_id, subnet.availability_zone) else {
                    tracing::warn!(
                        terms = label,
                        "EC2 listed a subnet without an id or zone; skipped"
                    );
                    continue;
                };
                out.push(Subnet {
                    id,
                    zone,
                    zone_id: subnet.availability_zone_id,
                    available_ip_count: subnet.available_ip_address_count.unwrap_or(0),
                });
            }
        }
        Ok(out)
    }
}
