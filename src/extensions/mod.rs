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
//!
//! A module in `mode: Shadow` runs and is reported (what it would have
//! dropped, reordered or selected) but decides nothing, and its failures
//! never block. Every module runs even after one has blocked the class, so
//! each failure is reported at once; the reports of those that succeeded
//! then say their answer had no effect.
//!
//! Calls block their thread; the controller runs them through
//! [`run_blocking`], bounded by [`Extensions::time_bound`]. At most
//! [`ExtensionSettings::concurrency`] evaluations call into modules at once,
//! and at most [`ExtensionSettings::cache_entries`] outcomes are kept.

mod blocking;
mod cache;
mod observe;
mod outcome;
mod signing;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use cache::{CallLimit, ModuleKey, OutcomeCache, OutcomeKey};
use observe::Meter;

use k8s_openapi::api::core::v1::ConfigMap;
use nodewright_filter::{Ami, Verdict};
use nodewright_host::{
    CallError, Host, HostConfig, HostError, InstanceTypeSet, Limits, LoadedModule, ModuleRef, Role,
};

use crate::apis::extensions::ExtensionMode;
use crate::apis::{EC2NodeClass, FailurePolicy, ModuleSource, ResolvedModule};
use crate::metrics::ExtensionMetrics;
use crate::scheduling::{Blocked, BlockedReason, InstanceType};

pub use blocking::run_blocking;
pub use cache::ExtensionSettings;
pub use outcome::{ExtensionEvent, ModuleReport, Outcome, Reorder, drops_by_reason, try_order};

/// The AMI selector that replaces a skipped or shadowed one.
const DEFAULT_AMI_SELECTOR: &str = "available-amis";

/// Why the answer of a module that ran changed nothing.
const NO_EFFECT_BLOCKED: &str =
    "no effect: a module failed with failurePolicy Fail, so the EC2NodeClass launches nothing";

/// The candidate table modules are given, built by the side that knows the
/// EC2 facts behind the instance types (the catalog), so extensions depend
/// on no provider.
pub trait CandidateSource {
    /// Identifies the facts (the catalog's version): cached outcomes are
    /// kept per version.
    fn version(&self) -> &str;
    /// The region, told to modules.
    fn region(&self) -> &str;
    /// The records of `instance_types`, in their order.
    fn records(&self, instance_types: &[InstanceType]) -> InstanceTypeSet;
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
    cache: OutcomeCache,
    calls: CallLimit,
    /// Fingerprints of the instance-type lists seen lately, by list: a list
    /// is resolved once and handed to every call until it changes, and
    /// hashing a thousand types' offerings on each call cost more than the
    /// rest of a cached call.
    fingerprints: Mutex<Vec<(Weak<Vec<InstanceType>>, u64)>>,
    /// Where calls, load failures, cache lookups and waits are counted.
    metrics: ExtensionMetrics,
}

/// How many instance-type lists keep their fingerprint.
const FINGERPRINTS_KEPT: usize = 16;

impl Extensions {
    /// Starts the sandbox host with the default [`ExtensionSettings`].
    pub fn new(config: HostConfig) -> Result<Self, HostError> {
        Self::with_settings(config, ExtensionSettings::default())
    }

    /// Starts the sandbox host, keeping and running as much as `settings` allow.
    pub fn with_settings(
        config: HostConfig,
        settings: ExtensionSettings,
    ) -> Result<Self, HostError> {
        Ok(Self {
            host: Host::new(config)?,
            cache: OutcomeCache::new(settings.cache_entries),
            calls: CallLimit::new(settings.concurrency),
            fingerprints: Mutex::new(Vec::new()),
            metrics: crate::metrics::metrics().extensions.clone(),
        })
    }

    /// Counts into `metrics` instead of the process's registry.
    pub fn with_metrics(mut self, metrics: ExtensionMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    fn meter<'a>(&'a self, node_class: &'a str) -> Meter<'a> {
        Meter {
            metrics: &self.metrics,
            node_class,
        }
    }

    /// Waits for a turn under the concurrency cap; the turn ends when the
    /// permit is dropped.
    fn turn(&self, meter: &Meter<'_>) -> Option<tokio::sync::SemaphorePermit<'_>> {
        let started = std::time::Instant::now();
        let turn = self.calls.turn();
        meter.turn_waited(started.elapsed());
        turn
    }

    /// Filters and scores `instance_types` (resolved for `node_class` from
    /// the facts of `catalog`) for `node_pool`.
    pub fn apply(
        &self,
        node_class: &EC2NodeClass,
        node_pool: &str,
        catalog: &dyn CandidateSource,
        instance_types: Arc<Vec<InstanceType>>,
        config_maps: &dyn ConfigMapSource,
    ) -> Arc<Outcome> {
        let class_name = node_class.metadata.name.clone().unwrap_or_default();
        let effective = match node_class.spec.effective_extensions() {
            Ok(effective) => effective,
            Err(e) => {
                return Arc::new(Outcome {
                    blocked: Some(Blocked::of_node_class(
                        BlockedReason::InvalidExtensions,
                        class_name,
                        e.to_string(),
                    )),
                    ..Outcome::default()
                });
            }
        };
        let key = OutcomeKey {
            node_class: class_name.clone(),
            generation: node_class.metadata.generation.unwrap_or_default(),
            node_pool: node_pool.to_string(),
            catalog_version: catalog.version().to_string(),
            instance_types: self.fingerprint_of(&instance_types),
            modules: ModuleKey::all(&effective, config_maps),
        };
        let meter = self.meter(&class_name);
        let cached = self.cache.get(&key);
        meter.cache_lookup(cached.is_some());
        if let Some(hit) = cached {
            return hit;
        }
        // Held until every module of this evaluation has run.
        let _turn = self.turn(&meter);
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
            // Built before the call, so the call's duration is the module's.
            let set = catalog.records(&outcome.instance_types);
            let result = self.run(
                &meter,
                module,
                Role::InstanceFilter,
                &field,
                config_maps,
                |loaded| loaded.filter(&context(&module.config), &set),
            );
            match result {
                Ok(verdicts) if module.mode == ExtensionMode::Shadow => {
                    for (it, verdict) in outcome.instance_types.iter().zip(verdicts) {
                        if let Verdict::Drop(reason) = verdict {
                            report.dropped.push((it.name.clone(), reason));
                        }
                    }
                }
                Ok(verdicts) => {
                    let mut kept = Vec::with_capacity(outcome.instance_types.len());
                    for (it, verdict) in outcome.instance_types.iter().zip(verdicts) {
                        match verdict {
                            Verdict::Keep => kept.push(it),
                            Verdict::Drop(reason) => report.dropped.push((it.name.clone(), reason)),
                        }
                    }
                    // The list is copied only when a filter dropped a type.
                    if kept.len() < outcome.instance_types.len() {
                        outcome.instance_types = Arc::new(kept.into_iter().cloned().collect());
                    }
                }
                Err(message) => fail(&mut outcome, &mut report, message),
            }
            outcome.reports.push(report);
        }
        let mut totals: HashMap<String, i32> = HashMap::new();
        let mut scored = false;
        // Report index and weighted scores of each shadow scorer that ran.
        let mut shadows: Vec<(usize, HashMap<String, i32>)> = Vec::new();
        for (i, scorer) in effective.priority_scorers.iter().enumerate() {
            let module = &scorer.module;
            let field = format!("spec.extensions.priorityScorers[{i}]");
            let mut report = report_for(module, Role::PriorityScorer);
            // Built before the call, so the call's duration is the module's.
            let set = catalog.records(&outcome.instance_types);
            let result = self.run(
                &meter,
                module,
                Role::PriorityScorer,
                &field,
                config_maps,
                |loaded| loaded.score(&context(&module.config), &set),
            );
            match result {
                Ok(scores) => {
                    let weighted = outcome
                        .instance_types
                        .iter()
                        .zip(scores)
                        .map(|(it, score)| (it.name.clone(), score.saturating_mul(scorer.weight)));
                    if module.mode == ExtensionMode::Shadow {
                        shadows.push((outcome.reports.len(), weighted.collect()));
                    } else {
                        scored = true;
                        for (name, score) in weighted {
                            let total = totals.entry(name).or_insert(0);
                            *total = total.saturating_add(score);
                        }
                    }
                }
                Err(message) => fail(&mut outcome, &mut report, message),
            }
            outcome.reports.push(report);
        }
        if !shadows.is_empty() && outcome.blocked.is_none() {
            let total = |name: &str| totals.get(name).copied().unwrap_or(0);
            let enforced = try_order(&outcome.instance_types, &|name| i64::from(total(name)));
            for (index, extra) in shadows {
                let shadow = try_order(&outcome.instance_types, &|name| {
                    i64::from(total(name)) + i64::from(extra.get(name).copied().unwrap_or(0))
                });
                if let Some(report) = outcome.reports.get_mut(index) {
                    report.reorder = Some(Reorder::between(&enforced, &shadow));
                }
            }
        }
        if scored {
            outcome.priority_scores = Some(Arc::new(totals));
        }
        if outcome.blocked.is_some() {
            outcome.instance_types = Arc::default();
            outcome.priority_scores = None;
            for report in outcome.reports.iter_mut().filter(|r| r.error.is_none()) {
                report.no_effect = Some(NO_EFFECT_BLOCKED.to_string());
            }
        }
        let outcome = Arc::new(outcome);
        // A failure may pass (a ConfigMap created, a registry back up), so
        // only clean outcomes are kept; a failing module is tried again on
        // the next evaluation.
        let clean = outcome.blocked.is_none() && outcome.reports.iter().all(|r| r.error.is_none());
        if clean {
            self.cache.insert(key, outcome.clone());
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
                return AmiSelection {
                    amis: Vec::new(),
                    report: None,
                    blocked: Some(Blocked::of_node_class(
                        BlockedReason::InvalidExtensions,
                        class_name,
                        e.to_string(),
                    )),
                };
            }
        };
        let field = "spec.extensions.amiSelector";
        let mut report = report_for(&module, Role::AmiSelector);
        let meter = self.meter(&class_name);
        // Held until the selector (or the default in its place) has run.
        let _turn = self.turn(&meter);
        let context = module_context("", &class_name, region, &module.config, now);
        let result = self.run(
            &meter,
            &module,
            Role::AmiSelector,
            field,
            config_maps,
            |loaded| loaded.select(&context, &candidates),
        );
        let mut blocked = None;
        let order = match (module.mode, result) {
            (ExtensionMode::Enforce, Ok(order)) => {
                report.dropped = left_out(&candidates, &order);
                order
            }
            (ExtensionMode::Enforce, Err(message)) => {
                let fallback = match module.failure_policy {
                    FailurePolicy::Fail => {
                        blocked = Some(Blocked::new(BlockedReason::ModuleFailed, message.clone()));
                        Vec::new()
                    }
                    // Skipped: the built-in default decides, so a skipped
                    // selector can never let a pending image through.
                    FailurePolicy::Ignore => self.default_ami_order(&meter, &context, &candidates),
                };
                report.dropped = left_out(&candidates, &fallback);
                report.error = Some(message);
                fallback
            }
            // Shadowed: the built-in default decides; the module's choice
            // is only reported.
            (ExtensionMode::Shadow, result) => {
                let enforced = self.default_ami_order(&meter, &context, &candidates);
                match result {
                    Ok(shadow) => {
                        report.dropped = left_out(&candidates, &shadow);
                        report.reorder = Some(Reorder::between(
                            &ami_ids(&candidates, &enforced),
                            &ami_ids(&candidates, &shadow),
                        ));
                    }
                    Err(message) => report.error = Some(message),
                }
                enforced
            }
        };
        let amis = order
            .iter()
            .filter_map(|&i| usize::try_from(i).ok().and_then(|i| candidates.get(i)))
            .cloned()
            .collect();
        AmiSelection {
            amis,
            report: Some(report),
            blocked,
        }
    }

    /// The built-in `available-amis` order with its default config, for a
    /// skipped selector; if even that fails, no image is offered.
    /// Counted under the module name `available-amis`.
    fn default_ami_order(
        &self,
        meter: &Meter<'_>,
        context: &nodewright_filter::Context,
        candidates: &[Ami],
    ) -> Vec<u32> {
        let context = nodewright_filter::Context {
            config: "{}".to_string(),
            ..context.clone()
        };
        let role = Role::AmiSelector;
        match self.host.load(
            role,
            &ModuleRef::Builtin(DEFAULT_AMI_SELECTOR.to_string()),
            None,
        ) {
            Ok(builtin) => meter
                .call(role, DEFAULT_AMI_SELECTOR, || {
                    builtin.select(&context, candidates)
                })
                .unwrap_or_default(),
            Err(e) => {
                meter.load_failed(role, DEFAULT_AMI_SELECTOR, observe::load_reason(&e));
                Vec::new()
            }
        }
    }

    /// Loads `module` and makes one `call` into it, counting the load
    /// failure or the call's result; the error text names `field`.
    fn run<T>(
        &self,
        meter: &Meter<'_>,
        module: &ResolvedModule,
        role: Role,
        field: &str,
        config_maps: &dyn ConfigMapSource,
        call: impl FnOnce(&LoadedModule) -> Result<T, CallError>,
    ) -> Result<T, String> {
        let loaded = self
            .load(module, role, field, config_maps)
            .map_err(|(reason, message)| {
                meter.load_failed(role, &module.name, reason);
                message
            })?;
        meter
            .call(role, &module.name, || call(&loaded))
            .map_err(|e| format!("{field} ({}): {e}", module.name))
    }

    /// Loads one module with its own timeout, fetching ConfigMap bytes when
    /// needed. A failure comes with its `reason` label.
    fn load(
        &self,
        module: &ResolvedModule,
        role: Role,
        field: &str,
        config_maps: &dyn ConfigMapSource,
    ) -> Result<LoadedModule, (&'static str, String)> {
        let source = match &module.source {
            ModuleSource::Builtin(name) => ModuleRef::Builtin(name.clone()),
            ModuleSource::Path(path) => ModuleRef::Path(path.into()),
            ModuleSource::Url(url) => ModuleRef::Url(url.clone()),
            ModuleSource::Oci(reference) => ModuleRef::Oci(reference.clone()),
            ModuleSource::ConfigMap(cm) => {
                let namespace = cm.namespace.as_str();
                let found = config_maps.config_map(namespace, &cm.name).ok_or_else(|| {
                    let message = format!(
                        "{field}.configMap: ConfigMap {namespace}/{} not found",
                        cm.name
                    );
                    (observe::CONFIG_MAP_NOT_FOUND, message)
                })?;
                let bytes = found
                    .binary_data
                    .as_ref()
                    .and_then(|data| data.get(&cm.key))
                    .ok_or_else(|| {
                        let message = format!(
                            "{field}.configMap: ConfigMap {namespace}/{} has no binaryData key {:?}",
                            cm.name, cm.key
                        );
                        (observe::CONFIG_MAP_KEY_MISSING, message)
                    })?;
                ModuleRef::Bytes {
                    label: format!("configmap/{namespace}/{}#{}", cm.name, cm.key),
                    bytes: Arc::from(bytes.0.as_slice()),
                }
            }
        };
        let entry_keys = match &module.signature_keys {
            Some(keys) => Some(signing::entry_keys(keys, field, config_maps)?),
            None => None,
        };
        let limits = Limits {
            timeout: module.timeout,
            ..self.host.config().default_limits
        };
        self.host
            .load_signed(role, &source, module.sha256.as_deref(), entry_keys.as_ref())
            .map(|loaded| loaded.with_limits(limits))
            .map_err(|e| {
                let message = format!("{field} ({}): {e}", module.name);
                (observe::load_reason(&e), message)
            })
    }

    /// [`fingerprint`] of `list`, computed once per list. The `Weak` held
    /// keeps the list's allocation from being reused by another list while
    /// its entry exists, so pointer equality is identity.
    fn fingerprint_of(&self, list: &Arc<Vec<InstanceType>>) -> u64 {
        let Ok(mut known) = self.fingerprints.lock() else {
            return fingerprint(list);
        };
        if let Some((_, found)) = known
            .iter()
            .find(|(seen, _)| seen.as_ptr() == Arc::as_ptr(list))
        {
            return *found;
        }
        known.retain(|(seen, _)| seen.strong_count() > 0);
        if known.len() >= FINGERPRINTS_KEPT {
            known.remove(0);
        }
        let computed = fingerprint(list);
        known.push((Arc::downgrade(list), computed));
        computed
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
    pub blocked: Option<Blocked>,
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
    ModuleReport::new(
        &module.name,
        role,
        describe(&module.source),
        module.mode,
        module.failure_policy,
    )
}

fn fail(outcome: &mut Outcome, report: &mut ModuleReport, message: String) {
    if report.blocks_on_failure() && outcome.blocked.is_none() {
        outcome.blocked = Some(Blocked::new(BlockedReason::ModuleFailed, message.clone()));
    }
    report.error = Some(message);
}

/// The candidates `order` leaves out, each with why.
fn left_out(candidates: &[Ami], order: &[u32]) -> Vec<(String, String)> {
    let mut chosen = vec![false; candidates.len()];
    for index in order.iter().filter_map(|&i| usize::try_from(i).ok()) {
        if let Some(slot) = chosen.get_mut(index) {
            *slot = true;
        }
    }
    candidates
        .iter()
        .zip(&chosen)
        .filter(|(_, chosen)| !**chosen)
        .map(|(ami, _)| {
            (
                ami.id.clone(),
                format!("not selected (state {})", ami.state.as_str()),
            )
        })
        .collect()
}

/// The image ids `order` names, in its order.
fn ami_ids(candidates: &[Ami], order: &[u32]) -> Vec<String> {
    order
        .iter()
        .filter_map(|&i| usize::try_from(i).ok().and_then(|i| candidates.get(i)))
        .map(|ami| ami.id.clone())
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduling::{CapacityType, Offering, Overhead, Requirements, Resources};

    fn list(available: bool) -> Arc<Vec<InstanceType>> {
        let mut offering = Offering::new("zone-a", CapacityType::OnDemand, 0.1);
        offering.available = available;
        Arc::new(vec![InstanceType::new(
            "m5.large",
            Requirements::default(),
            vec![offering],
            Resources::default(),
            Overhead::default(),
        )])
    }

    #[test]
    fn a_list_keeps_its_fingerprint_and_a_changed_list_gets_its_own() {
        let extensions = Extensions::new(HostConfig::default()).unwrap();
        let available = list(true);
        let first = extensions.fingerprint_of(&available);
        assert_eq!(first, fingerprint(&available));
        assert_eq!(extensions.fingerprint_of(&available.clone()), first);

        // Changed in place while the memo holds it: a new allocation.
        let mut changed = available.clone();
        drop(available);
        Arc::make_mut(&mut changed)[0].offerings[0].available = false;
        let second = extensions.fingerprint_of(&changed);
        assert_ne!(second, first);
        assert_eq!(second, fingerprint(&list(false)));

        for _ in 0..2 * FINGERPRINTS_KEPT {
            extensions.fingerprint_of(&list(true));
        }
        let kept = extensions.fingerprints.lock().unwrap().len();
        assert!(kept <= FINGERPRINTS_KEPT, "{kept} fingerprints kept");
    }
}
