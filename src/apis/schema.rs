//! OpenAPI schema fragments shared by the CRDs: the validation patterns
//! Karpenter uses, and hand-written schemas for fields whose Rust type comes
//! from k8s-openapi but whose Karpenter schema is stricter (taints, resource
//! lists, conditions).

use schemars::{Schema, SchemaGenerator, json_schema};

/// A Kubernetes qualified name, optionally prefixed by a DNS subdomain (label and taint keys).
pub const QUALIFIED_NAME_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$";

/// A label value: empty, or alphanumerics with `-`, `_`, `.` inside.
pub const LABEL_VALUE_PATTERN: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";

/// A status condition type (metav1.Condition).
pub const CONDITION_TYPE_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$";

/// A resource quantity (`100`, `500m`, `16Gi`).
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// `expireAfter` / `consolidateAfter`: seconds, minutes and hours, or `Never`.
pub const NILLABLE_DURATION_PATTERN: &str = r"^(([0-9]+(s|m|h))+|Never)$";

/// `terminationGracePeriod`: seconds, minutes and hours; no `Never`.
pub const TERMINATION_GRACE_PERIOD_PATTERN: &str = r"^([0-9]+(s|m|h))+$";

/// A Go duration as accepted by `time.ParseDuration`, without sign (extension timeouts).
pub const GO_DURATION_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$";

/// The maximum length of a qualified-name label key with its prefix.
pub const LABEL_KEY_MAX_LENGTH: u32 = 316;

/// A map of resource name to quantity (`ResourceList`), as int-or-string with the quantity pattern.
pub fn resource_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": true,
        },
    })
}

fn taint_item() -> serde_json::Value {
    serde_json::json!({
        "description": "The node this Taint is attached to has the \"effect\" on any pod that does not tolerate the Taint.",
        "type": "object",
        "required": ["effect", "key"],
        "properties": {
            "effect": {
                "description": "Required. The effect of the taint on pods that do not tolerate the taint.",
                "type": "string",
                "enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"],
            },
            "key": {
                "description": "Required. The taint key to be applied to a node.",
                "type": "string",
                "minLength": 1,
                "pattern": QUALIFIED_NAME_PATTERN,
            },
            "timeAdded": {
                "description": "TimeAdded represents the time at which the taint was added.",
                "type": "string",
                "format": "date-time",
            },
            "value": {
                "description": "The taint value corresponding to the taint key.",
                "type": "string",
                "pattern": QUALIFIED_NAME_PATTERN,
            },
        },
    })
}

/// A list of `core/v1` taints with Karpenter's stricter key/value/effect rules.
pub fn taint_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": taint_item(),
        "x-kubernetes-list-type": "atomic",
    })
}

fn condition_item(strict: bool) -> serde_json::Value {
    let reason_pattern = if strict {
        r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
    } else {
        r"^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?|)$"
    };
    let mut reason = serde_json::json!({
        "description": "reason contains a programmatic identifier indicating the reason for the condition's last transition.",
        "type": "string",
        "maxLength": 1024,
        "pattern": reason_pattern,
    });
    if strict && let Some(map) = reason.as_object_mut() {
        map.insert("minLength".into(), 1.into());
    }
    let required: Vec<&str> = if strict {
        vec!["lastTransitionTime", "message", "reason", "status", "type"]
    } else {
        vec!["lastTransitionTime", "status", "type"]
    };
    serde_json::json!({
        "description": "Condition aliases the upstream type and adds additional helper methods",
        "type": "object",
        "required": required,
        "properties": {
            "lastTransitionTime": {
                "description": "lastTransitionTime is the last time the condition transitioned from one status to another.",
                "type": "string",
                "format": "date-time",
            },
            "message": {
                "description": "message is a human readable message indicating details about the transition.",
                "type": "string",
                "maxLength": 32768,
            },
            "observedGeneration": {
                "description": "observedGeneration represents the .metadata.generation that the condition was set based upon.",
                "type": "integer",
                "format": "int64",
                "minimum": 0,
            },
            "reason": reason,
            "status": {
                "description": "status of the condition, one of True, False, Unknown.",
                "type": "string",
                "enum": ["True", "False", "Unknown"],
            },
            "type": {
                "description": "type of condition in CamelCase or in foo.example.com/CamelCase.",
                "type": "string",
                "maxLength": 316,
                "pattern": CONDITION_TYPE_PATTERN,
            },
        },
    })
}

/// Conditions of NodePool and EC2NodeClass: `reason` and `message` are required.
pub fn conditions_strict(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "Conditions contains signals for health and readiness",
        "type": "array",
        "items": condition_item(true),
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    })
}

/// Conditions of NodeClaim: `reason` may be empty and `message` may be absent.
pub fn conditions_lenient(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "Conditions contains signals for health and readiness",
        "type": "array",
        "items": condition_item(false),
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    })
}

/// A `string -> string` map whose values must be valid label values (template labels).
pub fn label_map(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {
            "type": "string",
            "maxLength": 63,
            "pattern": LABEL_VALUE_PATTERN,
        },
        "maxProperties": 100,
        "x-kubernetes-map-type": "atomic",
    })
}

/// Free-form JSON kept verbatim (extension `config`, whose shape the module defines).
pub fn preserve_unknown(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Pattern of an eviction threshold: a percentage or a quantity.
pub const EVICTION_THRESHOLD_PATTERN: &str = r"^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$";

/// A `string -> quantity string` map (kubelet `systemReserved` / `kubeReserved`).
pub fn quantity_string_map(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {"type": "string", "pattern": QUANTITY_PATTERN},
    })
}

/// A `signal -> threshold` map (kubelet `evictionHard` / `evictionSoft`).
pub fn eviction_threshold_map(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {"type": "string", "pattern": EVICTION_THRESHOLD_PATTERN},
    })
}
