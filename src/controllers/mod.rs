//! Controllers: reconcile loops over the cluster's objects. Today there is
//! one, the EC2NodeClass status controller; provisioning, launch and
//! disruption are not built yet.

pub mod node;
pub mod nodeclaim;
pub mod nodeclass;
pub mod nodepool;
pub mod provisioning;

use std::sync::Arc;

use kube::runtime::events::{Recorder, Reporter};

use crate::aws::amis::AmiProvider;
use crate::aws::instance_types::InstanceTypeProvider;

/// What every controller shares.
pub struct Context {
    /// The API server.
    pub client: kube::Client,
    /// Each NodePool's instance types: catalog, resolver, extensions.
    pub instance_types: Arc<InstanceTypeProvider>,
    /// Finds the images an EC2NodeClass selects.
    pub amis: AmiProvider,
    /// `major.minor` of the cluster, for AMI alias paths.
    pub kubernetes_version: String,
    /// Publishes events as `nodewright`.
    pub recorder: Recorder,
}

impl Context {
    /// A context whose events are reported by the `nodewright` controller.
    pub fn new(
        client: kube::Client,
        instance_types: Arc<InstanceTypeProvider>,
        amis: AmiProvider,
        kubernetes_version: String,
    ) -> Self {
        let reporter = Reporter {
            controller: "nodewright".to_string(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            instance_types,
            amis,
            kubernetes_version,
        }
    }
}

/// Why a controller stopped or a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The API server refused or failed a request; retried with backoff.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// A cloud provider call failed; retried.
    #[error("cloud provider: {0}")]
    Cloud(#[from] crate::cloudprovider::CloudProviderError),
    /// A blocking extension task panicked or was cancelled.
    #[error("extension task: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// `text` cut to at most `max` bytes on a character boundary (event notes
/// and condition messages have limits the API server enforces).
pub fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// Runs every controller until a shutdown signal (SIGTERM, Ctrl-C).
pub async fn run(context: Arc<Context>) -> Result<(), ControllerError> {
    nodeclass::run(context).await;
    Ok(())
}
