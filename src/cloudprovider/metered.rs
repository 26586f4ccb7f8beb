//! A cloud provider wrapped with Karpenter's cloud-provider metrics:
//! `karpenter_cloudprovider_duration_seconds` and
//! `karpenter_cloudprovider_errors_total`, labelled with the controller
//! that made the call, the method and the provider.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

use super::{
    CloudProvider, CloudProviderError, DriftReason, LaunchableTypes, NodeClassContext,
    Registration, RepairPolicy,
};
use crate::apis::{NodeClaim, NodePool};
use crate::metrics::{labels, metrics};

/// `inner`, measured as called by `controller`.
pub struct Metered {
    inner: Arc<dyn CloudProvider>,
    controller: &'static str,
}

impl Metered {
    /// Measures `inner`'s calls made by `controller`.
    pub fn wrap(inner: Arc<dyn CloudProvider>, controller: &'static str) -> Arc<dyn CloudProvider> {
        Arc::new(Metered { inner, controller })
    }

    async fn measure<T>(
        &self,
        method: &str,
        call: impl Future<Output = Result<T, CloudProviderError>>,
    ) -> Result<T, CloudProviderError> {
        let started = Instant::now();
        let result = call.await;
        let base = [
            ("controller", self.controller),
            ("method", method),
            ("provider", self.inner.name()),
        ];
        metrics()
            .cloudprovider_duration
            .get_or_create(&labels(&base))
            .observe(started.elapsed().as_secs_f64());
        if let Err(error) = &result {
            let kind = match error {
                CloudProviderError::NotFound { .. } => "NodeClaimNotFoundError",
                CloudProviderError::InsufficientCapacity { .. } => "InsufficientCapacityError",
                CloudProviderError::NodeClassNotReady { .. } => "NodeClassNotReadyError",
                CloudProviderError::Create { .. } => "CreateError",
                CloudProviderError::Api { .. } => "",
            };
            let mut with_error = labels(&base);
            with_error.push(("error".to_string(), kind.to_string()));
            metrics()
                .cloudprovider_errors
                .get_or_create(&with_error)
                .inc();
        }
        result
    }
}

#[async_trait]
impl CloudProvider for Metered {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    async fn create(
        &self,
        claim: &NodeClaim,
        class: &NodeClassContext,
    ) -> Result<NodeClaim, CloudProviderError> {
        self.measure("Create", self.inner.create(claim, class))
            .await
    }

    async fn delete(&self, claim: &NodeClaim) -> Result<(), CloudProviderError> {
        self.measure("Delete", self.inner.delete(claim)).await
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudProviderError> {
        self.measure("Get", self.inner.get(provider_id)).await
    }

    async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
        self.measure("List", self.inner.list()).await
    }

    async fn instance_types(
        &self,
        pool: &NodePool,
        class: &NodeClassContext,
    ) -> Result<Arc<LaunchableTypes>, CloudProviderError> {
        self.measure("GetInstanceTypes", self.inner.instance_types(pool, class))
            .await
    }

    async fn is_drifted(
        &self,
        claim: &NodeClaim,
        class: &NodeClassContext,
    ) -> Result<Option<DriftReason>, CloudProviderError> {
        self.measure("IsDrifted", self.inner.is_drifted(claim, class))
            .await
    }

    fn repair_policies(&self) -> Vec<RepairPolicy> {
        self.inner.repair_policies()
    }

    async fn before_registration(
        &self,
        claim: &mut NodeClaim,
    ) -> Result<Registration, CloudProviderError> {
        self.inner.before_registration(claim).await
    }
}
