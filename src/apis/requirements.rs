//! Node selector requirements with `minValues` (NodePool and NodeClaim
//! `requirements`), and the CEL rules that keep users out of restricted label
//! domains.

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::apis::labels;
use crate::apis::schema::{LABEL_KEY_MAX_LENGTH, LABEL_VALUE_PATTERN, QUALIFIED_NAME_PATTERN};

/// Operator of a node selector requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum RequirementOperator {
    /// The label value is one of `values`.
    In,
    /// The label value is none of `values` (or the label is absent).
    NotIn,
    /// The label exists.
    Exists,
    /// The label does not exist.
    DoesNotExist,
    /// The label value, an integer, is greater than the single value.
    Gt,
    /// The label value, an integer, is less than the single value.
    Lt,
    /// The label value, an integer, is greater than or equal to the single value.
    Gte,
    /// The label value, an integer, is less than or equal to the single value.
    Lte,
}

impl RequirementOperator {
    /// The operator as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::In => "In",
            Self::NotIn => "NotIn",
            Self::Exists => "Exists",
            Self::DoesNotExist => "DoesNotExist",
            Self::Gt => "Gt",
            Self::Lt => "Lt",
            Self::Gte => "Gte",
            Self::Lte => "Lte",
        }
    }
}

/// A node selector requirement plus `minValues`: the scheduler must keep at
/// least that many distinct values of `key` among the instance types it offers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirementWithMinValues {
    /// The label key that the selector applies to.
    pub key: String,
    /// How the key relates to the values.
    pub operator: RequirementOperator,
    /// Values for `In`/`NotIn` (any number) and `Gt`/`Lt`/`Gte`/`Lte` (exactly one integer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
    /// Minimum number of distinct values of `key` the offered instance types must span (1..50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<i64>,
}

impl NodeSelectorRequirementWithMinValues {
    /// The values, or an empty slice when none are given.
    pub fn values(&self) -> &[String] {
        self.values.as_deref().unwrap_or(&[])
    }
}

fn quoted_list(keys: &[&str]) -> String {
    keys.iter()
        .map(|k| format!("\"{k}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The CEL rules on a single label key (`self` is the key). `node_pool` adds the
/// `karpenter.sh/nodepool` exclusion that only NodePools have.
fn key_rules(node_pool: bool) -> Vec<serde_json::Value> {
    let mut rules = vec![serde_json::json!({
        "message": "label domain \"karpenter.sh\" is restricted",
        "rule": format!(
            "self in [{}] || !self.find(\"^([^/]+)\").endsWith(\"karpenter.sh\")",
            quoted_list(&[labels::CAPACITY_TYPE_LABEL_KEY, labels::NODE_POOL_LABEL_KEY])
        ),
    })];
    if node_pool {
        rules.push(serde_json::json!({
            "message": format!("label \"{}\" is restricted", labels::NODE_POOL_LABEL_KEY),
            "rule": format!("self != \"{}\"", labels::NODE_POOL_LABEL_KEY),
        }));
    }
    rules.push(serde_json::json!({
        "message": format!("label \"{}\" is restricted", labels::HOSTNAME_LABEL_KEY),
        "rule": format!("self != \"{}\"", labels::HOSTNAME_LABEL_KEY),
    }));
    rules.push(serde_json::json!({
        "message": "label domain \"karpenter.k8s.aws\" is restricted",
        "rule": format!(
            "self in [{}] || !self.find(\"^([^/]+)\").endsWith(\"karpenter.k8s.aws\")",
            quoted_list(labels::AWS_ALLOWED_LABEL_KEYS)
        ),
    }));
    rules
}

/// The same rules over every key of a label map (`self` is the map), for template labels.
pub fn label_map_rules() -> serde_json::Value {
    serde_json::json!([
        {
            "message": "label domain \"karpenter.sh\" is restricted",
            "rule": format!(
                "self.all(x, x in [{}] || !x.find(\"^([^/]+)\").endsWith(\"karpenter.sh\"))",
                quoted_list(&[labels::CAPACITY_TYPE_LABEL_KEY, labels::NODE_POOL_LABEL_KEY])
            ),
        },
        {
            "message": format!("label \"{}\" is restricted", labels::NODE_POOL_LABEL_KEY),
            "rule": format!("self.all(x, x != \"{}\")", labels::NODE_POOL_LABEL_KEY),
        },
        {
            "message": format!("label \"{}\" is restricted", labels::HOSTNAME_LABEL_KEY),
            "rule": format!("self.all(x, x != \"{}\")", labels::HOSTNAME_LABEL_KEY),
        },
        {
            "message": "label domain \"karpenter.k8s.aws\" is restricted",
            "rule": format!(
                "self.all(x, x in [{}] || !x.find(\"^([^/]+)\").endsWith(\"karpenter.k8s.aws\"))",
                quoted_list(labels::AWS_ALLOWED_LABEL_KEYS)
            ),
        },
    ])
}

fn requirements(node_pool: bool) -> Schema {
    json_schema!({
        "description": "Requirements are layered with GetLabels and applied to every node.",
        "type": "array",
        "maxItems": 100,
        "x-kubernetes-list-type": "atomic",
        "items": {
            "description": "A node selector requirement with min values is a selector that contains values, a key, an operator that relates the key and values and minValues that represent the requirement to have at least that many values.",
            "type": "object",
            "required": ["key", "operator"],
            "properties": {
                "key": {
                    "description": "The label key that the selector applies to.",
                    "type": "string",
                    "maxLength": LABEL_KEY_MAX_LENGTH,
                    "pattern": QUALIFIED_NAME_PATTERN,
                    "x-kubernetes-validations": key_rules(node_pool),
                },
                "minValues": {
                    "description": "This field is ALPHA and can be dropped or replaced at any time. MinValues is the minimum number of unique values required to define the flexibility of the specific requirement.",
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 50,
                },
                "operator": {
                    "description": "Represents a key's relationship to a set of values. Valid operators are In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte and Lte.",
                    "type": "string",
                    "enum": ["Gte", "Lte", "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"],
                },
                "values": {
                    "description": "An array of string values. If the operator is In or NotIn, the values array must be non-empty. If the operator is Exists or DoesNotExist, the values array must be empty. If the operator is Gt, Lt, Gte or Lte, the values array must have a single element, which will be interpreted as an integer.",
                    "type": "array",
                    "items": {
                        "type": "string",
                        "maxLength": 63,
                        "pattern": LABEL_VALUE_PATTERN,
                    },
                    "x-kubernetes-list-type": "atomic",
                },
            },
        },
        "x-kubernetes-validations": [
            {
                "message": "requirements with operator 'In' must have a value defined",
                "rule": "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
            },
            {
                "message": "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
                "rule": "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
            },
            {
                "message": "requirements with 'minValues' must have at least that many values specified in the 'values' field",
                "rule": "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)",
            },
        ],
    })
}

/// Schema of `NodePool.spec.template.spec.requirements`.
pub fn node_pool_requirements(_: &mut SchemaGenerator) -> Schema {
    requirements(true)
}

/// Schema of `NodeClaim.spec.requirements` (no `karpenter.sh/nodepool` exclusion).
pub fn node_claim_requirements(_: &mut SchemaGenerator) -> Schema {
    requirements(false)
}

/// Schema of `NodeOverlay.spec.requirements`: Karpenter's, which has no
/// `minValues`, requires values for `NotIn` too, and allows
/// `karpenter.sh/nodepool` (an overlay may select a pool).
pub fn node_overlay_requirements(_: &mut SchemaGenerator) -> Schema {
    let mut schema = requirements(false);
    schema.insert(
        "description".into(),
        "requirements constrain when this NodeOverlay is applied during scheduling simulations: well-known labels and the NodePool's template labels.".into(),
    );
    if let Some(items) = schema
        .get_mut("items")
        .and_then(serde_json::Value::as_object_mut)
    {
        items.insert(
            "description".into(),
            "A node selector requirement is a selector that contains values, a key, and an operator that relates the key and values.".into(),
        );
        if let Some(properties) = items
            .get_mut("properties")
            .and_then(serde_json::Value::as_object_mut)
        {
            properties.remove("minValues");
        }
    }
    schema.insert(
        "x-kubernetes-validations".into(),
        serde_json::json!([
            {
                "message": "requirements with operator 'NotIn' must have a value defined",
                "rule": "self.all(x, x.operator == 'NotIn' ? x.values.size() != 0 : true)",
            },
            {
                "message": "requirements with operator 'In' must have a value defined",
                "rule": "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
            },
            {
                "message": "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value",
                "rule": "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
            },
        ]),
    );
    schema
}
