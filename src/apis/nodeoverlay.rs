//! `NodeOverlay` (`karpenter.sh/v1alpha1`, alpha, behind the `NodeOverlay`
//! feature gate): a user's correction to what the catalog says about the
//! offerings a NodePool may launch — a price (a negotiated rate, a license
//! fee), a price adjustment, or extended resources the node will have —
//! for the offerings its requirements select. Field-for-field Karpenter's,
//! so its manifests apply unchanged; the typed forms ([`PriceChange`],
//! [`NodeOverlaySpec::parsed`]) are what the scheduler uses, so no string
//! is parsed twice.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::apis::conditions::Condition;
use crate::apis::requirements::{NodeSelectorRequirementWithMinValues, RequirementOperator};
use crate::apis::validation::{ValidationError, validate_requirement};

/// Reason of a `False` `ValidationSucceeded`
/// ([`crate::apis::conditions::NODE_OVERLAY_VALIDATION_SUCCEEDED`]) for a
/// spec the runtime validation rejects (Karpenter's reason).
pub const REASON_RUNTIME_VALIDATION: &str = "RuntimeValidation";
/// Reason of a `False` `ValidationSucceeded` for an overlay
/// that conflicts with another of the same weight (Karpenter's reason).
pub const REASON_CONFLICT: &str = "Conflict";

/// Resources an overlay's `capacity` may not set: the catalog knows them
/// (Karpenter's `WellKnownResources`).
pub const RESTRICTED_CAPACITY: &[&str] = &["cpu", "memory", "ephemeral-storage", "pods"];

/// Pattern of `spec.price` (Karpenter's): an unsigned decimal.
pub const PRICE_PATTERN: &str = r"^\d+(\.\d+)?$";
/// Pattern of `spec.priceAdjustment` (Karpenter's): a signed amount, a
/// positive percentage, or a negative one down to `-100%`.
pub const PRICE_ADJUSTMENT_PATTERN: &str =
    r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$";

/// Desired state of a NodeOverlay.
// Repeated `printcolumn(type_ = ..)` arguments are distinct columns, not duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1alpha1",
    kind = "NodeOverlay",
    plural = "nodeoverlays",
    singular = "nodeoverlay",
    shortname = "overlays",
    category = "karpenter",
    status = "NodeOverlayStatus",
    derive = "PartialEq",
    doc = "NodeOverlay changes the price or adds extended resources of the offerings its requirements select",
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
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "message": "cannot set both 'price' and 'priceAdjustment'",
        "rule": "!has(self.price) || !has(self.priceAdjustment)",
    },
]))]
pub struct NodeOverlaySpec {
    /// Which offerings the overlay applies to: well-known labels (instance
    /// type, zone, capacity type, `karpenter.sh/nodepool`, …) and the
    /// NodePool's template labels.
    #[schemars(schema_with = "crate::apis::requirements::node_overlay_requirements")]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// A change of the matching offerings' price: a signed amount
    /// (`-0.5`, `+1.2`) or a percentage (`+10%`, `-15%`, at least `-100%`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$"
    ))]
    pub price_adjustment: Option<String>,
    /// The matching offerings' price per hour, replacing the catalog's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^\d+(\.\d+)?$"))]
    pub price: Option<String>,
    /// Extended resources the matching instance types' nodes have, added to
    /// theirs; `cpu`, `memory`, `ephemeral-storage` and `pods` may not be set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "capacity_schema")]
    pub capacity: Option<BTreeMap<String, Quantity>>,
    /// Priority among overlays (1..10000, absent is 0): a higher weight wins
    /// an offering or resource; equal weights on the same one conflict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub weight: Option<i32>,
}

fn capacity_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = crate::apis::schema::resource_list(generator);
    let rule = format!(
        "self.all(x, !(x in [{}]))",
        RESTRICTED_CAPACITY
            .iter()
            .map(|r| format!("'{r}'"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    schema.insert(
        "description".into(),
        "Capacity adds extended resources only, and does not replace any existing resources."
            .into(),
    );
    schema.insert(
        "x-kubernetes-validations".into(),
        serde_json::json!([{"message": "invalid resource restricted", "rule": rule}]),
    );
    schema
}

/// Observed state of a NodeOverlay.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeOverlayStatus {
    /// `ValidationSucceeded` and `Ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::apis::schema::conditions_strict")]
    pub conditions: Option<Vec<Condition>>,
}

/// How an overlay changes an offering's price, parsed once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PriceChange {
    /// `price`: this price per hour.
    Set(f64),
    /// `priceAdjustment` as an amount: the list price plus this (signed).
    Add(f64),
    /// `priceAdjustment` as a percentage: the list price times `1 + p/100`.
    Percent(f64),
}

impl PriceChange {
    /// The price of an offering listed at `price` after this change; never
    /// below zero (Karpenter's `AdjustedPrice`).
    pub fn apply(self, price: f64) -> f64 {
        let changed = match self {
            PriceChange::Set(value) => value,
            PriceChange::Add(amount) => price + amount,
            PriceChange::Percent(percent) => price * (1.0 + percent / 100.0),
        };
        changed.max(0.0)
    }
}

/// A NodeOverlay's spec in the scheduler's terms: valid by construction.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedOverlay {
    /// The price change, if the overlay sets one.
    pub price: Option<PriceChange>,
    /// Extended resources and their quantities as written (the scheduler
    /// parses them into its units).
    pub capacity: BTreeMap<String, String>,
    /// The weight (absent is 0).
    pub weight: i32,
}

/// `\d+(\.\d+)?` when `leading_dot` is false, `\d*\.?\d+` when it is true.
fn is_decimal(text: &str, leading_dot: bool) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match text.split_once('.') {
        None => digits(text),
        Some((whole, fraction)) => {
            (digits(whole) || (leading_dot && whole.is_empty())) && digits(fraction)
        }
    }
}

/// Parses `spec.price` (Karpenter's pattern).
pub fn parse_price(text: &str) -> Option<f64> {
    if !is_decimal(text, false) {
        return None;
    }
    text.parse().ok()
}

/// Parses `spec.priceAdjustment` (Karpenter's pattern).
pub fn parse_price_adjustment(text: &str) -> Option<PriceChange> {
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'+') => (false, &text[1..]),
        Some(b'-') => (true, &text[1..]),
        _ => return None,
    };
    let sign = if negative { -1.0 } else { 1.0 };
    match rest.strip_suffix('%') {
        None => is_decimal(rest, true)
            .then(|| rest.parse::<f64>().ok())
            .flatten()
            .map(|v| PriceChange::Add(sign * v)),
        Some(percent) if !negative => is_decimal(percent, true)
            .then(|| percent.parse::<f64>().ok())
            .flatten()
            .map(PriceChange::Percent),
        Some(percent) => {
            // `-\d{1,2}(\.\d+)?%` or exactly `-100%`.
            let whole = percent.split_once('.').map_or(percent, |(w, _)| w);
            let allowed =
                percent == "100" || (is_decimal(percent, false) && (1..=2).contains(&whole.len()));
            allowed
                .then(|| percent.parse::<f64>().ok())
                .flatten()
                .map(|v| PriceChange::Percent(-v))
        }
    }
}

impl NodeOverlaySpec {
    /// Karpenter's `RuntimeValidate` plus the schema's own rules (a spec
    /// from a manifest never passed an API server): every problem, each
    /// naming its field and what to write instead.
    pub fn validate(&self) -> Result<(), Vec<ValidationError>> {
        self.parsed().map(|_| ())
    }

    /// The typed spec, or every problem found.
    pub fn parsed(&self) -> Result<ParsedOverlay, Vec<ValidationError>> {
        let mut errors = Vec::new();
        let invalid = |field: &str, reason: String| ValidationError::InvalidRequirement {
            field: field.to_string(),
            reason,
        };
        if self.requirements.len() > 100 {
            errors.push(invalid(
                "spec.requirements",
                "at most 100 requirements are allowed; merge or drop some".into(),
            ));
        }
        for (index, requirement) in self.requirements.iter().enumerate() {
            let field = format!("spec.requirements[{index}]");
            errors.extend(validate_requirement(requirement, &field));
            if requirement.operator == RequirementOperator::NotIn && requirement.values().is_empty()
            {
                errors.push(invalid(
                    &field,
                    format!(
                        "key {} with operator NotIn must have a value defined; list the values to exclude",
                        requirement.key
                    ),
                ));
            }
            if requirement.min_values.is_some() {
                errors.push(invalid(
                    &format!("{field}.minValues"),
                    "NodeOverlay requirements take no minValues; remove it".into(),
                ));
            }
        }
        let price = match (&self.price, &self.price_adjustment) {
            (Some(_), Some(_)) => {
                errors.push(invalid(
                    "spec",
                    "cannot set both 'price' and 'priceAdjustment'; keep one".into(),
                ));
                None
            }
            (Some(text), None) => {
                match parse_price(text) {
                    Some(value) => Some(PriceChange::Set(value)),
                    None => {
                        errors.push(invalid(
                        "spec.price",
                        format!("{text:?} is not a price; write an unsigned decimal such as \"0.432\""),
                    ));
                        None
                    }
                }
            }
            (None, Some(text)) => match parse_price_adjustment(text) {
                Some(change) => Some(change),
                None => {
                    errors.push(invalid(
                        "spec.priceAdjustment",
                        format!(
                            "{text:?} is not a price adjustment; write a signed amount (\"-0.5\", \"+1.2\") or a signed percentage (\"+10%\", \"-15%\", at least \"-100%\")"
                        ),
                    ));
                    None
                }
            },
            (None, None) => None,
        };
        let mut capacity = BTreeMap::new();
        for (name, quantity) in self.capacity.iter().flatten() {
            let field = format!("spec.capacity[{name}]");
            if RESTRICTED_CAPACITY.contains(&name.as_str()) {
                errors.push(invalid(
                    &field,
                    format!(
                        "invalid capacity: {name} in resource, restricted; overlays add extended resources only (e.g. example.com/device)"
                    ),
                ));
                continue;
            }
            capacity.insert(name.clone(), quantity.0.clone());
        }
        let weight = self.weight.unwrap_or(0);
        if self.weight.is_some() && !(1..=10000).contains(&weight) {
            errors.push(invalid(
                "spec.weight",
                format!("{weight} is out of range; use 1..10000 or leave it out"),
            ));
        }
        if errors.is_empty() {
            Ok(ParsedOverlay {
                price,
                capacity,
                weight,
            })
        } else {
            Err(errors)
        }
    }
}

#[cfg(test)]
#[path = "nodeoverlay_tests.rs"]
mod tests;
