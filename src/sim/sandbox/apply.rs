//! The manifests `sandbox` is started with, applied through the API as
//! `kubectl apply --server-side` would apply them: every document of every
//! file (directories recursively, in name order; the items of a `kind: List`
//! one by one), CustomResourceDefinitions and Namespaces first, then the rest
//! in file order. Validation is the API server's (strict field validation),
//! so a refusal names the file, the document and the field.
//!
//! One convenience a real cluster does not offer: a namespace that a
//! manifest uses and no manifest creates is created, so a directory of
//! application manifests applies as it is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Scope, pinned_kind};
use kube::{Client, ResourceExt};
use serde_json::Value;

use crate::sim::ManifestError;
use crate::sim::manifests::collect_files;

/// The field manager the sandbox applies manifests as.
pub const FIELD_MANAGER: &str = "nodewright-sandbox";

/// Why the manifests could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// A file or directory could not be read, or none was found.
    #[error(transparent)]
    Read(#[from] ManifestError),
    /// A document is not YAML, or not a Kubernetes object.
    #[error("{origin}: {message}")]
    Invalid {
        /// `file (document N)`.
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// The API server does not serve the document's kind.
    #[error(
        "{origin}: {api_version}/{kind} is not served by the sandbox's API server (see docs/apiserver-double.md for what it serves); create its CustomResourceDefinition first or leave the document out"
    )]
    UnknownKind {
        /// `file (document N)`.
        origin: String,
        /// The document's `apiVersion`.
        api_version: String,
        /// The document's `kind`.
        kind: String,
    },
    /// The API server refused the object (validation, conflicts, …): its message.
    #[error("{origin}: {message}")]
    Refused {
        /// `file (document N)`.
        origin: String,
        /// The API server's message, which names the object and the field.
        message: String,
    },
    /// The API server could not be asked.
    #[error("{origin}: {source}")]
    Api {
        /// `file (document N)`.
        origin: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

/// One object read from the manifests.
#[derive(Debug, Clone)]
pub struct Document {
    /// `file (document N)`, or `file (document N, item M)` inside a List.
    pub origin: String,
    /// The object as written.
    pub object: Value,
}

impl Document {
    fn field(&self, name: &str) -> &str {
        self.object.get(name).and_then(Value::as_str).unwrap_or("")
    }

    fn kind(&self) -> &str {
        self.field("kind")
    }

    fn api_version(&self) -> &str {
        self.field("apiVersion")
    }

    fn is(&self, group: &str, kind: &str) -> bool {
        let document_group = self.api_version().rsplit_once('/').map_or("", |(g, _)| g);
        document_group == group && self.kind() == kind
    }
}

/// An object the sandbox applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Where it came from (`file (document N)`), or why it was created.
    pub origin: String,
    /// Its kind.
    pub kind: String,
    /// `namespace/name`, or `name` for cluster-scoped objects.
    pub name: String,
}

/// Reads every document under `paths`.
pub fn read(paths: &[PathBuf]) -> Result<Vec<Document>, ApplyError> {
    let mut files = Vec::new();
    for path in paths {
        collect_files(path, &mut files)?;
    }
    if files.is_empty() && !paths.is_empty() {
        let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(ManifestError::Empty(names.join(", ")).into());
    }
    let mut documents = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|source| ManifestError::Io {
            path: file.clone(),
            source,
        })?;
        documents.extend(parse(&file.display().to_string(), &text)?);
    }
    Ok(documents)
}

/// The documents of one YAML stream; `origin` names it in errors.
pub fn parse(origin: &str, text: &str) -> Result<Vec<Document>, ApplyError> {
    let mut out = Vec::new();
    let file = origin;
    crate::yaml::each_document(text, |index, object| {
        let origin = format!("{file} (document {index})");
        let invalid = |message: String| ApplyError::Invalid {
            origin: origin.clone(),
            message,
        };
        let object = object.map_err(|e| invalid(e.to_string()))?;
        if object.get("kind").and_then(Value::as_str) == Some("List") {
            let items = object
                .get("items")
                .and_then(Value::as_array)
                .ok_or_else(|| invalid("a List needs an `items` array".to_string()))?;
            for (i, item) in items.iter().enumerate() {
                let origin = format!("{file} (document {index}, item {})", i + 1);
                out.push(checked(origin, item.clone())?);
            }
        } else {
            out.push(checked(origin, object)?);
        }
        Ok::<(), ApplyError>(())
    })?;
    Ok(out)
}

/// `object` as a document, once it has the fields every object needs.
fn checked(origin: String, object: Value) -> Result<Document, ApplyError> {
    let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
    let missing = if !object.is_object() {
        Some("a Kubernetes object (a mapping with apiVersion, kind and metadata)")
    } else if text("/apiVersion").is_none_or(str::is_empty) {
        Some("apiVersion")
    } else if text("/kind").is_none_or(str::is_empty) {
        Some("kind")
    } else if text("/metadata/name").is_none_or(str::is_empty)
        && text("/metadata/generateName").is_none_or(str::is_empty)
    {
        Some("metadata.name")
    } else {
        None
    };
    match missing {
        Some(what) => Err(ApplyError::Invalid {
            origin,
            message: format!("{what} is required"),
        }),
        None => Ok(Document { origin, object }),
    }
}

/// Applies `documents` through `client`: CRDs, then Namespaces (and the
/// namespaces the rest use that no document creates), then the rest.
pub async fn apply(client: &Client, documents: Vec<Document>) -> Result<Vec<Applied>, ApplyError> {
    let (crds, rest): (Vec<Document>, Vec<Document>) = documents
        .into_iter()
        .partition(|d| d.is("apiextensions.k8s.io", "CustomResourceDefinition"));
    let (namespaces, rest): (Vec<Document>, Vec<Document>) =
        rest.into_iter().partition(|d| d.is("", "Namespace"));
    let mut kinds = Kinds::default();
    let mut applied = Vec::new();
    for document in crds.iter().chain(&namespaces) {
        applied.push(apply_one(client, &mut kinds, document).await?);
    }
    let mut used: BTreeMap<String, String> = BTreeMap::new();
    for document in &rest {
        let (_, capabilities) = kinds.resolve(client, document).await?;
        if capabilities.scope == Scope::Namespaced {
            used.entry(namespace_of(document).to_string())
                .or_insert_with(|| document.origin.clone());
        }
    }
    let declared: BTreeSet<String> = namespaces
        .iter()
        .filter_map(|d| d.object.pointer("/metadata/name").and_then(Value::as_str))
        .map(str::to_string)
        .collect();
    let namespaces_api: Api<Namespace> = Api::all(client.clone());
    for (name, origin) in used.into_iter().filter(|(n, _)| !declared.contains(n)) {
        let exists = namespaces_api
            .get_opt(&name)
            .await
            .map_err(|source| ApplyError::Api {
                origin: origin.clone(),
                source,
            })?
            .is_some();
        if exists {
            continue;
        }
        let namespace = Namespace {
            metadata: kube::core::ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        let created_for = format!("namespace used by {origin}");
        namespaces_api
            .create(&post_params(), &namespace)
            .await
            .map_err(|e| refused(&created_for, e))?;
        applied.push(Applied {
            origin: created_for,
            kind: "Namespace".to_string(),
            name,
        });
    }
    for document in &rest {
        applied.push(apply_one(client, &mut kinds, document).await?);
    }
    Ok(applied)
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    }
}

/// The namespace a namespaced document goes to.
fn namespace_of(document: &Document) -> &str {
    document
        .object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .unwrap_or("default")
}

/// Server-side applies one document (creates it when it has only a
/// `generateName`).
async fn apply_one(
    client: &Client,
    kinds: &mut Kinds,
    document: &Document,
) -> Result<Applied, ApplyError> {
    let (resource, capabilities) = kinds.resolve(client, document).await?;
    let namespaced = capabilities.scope == Scope::Namespaced;
    let api: Api<DynamicObject> = if namespaced {
        Api::namespaced_with(client.clone(), namespace_of(document), &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    };
    let mut object: DynamicObject =
        serde_json::from_value(document.object.clone()).map_err(|e| ApplyError::Invalid {
            origin: document.origin.clone(),
            message: e.to_string(),
        })?;
    if namespaced {
        object.metadata.namespace = Some(namespace_of(document).to_string());
    }
    let written = match object.metadata.name.clone().filter(|n| !n.is_empty()) {
        Some(name) => {
            let params = PatchParams::apply(FIELD_MANAGER).validation_strict();
            api.patch(&name, &params, &Patch::Apply(&object)).await
        }
        None => api.create(&post_params(), &object).await,
    }
    .map_err(|e| refused(&document.origin, e))?;
    let name = match written.namespace() {
        Some(namespace) => format!("{namespace}/{}", written.name_any()),
        None => written.name_any(),
    };
    Ok(Applied {
        origin: document.origin.clone(),
        kind: resource.kind,
        name,
    })
}

fn refused(origin: &str, error: kube::Error) -> ApplyError {
    match error {
        kube::Error::Api(status) => ApplyError::Refused {
            origin: origin.to_string(),
            message: status.message,
        },
        source => ApplyError::Api {
            origin: origin.to_string(),
            source,
        },
    }
}

/// Kinds already looked up in discovery.
#[derive(Default)]
struct Kinds {
    known: BTreeMap<(String, String, String), (ApiResource, ApiCapabilities)>,
}

impl Kinds {
    async fn resolve(
        &mut self,
        client: &Client,
        document: &Document,
    ) -> Result<(ApiResource, ApiCapabilities), ApplyError> {
        let (group, version) = match document.api_version().rsplit_once('/') {
            Some((group, version)) => (group, version),
            None => ("", document.api_version()),
        };
        let key = (
            group.to_string(),
            version.to_string(),
            document.kind().to_string(),
        );
        if let Some(found) = self.known.get(&key) {
            return Ok(found.clone());
        }
        let gvk = GroupVersionKind::gvk(group, version, document.kind());
        match pinned_kind(client, &gvk).await {
            Ok(found) => {
                self.known.insert(key, found.clone());
                Ok(found)
            }
            Err(kube::Error::Api(status)) if status.code == 404 => Err(unknown(document)),
            Err(kube::Error::Discovery(_)) => Err(unknown(document)),
            Err(source) => Err(ApplyError::Api {
                origin: document.origin.clone(),
                source,
            }),
        }
    }
}

fn unknown(document: &Document) -> ApplyError {
    ApplyError::UnknownKind {
        origin: document.origin.clone(),
        api_version: document.api_version().to_string(),
        kind: document.kind().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_split_and_documents_need_their_fields() {
        let docs = parse(
            "a.yaml",
            "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n---\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n",
        )
        .unwrap();
        let origins: Vec<&str> = docs.iter().map(|d| d.origin.as_str()).collect();
        assert_eq!(
            origins,
            [
                "a.yaml (document 1, item 1)",
                "a.yaml (document 1, item 2)",
                "a.yaml (document 3)"
            ]
        );
        let missing = parse("b.yaml", "apiVersion: v1\nmetadata: {name: x}\n").unwrap_err();
        assert_eq!(missing.to_string(), "b.yaml (document 1): kind is required");
        let unnamed = parse("c.yaml", "apiVersion: v1\nkind: ConfigMap\n").unwrap_err();
        assert_eq!(
            unnamed.to_string(),
            "c.yaml (document 1): metadata.name is required"
        );
        let broken = parse("d.yaml", "kind: [").unwrap_err();
        assert!(broken.to_string().starts_with("d.yaml (document 1): "));
    }
}
