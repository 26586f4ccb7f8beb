//! A small typed reader for multi-document YAML holding our three kinds, used
//! by the example tests. Documents of other kinds are kept as raw JSON.

use serde::Deserialize;

use crate::apis::ec2nodeclass::EC2NodeClass;
use crate::apis::nodeclaim::NodeClaim;
use crate::apis::nodepool::NodePool;

/// One YAML document, typed when it is one of our kinds.
#[derive(Clone, Debug, PartialEq)]
pub enum Manifest {
    /// A `karpenter.sh/v1` NodePool.
    NodePool(Box<NodePool>),
    /// A `karpenter.sh/v1` NodeClaim.
    NodeClaim(Box<NodeClaim>),
    /// A `karpenter.k8s.aws/v1` EC2NodeClass.
    EC2NodeClass(Box<EC2NodeClass>),
    /// Anything else (Deployments, ConfigMaps, ...), untouched.
    Other(serde_json::Value),
}

/// Why a manifest could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// A document is not valid YAML.
    #[error("document {index}: invalid YAML: {source}")]
    Yaml {
        /// 0-based document index.
        index: usize,
        /// Parser error.
        source: serde_yaml::Error,
    },
    /// A document of one of our kinds does not match its type.
    #[error("document {index} ({kind} {name:?}): {field}: {source}")]
    Invalid {
        /// 0-based document index.
        index: usize,
        /// The document's kind.
        kind: String,
        /// `metadata.name`, if present.
        name: String,
        /// Path of the offending field, e.g. `spec.template.spec.requirements[0].operator`.
        field: String,
        /// serde's message (expected type or allowed values).
        source: serde_json::Error,
    },
}

/// The `apiVersion`/`kind` pairs this module types.
fn kind_of(value: &serde_json::Value) -> Option<(&str, &str)> {
    let api_version = value.get("apiVersion")?.as_str()?;
    let kind = value.get("kind")?.as_str()?;
    Some((api_version, kind))
}

/// Parses one document that is already JSON.
pub fn parse_value(index: usize, value: serde_json::Value) -> Result<Manifest, ManifestError> {
    let Some((api_version, kind)) = kind_of(&value) else {
        return Ok(Manifest::Other(value));
    };
    let invalid = |error: serde_path_to_error::Error<serde_json::Error>| ManifestError::Invalid {
        index,
        kind: kind.to_string(),
        name: value
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .unwrap_or_default()
            .to_string(),
        field: error.path().to_string(),
        source: error.into_inner(),
    };
    match (api_version, kind) {
        ("karpenter.sh/v1", "NodePool") => from_value(&value)
            .map(|v| Manifest::NodePool(Box::new(v)))
            .map_err(invalid),
        ("karpenter.sh/v1", "NodeClaim") => from_value(&value)
            .map(|v| Manifest::NodeClaim(Box::new(v)))
            .map_err(invalid),
        ("karpenter.k8s.aws/v1", "EC2NodeClass") => from_value(&value)
            .map(|v| Manifest::EC2NodeClass(Box::new(v)))
            .map_err(invalid),
        _ => Ok(Manifest::Other(value)),
    }
}

/// Deserializes `value` into `T`, reporting the path of the field that failed.
pub fn from_value<T: serde::de::DeserializeOwned>(
    value: &serde_json::Value,
) -> Result<T, serde_path_to_error::Error<serde_json::Error>> {
    serde_path_to_error::deserialize(value)
}

/// Splits multi-document YAML into JSON values, skipping empty documents.
pub fn yaml_documents(yaml: &str) -> Result<Vec<serde_json::Value>, ManifestError> {
    let mut documents = Vec::new();
    for (index, document) in serde_yaml::Deserializer::from_str(yaml).enumerate() {
        let value = serde_json::Value::deserialize(document)
            .map_err(|source| ManifestError::Yaml { index, source })?;
        if !value.is_null() {
            documents.push(value);
        }
    }
    Ok(documents)
}

/// Parses multi-document YAML into typed manifests.
pub fn parse_manifests(yaml: &str) -> Result<Vec<Manifest>, ManifestError> {
    yaml_documents(yaml)?
        .into_iter()
        .enumerate()
        .map(|(index, value)| parse_value(index, value))
        .collect()
}

impl Manifest {
    /// The document serialized back to JSON.
    pub fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        match self {
            Manifest::NodePool(v) => serde_json::to_value(v),
            Manifest::NodeClaim(v) => serde_json::to_value(v),
            Manifest::EC2NodeClass(v) => serde_json::to_value(v),
            Manifest::Other(v) => Ok(v.clone()),
        }
    }
}
