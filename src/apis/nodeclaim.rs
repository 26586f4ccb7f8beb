//! `NodeClaim` (`karpenter.sh/v1`): one requested node — the requirements it
//! must satisfy, and what was launched for it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::apis::conditions::Condition;
use crate::apis::duration::NillableDuration;
use crate::apis::requirements::NodeSelectorRequirementWithMinValues;

/// Reference to the provider NodeClass (for us, an `EC2NodeClass`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClassReference {
    /// Kind of the referent (`EC2NodeClass`).
    #[schemars(extend("x-kubernetes-validations" = [{"message": "kind may not be empty", "rule": "self != ''"}]))]
    pub kind: String,
    /// Name of the referent.
    #[schemars(extend("x-kubernetes-validations" = [{"message": "name may not be empty", "rule": "self != ''"}]))]
    pub name: String,
    /// API group of the referent (`karpenter.k8s.aws`).
    #[schemars(regex(pattern = r"^[^/]*$"))]
    #[schemars(extend("x-kubernetes-validations" = [{"message": "group may not be empty", "rule": "self != ''"}]))]
    pub group: String,
}

impl NodeClassReference {
    /// Whether it names an `EC2NodeClass` of `karpenter.k8s.aws`: a NodeClaim
    /// of any other node class belongs to another provisioner, and
    /// nodewright never marks, expires or disrupts it (Karpenter's
    /// `IsManaged`).
    pub fn is_ec2_node_class(&self) -> bool {
        self.group == "karpenter.k8s.aws" && self.kind == "EC2NodeClass"
    }
}

/// Resources a NodeClaim must provide.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimResources {
    /// Minimum resources the node must have (the pods' requests plus daemonset overhead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::apis::schema::resource_list")]
    pub requests: Option<BTreeMap<String, Quantity>>,
}

/// Desired state of a NodeClaim. Immutable once created.
// Repeated `printcolumn(type_ = ..)` arguments are distinct columns, not duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodeClaim",
    plural = "nodeclaims",
    singular = "nodeclaim",
    category = "karpenter",
    status = "NodeClaimStatus",
    derive = "PartialEq",
    doc = "NodeClaim is the Schema for the NodeClaims API",
    printcolumn(
        name = "Type",
        type_ = "string",
        json_path = r".metadata.labels.node\.kubernetes\.io/instance-type"
    ),
    printcolumn(
        name = "Capacity",
        type_ = "string",
        json_path = r".metadata.labels.karpenter\.sh/capacity-type"
    ),
    printcolumn(
        name = "Zone",
        type_ = "string",
        json_path = r".metadata.labels.topology\.kubernetes\.io/zone"
    ),
    printcolumn(name = "Node", type_ = "string", json_path = ".status.nodeName"),
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
        name = "ImageID",
        type_ = "string",
        json_path = ".status.imageID",
        priority = 1
    ),
    printcolumn(
        name = "ID",
        type_ = "string",
        json_path = ".status.providerID",
        priority = 1
    ),
    printcolumn(
        name = "NodePool",
        type_ = "string",
        json_path = r".metadata.labels.karpenter\.sh/nodepool",
        priority = 1
    ),
    printcolumn(
        name = "NodeClass",
        type_ = "string",
        json_path = ".spec.nodeClassRef.name",
        priority = 1
    ),
    printcolumn(
        name = "Drifted",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Drifted")].status"#,
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"message": "spec is immutable", "rule": "self == oldSelf"}]))]
pub struct NodeClaimSpec {
    /// Taints applied to the node; pods must tolerate them to schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::apis::schema::taint_list")]
    pub taints: Option<Vec<Taint>>,
    /// Taints present at startup that a daemon removes once ready; pods need not tolerate them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::apis::schema::taint_list")]
    pub startup_taints: Option<Vec<Taint>>,
    /// Requirements the launched node must satisfy.
    #[schemars(schema_with = "crate::apis::requirements::node_claim_requirements")]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// Resources the node must provide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<NodeClaimResources>,
    /// The NodeClass holding the provider-specific configuration.
    pub node_class_ref: NodeClassReference,
    /// Maximum time a draining node may take before pods are force-deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::apis::schema::TERMINATION_GRACE_PERIOD_PATTERN))]
    pub termination_grace_period: Option<String>,
    /// How long the node lives before it is replaced (`Never` disables expiry). Default `720h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "720h"))]
    pub expire_after: Option<NillableDuration>,
}

/// Observed state of a NodeClaim.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimStatus {
    /// Name of the Node that registered for this NodeClaim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// Cloud provider ID (`aws:///<zone>/<instance-id>`).
    #[serde(
        rename = "providerID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// Image the node booted (AMI ID).
    #[serde(rename = "imageID", default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// Estimated full capacity of the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::apis::schema::resource_list")]
    pub capacity: Option<BTreeMap<String, Quantity>>,
    /// Estimated allocatable capacity of the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::apis::schema::resource_list")]
    pub allocatable: Option<BTreeMap<String, Quantity>>,
    /// Conditions of the NodeClaim lifecycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::apis::schema::conditions_lenient")]
    pub conditions: Option<Vec<Condition>>,
    /// Last time a pod was scheduled to or removed from the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pod_event_time: Option<Time>,
}
