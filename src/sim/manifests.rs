//! The one reader of the YAML `simulate` is given: files, directories or
//! standard input (`-`) of multi-document manifests, `kind: List` documents
//! as `kubectl get -o yaml` prints them (JSON too, which is YAML), sorted into
//! the objects the pipeline needs. Fields the pipeline does not use (`status`
//! of workloads, `managedFields`, …) are read and ignored.

use std::io::Read;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::sandbox::node_class::simulated_placement_group;
use super::workloads::{self, PodSource};
use crate::apis::{EC2NodeClass, NodeClaim, NodeOverlay, NodePool};

/// The path that stands for standard input.
pub const STDIN: &str = "-";

/// Why the manifests could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// A file or directory could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The path given or found (`-` for standard input).
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A document is not valid YAML or does not match its kind's schema.
    #[error("{location}: {message}")]
    Invalid {
        /// `file (document N)`, with `items[i]` inside a List.
        location: String,
        /// What is wrong, from the YAML parser or the kind's schema.
        message: String,
    },
    /// A document's `apiVersion`/`kind` is not one `simulate` reads.
    #[error(
        "{location}: unsupported kind {api_version}/{kind}; simulate reads NodePool, EC2NodeClass, NodeClaim, NodeOverlay, Pod, Deployment, ReplicaSet, StatefulSet, Job, DaemonSet, Node, Namespace, ConfigMap and List"
    )]
    UnsupportedKind {
        /// `file (document N)`, with `items[i]` inside a List.
        location: String,
        /// The document's `apiVersion`.
        api_version: String,
        /// The document's `kind`.
        kind: String,
    },
    /// No manifests were found under the given paths.
    #[error(
        "no YAML manifests found in {0}; pass .yaml/.yml files, directories holding them, or - for standard input"
    )]
    Empty(String),
}

/// Kinds that describe no capacity or workload and are skipped without error,
/// so an application's full manifest set, or everything `kubectl get -A -o
/// yaml` prints, can be passed as it is. CronJobs are among them: the Jobs
/// they created are read, future runs are not simulated.
pub const IGNORED_KINDS: &[&str] = &[
    "Service",
    "Endpoints",
    "EndpointSlice",
    "Event",
    "ServiceAccount",
    "Secret",
    "HorizontalPodAutoscaler",
    "Ingress",
    "IngressClass",
    "NetworkPolicy",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
    "CronJob",
    "ControllerRevision",
    "PodTemplate",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "StorageClass",
    "CSIDriver",
    "CSINode",
    "VolumeAttachment",
    "LimitRange",
    "ResourceQuota",
    "PriorityClass",
    "RuntimeClass",
    "Lease",
    "CustomResourceDefinition",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// Everything read from the manifests.
#[derive(Debug, Default)]
pub struct Manifests {
    /// NodePools, in the order read.
    pub node_pools: Vec<NodePool>,
    /// EC2NodeClasses, in the order read.
    pub node_classes: Vec<EC2NodeClass>,
    /// NodeClaims; those without a Node are in-flight capacity.
    pub node_claims: Vec<NodeClaim>,
    /// Pods and the workloads that create them, in the order read; see
    /// [`Manifests::pods`].
    pub pod_sources: Vec<PodSource>,
    /// DaemonSets: overhead on every node they would run on.
    pub daemon_sets: Vec<DaemonSet>,
    /// Existing Nodes.
    pub nodes: Vec<Node>,
    /// ConfigMaps (extension modules may be stored in `binaryData`).
    pub config_maps: Vec<ConfigMap>,
    /// Namespaces: their labels are what pod (anti-)affinity
    /// `namespaceSelector`s match.
    pub namespaces: Vec<Namespace>,
    /// PodDisruptionBudgets, as `simulate --disruption` honours them.
    pub pdbs: Vec<PodDisruptionBudget>,
    /// NodeOverlays that parse (applied with the `NodeOverlay` gate on).
    pub node_overlays: Vec<NodeOverlay>,
    /// NodeOverlays that do not parse, by name, with why: reported as not
    /// applied instead of failing the whole run (one bad overlay never
    /// stops the others).
    pub unreadable_overlays: Vec<(String, String)>,
}

/// One document of a YAML stream, Lists already opened.
#[derive(Debug, Clone)]
pub struct Document {
    /// `origin (document N)`, with `items[i]` inside a List.
    pub location: String,
    /// The object.
    pub value: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeMeta {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
}

/// The documents of one YAML stream, skipping empty ones; the items of a
/// `List` (and of a typed list such as `PodList`, whose items carry no
/// `apiVersion`/`kind` of their own) take its place. `origin` names the
/// stream in locations.
pub fn documents(origin: &str, text: &str) -> Result<Vec<Document>, ManifestError> {
    let mut out = Vec::new();
    each_document(origin, text, |document| {
        out.push(document);
        Ok(())
    })?;
    Ok(out)
}

/// Hands each object of a YAML stream to `add` as it is read (Lists
/// opened), stopping at the first error.
fn each_document(
    origin: &str,
    text: &str,
    mut add: impl FnMut(Document) -> Result<(), ManifestError>,
) -> Result<(), ManifestError> {
    crate::yaml::each_document(text, |index, value| {
        let location = format!("{origin} (document {index})");
        let value = value.map_err(|e| ManifestError::Invalid {
            location: location.clone(),
            message: e.to_string(),
        })?;
        let mut opened = Vec::new();
        open_lists(location, value, &mut opened)?;
        for document in opened {
            add(document)?;
        }
        Ok(())
    })
}

fn open_lists(
    location: String,
    value: Value,
    out: &mut Vec<Document>,
) -> Result<(), ManifestError> {
    if value.is_null() {
        return Ok(());
    }
    let meta: TypeMeta = typed(&location, value.clone())?;
    let Some(item_kind) = meta.kind.strip_suffix("List") else {
        out.push(Document { location, value });
        return Ok(());
    };
    let Some(Value::Array(items)) = value.get("items") else {
        return Err(ManifestError::Invalid {
            location,
            message: format!(
                "items: a {} holds its objects in `items`, a list",
                meta.kind
            ),
        });
    };
    for (i, mut item) in items.iter().cloned().enumerate() {
        let item_location = if location.ends_with(')') {
            format!("{}, items[{i}])", &location[..location.len() - 1])
        } else {
            format!("{location} items[{i}]")
        };
        // A typed list (`PodList`) names its items' kind once.
        if let Value::Object(fields) = &mut item
            && !item_kind.is_empty()
        {
            fields
                .entry("apiVersion")
                .or_insert_with(|| Value::String(meta.api_version.clone()));
            fields
                .entry("kind")
                .or_insert_with(|| Value::String(item_kind.to_string()));
        }
        open_lists(item_location, item, out)?;
    }
    Ok(())
}

impl Manifests {
    /// Reads every `.yaml`/`.yml` file among `paths` (directories recursively,
    /// in name order; a file named directly whatever its extension), and
    /// standard input for `-`.
    pub fn load(paths: &[PathBuf]) -> Result<Self, ManifestError> {
        let mut files = Vec::new();
        for path in paths {
            if path.as_os_str() == STDIN {
                files.push(path.clone());
            } else {
                collect_files(path, &mut files)?;
            }
        }
        if files.is_empty() {
            let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            return Err(ManifestError::Empty(names.join(", ")));
        }
        let mut manifests = Manifests::default();
        for file in files {
            let io = |source| ManifestError::Io {
                path: file.clone(),
                source,
            };
            let (origin, text) = if file.as_os_str() == STDIN {
                let mut text = String::new();
                std::io::stdin().read_to_string(&mut text).map_err(io)?;
                ("stdin".to_string(), text)
            } else {
                let text = std::fs::read_to_string(&file).map_err(io)?;
                (file.display().to_string(), text)
            };
            manifests.add_yaml(&origin, &text)?;
        }
        Ok(manifests)
    }

    /// The pods of the cluster: those given, and for each workload none of
    /// whose pods is given, the pods its controller would create.
    pub fn pods(&self) -> Vec<std::sync::Arc<Pod>> {
        workloads::pods(&self.pod_sources)
    }

    /// The objects read, as a cluster snapshot (nothing nominated yet).
    pub fn snapshot(&self) -> crate::cluster::ClusterSnapshot {
        fn shared<T: Clone>(items: &[T]) -> Vec<std::sync::Arc<T>> {
            items.iter().cloned().map(std::sync::Arc::new).collect()
        }
        crate::cluster::ClusterSnapshot {
            node_pools: shared(&self.node_pools),
            node_classes: self
                .node_classes
                .iter()
                .cloned()
                .map(|class| std::sync::Arc::new(with_placement_group(class)))
                .collect(),
            node_claims: shared(&self.node_claims),
            nodes: shared(&self.nodes),
            pods: self.pods(),
            daemon_sets: shared(&self.daemon_sets),
            namespaces: shared(&self.namespaces),
            pdbs: shared(&self.pdbs),
            config_maps: shared(&self.config_maps),
            nominated: Default::default(),
            state_nodes: None,
        }
    }

    /// Adds the documents of one YAML stream; `origin` names it in errors.
    pub fn add_yaml(&mut self, origin: &str, text: &str) -> Result<(), ManifestError> {
        // One document at a time: a stream of thousands of pods is never
        // held as parsed YAML and typed objects at once.
        each_document(origin, text, |document| {
            self.add_document(&document.location, document.value)
        })
    }

    /// Adds one object (not a List); `location` names it in errors.
    pub fn add_document(&mut self, location: &str, value: Value) -> Result<(), ManifestError> {
        let meta: TypeMeta = typed(location, value.clone())?;
        let group = meta.api_version.split('/').next().unwrap_or_default();
        match (group, meta.kind.as_str()) {
            ("karpenter.sh", "NodePool") => self.node_pools.push(typed(location, value)?),
            ("karpenter.sh", "NodeClaim") => self.node_claims.push(typed(location, value)?),
            ("karpenter.sh", "NodeOverlay") => {
                let name = value
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                match typed::<NodeOverlay>(location, value) {
                    Ok(overlay) => self.node_overlays.push(overlay),
                    Err(e) => self.unreadable_overlays.push((name, e.to_string())),
                }
            }
            ("karpenter.k8s.aws", "EC2NodeClass") => {
                self.node_classes.push(typed(location, value)?)
            }
            ("v1", "Pod") => {
                let pod = with_default_namespace(typed(location, value)?);
                self.pod_sources
                    .push(PodSource::Pod(std::sync::Arc::new(pod)));
            }
            ("v1", "Node") => self.nodes.push(typed(location, value)?),
            ("v1", "ConfigMap") => self.config_maps.push(typed(location, value)?),
            ("v1", "Namespace") => self.namespaces.push(typed(location, value)?),
            ("apps", "DaemonSet") => self.daemon_sets.push(typed(location, value)?),
            ("policy", "PodDisruptionBudget") => self.pdbs.push(typed(location, value)?),
            ("apps", "Deployment") => self
                .pod_sources
                .push(PodSource::Deployment(Box::new(typed(location, value)?))),
            ("apps", "ReplicaSet") => self
                .pod_sources
                .push(PodSource::ReplicaSet(Box::new(typed(location, value)?))),
            ("apps", "StatefulSet") => self
                .pod_sources
                .push(PodSource::StatefulSet(Box::new(typed(location, value)?))),
            ("batch", "Job") => self
                .pod_sources
                .push(PodSource::Job(Box::new(typed(location, value)?))),
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
}

/// A class with `spec.placementGroupSelector` as the sandbox resolves it:
/// the `status.placementGroup` given when it is the group named, else a
/// simulated cluster group (there is no EC2 to look it up in).
fn with_placement_group(mut class: EC2NodeClass) -> EC2NodeClass {
    if class.spec.placement_group_selector.is_some() {
        let status = class.status.get_or_insert_with(Default::default);
        status.placement_group =
            simulated_placement_group(&class.spec, status.placement_group.take());
    }
    class
}

fn with_default_namespace(mut pod: Pod) -> Pod {
    pod.metadata
        .namespace
        .get_or_insert_with(|| "default".to_string());
    pod
}

/// Deserializes one document, naming the offending field in errors.
fn typed<T: DeserializeOwned>(location: &str, value: Value) -> Result<T, ManifestError> {
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
    use serde_json::json;

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
            .pods()
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
            m.pods()[0]
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

    #[test]
    fn lists_are_opened_in_and_between_documents() {
        let mut m = Manifests::default();
        m.add_yaml(
            "snapshot",
            r#"
apiVersion: v1
kind: List
metadata: {resourceVersion: ""}
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: a, namespace: x, uid: u-a, managedFields: [{manager: kubectl, operation: Update}]}
  spec: {containers: [{name: c, image: x}]}
  status: {phase: Pending}
- apiVersion: v1
  kind: Event
  metadata: {name: a.17f, namespace: x}
- apiVersion: discovery.k8s.io/v1
  kind: EndpointSlice
  metadata: {name: s, namespace: x}
---
apiVersion: v1
kind: PodList
items:
- metadata: {name: b}
  spec: {containers: [{name: c, image: x}]}
---
apiVersion: karpenter.sh/v1
kind: NodeClaimList
items:
- metadata: {name: claim}
  spec:
    requirements: []
    nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
"#,
        )
        .unwrap();
        let names: Vec<String> = m
            .pods()
            .iter()
            .map(|p| crate::cluster::pod_key(p).to_string())
            .collect();
        assert_eq!(names, ["x/a", "default/b"]);
        assert_eq!(m.node_claims.len(), 1);
    }

    #[test]
    fn json_is_read_as_well() {
        let mut m = Manifests::default();
        m.add_yaml(
            "snapshot.json",
            r#"{"apiVersion": "v1", "kind": "List", "items": [
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
            ]}"#,
        )
        .unwrap();
        assert_eq!(m.nodes.len(), 1);
    }

    #[test]
    fn errors_inside_a_list_name_the_item() {
        let mut m = Manifests::default();
        let err = m
            .add_yaml(
                "stdin",
                "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n- apiVersion: example.com/v1\n  kind: Widget\n",
            )
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("stdin (document 1, items[1]): unsupported kind example.com/v1/Widget"),
            "{err}"
        );
        let err = m
            .add_yaml("stdin", "apiVersion: v1\nkind: List\nitems: {}\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("stdin (document 1): items:") && err.contains("a list"),
            "{err}"
        );
    }

    // The YAML kubectl, Helm and people write, pinned so that a change of
    // YAML library shows here first.

    fn values(text: &str) -> Vec<(String, Value)> {
        documents("t.yaml", text)
            .expect("documents")
            .into_iter()
            .map(|d| (d.location, d.value))
            .collect()
    }

    #[test]
    fn yaml_anchors_and_aliases_expand_and_merge_keys_stay_keys() {
        let docs = values(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labels: &labels\n    app: web\n  annotations: *labels\n",
        );
        assert_eq!(docs[0].1["metadata"]["annotations"], json!({"app": "web"}));
        // `<<` is YAML 1.1's merge key; a YAML 1.2 reader (as kubectl's is
        // not) keeps it as an ordinary key.
        let docs = values(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nbase: &b {cpu: '1'}\ndata:\n  <<: *b\n  memory: 1Gi\n",
        );
        assert_eq!(
            docs[0].1["data"],
            json!({"<<": {"cpu": "1"}, "memory": "1Gi"})
        );
    }

    #[test]
    fn yaml_streams_skip_empty_documents_but_count_them() {
        let docs = values(
            "---\napiVersion: v1\nkind: A\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: B\nmetadata: {name: b}\n...\n---\n# only a comment\n",
        );
        let found: Vec<(&str, &str)> = docs
            .iter()
            .map(|(location, value)| (location.as_str(), value["kind"].as_str().unwrap_or("")))
            .collect();
        assert_eq!(
            found,
            [("t.yaml (document 1)", "A"), ("t.yaml (document 3)", "B")]
        );
    }

    #[test]
    fn yaml_lists_open_into_their_items() {
        let docs = values(
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a}\n- apiVersion: v1\n  kind: Node\n  metadata: {name: n}\n",
        );
        let kinds: Vec<(&str, &str)> = docs
            .iter()
            .map(|(location, value)| (location.as_str(), value["kind"].as_str().unwrap_or("")))
            .collect();
        assert_eq!(
            kinds,
            [
                ("t.yaml (document 1, items[0])", "Pod"),
                ("t.yaml (document 1, items[1])", "Node")
            ]
        );
    }

    #[test]
    fn yaml_big_integers_stay_exact_or_are_refused() {
        let docs = values(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nbig: 9223372036854775808\nmemory: 17179869184\nmax: 18446744073709551615\n",
        );
        assert_eq!(docs[0].1["big"].as_u64(), Some(9_223_372_036_854_775_808));
        assert_eq!(docs[0].1["memory"].as_i64(), Some(17_179_869_184));
        assert_eq!(docs[0].1["max"].as_u64(), Some(u64::MAX));
        for text in [
            "kind: X\ntoo-big: 18446744073709551616\n",
            "kind: X\ntoo-small: -9223372036854775809\n",
        ] {
            let error = documents("t.yaml", text).expect_err(text).to_string();
            assert!(error.contains("t.yaml (document 1)"), "{error}");
            assert!(error.contains("out of range"), "{error}");
        }
    }

    #[test]
    fn yaml_yes_no_on_off_are_strings_quoted_or_not() {
        let docs = values(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  a: yes\n  b: no\n  c: on\n  d: off\n  e: 'yes'\n  f: \"off\"\n  g: y\n  on: key\nflag: true\nmode: 0777\n",
        );
        assert_eq!(
            docs[0].1["data"],
            json!({"a": "yes", "b": "no", "c": "on", "d": "off", "e": "yes", "f": "off", "g": "y", "on": "key"})
        );
        assert_eq!(docs[0].1["flag"], json!(true));
        assert_eq!(docs[0].1["mode"], json!("0777"));
        // A bool field takes only YAML 1.2's true/false.
        assert!(crate::yaml::from_str::<bool>("yes").is_err());
        assert_eq!(crate::yaml::from_str::<bool>("false").ok(), Some(false));
    }

    #[test]
    fn yaml_duplicate_keys_keep_the_last() {
        let docs = values("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nx: 1\nx: 2\n");
        assert_eq!(docs[0].1["x"], json!(2));
    }
}
