//! Reading the YAML that `simulate` is given: files or directories of
//! multi-document manifests, sorted into the objects the pipeline needs, with
//! workloads expanded into the pods their controllers would create.

use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::apis::{EC2NodeClass, NodePool};

/// Why the manifests could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// A file or directory could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The path given or found.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A document is not valid YAML or does not match its kind's schema.
    #[error("{location}: {message}")]
    Invalid {
        /// `file` or `file (document N)`.
        location: String,
        /// What is wrong, from the YAML parser or the kind's schema.
        message: String,
    },
    /// A document's `apiVersion`/`kind` is not one `simulate` reads.
    #[error(
        "{location}: unsupported kind {api_version}/{kind}; simulate reads NodePool, EC2NodeClass, Pod, Deployment, ReplicaSet, StatefulSet, Job, DaemonSet, Node, Namespace and ConfigMap"
    )]
    UnsupportedKind {
        /// `file (document N)`.
        location: String,
        /// The document's `apiVersion`.
        api_version: String,
        /// The document's `kind`.
        kind: String,
    },
    /// No manifests were found under the given paths.
    #[error("no YAML manifests found in {0}; pass .yaml/.yml files or directories holding them")]
    Empty(String),
}

/// Kinds that describe no capacity or workload and are skipped without error,
/// so an application's full manifest set can be passed as it is.
pub const IGNORED_KINDS: [&str; 8] = [
    "Service",
    "ServiceAccount",
    "Secret",
    "PodDisruptionBudget",
    "HorizontalPodAutoscaler",
    "Ingress",
    "Role",
    "RoleBinding",
];

/// Everything read from the manifests, workloads already expanded into pods.
#[derive(Debug, Default)]
pub struct Manifests {
    /// NodePools, in file order.
    pub node_pools: Vec<NodePool>,
    /// EC2NodeClasses, in file order.
    pub node_classes: Vec<EC2NodeClass>,
    /// Pods: the ones given directly plus those expanded from workloads.
    pub pods: Vec<Pod>,
    /// DaemonSets: overhead on every node they would run on.
    pub daemon_sets: Vec<DaemonSet>,
    /// Existing Nodes.
    pub nodes: Vec<Node>,
    /// ConfigMaps (extension modules may be stored in `binaryData`).
    pub config_maps: Vec<ConfigMap>,
    /// Namespaces: their labels are what pod (anti-)affinity
    /// `namespaceSelector`s match.
    pub namespaces: Vec<Namespace>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeMeta {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
}

impl Manifests {
    /// Reads every `.yaml`/`.yml` file among `paths` (directories recursively,
    /// in name order).
    pub fn load(paths: &[PathBuf]) -> Result<Self, ManifestError> {
        let mut files = Vec::new();
        for path in paths {
            collect_files(path, &mut files)?;
        }
        if files.is_empty() {
            let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            return Err(ManifestError::Empty(names.join(", ")));
        }
        let mut manifests = Manifests::default();
        for file in files {
            let text = std::fs::read_to_string(&file).map_err(|source| ManifestError::Io {
                path: file.clone(),
                source,
            })?;
            manifests.add_yaml(&file.display().to_string(), &text)?;
        }
        Ok(manifests)
    }

    /// The objects read, as a cluster snapshot (nothing nominated yet).
    pub fn snapshot(&self) -> crate::cluster::ClusterSnapshot {
        fn shared<T: Clone>(items: &[T]) -> Vec<std::sync::Arc<T>> {
            items.iter().cloned().map(std::sync::Arc::new).collect()
        }
        crate::cluster::ClusterSnapshot {
            node_pools: shared(&self.node_pools),
            node_classes: shared(&self.node_classes),
            node_claims: Vec::new(),
            nodes: shared(&self.nodes),
            pods: shared(&self.pods),
            daemon_sets: shared(&self.daemon_sets),
            namespaces: shared(&self.namespaces),
            config_maps: shared(&self.config_maps),
            nominated: Default::default(),
        }
    }

    /// Adds the documents of one YAML stream; `origin` names it in errors.
    pub fn add_yaml(&mut self, origin: &str, text: &str) -> Result<(), ManifestError> {
        for (index, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
            let location = format!("{origin} (document {})", index + 1);
            let value =
                serde_yaml::Value::deserialize(document).map_err(|e| ManifestError::Invalid {
                    location: location.clone(),
                    message: e.to_string(),
                })?;
            if value.is_null() {
                continue;
            }
            self.add_document(&location, value)?;
        }
        Ok(())
    }

    fn add_document(
        &mut self,
        location: &str,
        value: serde_yaml::Value,
    ) -> Result<(), ManifestError> {
        let meta: TypeMeta = typed(location, value.clone())?;
        let group = meta.api_version.split('/').next().unwrap_or_default();
        match (group, meta.kind.as_str()) {
            ("karpenter.sh", "NodePool") => self.node_pools.push(typed(location, value)?),
            ("karpenter.k8s.aws", "EC2NodeClass") => {
                self.node_classes.push(typed(location, value)?)
            }
            ("v1", "Pod") => self
                .pods
                .push(with_default_namespace(typed(location, value)?)),
            ("v1", "Node") => self.nodes.push(typed(location, value)?),
            ("v1", "ConfigMap") => self.config_maps.push(typed(location, value)?),
            ("v1", "Namespace") => self.namespaces.push(typed(location, value)?),
            ("apps", "DaemonSet") => self.daemon_sets.push(typed(location, value)?),
            ("apps", "Deployment") => {
                let d: Deployment = typed(location, value)?;
                let spec = &d.spec;
                self.expand(&d.metadata, spec.replicas.unwrap_or(1), &spec.template);
            }
            ("apps", "ReplicaSet") => {
                let r: ReplicaSet = typed(location, value)?;
                let spec = &r.spec;
                let template = spec.template.clone().unwrap_or_default();
                self.expand(&r.metadata, spec.replicas.unwrap_or(1), &template);
            }
            ("apps", "StatefulSet") => {
                let s: StatefulSet = typed(location, value)?;
                let spec = &s.spec;
                self.expand(&s.metadata, spec.replicas.unwrap_or(1), &spec.template);
            }
            ("batch", "Job") => {
                let j: Job = typed(location, value)?;
                let spec = j.spec.unwrap_or_default();
                // Pods running at once: parallelism, never more than completions.
                let parallelism = spec.parallelism.unwrap_or(1);
                let count = spec.completions.map_or(parallelism, |c| c.min(parallelism));
                self.expand(&j.metadata, count, &spec.template);
            }
            (_, kind) if IGNORED_KINDS.contains(&kind) => {}
            _ => {
                return Err(ManifestError::UnsupportedKind {
                    location: location.to_string(),
                    api_version: meta.api_version,
                    kind: meta.kind,
                });
            }
        }
        Ok(())
    }

    /// Creates `replicas` pods from a workload's template, named `<workload>-<i>`.
    fn expand(&mut self, owner: &ObjectMeta, replicas: i32, template: &PodTemplateSpec) {
        let workload = owner.name.clone().unwrap_or_default();
        let namespace = owner
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        for i in 0..replicas.max(0) {
            let mut metadata = template.metadata.clone().unwrap_or_default();
            metadata.name = Some(format!("{workload}-{i}"));
            metadata.namespace = Some(namespace.clone());
            self.pods.push(Pod {
                metadata,
                spec: template.spec.clone(),
                status: None,
            });
        }
    }
}

fn with_default_namespace(mut pod: Pod) -> Pod {
    pod.metadata
        .namespace
        .get_or_insert_with(|| "default".to_string());
    pod
}

/// Deserializes one document, naming the offending field in errors.
fn typed<T: DeserializeOwned>(
    location: &str,
    value: serde_yaml::Value,
) -> Result<T, ManifestError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        ManifestError::Invalid {
            location: location.to_string(),
            message: if path == "." {
                message
            } else {
                format!("{path}: {message}")
            },
        }
    })
}

/// Every `.yaml`/`.yml` file at `path` (a file is taken as it is; directories
/// recursively, in name order).
pub(crate) fn collect_files(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), ManifestError> {
    let io = |source| ManifestError::Io {
        path: path.to_path_buf(),
        source,
    };
    let metadata = std::fs::metadata(path).map_err(io)?;
    if metadata.is_file() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(io)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort();
    for entry in entries {
        if entry.is_dir() {
            collect_files(&entry, out)?;
        } else if entry
            .extension()
            .is_some_and(|ext| ext == "yaml" || ext == "yml")
        {
            out.push(entry);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_expand_into_deterministically_named_pods() {
        let mut m = Manifests::default();
        m.add_yaml(
            "test.yaml",
            r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  parallelism: 4
  completions: 2
  template:
    spec: {restartPolicy: Never, containers: [{name: c, image: x}]}
---
apiVersion: v1
kind: Service
metadata: {name: web}
"#,
        )
        .unwrap();
        let names: Vec<String> = m
            .pods
            .iter()
            .map(|p| {
                format!(
                    "{}/{}",
                    p.metadata.namespace.as_deref().unwrap(),
                    p.metadata.name.as_deref().unwrap()
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                "shop/web-0",
                "shop/web-1",
                "shop/web-2",
                "default/train-0",
                "default/train-1"
            ]
        );
        assert_eq!(
            m.pods[0]
                .metadata
                .labels
                .as_ref()
                .unwrap()
                .get("app")
                .map(String::as_str),
            Some("web")
        );
    }

    #[test]
    fn unknown_kinds_and_bad_yaml_name_the_document() {
        let mut m = Manifests::default();
        let err = m
            .add_yaml("a.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\napiVersion: example.com/v1\nkind: Widget\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("a.yaml (document 2)") && err.contains("Widget"),
            "{err}"
        );
        let err = m
            .add_yaml("b.yaml", "kind: Pod\n  bad: [")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("b.yaml (document 1)"), "{err}");
        let err = m
            .add_yaml(
                "c.yaml",
                "apiVersion: apps/v1\nkind: Deployment\nspec: {replicas: many}\n",
            )
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("c.yaml (document 1)") && err.contains("replicas"),
            "{err}"
        );
    }
}
