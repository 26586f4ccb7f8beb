//! The EC2NodeClass status in a sandbox with the simulated cloud, where
//! there is no AWS to discover images, subnets or security groups in.
//! **Everything this controller writes is simulated**, so that a class
//! becomes `Ready` and its NodePools can launch:
//!
//! - images: one per alias family × architecture × variant the family
//!   publishes (`ami-sim-al2023-amd64`, `ami-sim-al2023-amd64-nvidia`, …);
//!   an `id` term is that image for both architectures; any other term
//!   (name, tags, SSM parameter) is `ami-sim-term<N>-<arch>`. They go
//!   through the class's real AMI selector (built-in or extension), and
//!   `status.amis` and `AMIsReady` are written as the real controller
//!   writes them; an invalid alias is refused with the real error;
//! - subnets: one per zone of the region's embedded catalog
//!   (`subnet-sim-us-east-1a`, …), whatever the terms say;
//! - security groups: an `id` term as given, a `name` term as
//!   `sg-sim-<name>`, a tags term as `sg-sim-term<N>`;
//! - instance profile: `spec.instanceProfile` as given, or
//!   `sandbox_<role>` for a `role`;
//! - placement group: a `cluster` group with the selector's id, or
//!   `pg-sim-<name>` for a name; a `status.placementGroup` already written
//!   for the group the selector names is kept (write one with
//!   `kubectl patch --subresource status` to try a partition or spread group);
//! - `SubnetsReady`, `SecurityGroupsReady`, `InstanceProfileReady`,
//!   `ValidationSucceeded` and `PlacementGroupReady` are `True` (nothing is
//!   checked against AWS), and `Ready` follows from them and `AMIsReady`.
//!
//! `ExtensionsReady` is not written here; a class whose instance filters
//! fail still cannot launch (the provisioner says why on the pods).

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use nodewright_filter::{Ami, AmiState, Architecture};

use crate::apis::conditions::{
    EC2_NODE_CLASS_AMIS_READY, EC2_NODE_CLASS_INSTANCE_PROFILE_READY,
    EC2_NODE_CLASS_PLACEMENT_GROUP_READY, EC2_NODE_CLASS_READY_DEPENDENCIES,
    EC2_NODE_CLASS_SECURITY_GROUPS_READY, EC2_NODE_CLASS_SUBNETS_READY,
    EC2_NODE_CLASS_VALIDATION_SUCCEEDED, READY, find_condition, set_condition,
};
use crate::apis::ec2nodeclass::{
    AMIFamily, PlacementGroupStatus, PlacementGroupStrategy, SecurityGroupStatus, SubnetStatus,
};
use crate::apis::{ConditionStatus, EC2NodeClass, EC2NodeClassSpec, EC2NodeClassStatus};
use crate::aws::amis::{QueryError, queries, status_amis};
use crate::aws::instance_types::InstanceTypeProvider;
use crate::cluster::ClusterState;
use crate::controllers::ControllerError;
use crate::controllers::nodeclass::amis_ready_condition;
use crate::extensions::unix_now;

/// Creation time of every simulated image (2025-01-01T00:00:00Z).
const IMAGE_CREATED: i64 = 1_735_689_600;

/// The simulated images `spec`'s AMI terms select, in term order.
pub fn simulated_images(
    spec: &EC2NodeClassSpec,
    kubernetes_version: &str,
) -> Result<Vec<Ami>, QueryError> {
    // The real lookups' checks: bad aliases, aliases the version refuses, empty terms.
    queries(spec, kubernetes_version)?;
    let image = |id: String, arch: Architecture, variant: &str, source: String| Ami {
        name: format!("{id} (simulated)"),
        id,
        owner: "amazon".to_string(),
        state: AmiState::Available,
        creation_time: IMAGE_CREATED,
        deprecation_time: None,
        architecture: arch,
        variant: variant.to_string(),
        tags: Default::default(),
        source,
    };
    let arch_name = |arch: Architecture| match arch {
        Architecture::Arm64 => "arm64",
        _ => "amd64",
    };
    let mut out = Vec::new();
    for (index, term) in spec.ami_selector_terms.iter().enumerate() {
        if let Some(alias) = &term.alias {
            let family_name = alias.split_once('@').map_or(alias.as_str(), |(f, _)| f);
            let Some(family) = AMIFamily::from_alias_family(family_name) else {
                continue;
            };
            for (arch, variant) in alias_images(family) {
                let suffix = match *variant {
                    "standard" => String::new(),
                    other => format!("-{other}"),
                };
                let id = format!("ami-sim-{family_name}-{}{suffix}", arch_name(*arch));
                out.push(image(id, *arch, variant, format!("alias:{alias}")));
            }
        } else {
            for arch in [Architecture::Amd64, Architecture::Arm64] {
                let (id, source) = match &term.id {
                    Some(id) => (id.clone(), format!("id:{id}")),
                    None => (
                        format!("ami-sim-term{index}-{}", arch_name(arch)),
                        format!("amiSelectorTerms[{index}]"),
                    ),
                };
                out.push(image(id, arch, "", source));
            }
        }
    }
    Ok(out)
}

/// The architectures and variants an alias family publishes images for.
fn alias_images(family: AMIFamily) -> &'static [(Architecture, &'static str)] {
    use Architecture::{Amd64, Arm64};
    match family {
        AMIFamily::AL2023 => &[
            (Amd64, "standard"),
            (Amd64, "nvidia"),
            (Amd64, "neuron"),
            (Arm64, "standard"),
            (Arm64, "nvidia"),
        ],
        AMIFamily::AL2 => &[
            (Amd64, "standard"),
            (Arm64, "standard"),
            (Amd64, "nvidia"),
            (Amd64, "neuron"),
        ],
        AMIFamily::Bottlerocket => &[
            (Amd64, "standard"),
            (Amd64, "nvidia"),
            (Arm64, "standard"),
            (Arm64, "nvidia"),
        ],
        AMIFamily::Windows2019 | AMIFamily::Windows2022 | AMIFamily::Windows2025 => {
            &[(Amd64, "standard")]
        }
        AMIFamily::Custom => &[],
    }
}

/// One simulated subnet per zone.
pub fn simulated_subnets(zones: &[&str]) -> Vec<SubnetStatus> {
    zones
        .iter()
        .map(|zone| SubnetStatus {
            id: format!("subnet-sim-{zone}"),
            zone: zone.to_string(),
            zone_id: None,
        })
        .collect()
}

/// The security groups `spec`'s terms name, simulated where only AWS could say.
pub fn simulated_security_groups(spec: &EC2NodeClassSpec) -> Vec<SecurityGroupStatus> {
    spec.security_group_selector_terms
        .iter()
        .enumerate()
        .map(|(index, term)| match (&term.id, &term.name) {
            (Some(id), _) => SecurityGroupStatus {
                id: id.clone(),
                name: None,
            },
            (None, Some(name)) => SecurityGroupStatus {
                id: format!("sg-sim-{name}"),
                name: Some(name.clone()),
            },
            (None, None) => SecurityGroupStatus {
                id: format!("sg-sim-term{index}"),
                name: None,
            },
        })
        .collect()
}

/// The instance profile: the one given, or one named after the role.
pub fn simulated_instance_profile(spec: &EC2NodeClassSpec) -> Option<String> {
    spec.instance_profile
        .clone()
        .or_else(|| spec.role.as_ref().map(|role| format!("sandbox_{role}")))
}

/// The placement group the selector names: `stored` when it is the one
/// named (a group written into the status, to try a partition or spread
/// group), else a cluster group with the id given or `pg-sim-<name>`.
pub fn simulated_placement_group(
    spec: &EC2NodeClassSpec,
    stored: Option<PlacementGroupStatus>,
) -> Option<PlacementGroupStatus> {
    let selector = spec.placement_group_selector.as_ref()?;
    let named = |g: &PlacementGroupStatus| match (&selector.id, &selector.name) {
        (Some(id), _) => &g.id == id,
        (None, Some(name)) => &g.name == name,
        (None, None) => false,
    };
    if let Some(stored) = stored.filter(named) {
        return Some(stored);
    }
    let name = selector.name.clone().unwrap_or_default();
    Some(PlacementGroupStatus {
        id: selector
            .id
            .clone()
            .unwrap_or_else(|| format!("pg-sim-{name}")),
        name,
        strategy: PlacementGroupStrategy::Cluster,
        partition_count: None,
        spread_level: None,
    })
}

/// The simulated EC2NodeClass status controller.
pub struct SimulatedNodeClasses {
    client: Client,
    state: Arc<ClusterState>,
    instance_types: Arc<InstanceTypeProvider>,
    kubernetes_version: String,
}

impl SimulatedNodeClasses {
    /// A controller writing through `client`; the region, the zones and the
    /// AMI selectors come from `instance_types`.
    pub fn new(
        client: Client,
        state: Arc<ClusterState>,
        instance_types: Arc<InstanceTypeProvider>,
        kubernetes_version: String,
    ) -> Self {
        SimulatedNodeClasses {
            client,
            state,
            instance_types,
            kubernetes_version,
        }
    }

    /// Runs until dropped: every class once, then each class that changes.
    pub async fn run(self) {
        let mut changes = std::pin::pin!(self.state.node_classes.changes());
        tracing::debug!("simulated EC2NodeClass status: waiting for the cluster state");
        self.state.synced().await;
        tracing::debug!(
            classes = self.state.node_classes.all().len(),
            "simulated EC2NodeClass status: synced"
        );
        for class in self.state.node_classes.all() {
            self.reconcile_logged(&class.name_any()).await;
        }
        while let Some(class) = changes.next().await {
            self.reconcile_logged(&class.name_any()).await;
        }
    }

    async fn reconcile_logged(&self, name: &str) {
        if let Err(error) = self.reconcile(name).await {
            tracing::warn!(nodeclass = %name, %error, "simulated EC2NodeClass status not written");
        }
    }

    /// Writes the simulated status of class `name` (as the store has it) if it changed.
    pub async fn reconcile(&self, name: &str) -> Result<(), ControllerError> {
        let Some(class) = self.state.node_classes.store().get(&ObjectRef::new(name)) else {
            return Ok(());
        };
        if class.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let status = self.status(&class).await?;
        if class.status.as_ref() == Some(&status) {
            tracing::debug!(nodeclass = %name, "simulated EC2NodeClass status unchanged");
            return Ok(());
        }
        let became_ready = status
            .conditions
            .as_deref()
            .and_then(|c| find_condition(c, READY))
            .is_some_and(|c| c.is_true());
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": class.metadata.resource_version},
            "status": status,
        });
        let api: Api<EC2NodeClass> = Api::all(self.client.clone());
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            // A conflict means the class changed: its change runs this again.
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {
                tracing::debug!(nodeclass = %name, code = s.code, "simulated EC2NodeClass status not written");
                return Ok(());
            }
            other => {
                other?;
            }
        }
        tracing::info!(nodeclass = %name, ready = became_ready, "EC2NodeClass status written (simulated)");
        Ok(())
    }

    /// The class's status as the simulated cloud sees it.
    async fn status(&self, class: &EC2NodeClass) -> Result<EC2NodeClassStatus, ControllerError> {
        let generation = class.metadata.generation;
        let now = unix_now();
        tracing::debug!(nodeclass = %class.name_any(), "computing the simulated EC2NodeClass status");
        let (amis, why) = match simulated_images(&class.spec, &self.kubernetes_version) {
            Ok(found) => {
                let config_maps: Vec<ConfigMap> = self
                    .state
                    .node_class_context(&class.name_any())
                    .map(|c| c.config_maps.as_ref().clone())
                    .unwrap_or_default();
                let class_name = class.name_any();
                let (class, provider) = (class.clone(), self.instance_types.clone());
                let selection = tokio::task::spawn_blocking(move || {
                    let region = provider.catalog().region().to_string();
                    provider
                        .extensions()
                        .select_amis(&class, &region, found, &config_maps, now)
                })
                .await?;
                tracing::debug!(nodeclass = %class_name, "AMI selector ran");
                (
                    status_amis(&selection.amis, now),
                    selection.blocked.as_ref().map(ToString::to_string),
                )
            }
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
        let mut status = class.status.clone().unwrap_or_default();
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        let amis_ready = amis_ready_condition(
            &amis,
            why.as_deref(),
            generation,
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ),
        );
        set_condition(
            conditions,
            EC2_NODE_CLASS_AMIS_READY,
            amis_ready.status,
            amis_ready.reason.as_deref().unwrap_or_default(),
            amis_ready.message.as_deref().unwrap_or_default(),
            generation,
        );
        let simulated = [
            (
                EC2_NODE_CLASS_SUBNETS_READY,
                "simulated: one subnet per zone of the embedded catalog",
            ),
            (
                EC2_NODE_CLASS_SECURITY_GROUPS_READY,
                "simulated: the security group terms are accepted as given",
            ),
            (
                EC2_NODE_CLASS_INSTANCE_PROFILE_READY,
                "simulated: the instance profile is accepted as given",
            ),
            (
                EC2_NODE_CLASS_VALIDATION_SUCCEEDED,
                "simulated: nothing is checked against AWS",
            ),
            (
                EC2_NODE_CLASS_PLACEMENT_GROUP_READY,
                "simulated: the placement group selector is accepted as given",
            ),
        ];
        for (type_, message) in simulated {
            set_condition(
                conditions,
                type_,
                ConditionStatus::True,
                type_,
                message,
                generation,
            );
        }
        let not_ready = EC2_NODE_CLASS_READY_DEPENDENCIES
            .iter()
            .filter_map(|type_| find_condition(conditions, type_))
            .find(|c| !c.is_true())
            .cloned();
        match not_ready {
            None => set_condition(
                conditions,
                READY,
                ConditionStatus::True,
                READY,
                "",
                generation,
            ),
            Some(c) => set_condition(
                conditions,
                READY,
                ConditionStatus::False,
                "NotReady",
                &format!(
                    "{} is not True: {}",
                    c.type_,
                    c.message.as_deref().unwrap_or_default()
                ),
                generation,
            ),
        };
        conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
        status.amis = (!amis.is_empty()).then_some(amis);
        status.subnets = Some(simulated_subnets(&self.instance_types.catalog().zones()));
        let groups = simulated_security_groups(&class.spec);
        status.security_groups = (!groups.is_empty()).then_some(groups);
        status.instance_profile = simulated_instance_profile(&class.spec);
        status.placement_group =
            simulated_placement_group(&class.spec, status.placement_group.take());
        Ok(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> EC2NodeClassSpec {
        crate::yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn aliases_give_one_image_per_architecture_and_variant() {
        let spec = spec(
            "amiSelectorTerms: [{alias: al2023@latest}]\nsubnetSelectorTerms: [{id: s}]\nsecurityGroupSelectorTerms: [{id: sg-1}, {name: web}, {tags: {a: b}}]\nrole: NodeRole\n",
        );
        let images = simulated_images(&spec, "1.34").unwrap();
        let ids: Vec<&str> = images.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "ami-sim-al2023-amd64",
                "ami-sim-al2023-amd64-nvidia",
                "ami-sim-al2023-amd64-neuron",
                "ami-sim-al2023-arm64",
                "ami-sim-al2023-arm64-nvidia"
            ]
        );
        let amis = status_amis(&images, 0);
        assert_eq!(amis.len(), 5);
        assert!(amis[0].requirements.iter().any(|r| r.key
            == "karpenter.k8s.aws/instance-gpu-count"
            && r.operator == "DoesNotExist"));
        let groups: Vec<String> = simulated_security_groups(&spec)
            .into_iter()
            .map(|g| g.id)
            .collect();
        assert_eq!(groups, ["sg-1", "sg-sim-web", "sg-sim-term2"]);
        assert_eq!(
            simulated_instance_profile(&spec).as_deref(),
            Some("sandbox_NodeRole")
        );
        assert_eq!(
            simulated_subnets(&["us-east-1a"])[0].id,
            "subnet-sim-us-east-1a"
        );
    }

    #[test]
    fn aliases_the_version_refuses_are_refused_as_without_the_sandbox() {
        let spec = spec(
            "amiSelectorTerms: [{alias: al2@latest}]\nsubnetSelectorTerms: [{id: s}]\nsecurityGroupSelectorTerms: [{id: g}]\n",
        );
        let error = simulated_images(&spec, "1.34").unwrap_err();
        assert!(error.to_string().contains("al2023@latest"), "{error}");
        let ids = spec_ids("amiSelectorTerms: [{id: ami-0123}]");
        assert_eq!(ids, ["ami-0123", "ami-0123"]);
    }

    fn spec_ids(terms: &str) -> Vec<String> {
        let spec = spec(&format!(
            "{terms}\namiFamily: AL2023\nsubnetSelectorTerms: [{{id: s}}]\nsecurityGroupSelectorTerms: [{{id: g}}]\n"
        ));
        simulated_images(&spec, "1.34")
            .unwrap()
            .into_iter()
            .map(|i| i.id)
            .collect()
    }
}
