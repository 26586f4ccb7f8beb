//! An in-memory cloud: "launches" instances of the instance types a NodePool
//! may use (from the catalog the instance-type provider serves), after a
//! configurable delay, and keeps them until they are deleted. Capacity errors
//! can be injected per offering, to see how provisioning falls back. It backs
//! `nodewright sandbox` and the controller tests; nothing leaves the process.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::launch::{Launched, image_for, launch_options, launched_node_claim};
use super::{
    CloudProvider, CloudProviderError, DriftReason, InstanceTypeSource, LaunchableTypes,
    NodeClassContext, OfferingKey, Registration, RepairPolicy, UnavailableOfferings,
    launchable_off_thread,
};
use super::{ProviderId, targeted_partition};
use crate::apis::labels::NODE_POOL_LABEL_KEY;
use crate::apis::{NodeClaim, NodePool};

/// How the simulated cloud behaves.
#[derive(Debug, Clone)]
pub struct SimulatedSettings {
    /// How long a launch takes before `create` returns.
    pub launch_delay: Duration,
    /// At most this many instance types are tried per launch (CreateFleet's
    /// override limit).
    pub max_instance_types: usize,
}

impl Default for SimulatedSettings {
    fn default() -> Self {
        SimulatedSettings {
            launch_delay: Duration::ZERO,
            max_instance_types: 60,
        }
    }
}

#[derive(Default)]
struct State {
    /// Running instances by instance ID, as launched NodeClaims.
    instances: BTreeMap<String, NodeClaim>,
    /// NodeClaim name → instance ID, so a retried create launches nothing new.
    by_claim: BTreeMap<String, String>,
    /// Offerings that fail with insufficient capacity.
    insufficient: BTreeSet<OfferingKey>,
    next_id: u64,
    /// Instances launched and terminated through `create` and `delete`,
    /// so a test can tell each claim was launched and terminated once.
    launches: u64,
    terminations: u64,
}

/// The in-memory provider.
pub struct SimulatedCloudProvider {
    types: Arc<dyn InstanceTypeSource>,
    unavailable: Arc<UnavailableOfferings>,
    settings: SimulatedSettings,
    state: Mutex<State>,
}

impl SimulatedCloudProvider {
    /// A cloud whose instance types come from `types`; offerings that run out
    /// of capacity are recorded in `unavailable`.
    pub fn new(
        types: Arc<dyn InstanceTypeSource>,
        unavailable: Arc<UnavailableOfferings>,
        settings: SimulatedSettings,
    ) -> Self {
        SimulatedCloudProvider {
            types,
            unavailable,
            settings,
            state: Mutex::new(State::default()),
        }
    }

    /// Makes every launch of `offering` fail with insufficient capacity until
    /// [`SimulatedCloudProvider::restore_capacity`].
    pub fn inject_insufficient_capacity(&self, offering: OfferingKey) {
        self.lock().insufficient.insert(offering);
    }

    /// Undoes [`SimulatedCloudProvider::inject_insufficient_capacity`].
    pub fn restore_capacity(&self, offering: &OfferingKey) {
        self.lock().insufficient.remove(offering);
    }

    /// Terminates an instance behind the controllers' back (as a user in the
    /// console or a spot reclaim would). False when it was not running.
    pub fn terminate_out_of_band(&self, instance_id: &str) -> bool {
        let mut state = self.lock();
        let removed = state.instances.remove(instance_id).is_some();
        state.by_claim.retain(|_, id| id != instance_id);
        removed
    }

    /// How many instances `create` launched (a retried create that found
    /// its claim's instance launches none).
    pub fn launches(&self) -> u64 {
        self.lock().launches
    }

    /// How many instances `delete` terminated.
    pub fn terminations(&self) -> u64 {
        self.lock().terminations
    }

    /// Moves an instance's launch time, as if it had run since `launched`.
    /// False when it is not running.
    pub fn backdate(&self, instance_id: &str, launched: Time) -> bool {
        match self.lock().instances.get_mut(instance_id) {
            Some(instance) => {
                instance.metadata.creation_timestamp = Some(launched);
                true
            }
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind; keep serving it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn launchable(
        &self,
        pool: String,
        class: &NodeClassContext,
    ) -> Result<Arc<LaunchableTypes>, CloudProviderError> {
        launchable_off_thread(&self.types, pool, class).await
    }
}

#[async_trait]
impl CloudProvider for SimulatedCloudProvider {
    fn name(&self) -> &'static str {
        "simulated"
    }

    async fn create(
        &self,
        claim: &NodeClaim,
        class: &NodeClassContext,
    ) -> Result<NodeClaim, CloudProviderError> {
        let claim_name = claim.metadata.name.clone().unwrap_or_default();
        if let Some(existing) = {
            let state = self.lock();
            state
                .by_claim
                .get(&claim_name)
                .and_then(|id| state.instances.get(id).cloned())
        } {
            return Ok(existing);
        }
        let pool = claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(NODE_POOL_LABEL_KEY).cloned())
            .unwrap_or_default();
        let launchable = self.launchable(pool, class).await?;
        let options = launch_options(claim, class.name(), &launchable)?;
        let mut refused = Vec::new();
        let mut chosen = None;
        'types: for option in options.iter().take(self.settings.max_instance_types) {
            for offering in &option.offerings {
                let key = OfferingKey {
                    instance_type: option.instance_type.name.clone(),
                    zone: offering.zone.clone(),
                    capacity_type: offering.capacity_type.label_value().to_string(),
                };
                if self.lock().insufficient.contains(&key) {
                    self.unavailable.mark(key.clone());
                    refused.push(key);
                    continue;
                }
                chosen = Some((option, offering));
                break 'types;
            }
        }
        let Some((option, offering)) = chosen else {
            return Err(CloudProviderError::InsufficientCapacity {
                offerings: refused,
                source: Some("InsufficientInstanceCapacity (simulated)".into()),
            });
        };
        let image = image_for(&class.class, &option.instance_type).ok_or_else(|| {
            CloudProviderError::NodeClassNotReady {
                node_class: class.name().to_string(),
                reason: format!(
                    "no image in status.amis fits instance type {}",
                    option.instance_type.name
                ),
            }
        })?;
        if !self.settings.launch_delay.is_zero() {
            tokio::time::sleep(self.settings.launch_delay).await;
        }
        let mut state = self.lock();
        if let Some(id) = state.by_claim.get(&claim_name)
            && let Some(existing) = state.instances.get(id)
        {
            return Ok(existing.clone());
        }
        state.next_id += 1;
        let instance_id = format!("i-{:017x}", state.next_id);
        let mut launched = launched_node_claim(
            claim,
            &Launched {
                instance_type: &option.instance_type,
                offering,
                provider_id: ProviderId::new(&offering.zone, &instance_id),
                image_id: image.id.clone(),
            },
        );
        // As listed, an instance was created when it launched.
        launched.metadata.creation_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        // A partition group's instance gets the partition targeted, else
        // the next in turn (EC2 spreads instances over the partitions).
        let partitions = class
            .class
            .status
            .as_ref()
            .and_then(|s| s.placement_group.as_ref())
            .and_then(|g| g.partition_count)
            .filter(|n| *n > 0);
        let partition = targeted_partition(claim)
            .or_else(|| partitions.map(|n| (state.next_id % n as u64) as i32 + 1));
        let labels = launched
            .metadata
            .labels
            .get_or_insert_with(Default::default);
        for (key, value) in super::placement_group_labels(&class.class, partition) {
            labels.insert(key.to_string(), value);
        }
        super::stamp_node_class_hash(&mut launched, &class.class);
        state
            .instances
            .insert(instance_id.clone(), launched.clone());
        state.by_claim.insert(claim_name, instance_id);
        state.launches += 1;
        Ok(launched)
    }

    async fn delete(&self, claim: &NodeClaim) -> Result<(), CloudProviderError> {
        let instance_id = ProviderId::of_claim(claim)?.instance_id().to_string();
        if self.terminate_out_of_band(&instance_id) {
            self.lock().terminations += 1;
            Ok(())
        } else {
            Err(CloudProviderError::NotFound {
                provider_id: instance_id,
                source: None,
            })
        }
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudProviderError> {
        let not_found = || CloudProviderError::NotFound {
            provider_id: provider_id.to_string(),
            source: None,
        };
        let id = ProviderId::parse(provider_id).ok_or_else(not_found)?;
        self.lock()
            .instances
            .get(id.instance_id())
            .cloned()
            .ok_or_else(not_found)
    }

    async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
        Ok(self.lock().instances.values().cloned().collect())
    }

    async fn instance_types(
        &self,
        pool: &NodePool,
        class: &NodeClassContext,
    ) -> Result<Arc<LaunchableTypes>, CloudProviderError> {
        self.launchable(pool.metadata.name.clone().unwrap_or_default(), class)
            .await
    }

    async fn is_drifted(
        &self,
        claim: &NodeClaim,
        class: &NodeClassContext,
    ) -> Result<Option<DriftReason>, CloudProviderError> {
        if super::node_class_hash_drifted(claim, &class.class) {
            return Ok(Some(DriftReason::NodeClassDrift));
        }
        let image = claim.status.as_ref().and_then(|s| s.image_id.as_deref());
        let amis = class.class.status.as_ref().and_then(|s| s.amis.as_ref());
        if let (Some(image), Some(amis)) = (image, amis)
            && !amis.iter().any(|a| a.id == image)
        {
            return Ok(Some(DriftReason::AmiDrift));
        }
        Ok(super::placement_group_drifted(claim, &class.class)
            .then_some(DriftReason::PlacementGroupDrift))
    }

    fn repair_policies(&self) -> Vec<RepairPolicy> {
        super::repair_policies()
    }

    /// Nothing to wait for: a partition group's instance got its partition
    /// at launch.
    async fn before_registration(
        &self,
        _claim: &mut NodeClaim,
    ) -> Result<Registration, CloudProviderError> {
        Ok(Registration::Proceed)
    }
}
