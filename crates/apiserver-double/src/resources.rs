//! The resources the double serves: the built-in kinds a cluster running
//! nodewright needs, with their real scopes, short names, categories and
//! subresources, and custom resources installed from CRD manifests (those
//! given to [`ApiServerBuilder::crds`](crate::ApiServerBuilder::crds) are
//! installed at start).

use std::sync::Arc;

use serde_json::Value;

use super::validation::CrdSchema;

/// The `scale` subresource of a resource: where the replica counts live.
#[derive(Debug, Clone)]
pub struct ScalePaths {
    /// JSON path of the desired replicas (`.spec.replicas`).
    pub spec_replicas: String,
    /// JSON path of the observed replicas (`.status.replicas`).
    pub status_replicas: String,
    /// JSON path of a string label selector, for custom resources.
    pub label_selector: Option<String>,
}

/// One `additionalPrinterColumns` entry of a CRD version.
#[derive(Debug, Clone)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

/// One served resource at one group/version.
#[derive(Debug)]
pub struct ResourceDef {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// Whether `.status` is written only through the `status` subresource.
    pub status: bool,
    pub scale: Option<ScalePaths>,
    /// `pods/binding` and `pods/eviction`.
    pub pod_subresources: bool,
    /// Where objects are kept: `(group, plural)`. `events.k8s.io` Events
    /// share storage with core Events, as in a real cluster.
    pub storage: (String, String),
    /// The schema of a custom resource (validation, defaults, CEL).
    pub crd: Option<Arc<CrdSchema>>,
    /// Printer columns of a custom resource.
    pub columns: Vec<PrinterColumn>,
    /// The CRD object that installed this resource.
    pub crd_name: Option<String>,
}

impl ResourceDef {
    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `plural` or `plural.group`, as error messages name a resource.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Whether this is a custom resource (strategic merge patch is refused).
    pub fn is_custom(&self) -> bool {
        self.crd_name.is_some()
    }

    /// Whether objects are kept as core Events but served as `events.k8s.io`.
    pub fn is_event_alias(&self) -> bool {
        self.group == "events.k8s.io"
    }

    /// The subresources discovery lists: `(name, group, version, kind, verbs)`.
    pub fn subresources(
        &self,
    ) -> Vec<(
        &'static str,
        String,
        String,
        String,
        &'static [&'static str],
    )> {
        const RW: &[&str] = &["get", "patch", "update"];
        let mut subresources = Vec::new();
        if self.status {
            subresources.push((
                "status",
                self.group.clone(),
                self.version.clone(),
                self.kind.clone(),
                RW,
            ));
        }
        if self.scale.is_some() {
            subresources.push((
                "scale",
                "autoscaling".into(),
                "v1".into(),
                "Scale".into(),
                RW,
            ));
        }
        if self.pod_subresources {
            subresources.push((
                "binding",
                String::new(),
                "v1".into(),
                "Binding".into(),
                &["create"][..],
            ));
            subresources.push((
                "eviction",
                "policy".into(),
                "v1".into(),
                "Eviction".into(),
                &["create"][..],
            ));
        }
        subresources
    }
}

/// The verbs every resource here supports.
pub const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

const STATUS: u8 = 1;
const SCALE: u8 = 2;
const POD: u8 = 4;

/// `(group, version, plural, kind, namespaced, short names, categories, subresources)`,
/// in the order real discovery lists groups (kubectl resolves short names in that order).
type Builtin = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static [&'static str],
    &'static [&'static str],
    u8,
);

const BUILTINS: &[Builtin] = &[
    (
        "",
        "v1",
        "pods",
        "Pod",
        true,
        &["po"],
        &["all"],
        STATUS | POD,
    ),
    ("", "v1", "nodes", "Node", false, &["no"], &[], STATUS),
    (
        "",
        "v1",
        "namespaces",
        "Namespace",
        false,
        &["ns"],
        &[],
        STATUS,
    ),
    ("", "v1", "events", "Event", true, &["ev"], &[], 0),
    ("", "v1", "configmaps", "ConfigMap", true, &["cm"], &[], 0),
    ("", "v1", "secrets", "Secret", true, &[], &[], 0),
    (
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        true,
        &["sa"],
        &[],
        0,
    ),
    (
        "",
        "v1",
        "services",
        "Service",
        true,
        &["svc"],
        &["all"],
        STATUS,
    ),
    (
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        true,
        &["pvc"],
        &[],
        STATUS,
    ),
    (
        "",
        "v1",
        "persistentvolumes",
        "PersistentVolume",
        false,
        &["pv"],
        &[],
        STATUS,
    ),
    (
        "apps",
        "v1",
        "deployments",
        "Deployment",
        true,
        &["deploy"],
        &["all"],
        STATUS | SCALE,
    ),
    (
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        true,
        &["rs"],
        &["all"],
        STATUS | SCALE,
    ),
    (
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        true,
        &["sts"],
        &["all"],
        STATUS | SCALE,
    ),
    (
        "apps",
        "v1",
        "daemonsets",
        "DaemonSet",
        true,
        &["ds"],
        &["all"],
        STATUS,
    ),
    (
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        true,
        &["ev"],
        &[],
        0,
    ),
    ("batch", "v1", "jobs", "Job", true, &[], &["all"], STATUS),
    (
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true,
        &["pdb"],
        &[],
        STATUS,
    ),
    (
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "StorageClass",
        false,
        &["sc"],
        &[],
        0,
    ),
    (
        "storage.k8s.io",
        "v1",
        "csinodes",
        "CSINode",
        false,
        &[],
        &[],
        0,
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
        &["crd", "crds"],
        &["api-extensions"],
        STATUS,
    ),
    (
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "PriorityClass",
        false,
        &["pc"],
        &[],
        0,
    ),
    (
        "coordination.k8s.io",
        "v1",
        "leases",
        "Lease",
        true,
        &[],
        &[],
        0,
    ),
    // Stored and served only: the double authorizes no request by them.
    (
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "ClusterRole",
        false,
        &[],
        &[],
        0,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        false,
        &[],
        &[],
        0,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "roles",
        "Role",
        true,
        &[],
        &[],
        0,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "RoleBinding",
        true,
        &[],
        &[],
        0,
    ),
];

/// Every served resource.
#[derive(Debug, Clone)]
pub struct Registry {
    defs: Vec<Arc<ResourceDef>>,
}

impl Registry {
    /// The built-in resources, without custom resources.
    pub fn builtin() -> Self {
        let defs = BUILTINS
            .iter()
            .map(
                |&(group, version, plural, kind, namespaced, short, categories, flags)| {
                    let replicas = |status: &str| ScalePaths {
                        spec_replicas: ".spec.replicas".into(),
                        status_replicas: status.into(),
                        label_selector: None,
                    };
                    let storage_group = if group == "events.k8s.io" { "" } else { group };
                    Arc::new(ResourceDef {
                        group: group.into(),
                        version: version.into(),
                        plural: plural.into(),
                        singular: kind.to_lowercase(),
                        kind: kind.into(),
                        namespaced,
                        short_names: short.iter().map(|s| s.to_string()).collect(),
                        categories: categories.iter().map(|s| s.to_string()).collect(),
                        status: flags & STATUS != 0,
                        scale: (flags & SCALE != 0).then(|| replicas(".status.replicas")),
                        pod_subresources: flags & POD != 0,
                        storage: (storage_group.into(), plural.into()),
                        crd: None,
                        columns: Vec::new(),
                        crd_name: None,
                    })
                },
            )
            .collect();
        Registry { defs }
    }

    /// Every resource, in discovery order.
    pub fn all(&self) -> &[Arc<ResourceDef>] {
        &self.defs
    }

    /// The resource served at `group/version` as `plural`.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.defs
            .iter()
            .find(|d| d.group == group && d.version == version && d.plural == plural)
            .cloned()
    }

    /// The resource of an object's `apiVersion` and `kind` (owner references).
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceDef>> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.defs
            .iter()
            .find(|d| d.group == group && d.version == version && d.kind == kind)
            .cloned()
    }

    /// The definition objects of `storage` are kept under (its first served version).
    pub fn by_storage(&self, storage: &(String, String)) -> Option<Arc<ResourceDef>> {
        self.defs
            .iter()
            .find(|d| &d.storage == storage && !d.is_event_alias())
            .cloned()
    }

    /// Groups in discovery order, each with its versions in order.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for def in &self.defs {
            match groups.iter_mut().find(|(g, _)| *g == def.group) {
                Some((_, versions)) => {
                    if !versions.contains(&def.version) {
                        versions.push(def.version.clone());
                    }
                }
                None => groups.push((def.group.clone(), vec![def.version.clone()])),
            }
        }
        groups
    }

    /// Serves the versions of a `CustomResourceDefinition` (as JSON); a CRD
    /// of the same name is replaced.
    pub fn install_crd(&mut self, crd: &Value) -> Result<(), String> {
        let text = |pointer: &str| {
            crd.pointer(pointer)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("CustomResourceDefinition: {pointer} is required"))
        };
        let strings = |pointer: &str| -> Vec<String> {
            crd.pointer(pointer)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        let name = text("/metadata/name")?;
        let group = text("/spec/group")?;
        let plural = text("/spec/names/plural")?;
        let kind = text("/spec/names/kind")?;
        let singular = text("/spec/names/singular").unwrap_or_else(|_| kind.to_lowercase());
        let namespaced = text("/spec/scope")? == "Namespaced";
        let versions = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .ok_or("CustomResourceDefinition: /spec/versions is required")?;
        let mut defs = Vec::new();
        for version in versions {
            if version.get("served").and_then(Value::as_bool) == Some(false) {
                continue;
            }
            let version_name = version
                .get("name")
                .and_then(Value::as_str)
                .ok_or("CustomResourceDefinition: every version needs a name")?;
            let schema = version
                .pointer("/schema/openAPIV3Schema")
                .cloned()
                .map(|schema| Arc::new(CrdSchema::new(schema)));
            let scale = version.pointer("/subresources/scale").map(|scale| {
                let path = |key: &str| scale.get(key).and_then(Value::as_str).map(str::to_string);
                ScalePaths {
                    spec_replicas: path("specReplicasPath")
                        .unwrap_or_else(|| ".spec.replicas".into()),
                    status_replicas: path("statusReplicasPath")
                        .unwrap_or_else(|| ".status.replicas".into()),
                    label_selector: path("labelSelectorPath"),
                }
            });
            let columns = version
                .get("additionalPrinterColumns")
                .and_then(Value::as_array)
                .map(|columns| columns.iter().filter_map(printer_column).collect())
                .unwrap_or_default();
            defs.push(Arc::new(ResourceDef {
                group: group.clone(),
                version: version_name.to_string(),
                plural: plural.clone(),
                singular: singular.clone(),
                kind: kind.clone(),
                namespaced,
                short_names: strings("/spec/names/shortNames"),
                categories: strings("/spec/names/categories"),
                status: version.pointer("/subresources/status").is_some(),
                scale,
                pod_subresources: false,
                storage: (group.clone(), plural.clone()),
                crd: schema,
                columns,
                crd_name: Some(name.clone()),
            }));
        }
        self.remove_crd(&name);
        self.defs.extend(defs);
        Ok(())
    }

    /// Stops serving the resources of CRD `name`.
    pub fn remove_crd(&mut self, name: &str) {
        self.defs.retain(|d| d.crd_name.as_deref() != Some(name));
    }
}

fn printer_column(column: &Value) -> Option<PrinterColumn> {
    let text = |key: &str| {
        column
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    Some(PrinterColumn {
        name: column.get("name")?.as_str()?.to_string(),
        type_: text("type"),
        description: text("description"),
        priority: column.get("priority").and_then(Value::as_i64).unwrap_or(0),
        json_path: column.get("jsonPath")?.as_str()?.to_string(),
    })
}
