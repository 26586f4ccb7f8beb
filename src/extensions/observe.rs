//! The `nodewright_extension_*` metrics, recorded where a call's outcome is
//! known. Results and reasons come from the host's typed errors (never from
//! their text), so a label value means one kind of failure; every match is
//! exhaustive, so a new kind of failure must be given a value here.

use std::time::{Duration, Instant};

use nodewright_host::{CallError, LoadError, Role};

use crate::metrics::{ExtensionMetrics, labels};

/// `result` of a call that answered within the contract.
pub(super) const OK: &str = "ok";

/// `reason` of a ConfigMap source whose ConfigMap does not exist.
pub(super) const CONFIG_MAP_NOT_FOUND: &str = "configmap_not_found";
/// `reason` of a ConfigMap source whose ConfigMap lacks the key.
pub(super) const CONFIG_MAP_KEY_MISSING: &str = "configmap_key_missing";
/// `reason` of an entry whose `signatureKeys` ConfigMap holds no usable
/// public key.
pub(super) const SIGNATURE_KEYS: &str = "signature_keys";

/// The `result` label of a failed call.
pub(super) fn call_result(error: &CallError) -> &'static str {
    match error {
        CallError::Timeout { .. } => "timeout",
        CallError::MemoryExhausted { .. } => "memory",
        CallError::Trap { .. } => "trap",
        CallError::Rejected(_) => "rejected",
        CallError::MalformedOutput(_) => "malformed",
        // The host's side, not the module's: called through the wrong
        // role, or the call could not be set up.
        CallError::WrongRole { .. } | CallError::Setup(_) => "host_error",
    }
}

/// The `reason` label of a module that could not be loaded.
pub(super) fn load_reason(error: &LoadError) -> &'static str {
    match error {
        LoadError::UnknownBuiltin { .. } => "unknown_builtin",
        LoadError::MissingDigest { .. } => "missing_digest",
        LoadError::InvalidDigest { .. } => "invalid_digest",
        LoadError::DigestMismatch { .. } => "digest_mismatch",
        LoadError::Read { .. } => "read",
        LoadError::UnsupportedSource { .. } => "unsupported_source",
        LoadError::Download { .. } => "download",
        LoadError::InsecureSource { .. } => "insecure_source",
        LoadError::DownloadTooLarge { .. } => "download_too_large",
        LoadError::NotAComponentArtifact { .. } => "not_a_component_artifact",
        LoadError::CoreModule { .. } => "core_module",
        LoadError::Compile { .. } => "compile",
        LoadError::ForbiddenImport { .. } => "forbidden_import",
        LoadError::WrongWorld { .. } => "wrong_world",
        LoadError::Signature { .. } => "signature",
    }
}

/// Records one EC2NodeClass's extension work into `metrics`.
pub(super) struct Meter<'a> {
    pub(super) metrics: &'a ExtensionMetrics,
    pub(super) node_class: &'a str,
}

impl Meter<'_> {
    /// Runs `call` (one call into the module of entry `module`) and records
    /// how it ended and how long it took.
    pub(super) fn call<T>(
        &self,
        role: Role,
        module: &str,
        call: impl FnOnce() -> Result<T, CallError>,
    ) -> Result<T, CallError> {
        let started = Instant::now();
        let result = call();
        self.metrics
            .call_duration
            .get_or_create(&labels(&[("role", role.as_str())]))
            .observe(started.elapsed().as_secs_f64());
        let outcome = result.as_ref().map_or_else(call_result, |_| OK);
        self.metrics
            .calls
            .get_or_create(&labels(&[
                ("nodeclass", self.node_class),
                ("role", role.as_str()),
                ("module", module),
                ("result", outcome),
            ]))
            .inc();
        result
    }

    /// A module of entry `module` that could not be loaded, for `reason`.
    pub(super) fn load_failed(&self, role: Role, module: &str, reason: &str) {
        self.metrics
            .load_failures
            .get_or_create(&labels(&[
                ("nodeclass", self.node_class),
                ("role", role.as_str()),
                ("module", module),
                ("reason", reason),
            ]))
            .inc();
    }

    /// An evaluation looked up in the outcome cache.
    pub(super) fn cache_lookup(&self, hit: bool) {
        let result = if hit { "hit" } else { "miss" };
        self.metrics
            .cache_lookups
            .get_or_create(&labels(&[
                ("nodeclass", self.node_class),
                ("result", result),
            ]))
            .inc();
    }

    /// An evaluation waited `waited` for its turn.
    pub(super) fn turn_waited(&self, waited: Duration) {
        self.metrics
            .concurrency_wait
            .get_or_create(&Vec::new())
            .observe(waited.as_secs_f64());
    }
}

#[cfg(test)]
mod tests;
