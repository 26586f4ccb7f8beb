//! Label and field selectors: the `labelSelector` / `fieldSelector` query
//! parameters of list and watch, and `metav1.LabelSelector` objects
//! (`matchLabels` / `matchExpressions`) that workloads and PDBs carry.

use std::collections::BTreeMap;

use serde_json::Value;

/// One label-selector requirement.
#[derive(Debug, Clone, PartialEq)]
enum LabelTerm {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

impl LabelTerm {
    fn matches(&self, labels: Option<&serde_json::Map<String, Value>>) -> bool {
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        match self {
            LabelTerm::Equals(k, v) => label(k) == Some(v.as_str()),
            LabelTerm::NotEquals(k, v) => label(k) != Some(v.as_str()),
            LabelTerm::In(k, values) => label(k).is_some_and(|l| values.iter().any(|v| v == l)),
            LabelTerm::NotIn(k, values) => !label(k).is_some_and(|l| values.iter().any(|v| v == l)),
            LabelTerm::Exists(k) => label(k).is_some(),
            LabelTerm::NotExists(k) => label(k).is_none(),
        }
    }
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector {
    terms: Vec<LabelTerm>,
    /// A `nil` `metav1.LabelSelector`: matches nothing.
    nothing: bool,
}

impl LabelSelector {
    /// Parses the string form (`a=b,c!=d,e in (f,g),!h`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for term in split_terms(text) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let set = |rest: &str, key: &str, negate: bool| -> Result<LabelTerm, String> {
                let rest = rest.trim();
                let inner = rest
                    .strip_prefix('(')
                    .and_then(|r| r.strip_suffix(')'))
                    .ok_or_else(|| {
                        format!("label selector term {term:?}: values must be in parentheses")
                    })?;
                let values = inner
                    .split(',')
                    .map(|v| v.trim().to_string())
                    .filter(|v| !v.is_empty())
                    .collect();
                Ok(if negate {
                    LabelTerm::NotIn(key.to_string(), values)
                } else {
                    LabelTerm::In(key.to_string(), values)
                })
            };
            let parsed = if let Some((k, rest)) = term.split_once(" notin ") {
                set(rest, k.trim(), true)?
            } else if let Some((k, rest)) = term.split_once(" in ") {
                set(rest, k.trim(), false)?
            } else if let Some((k, v)) = term.split_once("!=") {
                LabelTerm::NotEquals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                LabelTerm::Equals(k.trim().into(), v.trim().into())
            } else if let Some(k) = term.strip_prefix('!') {
                LabelTerm::NotExists(k.trim().into())
            } else if term.contains(' ') || term.contains('(') {
                return Err(format!("unable to parse requirement: {term:?}"));
            } else {
                LabelTerm::Exists(term.into())
            };
            terms.push(parsed);
        }
        Ok(LabelSelector {
            terms,
            nothing: false,
        })
    }

    /// A `metav1.LabelSelector` object; `None` (absent) matches nothing.
    pub fn from_object(selector: Option<&Value>) -> Result<Self, String> {
        let Some(selector) = selector.filter(|s| !s.is_null()) else {
            return Ok(LabelSelector {
                terms: Vec::new(),
                nothing: true,
            });
        };
        let mut terms = Vec::new();
        if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in labels {
                terms.push(LabelTerm::Equals(
                    k.clone(),
                    v.as_str().unwrap_or_default().to_string(),
                ));
            }
        }
        for expression in selector
            .get("matchExpressions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let key = expression
                .get("key")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let values: Vec<String> = expression
                .get("values")
                .and_then(Value::as_array)
                .map(|v| {
                    v.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            let operator = expression
                .get("operator")
                .and_then(Value::as_str)
                .unwrap_or_default();
            terms.push(match operator {
                "In" => LabelTerm::In(key, values),
                "NotIn" => LabelTerm::NotIn(key, values),
                "Exists" => LabelTerm::Exists(key),
                "DoesNotExist" => LabelTerm::NotExists(key),
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            });
        }
        Ok(LabelSelector {
            terms,
            nothing: false,
        })
    }

    /// Whether the selector selects nothing or everything by having no terms.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether an object's labels satisfy every term.
    pub fn matches(&self, object: &Value) -> bool {
        self.matches_labels(
            object
                .pointer("/metadata/labels")
                .and_then(Value::as_object),
        )
    }

    /// Whether a label map satisfies every term.
    pub fn matches_labels(&self, labels: Option<&serde_json::Map<String, Value>>) -> bool {
        !self.nothing && self.terms.iter().all(|t| t.matches(labels))
    }

    /// The string form, as `kubectl` and the scale subresource show it.
    pub fn to_string_form(&self) -> String {
        let terms: Vec<String> = self
            .terms
            .iter()
            .map(|t| match t {
                LabelTerm::Equals(k, v) => format!("{k}={v}"),
                LabelTerm::NotEquals(k, v) => format!("{k}!={v}"),
                LabelTerm::In(k, v) => format!("{k} in ({})", v.join(",")),
                LabelTerm::NotIn(k, v) => format!("{k} notin ({})", v.join(",")),
                LabelTerm::Exists(k) => k.clone(),
                LabelTerm::NotExists(k) => format!("!{k}"),
            })
            .collect();
        terms.join(",")
    }
}

/// Splits on commas outside parentheses.
fn split_terms(text: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    terms
}

/// A `fieldSelector`: `path=value`, `path==value`, `path!=value` terms on
/// any dotted field path (`spec.nodeName`, `involvedObject.uid`).
#[derive(Debug, Clone, Default)]
pub struct FieldSelector {
    terms: Vec<(String, String, bool)>,
}

impl FieldSelector {
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for term in text.split(',').filter(|t| !t.trim().is_empty()) {
            let (field, value, equal) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (f, v, true)
            } else {
                return Err(format!(
                    "invalid field selector term {term:?}: expected field=value"
                ));
            };
            terms.push((field.trim().to_string(), value.trim().to_string(), equal));
        }
        Ok(FieldSelector { terms })
    }

    /// Whether `object` satisfies every term; a missing field reads as "".
    pub fn matches(&self, object: &Value) -> bool {
        self.terms.iter().all(|(field, value, equal)| {
            let pointer = format!("/{}", field.replace('.', "/"));
            let actual = match object.pointer(&pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (actual == *value) == *equal
        })
    }
}

/// Label and field selectors of one list or watch request.
#[derive(Debug, Clone, Default)]
pub struct Selector {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Selector {
    pub fn from_params(params: &BTreeMap<String, String>) -> Result<Self, String> {
        Ok(Selector {
            labels: LabelSelector::parse(
                params
                    .get("labelSelector")
                    .map(String::as_str)
                    .unwrap_or_default(),
            )?,
            fields: FieldSelector::parse(
                params
                    .get("fieldSelector")
                    .map(String::as_str)
                    .unwrap_or_default(),
            )?,
        })
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.labels.matches(object) && self.fields.matches(object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labelled(labels: Value) -> Value {
        json!({"metadata": {"labels": labels}, "spec": {"nodeName": "n1"}})
    }

    #[test]
    fn set_based_terms() {
        let selector =
            LabelSelector::parse("app in (web, api),tier notin (db),!legacy,team").unwrap();
        assert!(selector.matches(&labelled(json!({"app": "web", "tier": "fe", "team": "x"}))));
        assert!(!selector.matches(&labelled(json!({"app": "web", "tier": "db", "team": "x"}))));
        assert!(!selector.matches(&labelled(json!({"app": "web", "team": "x", "legacy": "1"}))));
        assert!(!selector.matches(&labelled(json!({"app": "batch", "team": "x"}))));
        assert!(LabelSelector::parse("app in web").is_err());
    }

    #[test]
    fn label_selector_objects_and_nil() {
        let object = json!({"matchLabels": {"app": "web"}, "matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]}]});
        let selector = LabelSelector::from_object(Some(&object)).unwrap();
        assert!(selector.matches(&labelled(json!({"app": "web", "zone": "a"}))));
        assert!(!selector.matches(&labelled(json!({"app": "web"}))));
        assert_eq!(selector.to_string_form(), "app=web,zone in (a)");
        assert!(
            !LabelSelector::from_object(None)
                .unwrap()
                .matches(&labelled(json!({})))
        );
        assert!(
            LabelSelector::from_object(Some(&json!({})))
                .unwrap()
                .matches(&labelled(json!({})))
        );
    }

    #[test]
    fn field_selectors_on_any_path() {
        let selector = FieldSelector::parse("spec.nodeName=n1,status.phase!=Failed").unwrap();
        assert!(selector.matches(&labelled(json!({}))));
        assert!(
            !FieldSelector::parse("spec.nodeName!=n1")
                .unwrap()
                .matches(&labelled(json!({})))
        );
    }
}
