//! Launch templates: one per distinct content (class, AMI, user data, …),
//! named and tagged as Karpenter names and tags them, created on demand and
//! remembered for [`TEMPLATE_CACHE_TTL`], so a warm launch makes no
//! launch-template call at all.
//!
//! Creation goes straight to `CreateLaunchTemplate` (the name is a hash of
//! the content, so a template of that name already holds exactly that
//! content); when another writer won the race, the existing template is
//! described instead. Templates are not deleted when they fall out of the
//! cache: [`LaunchTemplateProvider::list_for_class`] and
//! [`LaunchTemplateProvider::delete_for_class`] serve the garbage collector
//! and the class finalizer.

mod build;
mod template;
pub mod user_data;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::types::Filter;
use serde::Serialize;

pub use build::{BuildError, TemplateChoice, build_spec, dedicated_only};
pub use template::{
    LaunchTemplateSpec, NAME_PREFIX, ReservationTarget, default_block_device_mappings, ec2_tags,
    volume_size_gib,
};

use crate::apis::labels::EC2_NODE_CLASS_LABEL_KEY;
use crate::aws::errors::ServiceFailure;
use crate::cloudprovider::BoxError;

/// How long a template known to exist is used without asking EC2 again. A
/// template deleted behind nodewright's back within this time makes
/// CreateFleet fail with a not-found error; the launch then drops it from
/// the cache and creates it again.
pub const TEMPLATE_CACHE_TTL: Duration = Duration::from_secs(5 * 60);

/// The tag every nodewright (and Karpenter) resource of a cluster carries.
pub const CLUSTER_NAME_TAG_KEY: &str = "eks:eks-cluster-name";

/// The cluster's IP family.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
pub enum IpFamily {
    /// IPv4 pods and services.
    #[default]
    Ipv4,
    /// IPv6 pods and services: primary interfaces get an IPv6 address.
    Ipv6,
}

/// Cluster facts the launch path needs and cannot read from the API: the
/// controller fills them from its flags.
#[derive(Debug, Clone, Default)]
pub struct LaunchSettings {
    /// The cluster's name (tags, bootstrap).
    pub cluster_name: String,
    /// The API server URL nodes join.
    pub cluster_endpoint: String,
    /// The cluster CA bundle, base64-encoded PEM; `None` lets the bootstrap
    /// fetch it (AL2, Windows) or keeps the user's (Bottlerocket).
    pub ca_bundle: Option<String>,
    /// The service CIDR (nodeadm's `spec.cluster.cidr`); AL2023 needs it.
    pub service_cidr: Option<String>,
    /// The cluster DNS service IP, used when `spec.kubelet.clusterDNS` is unset.
    pub cluster_dns_ip: Option<String>,
    /// IPv4 or IPv6.
    pub ip_family: IpFamily,
}

/// A launch-template call that failed.
#[derive(Debug, thiserror::Error)]
#[error("{operation} {name}: {source}")]
pub struct LaunchTemplateError {
    /// The EC2 call.
    pub operation: &'static str,
    /// The template (or class) it was about.
    pub name: String,
    /// What the service said.
    #[source]
    pub source: BoxError,
}

impl LaunchTemplateError {
    /// A failed call, showing the service's error code and message (the
    /// SDK error itself displays as "service error").
    fn from_sdk<E>(operation: &'static str, name: impl Into<String>, error: &SdkError<E>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        LaunchTemplateError {
            operation,
            name: name.into(),
            source: Box::new(ServiceFailure::from_sdk(operation, error)),
        }
    }
}

/// A template that exists in EC2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchTemplateRef {
    /// Its name.
    pub name: String,
    /// Its id (`lt-…`), when EC2 returned one.
    pub id: Option<String>,
}

/// Creates, remembers, lists and deletes launch templates.
pub struct LaunchTemplateProvider {
    ec2: aws_sdk_ec2::Client,
    cluster_name: String,
    ttl: Duration,
    known: Mutex<HashMap<String, (LaunchTemplateRef, Instant)>>,
}

impl LaunchTemplateProvider {
    /// A provider for the templates of `cluster_name`.
    pub fn new(ec2: aws_sdk_ec2::Client, cluster_name: &str) -> Self {
        LaunchTemplateProvider {
            ec2,
            cluster_name: cluster_name.to_string(),
            ttl: TEMPLATE_CACHE_TTL,
            known: Mutex::new(HashMap::new()),
        }
    }

    /// Makes sure the template for `spec` exists and returns it. A cache hit
    /// costs no call; a miss costs one `CreateLaunchTemplate` (plus one
    /// `DescribeLaunchTemplates` when it already existed).
    pub async fn ensure(
        &self,
        spec: &LaunchTemplateSpec,
    ) -> Result<LaunchTemplateRef, LaunchTemplateError> {
        let name = spec.name();
        if let Some(hit) = self.cached(&name) {
            return Ok(hit);
        }
        let data = spec.data().map_err(|e| LaunchTemplateError {
            operation: "ec2:CreateLaunchTemplate",
            name: name.clone(),
            source: e.into(),
        })?;
        let created = self
            .ec2
            .create_launch_template()
            .launch_template_name(&name)
            .launch_template_data(data)
            .tag_specifications(spec.tag_specification())
            .send()
            .await;
        let template = match created {
            Ok(output) => LaunchTemplateRef {
                name: name.clone(),
                id: output.launch_template.and_then(|t| t.launch_template_id),
            },
            Err(e) if e.code() == Some("InvalidLaunchTemplateName.AlreadyExistsException") => {
                self.describe(&name).await?
            }
            Err(e) => {
                return Err(LaunchTemplateError::from_sdk(
                    "ec2:CreateLaunchTemplate",
                    name,
                    &e,
                ));
            }
        };
        self.remember(template.clone());
        Ok(template)
    }

    /// Forgets `name`, so the next launch creates it again (after CreateFleet
    /// said it does not exist).
    pub fn invalidate(&self, name: &str) {
        if let Ok(mut known) = self.known.lock() {
            known.remove(name);
        }
    }

    /// Every template of the cluster that belongs to `node_class` (by the
    /// `eks:eks-cluster-name` and `karpenter.k8s.aws/ec2nodeclass` tags).
    pub async fn list_for_class(
        &self,
        node_class: &str,
    ) -> Result<Vec<LaunchTemplateRef>, LaunchTemplateError> {
        let mut pages = self
            .ec2
            .describe_launch_templates()
            .filters(tag_filter(CLUSTER_NAME_TAG_KEY, &self.cluster_name))
            .filters(tag_filter(EC2_NODE_CLASS_LABEL_KEY, node_class))
            .max_results(200)
            .into_paginator()
            .send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| {
                LaunchTemplateError::from_sdk("ec2:DescribeLaunchTemplates", node_class, &e)
            })?;
            for template in page.launch_templates.unwrap_or_default() {
                if let Some(name) = template.launch_template_name {
                    out.push(LaunchTemplateRef {
                        name,
                        id: template.launch_template_id,
                    });
                }
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Deletes one template; one that is already gone counts as deleted.
    pub async fn delete(&self, name: &str) -> Result<(), LaunchTemplateError> {
        self.invalidate(name);
        match self
            .ec2
            .delete_launch_template()
            .launch_template_name(name)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(e.code()) => Ok(()),
            Err(e) => Err(LaunchTemplateError::from_sdk(
                "ec2:DeleteLaunchTemplate",
                name,
                &e,
            )),
        }
    }

    /// Deletes every template of `node_class` (when the class is deleted);
    /// returns how many there were.
    pub async fn delete_for_class(&self, node_class: &str) -> Result<usize, LaunchTemplateError> {
        let templates = self.list_for_class(node_class).await?;
        for template in &templates {
            self.delete(&template.name).await?;
        }
        Ok(templates.len())
    }

    async fn describe(&self, name: &str) -> Result<LaunchTemplateRef, LaunchTemplateError> {
        let output = self
            .ec2
            .describe_launch_templates()
            .launch_template_names(name)
            .send()
            .await
            .map_err(|e| LaunchTemplateError::from_sdk("ec2:DescribeLaunchTemplates", name, &e))?;
        let found = output
            .launch_templates
            .unwrap_or_default()
            .into_iter()
            .find(|t| t.launch_template_name.as_deref() == Some(name));
        match found {
            Some(template) => Ok(LaunchTemplateRef {
                name: name.to_string(),
                id: template.launch_template_id,
            }),
            None => Err(LaunchTemplateError {
                operation: "ec2:DescribeLaunchTemplates",
                name: name.to_string(),
                source: "EC2 said the template exists but does not describe it".into(),
            }),
        }
    }

    fn cached(&self, name: &str) -> Option<LaunchTemplateRef> {
        let mut known = self.known.lock().ok()?;
        let now = Instant::now();
        let (template, until) = known.get_mut(name)?;
        if *until <= now {
            known.remove(name);
            return None;
        }
        // A hit extends the entry, as Karpenter's cache does.
        *until = now + self.ttl;
        Some(template.clone())
    }

    fn remember(&self, template: LaunchTemplateRef) {
        if let Ok(mut known) = self.known.lock() {
            let now = Instant::now();
            known.retain(|_, (_, until)| *until > now);
            known.insert(template.name.clone(), (template, now + self.ttl));
        }
    }
}

/// A `tag:<key>` filter.
pub fn tag_filter(key: &str, value: &str) -> Filter {
    Filter::builder()
        .name(format!("tag:{key}"))
        .values(value)
        .build()
}

/// Whether an EC2 error code says a launch template does not exist.
pub fn is_not_found(code: Option<&str>) -> bool {
    matches!(
        code,
        Some(
            "InvalidLaunchTemplateName.NotFoundException"
                | "InvalidLaunchTemplateId.NotFound"
                | "InvalidLaunchTemplateId.NotFoundException"
        )
    )
}
