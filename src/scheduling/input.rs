//! What a solve takes in and gives back: plain data, no clients.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::instance_type::{CapacityType, InstanceType};
use super::pod::Pod;
use super::pod_key::PodKey;
use super::requirements::Requirements;
use super::resources::Resources;
use super::taints::Taint;

/// A NodePool as the scheduler needs it, with its instance types already
/// resolved (filtered by its NodeClass) by the provider.
#[derive(Clone, Debug, Default)]
pub struct NodePoolSpec {
    /// NodePool name.
    pub name: String,
    /// Higher weights are tried first (Karpenter `spec.weight`, default 0).
    pub weight: i32,
    /// `spec.template.spec.requirements` (with `minValues`).
    pub requirements: Requirements,
    /// `spec.template.metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// Taints every node of the pool carries.
    pub taints: Vec<Taint>,
    /// Taints present only while a node starts; ignored for placement.
    pub startup_taints: Vec<Taint>,
    /// `spec.limits` by resource name, in [`Resources`] units (cpu in millicores).
    pub limits: BTreeMap<String, i64>,
    /// The `nodewright.io/price-limit-per-hour` annotation: the most the
    /// pool's nodes may cost together per hour, at the prices the scheduler
    /// minimises.
    pub price_limit: Option<f64>,
    /// Instance types this pool may launch, shared with the instance-type
    /// provider's cache rather than copied each round.
    pub instance_types: Arc<Vec<InstanceType>>,
    /// Optional per-instance-type priority (higher first; ties by price),
    /// e.g. from a priority scorer module. Types missing from the map score 0.
    pub priority_scores: Option<Arc<HashMap<String, i32>>>,
    /// Set when the pool may not launch nodes (e.g. an extension of its
    /// EC2NodeClass failed with `failurePolicy: Fail`): why, typed, with
    /// words that name the cause. Each pod that needs a new node reports it
    /// for this pool.
    pub blocked: Option<super::Blocked>,
}

/// A node already in the cluster, or an in-flight NodeClaim that has not
/// become a ready node yet.
#[derive(Clone, Debug, Default)]
pub struct ExistingNode {
    /// Node (or NodeClaim) name.
    pub name: String,
    /// Node labels (for in-flight claims: the labels the node will carry).
    pub labels: BTreeMap<String, String>,
    /// Node taints.
    pub taints: Vec<Taint>,
    /// Capacity (counts against its NodePool's limits).
    pub capacity: Resources,
    /// Allocatable.
    pub allocatable: Resources,
    /// Pods bound to it (their requests are subtracted; they count for
    /// topology, anti-affinity and host ports).
    pub pods: Vec<Pod>,
    /// False for nodes still starting: ephemeral and startup taints are
    /// ignored. (On every node, room is kept for the DaemonSets that would
    /// run on it and have no pod there yet.)
    pub initialized: bool,
    /// Nodes being deleted take no new pods.
    pub marked_for_deletion: bool,
}

/// Policy for `minValues` when instance types run short.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MinValuesPolicy {
    /// Fail the NodeClaim.
    #[default]
    Strict,
    /// Keep what there is.
    BestEffort,
}

/// Solve-wide options.
#[derive(Clone, Debug)]
pub struct SchedulerOptions {
    /// Drop every preference up front (Karpenter `--preference-policy=Ignore`).
    pub ignore_preferences: bool,
    /// How many instance-type options a new NodeClaim keeps (Karpenter: 60).
    pub max_instance_types: usize,
    /// `--min-values-policy`.
    pub min_values_policy: MinValuesPolicy,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        SchedulerOptions {
            ignore_preferences: false,
            max_instance_types: 60,
            min_values_policy: MinValuesPolicy::Strict,
        }
    }
}

/// Everything one solve needs.
#[derive(Clone, Debug, Default)]
pub struct SchedulerInput {
    /// NodePools (any order; tried by descending weight).
    pub node_pools: Vec<NodePoolSpec>,
    /// Nodes in the cluster. With `in_flight`, tried before any new
    /// NodeClaim in Karpenter's order: initialized nodes first, then by name.
    pub existing_nodes: Vec<ExistingNode>,
    /// Launched NodeClaims that are not nodes yet (never initialized), tried
    /// with `existing_nodes` in the order described there.
    pub in_flight: Vec<ExistingNode>,
    /// Pending pods to place.
    pub pods: Vec<Pod>,
    /// DaemonSet pod templates; each one compatible with a NodePool adds its
    /// requests to every new node of that pool.
    pub daemonsets: Vec<Pod>,
    /// Namespace labels, for affinity terms with a `namespaceSelector`.
    pub namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
    /// Options.
    pub options: SchedulerOptions,
}

/// One instance-type option of a new NodeClaim.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceTypeOption {
    /// Instance type name.
    pub name: String,
    /// Cheapest compatible available offering price.
    pub price: f64,
    /// Priority score, when the pool has scores.
    pub score: Option<i32>,
}

/// A NodeClaim the solve wants created.
#[derive(Clone, Debug, PartialEq)]
pub struct NewNodeClaim {
    /// NodePool it belongs to.
    pub node_pool: String,
    /// Options in launch order (priority score, then price), at most `max_instance_types`.
    pub instance_type_options: Vec<InstanceTypeOption>,
    /// The first option: the type the launch is expected to get.
    pub instance_type: String,
    /// Zone of the chosen offering.
    pub zone: String,
    /// Capacity type of the chosen offering.
    pub capacity_type: CapacityType,
    /// Price of the chosen offering.
    pub price: f64,
    /// Reservation of the chosen offering, if reserved.
    pub reservation_id: Option<String>,
    /// Pods planned onto it.
    pub pods: Vec<PodKey>,
    /// Total requests: the pods', plus the daemonsets that every instance-type
    /// option runs (per resource, the least over the options).
    pub requests: Resources,
    /// The NodeClaim's requirements after all pods were added.
    pub requirements: Requirements,
    /// Labels (single-valued requirements plus NodePool labels).
    pub labels: BTreeMap<String, String>,
    /// Taints from the NodePool.
    pub taints: Vec<Taint>,
}

/// A pod planned onto a node that already exists (or is in flight).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExistingPlacement {
    /// The pod.
    pub pod: PodKey,
    /// Node or NodeClaim name.
    pub node: String,
}

/// A pod that could not be placed, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodError {
    /// The pod.
    pub pod: PodKey,
    /// What fell short, per NodePool.
    pub reason: String,
}

/// The outcome of a solve.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SchedulingResult {
    /// NodeClaims to create.
    pub new_node_claims: Vec<NewNodeClaim>,
    /// Pods that fit on existing or in-flight nodes.
    pub existing_node_placements: Vec<ExistingPlacement>,
    /// Pods that cannot be placed.
    pub errors: Vec<PodError>,
}
