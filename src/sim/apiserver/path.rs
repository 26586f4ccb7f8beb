//! Request paths and selectors of the emulated API server.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Change, Key};

/// One API path: `/api/v1/...` (core) or `/apis/{group}/{version}/...`,
/// optionally namespaced, optionally naming an object and a subresource.
#[derive(Debug, Clone)]
pub(super) struct ResourcePath {
    pub group: String,
    pub version: String,
    pub namespace: String,
    pub plural: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

impl ResourcePath {
    /// Parses a path, or `None` when it names no resource.
    pub fn parse(path: &str) -> Option<Self> {
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, version, rest) = match segments.as_slice() {
            ["api", version, rest @ ..] => (String::new(), version.to_string(), rest),
            ["apis", group, version, rest @ ..] => (group.to_string(), version.to_string(), rest),
            _ => return None,
        };
        // `/api/v1/namespaces/{ns}/{plural}...` is namespaced;
        // `/api/v1/namespaces[/{name}]` is the Namespace resource itself.
        let (namespace, rest) = match rest {
            ["namespaces", namespace, rest @ ..] if !rest.is_empty() => {
                (namespace.to_string(), rest)
            }
            rest => (String::new(), rest),
        };
        let (plural, name, subresource) = match rest {
            [plural] => (plural, None, None),
            [plural, name] => (plural, Some(name.to_string()), None),
            [plural, name, sub] => (plural, Some(name.to_string()), Some(sub.to_string())),
            _ => return None,
        };
        Some(ResourcePath {
            group,
            version,
            namespace,
            plural: plural.to_string(),
            name,
            subresource,
        })
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The key of the named object.
    pub fn key(&self) -> Key {
        self.key_for(self.name.as_deref().unwrap_or_default())
    }

    /// The key of object `name` of this resource.
    pub fn key_for(&self, name: &str) -> Key {
        (
            self.group.clone(),
            self.plural.clone(),
            self.namespace.clone(),
            name.to_string(),
        )
    }

    /// Whether a stored object belongs to this (possibly all-namespace) collection.
    pub fn matches(&self, key: &Key) -> bool {
        key.0 == self.group
            && key.1 == self.plural
            && (self.namespace.is_empty() || key.2 == self.namespace)
    }

    /// Whether a change belongs to this collection.
    pub fn matches_change(&self, change: &Change) -> bool {
        change.group == self.group
            && change.plural == self.plural
            && (self.namespace.is_empty() || change.namespace == self.namespace)
    }

    /// The object a write leaves: a `status` write changes only `.status`;
    /// any other write keeps the stored `.status` (every kind here behaves as
    /// if it had a status subresource), and the server-owned metadata.
    pub fn apply_write(&self, current: &Value, mut written: Value) -> Value {
        if self.subresource.as_deref() == Some("status") {
            let mut updated = current.clone();
            if let Some(map) = updated.as_object_mut() {
                match written.get("status") {
                    Some(status) => map.insert("status".to_string(), status.clone()),
                    None => map.remove("status"),
                };
            }
            return updated;
        }
        if let Some(map) = written.as_object_mut() {
            match current.get("status") {
                Some(status) => map.insert("status".to_string(), status.clone()),
                None => map.remove("status"),
            };
            for field in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "namespace",
                "name",
            ] {
                let kept = current.pointer(&format!("/metadata/{field}")).cloned();
                if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
                    match kept {
                        Some(value) => metadata.insert(field.to_string(), value),
                        None => metadata.remove(field),
                    };
                }
            }
        }
        written
    }
}

/// Decoded query parameters.
pub(super) fn query_params(query: &str) -> BTreeMap<String, String> {
    form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// One label-selector term.
#[derive(Debug, Clone)]
enum LabelTerm {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
}

/// `labelSelector` (equality and existence terms) and `fieldSelector`
/// (`metadata.name`, `metadata.namespace`) of a list or watch.
#[derive(Debug, Clone, Default)]
pub(super) struct Selector {
    labels: Vec<LabelTerm>,
    fields: Vec<(String, String)>,
}

impl Selector {
    /// The selectors of a request; set-based label terms are refused.
    pub fn from_params(params: &BTreeMap<String, String>) -> Result<Self, String> {
        let mut selector = Selector::default();
        for term in params
            .get("labelSelector")
            .map(String::as_str)
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            let parsed = if let Some((k, v)) = term.split_once("!=") {
                LabelTerm::NotEquals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                LabelTerm::Equals(k.trim().into(), v.trim().into())
            } else if let Some(k) = term.strip_prefix('!') {
                LabelTerm::NotExists(k.trim().into())
            } else if term.contains(' ') || term.contains('(') {
                return Err(format!(
                    "label selector term {term:?} is not supported by the emulator"
                ));
            } else {
                LabelTerm::Exists(term.into())
            };
            selector.labels.push(parsed);
        }
        for term in params
            .get("fieldSelector")
            .map(String::as_str)
            .unwrap_or_default()
            .split(',')
            .filter(|t| !t.is_empty())
        {
            let (field, value) = term
                .split_once("==")
                .or_else(|| term.split_once('='))
                .ok_or_else(|| format!("field selector term {term:?} is not field=value"))?;
            if field != "metadata.name" && field != "metadata.namespace" {
                return Err(format!(
                    "field selector {field:?} is not supported by the emulator"
                ));
            }
            selector.fields.push((field.to_string(), value.to_string()));
        }
        Ok(selector)
    }

    /// Whether `object` satisfies every term.
    pub fn matches(&self, object: &Value) -> bool {
        let label = |key: &str| {
            object
                .pointer("/metadata/labels")
                .and_then(|labels| labels.get(key))
                .and_then(Value::as_str)
        };
        let labels_match = self.labels.iter().all(|term| match term {
            LabelTerm::Equals(k, v) => label(k) == Some(v.as_str()),
            LabelTerm::NotEquals(k, v) => label(k) != Some(v.as_str()),
            LabelTerm::Exists(k) => label(k).is_some(),
            LabelTerm::NotExists(k) => label(k).is_none(),
        });
        labels_match
            && self.fields.iter().all(|(field, value)| {
                let pointer = format!("/{}", field.replace('.', "/"));
                object
                    .pointer(&pointer)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    == value
            })
    }
}
