//! `NodePool` (`karpenter.sh/v1`): a template for the nodes the provisioner may
//! create, plus how and when they may be disrupted.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::apis::conditions::Condition;
use crate::apis::duration::NillableDuration;
use crate::apis::nodeclaim::NodeClassReference;
use crate::apis::requirements::NodeSelectorRequirementWithMinValues;

/// The budget every NodePool gets when `disruption.budgets` is absent.
pub const DEFAULT_BUDGET_NODES: &str = "10%";
/// Default `expireAfter` of a NodeClaim template.
pub const DEFAULT_EXPIRE_AFTER: &str = "720h";

/// Desired state of a NodePool.
// Repeated `printcolumn(type_ = ..)` arguments are distinct columns, not duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodePool",
    plural = "nodepools",
    singular = "nodepool",
    category = "karpenter",
    status = "NodePoolStatus",
    derive = "PartialEq",
    doc = "NodePool is the Schema for the NodePools API",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.nodes"
    ),
    printcolumn(
        name = "NodeClass",
        type_ = "string",
        json_path = ".spec.template.spec.nodeClassRef.name"
    ),
    printcolumn(name = "Nodes", type_ = "string", json_path = ".status.nodes"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Weight",
        type_ = "integer",
        json_path = ".spec.weight",
        priority = 1
    ),
    printcolumn(
        name = "CPU",
        type_ = "string",
        json_path = ".status.resources.cpu",
        priority = 1
    ),
    printcolumn(
        name = "Memory",
        type_ = "string",
        json_path = ".status.resources.memory",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "message": "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes",
        "rule": "has(self.replicas) == has(oldSelf.replicas)",
    },
    {
        "message": "only 'limits.nodes' is supported on static NodePools",
        "rule": "!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in self.limits))",
    },
    {
        "message": "'weight' is not supported on static NodePools",
        "rule": "!has(self.replicas) || !has(self.weight)",
    },
]))]
pub struct NodePoolSpec {
    /// Template for the NodeClaims this NodePool creates.
    pub template: NodeClaimTemplate,
    /// How and when nodes of this pool may be disrupted. Defaults to `consolidateAfter: 0s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"consolidateAfter": "0s"}))]
    pub disruption: Option<Disruption>,
    /// Caps on the total resources of the pool's nodes (`cpu`, `memory`, `nodes`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::apis::schema::resource_list")]
    pub limits: Option<BTreeMap<String, Quantity>>,
    /// Priority among NodePools (higher first, 1..100). Not allowed on static NodePools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub weight: Option<i32>,
    /// Static capacity (alpha): keep exactly this many nodes; disables dynamic provisioning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i64>,
}

impl NodePoolSpec {
    /// The disruption settings with the schema defaults applied.
    pub fn effective_disruption(&self) -> Disruption {
        let mut disruption = self.disruption.clone().unwrap_or_else(|| Disruption {
            consolidate_after: NillableDuration::from("0s"),
            consolidation_policy: None,
            budgets: None,
        });
        if disruption.consolidation_policy.is_none() {
            disruption.consolidation_policy = Some(ConsolidationPolicy::WhenEmptyOrUnderutilized);
        }
        let budgets = disruption.budgets.get_or_insert_with(|| {
            vec![Budget {
                nodes: None,
                reasons: None,
                schedule: None,
                duration: None,
            }]
        });
        for budget in budgets.iter_mut() {
            budget
                .nodes
                .get_or_insert_with(|| DEFAULT_BUDGET_NODES.to_string());
        }
        disruption
    }

    /// Whether this is a static NodePool (`replicas` set).
    pub fn is_static(&self) -> bool {
        self.replicas.is_some()
    }
}

/// Labels and annotations stamped on every NodeClaim (and Node) of the pool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplateMetadata {
    /// Labels added to each node. Restricted domains (`karpenter.sh`, `karpenter.k8s.aws`)
    /// are refused except for their well-known keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::apis::schema::label_map")]
    #[schemars(extend("x-kubernetes-validations" = crate::apis::requirements::label_map_rules()))]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations added to each node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-map-type" = "granular"))]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// The NodeClaim template of a NodePool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplate {
    /// Labels and annotations for the nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<NodeClaimTemplateMetadata>,
    /// The NodeClaim spec the pool's nodes are created with.
    pub spec: NodeClaimTemplateSpec,
}

/// NodeClaim spec inside a NodePool template (NodeClaim spec without `resources`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplateSpec {
    /// Taints applied to the node; pods must tolerate them to schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::apis::schema::taint_list")]
    pub taints: Option<Vec<Taint>>,
    /// Taints present at startup that a daemon removes once ready; pods need not tolerate them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::apis::schema::taint_list")]
    pub startup_taints: Option<Vec<Taint>>,
    /// Requirements every node of the pool satisfies.
    #[schemars(schema_with = "crate::apis::requirements::node_pool_requirements")]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// The NodeClass holding the provider-specific configuration (group and kind are immutable).
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "nodeClassRef.group is immutable", "rule": "self.group == oldSelf.group"},
        {"message": "nodeClassRef.kind is immutable", "rule": "self.kind == oldSelf.kind"},
    ]))]
    pub node_class_ref: NodeClassReference,
    /// Maximum time a draining node may take before pods are force-deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::apis::schema::TERMINATION_GRACE_PERIOD_PATTERN))]
    pub termination_grace_period: Option<String>,
    /// How long a node lives before it is replaced (`Never` disables expiry). Default `720h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "720h"))]
    pub expire_after: Option<NillableDuration>,
}

/// When consolidation may remove or replace nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ConsolidationPolicy {
    /// Only empty nodes are consolidated.
    WhenEmpty,
    /// Empty and underutilized nodes are consolidated.
    WhenEmptyOrUnderutilized,
    /// Underutilized nodes are consolidated when the saving outweighs the disruption (scored).
    Balanced,
}

/// Disruption settings of a NodePool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    /// How long after a pod is added or removed a node becomes consolidatable (`Never` disables).
    /// Default `0s` (Karpenter defaults it rather than requiring it).
    #[serde(default = "zero_seconds")]
    #[schemars(extend("default" = "0s"))]
    pub consolidate_after: NillableDuration,
    /// Which nodes consolidation considers. Default `WhenEmptyOrUnderutilized`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "WhenEmptyOrUnderutilized"))]
    pub consolidation_policy: Option<ConsolidationPolicy>,
    /// Limits on how many nodes may be disrupted at once; the minimum of the active
    /// budgets applies. Default `[{nodes: 10%}]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 50))]
    #[schemars(extend(
        "default" = [{"nodes": "10%"}],
        "x-kubernetes-list-type" = "atomic",
        "x-kubernetes-validations" = [
            {"message": "'schedule' must be set with 'duration'", "rule": "self.all(x, has(x.schedule) == has(x.duration))"},
        ],
    ))]
    pub budgets: Option<Vec<Budget>>,
}

/// `consolidateAfter`'s default.
fn zero_seconds() -> NillableDuration {
    NillableDuration::from("0s")
}

/// Why a node is disrupted (budget `reasons`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum DisruptionReason {
    /// Consolidation of an underutilized node.
    Underutilized,
    /// Removal of an empty node.
    Empty,
    /// Replacement of a drifted node.
    Drifted,
}

/// Ordered as the disruption methods run — emptiness, drift, then
/// consolidation — while declared in Karpenter's order (the CRD's enum).
impl Ord for DisruptionReason {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let rank = |r: &Self| DisruptionReason::ALL.iter().position(|a| a == r);
        rank(self).cmp(&rank(other))
    }
}

impl PartialOrd for DisruptionReason {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl DisruptionReason {
    /// Every reason, in order.
    pub const ALL: [DisruptionReason; 3] = [
        DisruptionReason::Empty,
        DisruptionReason::Drifted,
        DisruptionReason::Underutilized,
    ];

    /// The reason as NodePools spell it (`Empty`, `Drifted`, `Underutilized`).
    pub fn as_str(self) -> &'static str {
        match self {
            DisruptionReason::Empty => "Empty",
            DisruptionReason::Drifted => "Drifted",
            DisruptionReason::Underutilized => "Underutilized",
        }
    }

    /// The `reason` label of Karpenter's disruption metrics (lower case).
    pub fn metric_label(self) -> &'static str {
        match self {
            DisruptionReason::Empty => "empty",
            DisruptionReason::Drifted => "drifted",
            DisruptionReason::Underutilized => "underutilized",
        }
    }
}

/// One disruption budget.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    /// Reasons this budget applies to; absent means all reasons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 50))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub reasons: Option<Vec<DisruptionReason>>,
    /// Maximum disrupted nodes: an integer or a percentage (rounded up). Default `10%`.
    // No `serde(default)`: a missing Option is still `None`, and this keeps the
    // field `required` in the schema, as Karpenter has it (the default fills it in).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required, regex(pattern = r"^((100|[0-9]{1,2})%|[0-9]+)$"))]
    #[schemars(extend("default" = "10%"))]
    pub nodes: Option<String>,
    /// Cron schedule (UTC) at which the budget becomes active; needs `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$"
    ))]
    pub schedule: Option<String>,
    /// How long the budget stays active after each schedule hit (hours and minutes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$"))]
    pub duration: Option<String>,
}

/// Observed state of a NodePool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    /// Resources in use by the pool's nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::apis::schema::resource_list")]
    pub resources: Option<BTreeMap<String, Quantity>>,
    /// Number of nodes in the pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0))]
    pub nodes: Option<i64>,
    /// Generation of the NodeClass last seen by the registration-health controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_observed_generation: Option<i64>,
    /// Conditions of the NodePool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::apis::schema::conditions_strict")]
    pub conditions: Option<Vec<Condition>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(disruption: serde_json::Value) -> NodePoolSpec {
        serde_json::from_value(serde_json::json!({
            "template": {"spec": {
                "requirements": [],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            }},
            "disruption": disruption,
        }))
        .unwrap()
    }

    #[test]
    fn effective_disruption_fills_schema_defaults() {
        let mut absent = spec(serde_json::Value::Null);
        absent.disruption = None;
        let disruption = absent.effective_disruption();
        assert_eq!(disruption.consolidate_after.as_str(), "0s");
        assert_eq!(
            disruption.consolidation_policy,
            Some(ConsolidationPolicy::WhenEmptyOrUnderutilized)
        );
        let budgets = disruption.budgets.unwrap();
        assert_eq!(budgets.len(), 1);
        assert_eq!(budgets[0].nodes.as_deref(), Some(DEFAULT_BUDGET_NODES));

        // A budget without `nodes` parses and gets the default; given values are kept.
        let given = spec(serde_json::json!({
            "consolidateAfter": "Never",
            "consolidationPolicy": "WhenEmpty",
            "budgets": [{"reasons": ["Drifted"]}, {"nodes": "3"}],
        }));
        let disruption = given.effective_disruption();
        assert_eq!(disruption.consolidate_after.duration(), Ok(None));
        assert_eq!(
            disruption.consolidation_policy,
            Some(ConsolidationPolicy::WhenEmpty)
        );
        let budgets = disruption.budgets.unwrap();
        assert_eq!(budgets[0].nodes.as_deref(), Some("10%"));
        assert_eq!(budgets[1].nodes.as_deref(), Some("3"));
        assert!(!given.is_static());
    }
}
