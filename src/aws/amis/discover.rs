//! Runs a class's AMI lookups against SSM and EC2 and turns the images into
//! the records an AMI selector sees. Nothing is filtered here, not even the
//! image state: deciding which images may boot is the selector's job, so a
//! custom selector sees exactly what the terms matched.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use aws_sdk_ec2::primitives::{DateTime, DateTimeFormat};
use aws_sdk_ec2::types::{ArchitectureValues, Filter, Image, ImageState};
use nodewright_filter::{Ami, AmiState, Architecture};

use super::query::{AmiQueries, DescribeQuery, ParameterQuery, QueryError, Variant, queries};
use crate::apis::EC2NodeClassSpec;
use crate::aws::errors::{ErrorKind, ServiceFailure};

/// Most image ids one `image-id` filter carries.
const IDS_PER_REQUEST: usize = 200;

/// Why a class's images could not be discovered.
#[derive(Debug, thiserror::Error)]
pub enum AmiError {
    /// The terms cannot be turned into lookups.
    #[error(transparent)]
    Query(#[from] QueryError),
    /// SSM refused or failed a parameter read (a missing parameter is not an error).
    #[error("reading SSM parameter {parameter} for {term}: {failure}")]
    Parameter {
        /// The parameter.
        parameter: String,
        /// The selector term that asked for it.
        term: String,
        /// What SSM said.
        failure: ServiceFailure,
    },
    /// A parameter holds something other than an image id.
    #[error(
        "SSM parameter {parameter} for {term} holds {value:?}, not an image id: point the term at a parameter whose value is an ami-… id"
    )]
    NotAnImageId {
        /// The parameter.
        parameter: String,
        /// The selector term that asked for it.
        term: String,
        /// What it holds.
        value: String,
    },
    /// EC2 refused or failed a `DescribeImages` call.
    #[error("describing images for {term}: {failure}")]
    Describe {
        /// The selector term(s) the call served.
        term: String,
        /// What EC2 said.
        failure: ServiceFailure,
    },
}

impl AmiError {
    /// Whether waiting may help (throttling, a server fault, a timeout):
    /// the images found before still stand.
    pub fn is_transient(&self) -> bool {
        match self {
            AmiError::Parameter { failure, .. } | AmiError::Describe { failure, .. } => {
                failure.kind != ErrorKind::Permanent
            }
            AmiError::Query(_) | AmiError::NotAnImageId { .. } => false,
        }
    }
}

/// Finds the images a class's `amiSelectorTerms` select.
#[derive(Clone)]
pub struct AmiProvider {
    ec2: aws_sdk_ec2::Client,
    ssm: aws_sdk_ssm::Client,
}

impl AmiProvider {
    /// A provider over the given clients (real AWS, moto, or SDK mocks).
    pub fn new(ec2: aws_sdk_ec2::Client, ssm: aws_sdk_ssm::Client) -> Self {
        AmiProvider { ec2, ssm }
    }

    /// Every image the terms of `spec` select, one record per (image,
    /// variant), in lookup order. `kubernetes_version` (`1.34`) fills the
    /// alias SSM paths. SSM parameters that do not exist are skipped, as
    /// Karpenter does.
    pub async fn discover(
        &self,
        spec: &EC2NodeClassSpec,
        kubernetes_version: &str,
    ) -> Result<Vec<Ami>, AmiError> {
        let queries = queries(spec, kubernetes_version)?;
        self.run(&queries).await
    }

    /// Runs the lookups: SSM parameters first, then one id lookup for
    /// every id found, then the name / owner / tag searches.
    async fn run(&self, queries: &AmiQueries) -> Result<Vec<Ami>, AmiError> {
        // (image id, source, variant) per finding, in lookup order.
        let mut by_id: Vec<(String, String, Option<Variant>)> = Vec::new();
        for parameter in &queries.parameters {
            let Some(id) = self.read_parameter(parameter).await? else {
                continue;
            };
            // The record's source is the parameter that named the image.
            if parameter.variants.is_empty() {
                by_id.push((id.clone(), parameter.name.clone(), None));
            }
            for &variant in &parameter.variants {
                by_id.push((id.clone(), parameter.name.clone(), Some(variant)));
            }
        }
        for (id, term) in &queries.ids {
            by_id.push((id.clone(), term.clone(), None));
        }

        let mut out = Vec::new();
        let mut seen: HashSet<(String, Option<Variant>)> = HashSet::new();
        let mut unique_ids: Vec<&str> = by_id.iter().map(|(id, _, _)| id.as_str()).collect();
        unique_ids.sort_unstable();
        unique_ids.dedup();
        let mut images: HashMap<String, Image> = HashMap::new();
        for chunk in unique_ids.chunks(IDS_PER_REQUEST) {
            let query = DescribeQuery {
                owners: Vec::new(),
                filters: vec![(
                    "image-id".to_string(),
                    chunk.iter().map(|id| id.to_string()).collect(),
                )],
                term: by_id
                    .iter()
                    .filter(|(id, _, _)| chunk.contains(&id.as_str()))
                    .map(|(_, source, _)| source.as_str())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            for image in self.describe(&query).await? {
                if let Some(id) = image.image_id() {
                    images.insert(id.to_string(), image);
                }
            }
        }
        for (id, source, variant) in &by_id {
            let Some(image) = images.get(id) else {
                continue;
            };
            if seen.insert((id.clone(), *variant))
                && let Some(ami) = record(image, source, *variant)
            {
                out.push(ami);
            }
        }
        for query in &queries.describes {
            for image in self.describe(query).await? {
                let Some(id) = image.image_id() else { continue };
                if seen.insert((id.to_string(), None))
                    && let Some(ami) = record(&image, &query.term, None)
                {
                    out.push(ami);
                }
            }
        }
        Ok(out)
    }

    /// The image id a parameter holds, or `None` if it does not exist.
    async fn read_parameter(&self, parameter: &ParameterQuery) -> Result<Option<String>, AmiError> {
        let result = self.ssm.get_parameter().name(&parameter.name).send().await;
        let output = match result {
            Ok(output) => output,
            Err(e)
                if e.as_service_error()
                    .is_some_and(|service| service.is_parameter_not_found()) =>
            {
                tracing::debug!(parameter = %parameter.name, term = %parameter.term, "SSM parameter not found; skipped");
                return Ok(None);
            }
            Err(e) => {
                return Err(AmiError::Parameter {
                    parameter: parameter.name.clone(),
                    term: parameter.term.clone(),
                    failure: ServiceFailure::from_sdk("ssm:GetParameter", &e),
                });
            }
        };
        let value = output
            .parameter()
            .and_then(|p| p.value())
            .unwrap_or_default()
            .trim()
            .to_string();
        if !value.starts_with("ami-") {
            return Err(AmiError::NotAnImageId {
                parameter: parameter.name.clone(),
                term: parameter.term.clone(),
                value,
            });
        }
        Ok(Some(value))
    }

    /// All pages of one `DescribeImages` request, deprecated images included.
    async fn describe(&self, query: &DescribeQuery) -> Result<Vec<Image>, AmiError> {
        let filters: Vec<Filter> = query
            .filters
            .iter()
            .map(|(name, values)| {
                Filter::builder()
                    .name(name)
                    .set_values(Some(values.clone()))
                    .build()
            })
            .collect();
        let mut request = self
            .ec2
            .describe_images()
            .include_deprecated(true)
            .set_filters(Some(filters));
        if !query.owners.is_empty() {
            request = request.set_owners(Some(query.owners.clone()));
        }
        let mut pages = request.into_paginator().send();
        let mut images = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| AmiError::Describe {
                term: query.term.clone(),
                failure: ServiceFailure::from_sdk("ec2:DescribeImages", &e),
            })?;
            images.extend(page.images.unwrap_or_default());
        }
        Ok(images)
    }
}

/// The selector's record for one image, or `None` for an architecture no
/// node can run (Karpenter keeps only `x86_64` and `arm64`).
fn record(image: &Image, source: &str, variant: Option<Variant>) -> Option<Ami> {
    let architecture = match image.architecture()? {
        ArchitectureValues::X8664 => Architecture::Amd64,
        ArchitectureValues::Arm64 => Architecture::Arm64,
        _ => return None,
    };
    let tags: BTreeMap<String, String> = image
        .tags()
        .iter()
        .filter_map(|t| {
            Some((
                t.key()?.to_string(),
                t.value().unwrap_or_default().to_string(),
            ))
        })
        .collect();
    Some(Ami {
        id: image.image_id()?.to_string(),
        name: image.name().unwrap_or_default().to_string(),
        owner: image
            .image_owner_alias()
            .or(image.owner_id())
            .unwrap_or_default()
            .to_string(),
        state: state(image.state()),
        creation_time: image.creation_date().and_then(epoch_seconds).unwrap_or(0),
        deprecation_time: image.deprecation_time().and_then(epoch_seconds),
        architecture,
        variant: variant.map(|v| v.as_str().to_string()).unwrap_or_default(),
        tags,
        source: source.to_string(),
    })
}

/// The record's state; an unknown or missing state is never `available`.
fn state(state: Option<&ImageState>) -> AmiState {
    match state {
        Some(ImageState::Available) => AmiState::Available,
        Some(ImageState::Pending) => AmiState::Pending,
        Some(ImageState::Deregistered) => AmiState::Deregistered,
        Some(ImageState::Disabled) => AmiState::Disabled,
        Some(ImageState::Failed) => AmiState::Failed,
        Some(ImageState::Invalid) => AmiState::Invalid,
        Some(ImageState::Transient) => AmiState::Transient,
        _ => AmiState::Error,
    }
}

/// Seconds since the epoch of an EC2 timestamp (`2024-06-25T12:00:00.000Z`).
fn epoch_seconds(text: &str) -> Option<i64> {
    DateTime::from_str(text, DateTimeFormat::DateTime)
        .ok()
        .map(|t| t.secs())
}
