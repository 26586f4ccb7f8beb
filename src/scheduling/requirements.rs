//! The requirements algebra: label keys constrained by Kubernetes node-selector
//! operators, intersected and checked for compatibility the way Karpenter v1
//! does it (`core:pkg/scheduling/requirement(s).go`).

use std::collections::BTreeMap;
use std::fmt;

use thiserror::Error;

/// Node-selector operators, including Karpenter v1.14's `Gte`/`Lte`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operator {
    /// The label has one of the values.
    In,
    /// The label is absent or has none of the values.
    NotIn,
    /// The label is present with any value.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// The label is an integer strictly greater than the value.
    Gt,
    /// The label is an integer strictly less than the value.
    Lt,
    /// The label is an integer greater than or equal to the value.
    Gte,
    /// The label is an integer less than or equal to the value.
    Lte,
}

impl From<crate::apis::RequirementOperator> for Operator {
    /// The algebra's operator for a NodePool/NodeClaim requirement's operator.
    fn from(operator: crate::apis::RequirementOperator) -> Self {
        use crate::apis::RequirementOperator as Api;
        match operator {
            Api::In => Operator::In,
            Api::NotIn => Operator::NotIn,
            Api::Exists => Operator::Exists,
            Api::DoesNotExist => Operator::DoesNotExist,
            Api::Gt => Operator::Gt,
            Api::Lt => Operator::Lt,
            Api::Gte => Operator::Gte,
            Api::Lte => Operator::Lte,
        }
    }
}

impl Operator {
    /// Parses the Kubernetes spelling (`In`, `NotIn`, ...).
    pub fn parse(text: &str) -> Result<Self, RequirementError> {
        Ok(match text {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" => Operator::Gt,
            "Lt" => Operator::Lt,
            "Gte" => Operator::Gte,
            "Lte" => Operator::Lte,
            other => return Err(RequirementError::UnknownOperator(other.to_string())),
        })
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Operator::In => "In",
            Operator::NotIn => "NotIn",
            Operator::Exists => "Exists",
            Operator::DoesNotExist => "DoesNotExist",
            Operator::Gt => "Gt",
            Operator::Lt => "Lt",
            Operator::Gte => "Gte",
            Operator::Lte => "Lte",
        };
        f.write_str(text)
    }
}

/// Why a requirement could not be built from user input.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RequirementError {
    /// The operator is not one Kubernetes or Karpenter knows.
    #[error("unknown operator {0:?}; use one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte")]
    UnknownOperator(String),
    /// Gt/Lt/Gte/Lte need exactly one integer value.
    #[error(
        "requirement {key:?} with operator {operator} needs exactly one integer value, got {values:?}"
    )]
    NotOneInteger {
        /// Label key.
        key: String,
        /// Operator used.
        operator: Operator,
        /// Values given.
        values: Vec<String>,
    },
    /// Exists/DoesNotExist take no values.
    #[error("requirement {key:?} with operator {operator} must not list values, got {values:?}")]
    UnexpectedValues {
        /// Label key.
        key: String,
        /// Operator used.
        operator: Operator,
        /// Values given.
        values: Vec<String>,
    },
    /// The key is empty.
    #[error("requirement key is empty; give a label key such as topology.kubernetes.io/zone")]
    EmptyKey,
}

/// A set of label values, possibly complemented and bounded by integers.
/// Generic over the value representation so the solver can run the same
/// algebra on interned ids.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ValueSet<V> {
    complement: bool,
    values: Vec<V>,
    greater_than: Option<i64>,
    less_than: Option<i64>,
}

impl<V: Ord + Clone> ValueSet<V> {
    /// Every value (`Exists`).
    pub fn any() -> Self {
        ValueSet {
            complement: true,
            values: Vec::new(),
            greater_than: None,
            less_than: None,
        }
    }

    /// No value (`DoesNotExist`).
    pub fn none() -> Self {
        ValueSet {
            complement: false,
            values: Vec::new(),
            greater_than: None,
            less_than: None,
        }
    }

    /// Exactly these values (`In`).
    pub fn of(mut values: Vec<V>) -> Self {
        values.sort();
        values.dedup();
        ValueSet {
            complement: false,
            values,
            greater_than: None,
            less_than: None,
        }
    }

    /// Everything except these values (`NotIn`).
    pub fn except(mut values: Vec<V>) -> Self {
        values.sort();
        values.dedup();
        ValueSet {
            complement: true,
            values,
            greater_than: None,
            less_than: None,
        }
    }

    /// Integers strictly between the bounds.
    pub fn bounded(greater_than: Option<i64>, less_than: Option<i64>) -> Self {
        ValueSet {
            complement: true,
            values: Vec::new(),
            greater_than,
            less_than,
        }
    }

    /// Whether the set is a complement (NotIn/Exists/Gt/Lt).
    pub fn is_complement(&self) -> bool {
        self.complement
    }

    /// The listed values: members for In, exclusions for a complement.
    pub fn values(&self) -> &[V] {
        &self.values
    }

    /// Strict lower bound, if any.
    pub fn greater_than(&self) -> Option<i64> {
        self.greater_than
    }

    /// Strict upper bound, if any.
    pub fn less_than(&self) -> Option<i64> {
        self.less_than
    }

    /// Karpenter's `Len`: members for a concrete set, "almost infinite" for a complement.
    pub fn len(&self) -> usize {
        if self.complement {
            usize::MAX - self.values.len()
        } else {
            self.values.len()
        }
    }

    /// True when nothing can satisfy the set.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The operator this set reads as (Karpenter's `Operator()`).
    pub fn operator(&self) -> Operator {
        if self.complement {
            if self.values.is_empty() {
                Operator::Exists
            } else {
                Operator::NotIn
            }
        } else if self.values.is_empty() {
            Operator::DoesNotExist
        } else {
            Operator::In
        }
    }

    fn within(&self, value: &V, number: &impl Fn(&V) -> Option<i64>) -> bool {
        self.within_bounds(|| number(value))
    }

    /// Whether the number `number` gives is within `Gt`/`Lt` (asked only
    /// when there are bounds).
    fn within_bounds(&self, number: impl FnOnce() -> Option<i64>) -> bool {
        if self.greater_than.is_none() && self.less_than.is_none() {
            return true;
        }
        let Some(n) = number() else { return false };
        self.greater_than.is_none_or(|gt| n > gt) && self.less_than.is_none_or(|lt| n < lt)
    }

    /// Whether `value` satisfies the set.
    pub fn has(&self, value: &V, number: &impl Fn(&V) -> Option<i64>) -> bool {
        self.has_borrowed(value, number)
    }

    /// [`ValueSet::has`] for a borrowed form of a value (a `&str` for a set
    /// of `String`s), so a caller need not make an owned copy to ask.
    pub fn has_borrowed<Q>(&self, value: &Q, number: impl Fn(&Q) -> Option<i64>) -> bool
    where
        V: std::borrow::Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let listed = self
            .values
            .binary_search_by(|v| v.borrow().cmp(value))
            .is_ok();
        (listed != self.complement) && self.within_bounds(|| number(value))
    }

    /// The values both sets accept (Karpenter's `Intersection`).
    pub fn intersection(&self, other: &Self, number: &impl Fn(&V) -> Option<i64>) -> Self {
        let complement = self.complement && other.complement;
        let greater_than = max_opt(self.greater_than, other.greater_than);
        let less_than = min_opt(self.less_than, other.less_than);
        if let (Some(gt), Some(lt)) = (greater_than, less_than)
            && gt.saturating_add(1) >= lt
        {
            return Self::none();
        }
        let mut values: Vec<V> = match (self.complement, other.complement) {
            (true, true) => {
                let mut union = self.values.clone();
                union.extend(other.values.iter().cloned());
                union.sort();
                union.dedup();
                union
            }
            (true, false) => difference(&other.values, &self.values),
            (false, true) => difference(&self.values, &other.values),
            (false, false) => intersect(&self.values, &other.values),
        };
        let bounds = ValueSet {
            complement: true,
            values: Vec::new(),
            greater_than,
            less_than,
        };
        values.retain(|v| bounds.within(v, number));
        if complement {
            ValueSet {
                complement,
                values,
                greater_than,
                less_than,
            }
        } else {
            ValueSet {
                complement,
                values,
                greater_than: None,
                less_than: None,
            }
        }
    }

    /// Karpenter's `Intersects` rule for one key: some value in common, or
    /// both sides merely exclude values (NotIn/DoesNotExist).
    pub fn intersects(&self, other: &Self, number: &impl Fn(&V) -> Option<i64>) -> bool {
        if !self.intersection(other, number).is_empty() {
            return true;
        }
        let excluding = |op: Operator| matches!(op, Operator::NotIn | Operator::DoesNotExist);
        excluding(self.operator()) && excluding(other.operator())
    }
}

fn max_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) | (None, x) => x,
    }
}

fn min_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) | (None, x) => x,
    }
}

fn difference<V: Ord + Clone>(a: &[V], b: &[V]) -> Vec<V> {
    a.iter()
        .filter(|v| b.binary_search(v).is_err())
        .cloned()
        .collect()
}

fn intersect<V: Ord + Clone>(a: &[V], b: &[V]) -> Vec<V> {
    a.iter()
        .filter(|v| b.binary_search(v).is_ok())
        .cloned()
        .collect()
}

/// Parses a label value as an integer for Gt/Lt comparisons (generic so it
/// serves both `Fn(&String)` and `Fn(&str)`).
pub fn label_number<S: AsRef<str> + ?Sized>(value: &S) -> Option<i64> {
    value.as_ref().parse().ok()
}

/// One label key with its allowed values and optional `minValues` flexibility.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    /// Label key (normalized).
    pub key: String,
    /// Allowed values.
    pub values: ValueSet<String>,
    /// Keep at least this many distinct values among a NodeClaim's instance types.
    pub min_values: Option<u32>,
}

impl Requirement {
    /// Builds a requirement from a key, operator and values as written in a
    /// NodePool, node selector or node affinity term.
    pub fn new(key: &str, operator: Operator, values: &[&str]) -> Result<Self, RequirementError> {
        let owned: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        Self::from_parts(key, operator, owned)
    }

    /// Like [`Requirement::new`] with owned values.
    pub fn from_parts(
        key: &str,
        operator: Operator,
        values: Vec<String>,
    ) -> Result<Self, RequirementError> {
        if key.is_empty() {
            return Err(RequirementError::EmptyKey);
        }
        let key = super::labels::normalize(key).to_string();
        let integer = |values: &[String]| -> Result<i64, RequirementError> {
            match values {
                [one] => one
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| RequirementError::NotOneInteger {
                        key: key.clone(),
                        operator,
                        values: values.to_vec(),
                    }),
                _ => Err(RequirementError::NotOneInteger {
                    key: key.clone(),
                    operator,
                    values: values.to_vec(),
                }),
            }
        };
        let set = match operator {
            Operator::In => ValueSet::of(values),
            Operator::NotIn => ValueSet::except(values),
            Operator::Exists | Operator::DoesNotExist => {
                if !values.is_empty() {
                    return Err(RequirementError::UnexpectedValues {
                        key,
                        operator,
                        values,
                    });
                }
                if operator == Operator::Exists {
                    ValueSet::any()
                } else {
                    ValueSet::none()
                }
            }
            Operator::Gt => ValueSet::bounded(Some(integer(&values)?), None),
            Operator::Gte => ValueSet::bounded(Some(integer(&values)?.saturating_sub(1)), None),
            Operator::Lt => ValueSet::bounded(None, Some(integer(&values)?)),
            Operator::Lte => ValueSet::bounded(None, Some(integer(&values)?.saturating_add(1))),
        };
        Ok(Requirement {
            key,
            values: set,
            min_values: None,
        })
    }

    /// `key In [value]`, the form a label takes.
    pub fn single(key: &str, value: &str) -> Self {
        Requirement {
            key: super::labels::normalize(key).to_string(),
            values: ValueSet::of(vec![value.to_string()]),
            min_values: None,
        }
    }

    /// `key DoesNotExist`, for labels an instance type lacks.
    pub fn does_not_exist(key: &str) -> Self {
        Requirement {
            key: super::labels::normalize(key).to_string(),
            values: ValueSet::none(),
            min_values: None,
        }
    }

    /// Sets `minValues`.
    pub fn with_min_values(mut self, min_values: u32) -> Self {
        self.min_values = Some(min_values);
        self
    }

    /// The operator this requirement reads as.
    pub fn operator(&self) -> Operator {
        self.values.operator()
    }

    /// Whether a label value satisfies the requirement.
    pub fn has(&self, value: &str) -> bool {
        self.values.has_borrowed(value, label_number)
    }

    /// Values both requirements accept; `minValues` is the larger of the two.
    pub fn intersection(&self, other: &Requirement) -> Requirement {
        Requirement {
            key: self.key.clone(),
            values: self.values.intersection(&other.values, &label_number),
            min_values: self.min_values.max(other.min_values),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = &self.values;
        match (v.greater_than(), v.less_than()) {
            (Some(gt), None) if v.values().is_empty() => return write!(f, "{} Gt {gt}", self.key),
            (None, Some(lt)) if v.values().is_empty() => return write!(f, "{} Lt {lt}", self.key),
            (Some(gt), Some(lt)) => return write!(f, "{} Gt {gt} and Lt {lt}", self.key),
            _ => {}
        }
        match v.operator() {
            Operator::Exists | Operator::DoesNotExist => write!(f, "{} {}", self.key, v.operator()),
            op => write!(f, "{} {} [{}]", self.key, op, v.values().join(", ")),
        }
    }
}

/// Why two sets of requirements cannot be satisfied together.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum Incompatibility {
    /// A key both sides constrain has no value in common.
    #[error("{incoming} is not compatible with {existing}")]
    NoCommonValue {
        /// The requirement already in place.
        existing: String,
        /// The requirement being added.
        incoming: String,
    },
    /// The incoming side needs a label the other side never sets.
    #[error(
        "label {key:?} does not have known values (no NodePool label or requirement defines it)"
    )]
    UndefinedLabel {
        /// Label key.
        key: String,
    },
}

/// A conjunction of requirements keyed by label.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requirements {
    by_key: BTreeMap<String, Requirement>,
}

impl Requirements {
    /// No constraints.
    pub fn new() -> Self {
        Self::default()
    }

    /// Each label as a single-value `In` requirement.
    pub fn from_labels<'a>(labels: impl IntoIterator<Item = (&'a String, &'a String)>) -> Self {
        let mut out = Self::new();
        for (key, value) in labels {
            out.add(Requirement::single(key, value));
        }
        out
    }

    /// Adds a requirement, intersecting with any existing one on the same key.
    pub fn add(&mut self, requirement: Requirement) {
        match self.by_key.get_mut(&requirement.key) {
            Some(existing) => *existing = existing.intersection(&requirement),
            None => {
                self.by_key.insert(requirement.key.clone(), requirement);
            }
        }
    }

    /// Adds every requirement of `other`.
    pub fn add_all(&mut self, other: &Requirements) {
        for requirement in other.iter() {
            self.add(requirement.clone());
        }
    }

    /// The requirement on `key`, if constrained.
    pub fn get(&self, key: &str) -> Option<&Requirement> {
        self.by_key.get(key)
    }

    /// Whether `key` is constrained.
    pub fn has(&self, key: &str) -> bool {
        self.by_key.contains_key(key)
    }

    /// All requirements in key order.
    pub fn iter(&self) -> impl Iterator<Item = &Requirement> {
        self.by_key.values()
    }

    /// Number of constrained keys.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// True when nothing is constrained.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Karpenter's `Intersects`: every key both sides constrain has a value
    /// in common (or both sides only exclude values).
    pub fn intersects(&self, incoming: &Requirements) -> Result<(), Incompatibility> {
        for theirs in incoming.iter() {
            if let Some(ours) = self.by_key.get(&theirs.key)
                && !ours.values.intersects(&theirs.values, &label_number)
            {
                return Err(Incompatibility::NoCommonValue {
                    existing: ours.to_string(),
                    incoming: theirs.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Karpenter's `Compatible`: `intersects`, and every key the incoming side
    /// requires with In/Exists/Gt/Lt is defined here unless `allow_undefined`
    /// says the key's values come from elsewhere (well-known labels).
    pub fn compatible(
        &self,
        incoming: &Requirements,
        allow_undefined: impl Fn(&str) -> bool,
    ) -> Result<(), Incompatibility> {
        for theirs in incoming.iter() {
            let op = theirs.operator();
            if self.has(&theirs.key)
                || allow_undefined(&theirs.key)
                || matches!(op, Operator::NotIn | Operator::DoesNotExist)
            {
                continue;
            }
            return Err(Incompatibility::UndefinedLabel {
                key: theirs.key.clone(),
            });
        }
        self.intersects(incoming)
    }

    /// Single-valued `In` requirements as labels (what a NodeClaim is labelled with).
    pub fn single_value_labels(&self) -> BTreeMap<String, String> {
        self.iter()
            .filter(|r| r.operator() == Operator::In && r.values.values().len() == 1)
            .map(|r| (r.key.clone(), r.values.values()[0].clone()))
            .collect()
    }
}

impl FromIterator<Requirement> for Requirements {
    fn from_iter<T: IntoIterator<Item = Requirement>>(iter: T) -> Self {
        let mut out = Requirements::new();
        for requirement in iter {
            out.add(requirement);
        }
        out
    }
}

impl fmt::Display for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.iter().map(|r| r.to_string()).collect();
        f.write_str(&parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
        Requirement::new(key, op, values).unwrap()
    }

    #[test]
    fn in_and_not_in_intersect() {
        let a = req("zone", Operator::In, &["a", "b", "c"]);
        let b = req("zone", Operator::NotIn, &["b"]);
        let both = a.intersection(&b);
        assert_eq!(both.operator(), Operator::In);
        assert_eq!(both.values.values(), &["a".to_string(), "c".to_string()]);
        assert!(both.has("a"));
        assert!(!both.has("b"));
    }

    #[test]
    fn bounds_filter_values_and_gte_lte_are_inclusive() {
        let cpu = req("cpu", Operator::In, &["2", "4", "8", "x"]);
        let gte = req("cpu", Operator::Gte, &["4"]);
        let lte = req("cpu", Operator::Lte, &["4"]);
        let only4 = cpu.intersection(&gte).intersection(&lte);
        assert_eq!(only4.values.values(), &["4".to_string()]);
        let gt = req("cpu", Operator::Gt, &["4"]);
        assert!(!gt.has("4"));
        assert!(gt.has("5"));
        assert!(!gt.has("abc"));
        let lt = req("cpu", Operator::Lt, &["3"]);
        assert!(gt.intersection(&lt).is_empty_set());
    }

    impl Requirement {
        fn is_empty_set(&self) -> bool {
            self.values.is_empty()
        }
    }

    #[test]
    fn bad_input_is_rejected_with_field_names() {
        let err = Requirement::new("cpu", Operator::Gt, &["four"]).unwrap_err();
        assert!(err.to_string().contains("cpu"));
        assert!(Requirement::new("k", Operator::Exists, &["v"]).is_err());
        assert!(Operator::parse("Like").is_err());
        assert!(Requirement::new("", Operator::In, &["v"]).is_err());
    }

    #[test]
    fn compatible_requires_defined_custom_labels() {
        let pool: Requirements = [req("team", Operator::In, &["a"])].into_iter().collect();
        let pod_ok: Requirements = [req("team", Operator::In, &["a", "b"])]
            .into_iter()
            .collect();
        let pod_other: Requirements = [req("team", Operator::In, &["b"])].into_iter().collect();
        let pod_undefined: Requirements = [req("example.com/gpu", Operator::Exists, &[])]
            .into_iter()
            .collect();
        let pod_not_in: Requirements = [req("example.com/gpu", Operator::NotIn, &["x"])]
            .into_iter()
            .collect();
        let pod_zone: Requirements = [req(crate::scheduling::labels::ZONE, Operator::In, &["z"])]
            .into_iter()
            .collect();
        let wk = crate::scheduling::labels::is_well_known;
        assert!(pool.compatible(&pod_ok, wk).is_ok());
        assert!(pool.compatible(&pod_other, wk).is_err());
        assert!(matches!(
            pool.compatible(&pod_undefined, wk),
            Err(Incompatibility::UndefinedLabel { .. })
        ));
        assert!(pool.compatible(&pod_not_in, wk).is_ok());
        assert!(pool.compatible(&pod_zone, wk).is_ok());
    }

    #[test]
    fn exclusions_on_both_sides_intersect() {
        let a: Requirements = [req("k", Operator::DoesNotExist, &[])]
            .into_iter()
            .collect();
        let b: Requirements = [req("k", Operator::NotIn, &["x"])].into_iter().collect();
        let c: Requirements = [req("k", Operator::In, &["x"])].into_iter().collect();
        assert!(a.intersects(&b).is_ok());
        assert!(a.intersects(&c).is_err());
    }

    #[test]
    fn min_values_takes_the_larger_and_labels_are_single_values() {
        let mut reqs = Requirements::new();
        reqs.add(req("family", Operator::Exists, &[]).with_min_values(2));
        reqs.add(req("family", Operator::In, &["m5", "c5", "r5"]).with_min_values(3));
        assert_eq!(reqs.get("family").unwrap().min_values, Some(3));
        reqs.add(Requirement::single("arch", "amd64"));
        let labels = reqs.single_value_labels();
        assert_eq!(labels.get("arch").map(String::as_str), Some("amd64"));
        assert!(!labels.contains_key("family"));
        assert_eq!(reqs.to_string(), "arch In [amd64], family In [c5, m5, r5]");
    }
}
