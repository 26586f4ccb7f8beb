//! Binds an EC2NodeClass's `spec.extensions` to loaded modules (Wasm
//! components or built-ins) and runs them where the pipeline needs them:
//! instance filters and priority scorers when a NodeClass's instance types
//! are resolved, the AMI selector after the class's images are discovered.
//! Instance-type results are cached, so the scheduler's hot loop never calls
//! into a module.
//!
//! Failures follow the entry's `failurePolicy`: `Fail` stops launches for the
//! NodeClass (its NodePools are offered no instance types, and the reason is
//! reported); `Ignore` skips the module and records a warning. A skipped AMI
//! selector is replaced by the built-in `available-amis`, so an image that
//! is not `available` is never offered.

mod records;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ConfigMap;
use nodewright_filter::Ami;
use nodewright_host::{Host, HostConfig, HostError, Limits, LoadedModule, ModuleRef, Role};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::apis::{
    Condition, ConditionStatus, EC2NodeClass, FailurePolicy, ModuleSource, ResolvedModule,
};
use crate::aws::catalog::Catalog;
use crate::scheduling::InstanceType;

pub use records::filter_records;

/// The AMI selector that replaces a skipped one.
const DEFAULT_AMI_SELECTOR: &str = "available-amis";

/// The condition type on an EC2NodeClass that reports whether its extensions load and run.
pub const EXTENSIONS_READY: &str = "ExtensionsReady";

/// What one module did in one evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct ModuleReport {
    /// The entry's `name`.
    pub name: String,
    /// `instance-filter`, `priority-scorer` or `ami-selector`.
    pub role: Role,
    /// Where the module came from (`builtin:flex-first`, a path, a ConfigMap key…).
    pub source: String,
    /// Instance types an instance filter dropped, or images an AMI selector
    /// left out, with the reason for each.
    pub dropped: Vec<(String, String)>,
    /// The failure, if the module could not be loaded or called.
    pub error: Option<String>,
    /// What the failure did: `Fail` blocks the NodeClass, `Ignore` skips the module.
    pub failure_policy: FailurePolicy,
}

/// Instance types after a NodeClass's extensions ran, plus what each module did.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The instance types the filters kept.
    pub instance_types: Vec<InstanceType>,
    /// Weighted sum of scorer scores per instance type; `None` without scorers.
    pub priority_scores: Option<HashMap<String, i32>>,
    /// One report per module that ran or failed, in evaluation order.
    pub reports: Vec<ModuleReport>,
    /// Set when a `failurePolicy: Fail` module failed: the NodeClass may not launch.
    pub blocked: Option<String>,
}

impl Outcome {
    /// The `ExtensionsReady` condition this outcome sets on its EC2NodeClass:
    /// `False` (reason `ModuleFailed`) when a `failurePolicy: Fail` module
    /// failed, naming the module and the error; `True` otherwise, with reason
    /// `ModulesSkipped` listing `Ignore` modules that failed.
    pub fn condition(&self, observed_generation: Option<i64>, now: Time) -> Condition {
        let skipped: Vec<String> = self
            .reports
            .iter()
            .filter_map(|r| r.error.as_ref())
            .cloned()
            .collect();
        let (status, reason, message) = match (&self.blocked, skipped.is_empty()) {
            (Some(blocked), _) => (ConditionStatus::False, "ModuleFailed", blocked.clone()),
            (None, true) => (
                ConditionStatus::True,
                "Ready",
                "all extension modules ran".to_string(),
            ),
            (None, false) => (
                ConditionStatus::True,
                "ModulesSkipped",
                format!("skipped with failurePolicy Ignore: {}", skipped.join("; ")),
            ),
        };
        Condition {
            type_: EXTENSIONS_READY.to_string(),
            status,
            observed_generation,
            last_transition_time: now,
            reason: Some(reason.to_string()),
            message: Some(message),
        }
    }
}

/// Where ConfigMap-sourced modules are looked up (the API server in the
/// controller; the given manifests in `simulate`).
pub trait ConfigMapSource {
    /// The ConfigMap `namespace/name`, if it exists.
    fn config_map(&self, namespace: &str, name: &str) -> Option<&ConfigMap>;
}

impl ConfigMapSource for Vec<ConfigMap> {
    fn config_map(&self, namespace: &str, name: &str) -> Option<&ConfigMap> {
        self.iter().find(|cm| is_config_map(cm, namespace, name))
    }
}

/// Whether `config_map` is `namespace/name` (a ConfigMap without a
/// namespace is in `default`).
pub fn is_config_map(config_map: &ConfigMap, namespace: &str, name: &str) -> bool {
    config_map.metadata.name.as_deref() == Some(name)
        && config_map
            .metadata
            .namespace
            .as_deref()
            .unwrap_or("default")
            == namespace
}

/// Runs EC2NodeClass extensions, caching successful results per NodeClass
/// generation, NodePool, effective extensions, catalog version and the
/// instance types given.
pub struct Extensions {
    host: Host,
    cache: Mutex<HashMap<String, Arc<Outcome>>>,
}

impl Extensions {
    /// Starts the sandbox host.
    pub fn new(config: HostConfig) -> Result<Self, HostError> {
        Ok(Self {
            host: Host::new(config)?,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// Filters and scores `instance_types` (resolved for `node_class` from
    /// `catalog`) for `node_pool`.
    pub fn apply(
        &self,
        node_class: &EC2NodeClass,
        node_pool: &str,
        catalog: &Catalog,
        instance_types: Vec<InstanceType>,
        config_maps: &dyn ConfigMapSource,
    ) -> Arc<Outcome> {
        let class_name = node_class.metadata.name.clone().unwrap_or_default();
        let effective = match node_class.spec.effective_extensions() {
            Ok(effective) => effective,
            Err(e) => {
                return Arc::new(Outcome {
                    blocked: Some(format!("EC2NodeClass {class_name:?}: {e}")),
                    ..Outcome::default()
                });
            }
        };
        let key = format!(
            "{class_name}/{}/{node_pool}/{}/{:016x}/{effective:?}",
            node_class.metadata.generation.unwrap_or_default(),
            catalog.version(),
            fingerprint(&instance_types),
        );
        if let Some(hit) = self.cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return hit;
        }
        // Informational for filters and scorers; their results are cached
        // per catalog version whatever the time.
        let now = unix_now();
        let context = |config: &serde_json::Value| {
            module_context(node_pool, &class_name, catalog.region(), config, now)
        };
        let mut outcome = Outcome {
            instance_types,
            ..Outcome::default()
        };
        for (i, module) in effective.instance_filters.iter().enumerate() {
            let field = format!("spec.extensions.instanceFilters[{i}]");
            let mut report = report_for(module, Role::InstanceFilter);
            let result = self
                .load(module, Role::InstanceFilter, &field, config_maps)
                .and_then(|loaded| {
                    let set = filter_records(catalog, &outcome.instance_types);
                    loaded
                        .filter(&context(&module.config), &set)
                        .map_err(|e| format!("{field} ({}): {e}", module.name))
                });
            match result {
                Ok(verdicts) => {
                    let mut kept = Vec::with_capacity(outcome.instance_types.len());
                    for (it, verdict) in outcome.instance_types.drain(..).zip(verdicts) {
                        match verdict {
                            nodewright_filter::Verdict::Keep => kept.push(it),
                            nodewright_filter::Verdict::Drop(reason) => {
                                report.dropped.push((it.name, reason));
                            }
                        }
                    }
                    outcome.instance_types = kept;
                }
                Err(message) => fail(&mut outcome, &mut report, message),
            }
            outcome.reports.push(report);
        }
        let mut totals: HashMap<String, i32> = HashMap::new();
        let mut scored = false;
        for (i, scorer) in effective.priority_scorers.iter().enumerate() {
            let module = &scorer.module;
            let field = format!("spec.extensions.priorityScorers[{i}]");
            let mut report = report_for(module, Role::PriorityScorer);
            let result = self
                .load(module, Role::PriorityScorer, &field, config_maps)
                .and_then(|loaded| {
                    let set = filter_records(catalog, &outcome.instance_types);
                    loaded
                        .score(&context(&module.config), &set)
                        .map_err(|e| format!("{field} ({}): {e}", module.name))
                });
            match result {
                Ok(scores) => {
                    scored = true;
                    for (it, score) in outcome.instance_types.iter().zip(scores) {
                        let total = totals.entry(it.name.clone()).or_insert(0);
                        *total = total.saturating_add(score.saturating_mul(scorer.weight));
                    }
                }
                Err(message) => fail(&mut outcome, &mut report, message),
            }
            outcome.reports.push(report);
        }
        if scored {
            outcome.priority_scores = Some(totals);
        }
        if outcome.blocked.is_some() {
            outcome.instance_types.clear();
            outcome.priority_scores = None;
        }
        let outcome = Arc::new(outcome);
        // A failure may pass (a ConfigMap created, a registry back up), so
        // only clean outcomes are kept; a failing module is tried again on
        // the next evaluation.
        let clean = outcome.blocked.is_none() && outcome.reports.iter().all(|r| r.error.is_none());
        if clean && let Ok(mut cache) = self.cache.lock() {
            cache.insert(key, outcome.clone());
        }
        outcome
    }

    /// Runs `node_class`'s AMI selector over the `candidates` its terms
    /// found. `now` (seconds since the epoch) decides which images count as
    /// deprecated. Not cached: the images change on their own schedule.
    pub fn select_amis(
        &self,
        node_class: &EC2NodeClass,
        region: &str,
        candidates: Vec<Ami>,
        config_maps: &dyn ConfigMapSource,
        now: i64,
    ) -> AmiSelection {
        let class_name = node_class.metadata.name.clone().unwrap_or_default();
        let module = match node_class.spec.effective_extensions() {
            Ok(effective) => effective.ami_selector,
            Err(e) => {
                let message = format!("EC2NodeClass {class_name:?}: {e}");
                return AmiSelection {
                    amis: Vec::new(),
                    report: None,
                    blocked: Some(message),
                };
            }
        };
        let field = "spec.extensions.amiSelector";
        let mut report = report_for(&module, Role::AmiSelector);
        let context = module_context("", &class_name, region, &module.config, now);
        let result = self
            .load(&module, Role::AmiSelector, field, config_maps)
            .and_then(|loaded| {
                loaded
                    .select(&context, &candidates)
                    .map_err(|e| format!("{field} ({}): {e}", module.name))
            });
        let mut blocked = None;
        let order = match result {
            Ok(order) => order,
            Err(message) => {
                let fallback = match module.failure_policy {
                    FailurePolicy::Fail => {
                        blocked = Some(message.clone());
                        Vec::new()
                    }
                    // Skipped: the built-in default decides, so a skipped
                    // selector can never let a pending image through.
                    FailurePolicy::Ignore => self.default_ami_order(&context, &candidates),
                };
                report.error = Some(message);
                fallback
            }
        };
        let mut chosen = vec![false; candidates.len()];
        let mut amis = Vec::with_capacity(order.len());
        for index in order.into_iter().filter_map(|i| usize::try_from(i).ok()) {
            if let Some(ami) = candidates.get(index) {
                chosen[index] = true;
                amis.push(ami.clone());
            }
        }
        for (ami, _) in candidates.iter().zip(&chosen).filter(|(_, c)| !**c) {
            report.dropped.push((
                ami.id.clone(),
                format!("not selected (state {})", ami.state.as_str()),
            ));
        }
        AmiSelection {
            amis,
            report: Some(report),
            blocked,
        }
    }

    /// The built-in `available-amis` order with its default config, for a
    /// skipped selector; if even that fails, no image is offered.
    fn default_ami_order(
        &self,
        context: &nodewright_filter::Context,
        candidates: &[Ami],
    ) -> Vec<u32> {
        let context = nodewright_filter::Context {
            config: "{}".to_string(),
            ..context.clone()
        };
        self.host
            .load(
                Role::AmiSelector,
                &ModuleRef::Builtin(DEFAULT_AMI_SELECTOR.to_string()),
                None,
            )
            .ok()
            .and_then(|builtin| builtin.select(&context, candidates).ok())
            .unwrap_or_default()
    }

    /// Loads one module with its own timeout, fetching ConfigMap bytes when needed.
    fn load(
        &self,
        module: &ResolvedModule,
        role: Role,
        field: &str,
        config_maps: &dyn ConfigMapSource,
    ) -> Result<LoadedModule, String> {
        let source = match &module.source {
            ModuleSource::Builtin(name) => ModuleRef::Builtin(name.clone()),
            ModuleSource::Path(path) => ModuleRef::Path(path.into()),
            ModuleSource::Url(url) => ModuleRef::Url(url.clone()),
            ModuleSource::Oci(reference) => ModuleRef::Oci(reference.clone()),
            ModuleSource::ConfigMap(cm) => {
                let namespace = cm.namespace.as_str();
                let found = config_maps.config_map(namespace, &cm.name).ok_or_else(|| {
                    format!(
                        "{field}.configMap: ConfigMap {namespace}/{} not found",
                        cm.name
                    )
                })?;
                let bytes = found
                    .binary_data
                    .as_ref()
                    .and_then(|data| data.get(&cm.key))
                    .ok_or_else(|| {
                        format!(
                            "{field}.configMap: ConfigMap {namespace}/{} has no binaryData key {:?}",
                            cm.name, cm.key
                        )
                    })?;
                ModuleRef::Bytes {
                    label: format!("configmap/{namespace}/{}#{}", cm.name, cm.key),
                    bytes: Arc::from(bytes.0.as_slice()),
                }
            }
        };
        let limits = Limits {
            timeout: module.timeout,
            ..self.host.config().default_limits
        };
        self.host
            .load(role, &source, module.sha256.as_deref())
            .map(|loaded| loaded.with_limits(limits))
            .map_err(|e| format!("{field} ({}): {e}", module.name))
    }
}

/// The AMI selector's choice for one EC2NodeClass.
#[derive(Debug, Clone)]
pub struct AmiSelection {
    /// The images the selector kept, in its order: a node boots the first
    /// one that matches its architecture and variant.
    pub amis: Vec<Ami>,
    /// What the selector did; `None` when the class's extensions are invalid.
    pub report: Option<ModuleReport>,
    /// Set when the extensions are invalid or a `failurePolicy: Fail`
    /// selector failed: the class may not launch.
    pub blocked: Option<String>,
}

/// What a module is told about the call; `config` is the entry's JSON
/// (`{}` when absent).
fn module_context(
    node_pool: &str,
    node_class: &str,
    region: &str,
    config: &serde_json::Value,
    now: i64,
) -> nodewright_filter::Context {
    nodewright_filter::Context {
        node_pool: node_pool.to_string(),
        node_class: node_class.to_string(),
        region: region.to_string(),
        config: if config.is_null() {
            "{}".to_string()
        } else {
            config.to_string()
        },
        now,
    }
}

/// Identifies the instance types a module is given (names and offerings),
/// so a cached outcome is reused only for the same input: the same catalog
/// resolves differently when a class's subnets (zones) change.
fn fingerprint(instance_types: &[InstanceType]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for it in instance_types {
        it.name.hash(&mut hasher);
        for offering in &it.offerings {
            offering.zone.hash(&mut hasher);
            offering.capacity_type.hash(&mut hasher);
            offering.available.hash(&mut hasher);
        }
    }
    hasher.finish()
}

/// Seconds since the Unix epoch, for contexts and deprecation checks.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn report_for(module: &ResolvedModule, role: Role) -> ModuleReport {
    ModuleReport {
        name: module.name.clone(),
        role,
        source: describe(&module.source),
        dropped: Vec::new(),
        error: None,
        failure_policy: module.failure_policy,
    }
}

fn fail(outcome: &mut Outcome, report: &mut ModuleReport, message: String) {
    if report.failure_policy == FailurePolicy::Fail && outcome.blocked.is_none() {
        outcome.blocked = Some(message.clone());
    }
    report.error = Some(message);
}

/// How a module source reads in messages.
pub fn describe(source: &ModuleSource) -> String {
    match source {
        ModuleSource::Builtin(name) => format!("builtin:{name}"),
        ModuleSource::Path(path) => path.clone(),
        ModuleSource::Url(url) => url.clone(),
        ModuleSource::Oci(reference) => format!("oci://{reference}"),
        ModuleSource::ConfigMap(cm) => format!("configmap/{}/{}#{}", cm.namespace, cm.name, cm.key),
    }
}

/// Groups an instance filter's drops by reason, most frequent first, for summaries.
pub fn drops_by_reason(dropped: &[(String, String)]) -> Vec<(String, Vec<String>)> {
    let mut by_reason: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (name, reason) in dropped {
        by_reason.entry(reason).or_default().push(name.clone());
    }
    let mut out: Vec<(String, Vec<String>)> = by_reason
        .into_iter()
        .map(|(reason, names)| (reason.to_string(), names))
        .collect();
    out.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
    out
}
