//! Runtime validation of NodePool templates and NodeClaim requirements:
//! Karpenter's `RuntimeValidate`, for the checks a CRD schema cannot express
//! (and for objects that never passed through an API server's schema, such as
//! those of the test API emulator). Feeds the NodePool `ValidationSucceeded`
//! condition.

use k8s_openapi::api::core::v1::Taint;

use crate::apis::labels;
use crate::apis::nodepool::NodePoolSpec;
use crate::apis::requirements::{NodeSelectorRequirementWithMinValues, RequirementOperator};

/// One problem found by runtime validation; `field` is the JSON path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// A label key that is not a qualified name.
    #[error("{field}: invalid key {key:?}: {reason}")]
    InvalidKey {
        /// Path of the key.
        field: String,
        /// The key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A label value that is not a valid label value.
    #[error("{field}: invalid value {value:?}: {reason}")]
    InvalidValue {
        /// Path of the value.
        field: String,
        /// The value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A key users may not use.
    #[error(
        "{field}: label {key:?} is restricted; use a well-known label or a custom domain outside karpenter.sh and karpenter.k8s.aws"
    )]
    RestrictedLabel {
        /// Path of the key.
        field: String,
        /// The key.
        key: String,
    },
    /// An invalid taint.
    #[error("{field}: {reason}")]
    InvalidTaint {
        /// Path of the taint.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The same key and effect appear twice across `taints` and `startupTaints`.
    #[error("{field}: duplicate taint key/effect pair {key}={effect}")]
    DuplicateTaint {
        /// Path of the second occurrence.
        field: String,
        /// Taint key.
        key: String,
        /// Taint effect.
        effect: String,
    },
    /// A requirement whose operator and values do not fit together.
    #[error("{field}: {reason}")]
    InvalidRequirement {
        /// Path of the requirement.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A nodewright annotation with a value it does not take.
    #[error("{field}: {value:?} is not {expected}")]
    InvalidAnnotation {
        /// Path of the annotation.
        field: String,
        /// Its value.
        value: String,
        /// What it takes.
        expected: &'static str,
    },
}

/// Whether a NodePool opts into priority back-migration
/// ([`labels::PRIORITY_MIGRATION_ANNOTATION_KEY`]): absent is off; any
/// value other than `"true"` or `"false"` is an error naming the field.
pub fn priority_migration(
    annotations: &std::collections::BTreeMap<String, String>,
) -> Result<bool, ValidationError> {
    match annotations
        .get(labels::PRIORITY_MIGRATION_ANNOTATION_KEY)
        .map(String::as_str)
    {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(ValidationError::InvalidAnnotation {
            field: format!(
                "metadata.annotations[{}]",
                labels::PRIORITY_MIGRATION_ANNOTATION_KEY
            ),
            value: other.to_string(),
            expected: "\"true\" or \"false\"; write \"true\" to move nodes back to higher-priority instance types, or remove it",
        }),
    }
}

/// A NodePool's hourly price limit ([`labels::PRICE_LIMIT_ANNOTATION_KEY`]):
/// absent is none; anything but a finite, non-negative decimal is an error
/// naming the field.
pub fn price_limit(
    annotations: &std::collections::BTreeMap<String, String>,
) -> Result<Option<f64>, ValidationError> {
    let Some(text) = annotations.get(labels::PRICE_LIMIT_ANNOTATION_KEY) else {
        return Ok(None);
    };
    match text.trim().parse::<f64>() {
        Ok(limit) if limit.is_finite() && limit >= 0.0 => Ok(Some(limit)),
        _ => Err(ValidationError::InvalidAnnotation {
            field: format!(
                "metadata.annotations[{}]",
                labels::PRICE_LIMIT_ANNOTATION_KEY
            ),
            value: text.clone(),
            expected: "a price: give dollars per hour as a non-negative decimal, e.g. \"12.50\", or remove it",
        }),
    }
}

const MAX_NAME_LENGTH: usize = 63;
const MAX_PREFIX_LENGTH: usize = 253;

/// Whether `s` is `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?` (a name part or label value).
fn is_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// Whether `s` is a DNS-1123 subdomain.
fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_PREFIX_LENGTH
        && s.split('.').all(|label| {
            let bytes = label.as_bytes();
            match (bytes.first(), bytes.last()) {
                (Some(first), Some(last)) => {
                    (first.is_ascii_lowercase() || first.is_ascii_digit())
                        && (last.is_ascii_lowercase() || last.is_ascii_digit())
                        && bytes
                            .iter()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
                }
                _ => false,
            }
        })
}

/// Checks a Kubernetes qualified name (`[prefix/]name`), as label and taint keys are.
pub fn check_qualified_name(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && !is_dns_subdomain(prefix)
    {
        return Err(format!(
            "prefix {prefix:?} must be a lowercase DNS subdomain of at most {MAX_PREFIX_LENGTH} characters"
        ));
    }
    if name.len() > MAX_NAME_LENGTH {
        return Err(format!(
            "name part must be at most {MAX_NAME_LENGTH} characters"
        ));
    }
    if !is_name_part(name) {
        return Err(
            "name part must be alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
                .to_string(),
        );
    }
    Ok(())
}

/// Checks a label value: empty, or at most 63 alphanumerics, `-`, `_`, `.` with alphanumeric ends.
pub fn check_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    if value.len() > MAX_NAME_LENGTH {
        return Err(format!("must be at most {MAX_NAME_LENGTH} characters"));
    }
    if !is_name_part(value) {
        return Err(
            "must be alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
                .to_string(),
        );
    }
    Ok(())
}

/// Validates one requirement (Karpenter's `ValidateRequirement`); `field` is its path.
pub fn validate_requirement(
    requirement: &NodeSelectorRequirementWithMinValues,
    field: &str,
) -> Vec<ValidationError> {
    let mut errors = Vec::new();
    let key = labels::normalize_label(&requirement.key);
    let values = requirement.values();
    let invalid = |reason: String| ValidationError::InvalidRequirement {
        field: field.to_string(),
        reason,
    };
    if labels::is_restricted_label(key) {
        errors.push(ValidationError::RestrictedLabel {
            field: format!("{field}.key"),
            key: key.to_string(),
        });
    }
    if let Err(reason) = check_qualified_name(key) {
        errors.push(ValidationError::InvalidKey {
            field: format!("{field}.key"),
            key: key.to_string(),
            reason,
        });
    }
    for (index, value) in values.iter().enumerate() {
        if let Err(reason) = check_label_value(value) {
            errors.push(ValidationError::InvalidValue {
                field: format!("{field}.values[{index}]"),
                value: value.clone(),
                reason,
            });
        }
    }
    let min_values = requirement.min_values.unwrap_or(0);
    match requirement.operator {
        RequirementOperator::In => {
            if values.is_empty() {
                errors.push(invalid(format!(
                    "key {key} with operator In must have a value defined"
                )));
            }
            if i64::try_from(values.len()).unwrap_or(i64::MAX) < min_values {
                errors.push(invalid(format!(
                    "key {key} with operator In must have at least minValues ({min_values}) values"
                )));
            }
            if let Some(known) = labels::well_known_values(key) {
                let valid = values
                    .iter()
                    .filter(|v| known.contains(&v.as_str()))
                    .count();
                if valid == 0 {
                    errors.push(invalid(format!(
                        "no valid values in {values:?} for {key}; expected one of {known:?}"
                    )));
                } else if i64::try_from(valid).unwrap_or(i64::MAX) < min_values {
                    errors.push(invalid(format!(
                        "only {valid} valid values for {key}, fewer than minValues ({min_values}); expected values from {known:?}"
                    )));
                }
            }
        }
        RequirementOperator::Gt
        | RequirementOperator::Lt
        | RequirementOperator::Gte
        | RequirementOperator::Lte => {
            let single_non_negative = match values {
                [value] => value.parse::<i64>().is_ok_and(|v| v >= 0),
                _ => false,
            };
            if !single_non_negative {
                errors.push(invalid(format!(
                    "key {key} with operator {} must have a single positive integer value",
                    requirement.operator.as_str()
                )));
            }
        }
        RequirementOperator::NotIn
        | RequirementOperator::Exists
        | RequirementOperator::DoesNotExist => {}
    }
    errors
}

fn validate_taints(
    taints: &[Taint],
    list: &str,
    seen: &mut Vec<(String, String)>,
    errors: &mut Vec<ValidationError>,
) {
    for (index, taint) in taints.iter().enumerate() {
        let field = format!("{list}[{index}]");
        if let Err(reason) = check_qualified_name(&taint.key) {
            errors.push(ValidationError::InvalidTaint {
                field: format!("{field}.key"),
                reason: format!("invalid key {:?}: {reason}", taint.key),
            });
        }
        if let Some(value) = taint.value.as_deref().filter(|v| !v.is_empty())
            && let Err(reason) = check_qualified_name(value)
        {
            errors.push(ValidationError::InvalidTaint {
                field: format!("{field}.value"),
                reason: format!("invalid value {value:?}: {reason}"),
            });
        }
        if !matches!(
            taint.effect.as_str(),
            "NoSchedule" | "PreferNoSchedule" | "NoExecute" | ""
        ) {
            errors.push(ValidationError::InvalidTaint {
                field: format!("{field}.effect"),
                reason: format!(
                    "unsupported effect {:?}; use NoSchedule, PreferNoSchedule or NoExecute",
                    taint.effect
                ),
            });
        }
        let pair = (taint.key.clone(), taint.effect.clone());
        if seen.contains(&pair) {
            errors.push(ValidationError::DuplicateTaint {
                field,
                key: pair.0,
                effect: pair.1,
            });
        } else {
            seen.push(pair);
        }
    }
}

/// Karpenter's `NodePool.RuntimeValidate`: template labels, taints and
/// requirements. Returns every problem found, each naming its field.
pub fn validate_node_pool(spec: &NodePoolSpec) -> Result<(), Vec<ValidationError>> {
    let mut errors = Vec::new();
    let template = &spec.template;
    if let Some(labels_map) = template.metadata.as_ref().and_then(|m| m.labels.as_ref()) {
        for (key, value) in labels_map {
            let field = format!("spec.template.metadata.labels[{key}]");
            if key == labels::NODE_POOL_LABEL_KEY || labels::is_restricted_label(key) {
                errors.push(ValidationError::RestrictedLabel {
                    field: field.clone(),
                    key: key.clone(),
                });
            }
            if let Err(reason) = check_qualified_name(key) {
                errors.push(ValidationError::InvalidKey {
                    field: field.clone(),
                    key: key.clone(),
                    reason,
                });
            }
            if let Err(reason) = check_label_value(value) {
                errors.push(ValidationError::InvalidValue {
                    field,
                    value: value.clone(),
                    reason,
                });
            }
        }
    }
    let mut seen = Vec::new();
    let taints = template.spec.taints.as_deref().unwrap_or(&[]);
    let startup = template.spec.startup_taints.as_deref().unwrap_or(&[]);
    validate_taints(taints, "spec.template.spec.taints", &mut seen, &mut errors);
    validate_taints(
        startup,
        "spec.template.spec.startupTaints",
        &mut seen,
        &mut errors,
    );
    for (index, requirement) in template.spec.requirements.iter().enumerate() {
        let field = format!("spec.template.spec.requirements[{index}]");
        errors.extend(validate_requirement(requirement, &field));
        if requirement.key == labels::NODE_POOL_LABEL_KEY {
            errors.push(ValidationError::RestrictedLabel {
                field: format!("{field}.key"),
                key: requirement.key.clone(),
            });
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(extra: serde_json::Value) -> NodePoolSpec {
        let mut spec = serde_json::json!({
            "template": {"spec": {
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
                    {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["3"]},
                ],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            }},
        });
        if let (Some(target), Some(patch)) = (spec["template"].as_object_mut(), extra.as_object()) {
            for (key, value) in patch {
                target.insert(key.clone(), value.clone());
            }
        }
        serde_json::from_value(spec).unwrap()
    }

    #[test]
    fn accepts_a_valid_pool() {
        assert_eq!(validate_node_pool(&pool(serde_json::json!({}))), Ok(()));
    }

    #[test]
    fn qualified_names_and_values() {
        assert!(check_qualified_name("example.com/team").is_ok());
        assert!(check_qualified_name("team").is_ok());
        assert!(check_qualified_name("Example.com/team").is_err());
        assert!(check_qualified_name("example.com/").is_err());
        assert!(check_qualified_name(&"a".repeat(64)).is_err());
        assert!(check_label_value("").is_ok());
        assert!(check_label_value("m5.large").is_ok());
        assert!(check_label_value("-bad").is_err());
    }

    #[test]
    fn rejects_bad_labels_taints_and_requirements() {
        let mut spec = pool(serde_json::json!({
            "metadata": {"labels": {"karpenter.sh/foo": "x", "team": "not ok!"}},
        }));
        spec.template.spec.taints = Some(vec![Taint {
            key: "gpu".into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        }]);
        spec.template.spec.startup_taints = Some(vec![Taint {
            key: "gpu".into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        }]);
        spec.template
            .spec
            .requirements
            .push(NodeSelectorRequirementWithMinValues {
                key: labels::CAPACITY_TYPE_LABEL_KEY.into(),
                operator: RequirementOperator::In,
                values: Some(vec!["cheap".into()]),
                min_values: None,
            });
        spec.template
            .spec
            .requirements
            .push(NodeSelectorRequirementWithMinValues {
                key: labels::NODE_POOL_LABEL_KEY.into(),
                operator: RequirementOperator::Exists,
                values: None,
                min_values: None,
            });
        spec.template
            .spec
            .requirements
            .push(NodeSelectorRequirementWithMinValues {
                key: labels::INSTANCE_FAMILY_LABEL_KEY.into(),
                operator: RequirementOperator::In,
                values: Some(vec!["m5".into()]),
                min_values: Some(2),
            });
        let errors = validate_node_pool(&spec).unwrap_err();
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        let has = |needle: &str| text.iter().any(|t| t.contains(needle));
        assert!(
            has(
                "spec.template.metadata.labels[karpenter.sh/foo]: label \"karpenter.sh/foo\" is restricted"
            ),
            "{text:#?}"
        );
        assert!(
            has("spec.template.metadata.labels[team]: invalid value"),
            "{text:#?}"
        );
        assert!(
            has(
                "spec.template.spec.startupTaints[0]: duplicate taint key/effect pair gpu=NoSchedule"
            ),
            "{text:#?}"
        );
        assert!(
            has("spec.template.spec.requirements[2]: no valid values"),
            "{text:#?}"
        );
        assert!(
            has(
                "spec.template.spec.requirements[3].key: label \"karpenter.sh/nodepool\" is restricted"
            ),
            "{text:#?}"
        );
        assert!(
            has(
                "spec.template.spec.requirements[4]: key karpenter.k8s.aws/instance-family with operator In must have at least minValues (2)"
            ),
            "{text:#?}"
        );
    }

    #[test]
    fn numeric_operators_need_one_non_negative_integer() {
        let requirement = |values: &[&str]| NodeSelectorRequirementWithMinValues {
            key: labels::INSTANCE_CPU_LABEL_KEY.into(),
            operator: RequirementOperator::Gte,
            values: Some(values.iter().map(|v| v.to_string()).collect()),
            min_values: None,
        };
        assert!(validate_requirement(&requirement(&["4"]), "r").is_empty());
        for values in [&["-1"][..], &["1", "2"], &["x"], &[]] {
            let errors = validate_requirement(&requirement(values), "r");
            assert!(
                errors.iter().any(|e| e
                    .to_string()
                    .contains("must have a single positive integer value")),
                "{values:?}: {errors:?}"
            );
        }
    }

    #[test]
    fn normalizes_beta_keys_before_checking() {
        let requirement = NodeSelectorRequirementWithMinValues {
            key: "beta.kubernetes.io/arch".into(),
            operator: RequirementOperator::In,
            values: Some(vec!["amd64".into()]),
            min_values: None,
        };
        assert!(validate_requirement(&requirement, "r").is_empty());
    }
}
