//! The security groups an EC2NodeClass's `securityGroupSelectorTerms` select.
//!
//! Terms are ORed and the fields of one term ANDed; a tag value `*` matches
//! any value. Terms by id share one `DescribeSecurityGroups` call
//! (`group-id`), terms by name another (`group-name`), each term by tags gets
//! its own; every call is paginated to the end. Groups come sorted by id.
//!
//! Cache: the selection per set of terms lives [`SECURITY_GROUPS_TTL`]
//! (1 minute, Karpenter's `DefaultTTL`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_ec2::types::Filter;

use super::errors::AwsError;
use super::filters::{describe_tags, filter, tag_filters};
use super::ttl_cache;
use crate::apis::ec2nodeclass::SecurityGroupSelectorTerm;

/// How long a selection is reused before EC2 is asked again.
pub const SECURITY_GROUPS_TTL: Duration = Duration::from_secs(60);
/// `MaxResults` of each `DescribeSecurityGroups` page.
const PAGE_SIZE: i32 = 500;
/// Distinct sets of terms cached at once.
const MAX_CACHED: u64 = 1024;

/// A security group instances of the class get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityGroup {
    /// `sg-…`.
    pub id: String,
    /// The group's name.
    pub name: Option<String>,
}

/// What a class's security group terms selected.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SecurityGroupSelection {
    /// Every selected group once, by id.
    pub security_groups: Vec<SecurityGroup>,
    /// Indexes of the terms that matched no group.
    pub unmatched_terms: Vec<usize>,
}

/// Why the security groups could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum SecurityGroupError {
    /// A term selects nothing in particular (it would match every group).
    #[error(
        "securityGroupSelectorTerms[{index}] has no tags, id or name: select security groups by one of them"
    )]
    EmptyTerm {
        /// The term's index.
        index: usize,
    },
    /// EC2 refused or failed the lookup.
    #[error("looking up {terms}: {source}")]
    Describe {
        /// The terms the call served (`securityGroupSelectorTerms[1]`).
        terms: String,
        /// The call's error.
        #[source]
        source: AwsError,
    },
}

impl SecurityGroupError {
    /// Whether waiting may help (throttling, a server fault).
    pub fn is_transient(&self) -> bool {
        matches!(self, SecurityGroupError::Describe { source, .. } if source.is_transient())
    }
}

/// How a term selects.
enum Selects<'t> {
    Id(&'t str),
    Name(&'t str),
    Tags(Vec<Filter>),
}

/// Finds security groups by selector terms.
pub struct SecurityGroupProvider {
    ec2: aws_sdk_ec2::Client,
    cache: moka::sync::Cache<String, Arc<SecurityGroupSelection>>,
}

impl SecurityGroupProvider {
    /// A provider over `ec2` (real AWS, moto, or SDK mocks).
    pub fn new(ec2: aws_sdk_ec2::Client) -> Self {
        SecurityGroupProvider {
            ec2,
            // Each selection lives SECURITY_GROUPS_TTL; at most MAX_CACHED sets of terms.
            cache: ttl_cache(SECURITY_GROUPS_TTL, MAX_CACHED),
        }
    }

    /// The security groups `terms` select, sorted by id.
    pub async fn list(
        &self,
        terms: &[SecurityGroupSelectorTerm],
    ) -> Result<Arc<SecurityGroupSelection>, SecurityGroupError> {
        let key = serde_json::to_string(terms).unwrap_or_default();
        if let Some(hit) = self.cache.get(&key) {
            return Ok(hit);
        }
        let mut selects = Vec::with_capacity(terms.len());
        for (index, term) in terms.iter().enumerate() {
            // As in Karpenter, an id wins over a name, a name over tags.
            selects.push(match (&term.id, &term.name, &term.tags) {
                (Some(id), _, _) => Selects::Id(id),
                (None, Some(name), _) => Selects::Name(name),
                (None, None, Some(tags)) if !tags.is_empty() => Selects::Tags(tag_filters(tags)),
                _ => return Err(SecurityGroupError::EmptyTerm { index }),
            });
        }

        let mut found: BTreeMap<String, SecurityGroup> = BTreeMap::new();
        let mut matched = vec![false; terms.len()];
        for (index, select) in selects.iter().enumerate() {
            let Selects::Tags(filters) = select else {
                continue;
            };
            let tags = terms[index]
                .tags
                .as_ref()
                .map(describe_tags)
                .unwrap_or_default();
            let label = format!("securityGroupSelectorTerms[{index}] (tags {tags})");
            for group in self.describe(filters.clone(), &label).await? {
                matched[index] = true;
                found.insert(group.id.clone(), group);
            }
        }
        let by_id: Vec<(usize, &str)> = selects
            .iter()
            .enumerate()
            .filter_map(|(index, select)| match select {
                Selects::Id(id) => Some((index, *id)),
                _ => None,
            })
            .collect();
        let by_name: Vec<(usize, &str)> = selects
            .iter()
            .enumerate()
            .filter_map(|(index, select)| match select {
                Selects::Name(name) => Some((index, *name)),
                _ => None,
            })
            .collect();
        for (wanted, filter_name, kind) in
            [(by_id, "group-id", "ids"), (by_name, "group-name", "names")]
        {
            if wanted.is_empty() {
                continue;
            }
            let indexes: Vec<String> = wanted.iter().map(|(i, _)| i.to_string()).collect();
            let label = format!(
                "securityGroupSelectorTerms[{}] ({kind})",
                indexes.join(", ")
            );
            let values = wanted.iter().map(|(_, value)| *value);
            for group in self
                .describe(vec![filter(filter_name, values)], &label)
                .await?
            {
                for (index, value) in &wanted {
                    let key = match filter_name {
                        "group-id" => Some(group.id.as_str()),
                        _ => group.name.as_deref(),
                    };
                    matched[*index] |= key == Some(*value);
                }
                found.insert(group.id.clone(), group);
            }
        }

        let selection = Arc::new(SecurityGroupSelection {
            security_groups: found.into_values().collect(),
            unmatched_terms: (0..terms.len()).filter(|i| !matched[*i]).collect(),
        });
        self.cache.insert(key, selection.clone());
        Ok(selection)
    }

    /// Every page of one `DescribeSecurityGroups` call; groups without an
    /// id (never sent by EC2) are skipped.
    async fn describe(
        &self,
        filters: Vec<Filter>,
        label: &str,
    ) -> Result<Vec<SecurityGroup>, SecurityGroupError> {
        let mut pages = self
            .ec2
            .describe_security_groups()
            .set_filters(Some(filters))
            .max_results(PAGE_SIZE)
            .into_paginator()
            .send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| SecurityGroupError::Describe {
                terms: label.to_string(),
                source: AwsError::from_sdk("ec2:DescribeSecurityGroups", &e),
            })?;
            for group in page.security_groups.unwrap_or_default() {
                let Some(id) = group.group_id else {
                    tracing::warn!(
                        terms = label,
                        "EC2 listed a security group without an id; skipped"
                    );
                    continue;
                };
                out.push(SecurityGroup {
                    id,
                    name: group.group_name,
                });
            }
        }
        Ok(out)
    }
}
