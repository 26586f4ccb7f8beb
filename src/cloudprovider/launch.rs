//! What both providers do around a launch: work out which instance types and
//! offerings a NodeClaim may use, in launch order, and write what was
//! launched back onto the NodeClaim (Karpenter's `resolveInstanceTypes` and
//! `instanceToNodeClaim`).

use super::ProviderId;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{CloudProviderError, LaunchableTypes};
use crate::apis::labels::{
    CAPACITY_RESERVATION_ID_LABEL_KEY, CAPACITY_RESERVATION_INTERRUPTIBLE_LABEL_KEY,
    CAPACITY_RESERVATION_TYPE_LABEL_KEY, CAPACITY_TYPE_LABEL_KEY, INSTANCE_TYPE_LABEL_KEY,
    WELL_KNOWN_LABELS, ZONE_LABEL_KEY,
};
use crate::apis::{NodeClaim, NodeClaimStatus};
use crate::scheduling::node_pool::node_claim_requirements;
use crate::scheduling::{InstanceType, LaunchRank, Offering, Resources, launch_order};

/// An instance type a NodeClaim may launch, with the offerings it may use.
#[derive(Debug, Clone)]
pub struct LaunchOption {
    /// The instance type.
    pub instance_type: InstanceType,
    /// Available offerings the claim's zone and capacity-type requirements
    /// allow, cheapest first.
    pub offerings: Vec<Offering>,
    /// Its priority score, when the pool has scorers.
    pub score: Option<i32>,
}

impl LaunchOption {
    /// Price of the cheapest usable offering.
    pub fn price(&self) -> f64 {
        self.offerings.first().map_or(f64::INFINITY, |o| o.price)
    }

    /// Where it stands in the launch order.
    fn rank(&self) -> LaunchRank<'_> {
        (
            i64::from(self.score.unwrap_or(0)),
            self.price(),
            &self.instance_type.name,
        )
    }
}

/// The instance types `claim` may launch out of `launchable`, in launch
/// order: highest priority score first (when the pool has scorers), then
/// cheapest, then by name. A type qualifies when its labels satisfy the
/// claim's requirements, its allocatable fits the claim's requests, and it
/// has an available offering in a zone and capacity type the claim allows.
///
/// `NodeClassNotReady` when the class is blocked; `InsufficientCapacity`
/// (with no offerings) when nothing qualifies, as Karpenter reports it, so
/// the claim is replaced and its pods provisioned again.
pub fn launch_options(
    claim: &NodeClaim,
    node_class: &str,
    launchable: &LaunchableTypes,
) -> Result<Vec<LaunchOption>, CloudProviderError> {
    if let Some(why) = &launchable.blocked {
        return Err(CloudProviderError::NodeClassNotReady {
            node_class: node_class.to_string(),
            reason: why.to_string(),
        });
    }
    let requirements = node_claim_requirements(claim).map_err(|e| CloudProviderError::Create {
        reason: "InvalidRequirements",
        message: e.to_string(),
        source: Some(Box::new(e)),
    })?;
    let requests = claim_requests(claim)?;
    let well_known = |key: &str| WELL_KNOWN_LABELS.contains(&key);
    // A claim names its instance types: each type is labelled with its own
    // name, so one lookup rules out the rest before the full comparison.
    let named = requirements.get(INSTANCE_TYPE_LABEL_KEY);
    let mut options: Vec<LaunchOption> = launchable
        .instance_types
        .iter()
        .filter(|it| named.is_none_or(|r| r.has(&it.name)))
        .filter(|it| {
            requirements
                .compatible(&it.requirements, well_known)
                .is_ok()
        })
        .filter(|it| requests.fits(&it.allocatable()))
        .filter_map(|it| {
            let mut offerings: Vec<Offering> = it
                .offerings
                .iter()
                .filter(|o| o.available && o.allowed_by(&requirements))
                .cloned()
                .collect();
            if offerings.is_empty() {
                return None;
            }
            offerings.sort_by(|a, b| a.price.total_cmp(&b.price));
            let score = launchable
                .priority_scores
                .as_ref()
                .map(|scores| scores.get(&it.name).copied().unwrap_or(0));
            Some(LaunchOption {
                instance_type: it.clone(),
                offerings,
                score,
            })
        })
        .collect();
    if options.is_empty() {
        return Err(CloudProviderError::InsufficientCapacity {
            offerings: Vec::new(),
            source: Some(
                format!(
                    "no instance type of EC2NodeClass {node_class:?} satisfies the NodeClaim's requirements and requests with an available offering"
                )
                .into(),
            ),
        });
    }
    options.sort_by(|a, b| launch_order(a.rank(), b.rank()));
    Ok(options)
}

/// `spec.resources.requests` of a claim.
fn claim_requests(claim: &NodeClaim) -> Result<Resources, CloudProviderError> {
    let Some(requests) = claim
        .spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
    else {
        return Ok(Resources::zero());
    };
    Resources::parse(requests.iter().map(|(k, v)| (k.as_str(), v.0.as_str()))).map_err(|e| {
        CloudProviderError::Create {
            reason: "InvalidRequests",
            message: format!("spec.resources.requests: {e}"),
            source: Some(Box::new(e)),
        }
    })
}

/// What a launch got.
#[derive(Debug, Clone)]
pub struct Launched<'a> {
    /// The instance type.
    pub instance_type: &'a InstanceType,
    /// The offering (zone, capacity type, reservation) it was bought as.
    pub offering: &'a Offering,
    /// `aws:///<zone>/<instance-id>`.
    pub provider_id: ProviderId,
    /// The image it boots.
    pub image_id: String,
}

/// `claim` as launched: labels from the instance type's single-valued
/// well-known requirements and from the offering (zone, capacity type,
/// reservation), and `status.providerID`, `imageID`, `capacity` and
/// `allocatable`.
pub fn launched_node_claim(claim: &NodeClaim, launched: &Launched<'_>) -> NodeClaim {
    let mut out = claim.clone();
    let mut labels = out.metadata.labels.take().unwrap_or_default();
    // Reservation labels describe the offering, not the type: a type with
    // one reservation would otherwise label every launch of it.
    let reservation_keys = [
        CAPACITY_RESERVATION_ID_LABEL_KEY,
        CAPACITY_RESERVATION_TYPE_LABEL_KEY,
        CAPACITY_RESERVATION_INTERRUPTIBLE_LABEL_KEY,
    ];
    for (key, value) in launched.instance_type.requirements.single_value_labels() {
        if WELL_KNOWN_LABELS.contains(&key.as_str()) && !reservation_keys.contains(&key.as_str()) {
            labels.insert(key, value);
        }
    }
    for key in reservation_keys {
        labels.remove(key);
    }
    labels.insert(ZONE_LABEL_KEY.to_string(), launched.offering.zone.clone());
    labels.insert(
        CAPACITY_TYPE_LABEL_KEY.to_string(),
        launched.offering.capacity_type.label_value().to_string(),
    );
    if let Some(id) = &launched.offering.reservation_id {
        labels.insert(CAPACITY_RESERVATION_ID_LABEL_KEY.to_string(), id.clone());
    }
    out.metadata.labels = Some(labels);
    let status = out.status.get_or_insert_with(NodeClaimStatus::default);
    status.provider_id = Some(launched.provider_id.to_string());
    status.image_id = Some(launched.image_id.clone());
    status.capacity = Some(quantities(&launched.instance_type.capacity));
    status.allocatable = Some(quantities(&launched.instance_type.allocatable()));
    out
}

fn quantities(resources: &Resources) -> BTreeMap<String, Quantity> {
    resources
        .to_quantities()
        .into_iter()
        .map(|(k, v)| (k, Quantity(v)))
        .collect()
}

/// The image a node of `instance_type` boots: the first of the class's
/// `status.amis` (in the AMI selector's order) whose requirements the
/// instance type satisfies (architecture, GPU or accelerator variant).
pub fn image_for<'a>(
    class: &'a crate::apis::EC2NodeClass,
    instance_type: &InstanceType,
) -> Option<&'a crate::apis::ec2nodeclass::AMIStatus> {
    let amis = class.status.as_ref()?.amis.as_ref()?;
    amis.iter().find(|ami| {
        ami.requirements.iter().all(|r| {
            let values: Vec<String> = r.values.clone().unwrap_or_default();
            crate::scheduling::Operator::parse(&r.operator)
                .and_then(|op| crate::scheduling::Requirement::from_parts(&r.key, op, values))
                .is_ok_and(|requirement| {
                    instance_type
                        .requirements
                        .get(&requirement.key)
                        .is_none_or(|theirs| {
                            theirs.values.intersects(
                                &requirement.values,
                                &crate::scheduling::requirements::label_number,
                            )
                        })
                })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduling::{CapacityType, Overhead, Requirement, Requirements};

    fn claim() -> NodeClaim {
        crate::yaml::from_str(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: c, labels: {team: web}}\nspec:\n  requirements: []\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n",
        )
        .unwrap()
    }

    #[test]
    fn reservation_labels_come_from_the_offering_not_the_type() {
        let mut requirements = Requirements::new();
        // A type with one reservation carries its labels single-valued.
        requirements.add(Requirement::single(
            CAPACITY_RESERVATION_TYPE_LABEL_KEY,
            "default",
        ));
        requirements.add(Requirement::single(
            CAPACITY_RESERVATION_INTERRUPTIBLE_LABEL_KEY,
            "false",
        ));
        requirements.add(Requirement::single(
            "karpenter.k8s.aws/instance-family",
            "m5",
        ));
        let on_demand = Offering::new("us-east-1a", CapacityType::OnDemand, 0.096);
        let reserved = Offering::reserved("us-east-1a", 0.0, "cr-1", 1);
        let it = InstanceType::new(
            "m5.large",
            requirements,
            vec![on_demand.clone(), reserved.clone()],
            Resources::cpu_memory(2000, 8 << 30),
            Overhead::default(),
        );
        let launch = |offering: &Offering| {
            launched_node_claim(
                &claim(),
                &Launched {
                    instance_type: &it,
                    offering,
                    provider_id: ProviderId::new("us-east-1a", "i-1"),
                    image_id: "ami-1".to_string(),
                },
            )
        };
        let labels = launch(&on_demand).metadata.labels.unwrap();
        assert_eq!(labels["karpenter.k8s.aws/instance-family"], "m5");
        assert_eq!(labels["team"], "web");
        assert_eq!(labels[CAPACITY_TYPE_LABEL_KEY], "on-demand");
        for key in [
            CAPACITY_RESERVATION_ID_LABEL_KEY,
            CAPACITY_RESERVATION_TYPE_LABEL_KEY,
            CAPACITY_RESERVATION_INTERRUPTIBLE_LABEL_KEY,
        ] {
            assert!(!labels.contains_key(key), "{key} on an on-demand launch");
        }
        let labels = launch(&reserved).metadata.labels.unwrap();
        assert_eq!(labels[CAPACITY_RESERVATION_ID_LABEL_KEY], "cr-1");
        assert_eq!(labels[CAPACITY_TYPE_LABEL_KEY], "reserved");
    }

    #[test]
    fn only_the_instance_types_a_claim_names_are_options() {
        let types: Vec<InstanceType> = [
            ("m5.large", 0.096),
            ("m5.xlarge", 0.192),
            ("c5.large", 0.085),
        ]
        .into_iter()
        .map(|(name, price)| {
            let mut requirements = Requirements::new();
            requirements.add(Requirement::single(INSTANCE_TYPE_LABEL_KEY, name));
            InstanceType::new(
                name,
                requirements,
                vec![Offering::new("us-east-1a", CapacityType::OnDemand, price)],
                Resources::cpu_memory(2000, 8 << 30),
                Overhead::default(),
            )
        })
        .collect();
        let launchable = LaunchableTypes {
            instance_types: std::sync::Arc::new(types),
            priority_scores: None,
            blocked: None,
        };
        let options = |operator: &str, values: &str| {
            let mut claim = claim();
            claim.spec.requirements = crate::yaml::from_str(&format!(
                "[{{key: {INSTANCE_TYPE_LABEL_KEY}, operator: {operator}, values: {values}}}]"
            ))
            .unwrap();
            launch_options(&claim, "default", &launchable)
                .unwrap()
                .into_iter()
                .map(|o| o.instance_type.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            options("In", "[m5.xlarge, m5.large]"),
            ["m5.large", "m5.xlarge"]
        );
        assert_eq!(options("NotIn", "[c5.large]"), ["m5.large", "m5.xlarge"]);
        assert_eq!(options("In", "[c5.large]"), ["c5.large"]);
    }
}
