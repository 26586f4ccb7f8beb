//! What keeps extension work bounded: outcomes are cached in a bounded
//! cache under a typed key, and calls into modules are capped at a number
//! running at once (as Kubewarden's policy server caps its evaluations),
//! so a burst of NodeClasses cannot take every blocking thread.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, SemaphorePermit};

use super::{ConfigMapSource, Outcome, signing};
use crate::apis::extensions::{
    EffectiveExtensions, ExtensionMode, ResolvedModule, SignatureKeysSource,
};
use crate::apis::{FailurePolicy, ModuleSource};

/// How much extension work is kept and run at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtensionSettings {
    /// Outcomes of filters and scorers kept (per NodeClass generation,
    /// NodePool, modules, catalog version and instance types); the least
    /// recently used goes first.
    pub cache_entries: u64,
    /// Evaluations calling into modules at once; more wait for a turn.
    pub concurrency: usize,
}

impl ExtensionSettings {
    /// Default of [`ExtensionSettings::cache_entries`].
    pub const DEFAULT_CACHE_ENTRIES: u64 = 256;
    /// Default of [`ExtensionSettings::concurrency`].
    pub const DEFAULT_CONCURRENCY: usize = 4;
}

impl Default for ExtensionSettings {
    fn default() -> Self {
        ExtensionSettings {
            cache_entries: Self::DEFAULT_CACHE_ENTRIES,
            concurrency: Self::DEFAULT_CONCURRENCY,
        }
    }
}

/// Everything a cached outcome was computed from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct OutcomeKey {
    pub(super) node_class: String,
    pub(super) generation: i64,
    pub(super) node_pool: String,
    pub(super) catalog_version: String,
    /// Fingerprint of the instance types given (names and offerings).
    pub(super) instance_types: u64,
    pub(super) modules: Vec<ModuleKey>,
}

/// One module entry as it decides an outcome: where its code comes from
/// and its digest, its config and how it is run.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct ModuleKey {
    role: Stage,
    name: String,
    source: ModuleSource,
    sha256: Option<String>,
    /// The config as JSON text.
    config: String,
    failure_policy: FailurePolicy,
    mode: ExtensionMode,
    timeout: Duration,
    weight: i32,
    /// The entry's `signatureKeys` and what its ConfigMap holds now.
    signature_keys: Option<(SignatureKeysSource, Option<BTreeMap<String, String>>)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Stage {
    Filter,
    Scorer,
    Selector,
}

impl ModuleKey {
    fn of(
        role: Stage,
        module: &ResolvedModule,
        weight: i32,
        config_maps: &dyn ConfigMapSource,
    ) -> Self {
        ModuleKey {
            role,
            name: module.name.clone(),
            source: module.source.clone(),
            sha256: module.sha256.clone(),
            config: module.config.to_string(),
            failure_policy: module.failure_policy,
            mode: module.mode,
            timeout: module.timeout,
            weight,
            signature_keys: module.signature_keys.as_ref().map(|keys| {
                let material = signing::key_material(keys, config_maps);
                (keys.clone(), material)
            }),
        }
    }

    /// The keys of every module of `effective`, in evaluation order.
    pub(super) fn all(
        effective: &EffectiveExtensions,
        config_maps: &dyn ConfigMapSource,
    ) -> Vec<ModuleKey> {
        let filters = effective
            .instance_filters
            .iter()
            .map(|m| ModuleKey::of(Stage::Filter, m, 0, config_maps));
        let scorers = effective
            .priority_scorers
            .iter()
            .map(|s| ModuleKey::of(Stage::Scorer, &s.module, s.weight, config_maps));
        let selector = ModuleKey::of(Stage::Selector, &effective.ami_selector, 0, config_maps);
        filters.chain(scorers).chain([selector]).collect()
    }
}

/// Clean outcomes by what they were computed from, at most
/// [`ExtensionSettings::cache_entries`] of them.
pub(super) struct OutcomeCache(moka::sync::Cache<OutcomeKey, Arc<Outcome>>);

impl OutcomeCache {
    pub(super) fn new(entries: u64) -> Self {
        OutcomeCache(
            moka::sync::Cache::builder()
                .max_capacity(entries.max(1))
                .eviction_policy(moka::policy::EvictionPolicy::lru())
                .build(),
        )
    }

    pub(super) fn get(&self, key: &OutcomeKey) -> Option<Arc<Outcome>> {
        self.0.get(key)
    }

    pub(super) fn insert(&self, key: OutcomeKey, outcome: Arc<Outcome>) {
        self.0.insert(key, outcome);
    }

    /// Entries held once pending evictions are done.
    #[cfg(test)]
    fn len(&self) -> u64 {
        self.0.run_pending_tasks();
        self.0.entry_count()
    }
}

/// At most [`ExtensionSettings::concurrency`] evaluations calling into
/// modules at once. Callers are on blocking threads (module calls block),
/// so a turn is waited for by blocking too.
pub(super) struct CallLimit(Semaphore);

impl CallLimit {
    pub(super) fn new(concurrency: usize) -> Self {
        CallLimit(Semaphore::new(concurrency.max(1)))
    }

    /// Waits for a turn; the turn ends when the permit is dropped. `None`
    /// only if the semaphore was closed, which it never is.
    pub(super) fn turn(&self) -> Option<SemaphorePermit<'_>> {
        futures::executor::block_on(self.0.acquire()).ok()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn key(pool: usize) -> OutcomeKey {
        OutcomeKey {
            node_class: "default".into(),
            generation: 1,
            node_pool: format!("pool-{pool}"),
            catalog_version: "v1".into(),
            instance_types: 0,
            modules: Vec::new(),
        }
    }

    #[test]
    fn the_cache_evicts_past_its_bound() {
        let cache = OutcomeCache::new(2);
        for pool in 0..10 {
            cache.insert(key(pool), Arc::default());
        }
        assert!(cache.len() <= 2, "{} entries kept", cache.len());
        assert!(cache.get(&key(9)).is_some(), "the newest entry is kept");
    }

    #[test]
    fn the_call_limit_bounds_calls_in_flight() {
        let limit = CallLimit::new(2);
        let in_flight = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    for _ in 0..50 {
                        let _turn = limit.turn();
                        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::yield_now();
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        });
        assert_eq!(done.load(Ordering::SeqCst), 400);
        let most = most.load(Ordering::SeqCst);
        assert!((1..=2).contains(&most), "{most} calls ran at once");
    }
}
