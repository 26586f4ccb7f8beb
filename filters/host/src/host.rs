//! The host: one wasmtime `Engine`, compiled components cached in memory and
//! on disk, an epoch ticker for per-call deadlines, and loading of modules
//! by reference and pinned digest.

use std::{
    fs,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::Duration,
};

use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::artifacts::ArtifactDir;
use crate::bindings::{filter, host_iface, scorer, selector};
use crate::digest::{normalize_pin, sha256_hex};
use crate::fetch::{
    FetchSettings, RegistryCredentials, fetch_oci, fetch_url, verify_oci_signature,
};
use crate::inspect::Inspection;
use crate::module::{Builtin, LoadedModule, RolePre, WasmModule};
use crate::sandbox::{CallState, forbidden_imports};
use crate::signature::SigningKeys;
use crate::{LoadError, ModuleRef, Role};

/// Largest linear memory a pooled slot can hold; per-module `Limits` cap
/// below it.
const MAX_POOLED_MEMORY: usize = 1 << 30;
/// Memory reset with `memset` (kept mapped) rather than `madvise` after a
/// call.
const KEEP_RESIDENT_BYTES: usize = 16 * 1024 * 1024;

/// Per-module resource limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock deadline of one call (instantiation included).
    pub timeout: Duration,
    /// Most linear memory a component may grow to, bytes (at most 1 GiB, the
    /// size of a pooled memory slot).
    pub memory_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_millis(100),
            memory_bytes: 64 * 1024 * 1024,
        }
    }
}

/// How to build a [`Host`].
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Directory for precompiled artifacts; `None` keeps them in memory only.
    /// Artifacts are trusted native code: the directory must be writable by
    /// the controller alone.
    pub cache_dir: Option<PathBuf>,
    /// Limits for modules that do not set their own.
    pub default_limits: Limits,
    /// Granularity of deadlines.
    pub epoch_tick: Duration,
    /// Most compiled components kept in memory.
    pub memory_cache_entries: u64,
    /// Most calls running at once across all modules. Instances come from a
    /// pre-reserved pool of this many slots whose memory stays mapped
    /// between calls (a fresh memory per call spent a fifth of the call in
    /// page faults); a call beyond the limit fails with a trap error.
    pub concurrent_calls: u32,
    /// Hosts (`name` or `name:port`) that `url` and `oci` sources may reach
    /// over plain HTTP: local registries and tests. Every other host needs
    /// HTTPS. Empty by default.
    pub plain_http_hosts: Vec<String>,
    /// Longest wait for a download's connection to open.
    pub download_connect_timeout: Duration,
    /// Longest a whole `url` or `oci` download may take.
    pub download_timeout: Duration,
    /// Largest module a `url` or `oci` source may deliver, bytes; larger
    /// downloads are refused before they fill memory.
    pub max_download_bytes: usize,
    /// Credentials for private OCI registries; others are pulled
    /// anonymously.
    pub registry_credentials: Vec<RegistryCredentials>,
    /// When set, an `oci:` module loads only if its manifest carries a
    /// cosign signature by one of these keys and holds the pinned module
    /// (checked once per reference and pin, before any cache is used).
    pub module_signature_keys: Option<Arc<SigningKeys>>,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            cache_dir: None,
            default_limits: Limits::default(),
            epoch_tick: Duration::from_millis(5),
            memory_cache_entries: 128,
            concurrent_calls: 32,
            plain_http_hosts: Vec::new(),
            download_connect_timeout: Duration::from_secs(10),
            download_timeout: Duration::from_secs(60),
            max_download_bytes: 32 * 1024 * 1024,
            registry_credentials: Vec::new(),
            module_signature_keys: None,
        }
    }
}

/// Why the host could not start.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The wasmtime engine or linker could not be set up.
    #[error("cannot set up the Wasm engine: {0}")]
    Engine(String),
    /// The artifact cache directory could not be created.
    #[error("cannot create the component cache directory {path}: {source}")]
    CacheDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The artifact cache directory may have been written by someone else:
    /// artifacts are native code, so the host will not use it.
    #[error(
        "refusing the component cache directory {path}: it is {reason}; remove it or \
         fix its owner and mode (0700), or turn the disk cache off"
    )]
    UnsafeCacheDir {
        /// The directory.
        path: PathBuf,
        /// Its owner or mode, and why that is unsafe.
        reason: String,
    },
    /// The epoch ticker thread could not be started.
    #[error("cannot start the deadline ticker thread: {0}")]
    Ticker(#[source] std::io::Error),
}

/// Loads extension modules and runs them in the sandbox. Cheap to clone;
/// clones share the engine and caches.
#[derive(Clone)]
pub struct Host {
    inner: Arc<HostInner>,
}

struct HostInner {
    engine: Engine,
    linker: Linker<CallState>,
    compiled: moka::sync::Cache<(String, Role), Arc<WasmModule>>,
    /// Pinned bytes refused for what they are (not a component, does not
    /// compile, forbidden imports, wrong world), by pin, role and source:
    /// the same bytes are refused the same way, so they are not fetched and
    /// compiled again on every load.
    refused: moka::sync::Cache<(String, Role, String), Arc<LoadError>>,
    artifact_dir: Option<ArtifactDir>,
    /// `oci:` references (with their pins and the fingerprint of the key
    /// set) whose signature was verified, and the key that made it.
    verified: moka::sync::Cache<(String, String, String), String>,
    config: HostConfig,
    ticker_stop: Arc<AtomicBool>,
}

impl Drop for HostInner {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

impl Host {
    /// Starts the engine, the linker and the deadline ticker.
    pub fn new(config: HostConfig) -> Result<Host, HostError> {
        let mut wasm_config = Config::new();
        wasm_config.wasm_component_model(true);
        wasm_config.epoch_interruption(true);
        let slots = config.concurrent_calls.max(1);
        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(slots)
            // A Rust component holds a handful of core instances, memories
            // and tables (the module plus the canonical-ABI shims).
            .total_core_instances(slots.saturating_mul(8))
            .total_memories(slots.saturating_mul(2))
            .total_tables(slots.saturating_mul(8))
            .max_memory_size(config.default_limits.memory_bytes.max(MAX_POOLED_MEMORY))
            .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
            .table_keep_resident(64 * 1024);
        wasm_config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&wasm_config).map_err(|e| HostError::Engine(format!("{e:#}")))?;

        let mut linker: Linker<CallState> = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|e| HostError::Engine(format!("{e:#}")))?;
        host_iface::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |s| s)
            .map_err(|e| HostError::Engine(format!("{e:#}")))?;
        crate::clock::add_to_linker(&mut linker)
            .map_err(|e| HostError::Engine(format!("{e:#}")))?;

        let artifact_dir = match &config.cache_dir {
            Some(base) => Some(ArtifactDir::open(base, &engine)?),
            None => None,
        };

        let ticker_stop = Arc::new(AtomicBool::new(false));
        {
            let engine = engine.clone();
            let stop = Arc::clone(&ticker_stop);
            let tick = config.epoch_tick.max(Duration::from_millis(1));
            thread::Builder::new()
                .name("nodewright-wasm-epoch".to_string())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        thread::sleep(tick);
                        engine.increment_epoch();
                    }
                })
                .map_err(HostError::Ticker)?;
        }

        Ok(Host {
            inner: Arc::new(HostInner {
                engine,
                linker,
                compiled: moka::sync::Cache::new(config.memory_cache_entries),
                refused: moka::sync::Cache::new(config.memory_cache_entries),
                artifact_dir,
                verified: moka::sync::Cache::new(config.memory_cache_entries),
                config,
                ticker_stop,
            }),
        })
    }

    /// Forgets every compiled component held in memory (precompiled
    /// artifacts on disk stay). The next load of each module reads its
    /// artifact or compiles again.
    pub fn clear_memory_cache(&self) {
        self.inner.compiled.invalidate_all();
    }

    /// The configuration the host was built with.
    pub fn config(&self) -> &HostConfig {
        &self.inner.config
    }

    /// Loads a module for `role` with the host's default limits. `sha256`
    /// is required for every source except `Builtin`; the bytes are checked
    /// against it before anything is compiled.
    pub fn load(
        &self,
        role: Role,
        source: &ModuleRef,
        sha256: Option<&str>,
    ) -> Result<LoadedModule, LoadError> {
        self.load_signed(role, source, sha256, None)
    }

    /// [`Host::load`] for an entry with its own key set: an `oci:` module
    /// must also carry a signature by one of `entry_keys` (the host's
    /// `module_signature_keys`, when set, still apply: an entry narrows the
    /// controller's policy, never widens it). Keys on another source are
    /// refused, as there is no signature to check.
    pub fn load_signed(
        &self,
        role: Role,
        source: &ModuleRef,
        sha256: Option<&str>,
        entry_keys: Option<&SigningKeys>,
    ) -> Result<LoadedModule, LoadError> {
        let limits = self.inner.config.default_limits;
        let label = source.describe();
        if let (Some(keys), false) = (entry_keys, matches!(source, ModuleRef::Oci(_))) {
            return Err(LoadError::Signature {
                source_desc: label,
                keys: keys.describe(),
                reason: "only an oci: module carries a cosign signature".to_string(),
            });
        }
        let pin = match (source, sha256) {
            (ModuleRef::Builtin(name), _) => {
                let builtin = Builtin::find(role, name)?;
                return Ok(LoadedModule::builtin(role, builtin, limits));
            }
            (_, None) => return Err(LoadError::MissingDigest { source_desc: label }),
            (_, Some(pin)) => normalize_pin(pin)?,
        };
        if let ModuleRef::Oci(reference) = source {
            let controller_keys = self.inner.config.module_signature_keys.as_deref();
            for keys in controller_keys.into_iter().chain(entry_keys) {
                self.verify_signature(reference, &pin, keys)?;
            }
        }

        if let Some(module) = self.inner.compiled.get(&(pin.clone(), role)) {
            return Ok(LoadedModule::wasm(
                module,
                limits,
                self.inner.engine.clone(),
                self.inner.config.epoch_tick,
            ));
        }

        let refusal_key = (pin.clone(), role, label.clone());
        if let Some(refusal) = self.inner.refused.get(&refusal_key)
            && let Some(err) = refusal.copy_refusal()
        {
            return Err(err);
        }
        let module = match self.build(source, &pin, role, label) {
            Ok(module) => module,
            Err(err) => {
                if let Some(copy) = err.copy_refusal() {
                    self.inner.refused.insert(refusal_key, Arc::new(copy));
                }
                return Err(err);
            }
        };
        self.inner.compiled.insert((pin, role), Arc::clone(&module));
        Ok(LoadedModule::wasm(
            module,
            limits,
            self.inner.engine.clone(),
            self.inner.config.epoch_tick,
        ))
    }

    /// Checks `reference`'s cosign signature against `keys` once per
    /// reference, pin and key set: the pin binds the signed manifest to the
    /// bytes any cache holds, and a changed key set checks again.
    fn verify_signature(
        &self,
        reference: &str,
        pin: &str,
        keys: &SigningKeys,
    ) -> Result<(), LoadError> {
        let key = (
            reference.to_string(),
            pin.to_string(),
            keys.fingerprint().to_string(),
        );
        if self.inner.verified.contains_key(&key) {
            return Ok(());
        }
        let config = &self.inner.config;
        let signer = verify_oci_signature(reference, pin, keys, &fetch_settings(config))?;
        tracing::debug!(reference, signer, "module signature verified");
        self.inner.verified.insert(key, signer);
        Ok(())
    }

    /// Inspects component bytes without running them: roles, contract
    /// version, imports (and whether the sandbox refuses them), size and
    /// digest. `label` names the component in errors.
    pub fn inspect(&self, bytes: &[u8], label: &str) -> Result<Inspection, LoadError> {
        crate::inspect::inspect(&self.inner.engine, bytes, label)
    }

    /// The module of pinned `source` for `role`: from its artifact or
    /// fetched, checked against its pin and compiled, then linked.
    fn build(
        &self,
        source: &ModuleRef,
        pin: &str,
        role: Role,
        label: String,
    ) -> Result<Arc<WasmModule>, LoadError> {
        let component = match self.load_artifact(pin) {
            Some(component) => component,
            None => {
                let bytes = fetch(source, &self.inner.config)?;
                let actual = sha256_hex(&bytes);
                if actual != pin {
                    return Err(LoadError::DigestMismatch {
                        source_desc: label,
                        expected: pin.to_string(),
                        actual,
                    });
                }
                self.compile(&bytes, pin, &label)?
            }
        };

        let imports: Vec<String> = component
            .component_type()
            .imports(&self.inner.engine)
            .map(|(name, _)| name.to_string())
            .collect();
        let forbidden = forbidden_imports(imports.iter().map(String::as_str));
        if !forbidden.is_empty() {
            return Err(LoadError::ForbiddenImport {
                source_desc: label,
                imports: forbidden,
            });
        }

        let wrong_world = |e: wasmtime::Error| LoadError::WrongWorld {
            source_desc: label.clone(),
            role,
            message: format!("{e:#}"),
        };
        let pre = self
            .inner
            .linker
            .instantiate_pre(&component)
            .map_err(wrong_world)?;
        let role_pre = match role {
            Role::InstanceFilter => {
                RolePre::Filter(filter::InstanceFilterPre::new(pre).map_err(wrong_world)?)
            }
            Role::AmiSelector => {
                RolePre::Selector(selector::AmiSelectorPre::new(pre).map_err(wrong_world)?)
            }
            Role::PriorityScorer => {
                RolePre::Scorer(scorer::PriorityScorerPre::new(pre).map_err(wrong_world)?)
            }
        };
        Ok(Arc::new(WasmModule {
            name: label,
            sha256: pin.to_string(),
            role,
            pre: role_pre,
        }))
    }

    fn load_artifact(&self, pin: &str) -> Option<Component> {
        self.inner
            .artifact_dir
            .as_ref()?
            .load(&self.inner.engine, pin)
    }

    fn compile(&self, bytes: &[u8], pin: &str, label: &str) -> Result<Component, LoadError> {
        if is_core_module(bytes) {
            return Err(LoadError::CoreModule {
                source_desc: label.to_string(),
            });
        }
        let component =
            Component::new(&self.inner.engine, bytes).map_err(|e| LoadError::Compile {
                source_desc: label.to_string(),
                message: format!("{e:#}"),
            })?;
        if let Some(dir) = &self.inner.artifact_dir {
            dir.store(&component, pin);
        }
        Ok(component)
    }
}

/// A core module starts with the magic `\0asm` and version 1; a component
/// has the same magic and a different version/layer word.
pub(crate) fn is_core_module(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\0asm\x01\0\0\0")
}

/// The download settings of `config`.
fn fetch_settings(config: &HostConfig) -> FetchSettings<'_> {
    FetchSettings {
        plain_http_hosts: &config.plain_http_hosts,
        connect_timeout: config.download_connect_timeout,
        total_timeout: config.download_timeout,
        max_bytes: config.max_download_bytes,
        credentials: &config.registry_credentials,
    }
}

/// The module's bytes. Called only after both compiled caches missed, so
/// a pinned module is downloaded once per cache lifetime.
fn fetch(source: &ModuleRef, config: &HostConfig) -> Result<Arc<[u8]>, LoadError> {
    let settings = || fetch_settings(config);
    match source {
        ModuleRef::Path(path) => fs::read(path)
            .map(Arc::from)
            .map_err(|source| LoadError::Read {
                path: path.clone(),
                source,
            }),
        ModuleRef::Bytes { bytes, .. } => Ok(Arc::clone(bytes)),
        ModuleRef::Url(url) => fetch_url(url, &settings()),
        ModuleRef::Oci(reference) => fetch_oci(reference, &settings()),
        ModuleRef::Builtin(_) => Err(LoadError::UnsupportedSource {
            scheme: "builtin",
            hint: "built-ins are not fetched",
        }),
    }
}
