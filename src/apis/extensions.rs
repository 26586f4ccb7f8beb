//! `EC2NodeClass.spec.extensions`: the WebAssembly modules (or built-ins) that
//! decide which instance types are allowed, which AMI a node boots, and in
//! which order instance types are tried. This is nodewright's addition to the
//! Karpenter API; absent means the built-in defaults.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::apis::duration::{DurationError, parse_go_duration};

/// Built-in AMI selector used when none is configured: only `available` AMIs, newest first.
pub const BUILTIN_AVAILABLE_AMIS: &str = "available-amis";
/// Built-in priority scorer used when none is configured: flex families first.
pub const BUILTIN_FLEX_FIRST: &str = "flex-first";
/// Per-call deadline when `timeout` is absent.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(100);
/// `timeout` default as written in the schema.
pub const DEFAULT_TIMEOUT_TEXT: &str = "100ms";
/// Longest per-call deadline a module may ask for. A call over the whole
/// catalog takes well under a millisecond; the bound keeps deadline
/// arithmetic sane and a slow module from holding a reconcile for long.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(10);
/// [`MAX_TIMEOUT`] as written in the schema's rule.
pub const MAX_TIMEOUT_TEXT: &str = "10s";
/// Longest `timeout` string (keeps the CEL rule's cost bounded).
pub const MAX_TIMEOUT_LENGTH: u32 = 32;
/// Scorer weight when `weight` is absent.
pub const DEFAULT_SCORER_WEIGHT: i32 = 1;

/// Pattern of extension names and built-in module names (a DNS label).
pub const NAME_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// Pattern of a pinned module digest: 64 lowercase hex characters.
pub const SHA256_PATTERN: &str = r"^[0-9a-f]{64}$";
/// Pattern of a module URL: HTTPS only.
pub const URL_PATTERN: &str = r"^https://[^\s]+$";

/// What happens when a module fails (trap, timeout, malformed answer, load error).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum FailurePolicy {
    /// Fail closed: the NodeClass offers nothing the module would have decided on.
    #[default]
    Fail,
    /// Fail open: behave as if the module were absent and record the error.
    Ignore,
}

/// Whether a module's answer is used: `Enforce` (default) lets it decide;
/// `Shadow` runs it and reports what it would have dropped, reordered or
/// selected without changing anything, and its failures never block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ExtensionMode {
    /// The answer decides: dropped instance types are not offered, scores
    /// order the options, the selected AMIs are booted.
    #[default]
    Enforce,
    /// The module runs and reports what it would have dropped, reordered
    /// or selected, without changing any decision; its failures never
    /// block (they are reported as with `failurePolicy: Ignore`). The way to
    /// roll out a new module safely.
    Shadow,
}

/// A module stored in a ConfigMap's `binaryData`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapModuleSource {
    /// Name of the ConfigMap.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Namespace of the ConfigMap (EC2NodeClass is cluster-scoped, so it must be given).
    #[schemars(length(min = 1, max = 63))]
    pub namespace: String,
    /// Key in `binaryData` holding the compiled component.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// A ConfigMap whose `data` values are PEM public keys (`cosign.pub`): the
/// keys an `oci:` entry's cosign signature must be made by.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SignatureKeysSource {
    /// Name of the ConfigMap.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Namespace of the ConfigMap (EC2NodeClass is cluster-scoped, so it must be given).
    #[schemars(length(min = 1, max = 63))]
    pub namespace: String,
}

/// One extension entry: a name, exactly one module source, and how to run it.
///
/// Sources: `builtin` (a module compiled into nodewright), `configMap`
/// (`binaryData` of a ConfigMap), `url` (HTTPS), `oci` (an OCI artifact
/// reference) or `path` (a file on the controller's filesystem, for
/// development and the test harness). Every source but `builtin` needs a
/// pinned `sha256`; the module is refused if its digest differs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "message": "must specify exactly one module source of ['builtin', 'configMap', 'url', 'oci', 'path']",
        "rule": "(has(self.builtin) ? 1 : 0) + (has(self.configMap) ? 1 : 0) + (has(self.url) ? 1 : 0) + (has(self.oci) ? 1 : 0) + (has(self.path) ? 1 : 0) == 1",
    },
    {
        "message": "'sha256' is required unless the module is 'builtin'",
        "rule": "has(self.builtin) || has(self.sha256)",
    },
    {
        "message": "'sha256' must not be set on a 'builtin' module",
        "rule": "!(has(self.builtin) && has(self.sha256))",
    },
    {
        "message": "'signatureKeys' is only valid on an 'oci' module",
        "rule": "!has(self.signatureKeys) || has(self.oci)",
    },
]))]
pub struct ExtensionModule {
    /// Name of this entry, unique within its list; used in logs, events and status.
    #[schemars(length(max = 63), regex(pattern = NAME_PATTERN))]
    pub name: String,
    /// Name of a module compiled into nodewright (e.g. `available-amis`, `flex-first`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63), regex(pattern = NAME_PATTERN))]
    pub builtin: Option<String>,
    /// Load the component from a ConfigMap's `binaryData`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapModuleSource>,
    /// Download the component over HTTPS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048), regex(pattern = URL_PATTERN))]
    pub url: Option<String>,
    /// Pull the component from an OCI registry (`registry/repository:tag` or `@sha256:...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub oci: Option<String>,
    /// Read the component from a file on the controller (development and harness only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub path: Option<String>,
    /// SHA-256 of the component bytes, 64 lowercase hex characters. Required unless `builtin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = SHA256_PATTERN))]
    pub sha256: Option<String>,
    /// `oci` modules only: a ConfigMap of PEM public keys; the module loads
    /// only if its cosign signature is made by one of them (and by one of
    /// the controller's `--module-signature-keys` when those are set too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature_keys: Option<SignatureKeysSource>,
    /// Free-form JSON handed to the module with every call; its shape is the module's business.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::apis::schema::preserve_unknown")]
    pub config: Option<serde_json::Value>,
    /// `Fail` (default) or `Ignore`: what to do when the module errors or times out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Fail"))]
    pub failure_policy: Option<FailurePolicy>,
    /// Deadline of one call, as a Go duration, at most `10s`. Default `100ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_TIMEOUT_LENGTH), regex(pattern = crate::apis::schema::GO_DURATION_PATTERN))]
    #[schemars(extend("default" = "100ms"))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "timeout must be at most 10s", "rule": "duration(self) <= duration('10s')"},
    ]))]
    pub timeout: Option<String>,
    /// `Enforce` (default): the module's answer is used. `Shadow`: it runs
    /// and reports what it would have done, changing nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Enforce"))]
    pub mode: Option<ExtensionMode>,
    /// Priority scorers only: multiplier of this scorer's scores (1..100, default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub weight: Option<i32>,
}

/// Rule shared by the filter and scorer lists: entry names are unique.
const UNIQUE_NAMES_RULE: &str = "self.all(x, self.filter(y, y.name == x.name).size() == 1)";

/// The three decisions a user may hand to modules.
///
/// Absent `extensions` — or an absent field inside it — means the built-in
/// default for that decision: no instance filters, AMI selector
/// `builtin: available-amis`, priority scorer `builtin: flex-first`. An
/// explicitly empty list means "none" (for scorers: ties fall back to price).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Extensions {
    /// Filters applied in order; an instance type is offered only if every filter keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 20))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "instanceFilters names must be unique", "rule": UNIQUE_NAMES_RULE},
        {"message": "'weight' is only valid on priorityScorers", "rule": "self.all(x, !has(x.weight))"},
    ]))]
    pub instance_filters: Option<Vec<ExtensionModule>>,
    /// Chooses the AMI per architecture/variant from the AMIs that `amiSelectorTerms` resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "ami_selector_schema")]
    pub ami_selector: Option<ExtensionModule>,
    /// Scorers whose weighted scores order instance types (higher first; ties by price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 20))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "priorityScorers names must be unique", "rule": UNIQUE_NAMES_RULE},
    ]))]
    pub priority_scorers: Option<Vec<ExtensionModule>>,
}

/// The AMI selector entry: an [`ExtensionModule`] that may not carry a `weight`.
fn ami_selector_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = <ExtensionModule as JsonSchema>::json_schema(generator);
    let rule = serde_json::json!({
        "message": "'weight' is only valid on priorityScorers",
        "rule": "!has(self.weight)",
    });
    match schema.get_mut("x-kubernetes-validations") {
        Some(serde_json::Value::Array(rules)) => rules.push(rule),
        _ => {
            schema.insert("x-kubernetes-validations".into(), serde_json::json!([rule]));
        }
    }
    schema
}

/// Where a module's code comes from, after validation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ModuleSource {
    /// A module compiled into nodewright.
    Builtin(String),
    /// `binaryData` of a ConfigMap.
    ConfigMap(ConfigMapModuleSource),
    /// An HTTPS URL.
    Url(String),
    /// An OCI artifact reference.
    Oci(String),
    /// A local file.
    Path(String),
}

/// An extension entry with its defaults filled in and its fields checked.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedModule {
    /// Entry name.
    pub name: String,
    /// Where the code comes from.
    pub source: ModuleSource,
    /// Pinned digest (lowercase hex); `None` only for built-ins.
    pub sha256: Option<String>,
    /// The keys an `oci` module's signature must be made by, if the entry names any.
    pub signature_keys: Option<SignatureKeysSource>,
    /// The user's config, `Value::Null` when absent.
    pub config: serde_json::Value,
    /// What to do on failure.
    pub failure_policy: FailurePolicy,
    /// Deadline of one call.
    pub timeout: Duration,
    /// Whether its answer is used.
    pub mode: ExtensionMode,
}

/// A resolved priority scorer and its weight.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedScorer {
    /// The module.
    pub module: ResolvedModule,
    /// Multiplier of its scores.
    pub weight: i32,
}

/// The extensions a NodeClass actually runs, defaults included.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectiveExtensions {
    /// Filters in order (possibly none).
    pub instance_filters: Vec<ResolvedModule>,
    /// The AMI selector.
    pub ami_selector: ResolvedModule,
    /// Scorers (possibly none).
    pub priority_scorers: Vec<ResolvedScorer>,
}

impl EffectiveExtensions {
    /// Every module, filters first, then scorers, then the AMI selector.
    pub fn modules(&self) -> impl Iterator<Item = &ResolvedModule> {
        self.instance_filters
            .iter()
            .chain(self.priority_scorers.iter().map(|s| &s.module))
            .chain(std::iter::once(&self.ami_selector))
    }

    /// The ConfigMaps (`namespace`, `name`) modules are stored in.
    pub fn config_map_references(&self) -> Vec<(&str, &str)> {
        let sources = self.modules().filter_map(|module| match &module.source {
            ModuleSource::ConfigMap(cm) => Some((cm.namespace.as_str(), cm.name.as_str())),
            _ => None,
        });
        let keys = self.modules().filter_map(|module| {
            let keys = module.signature_keys.as_ref()?;
            Some((keys.namespace.as_str(), keys.name.as_str()))
        });
        sources.chain(keys).collect()
    }
}

/// An extension entry that the apiserver would have refused (or that bypassed it).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ExtensionError {
    /// No source given.
    #[error("{field}: no module source; set exactly one of builtin, configMap, url, oci or path")]
    NoSource {
        /// Path of the entry, e.g. `spec.extensions.instanceFilters[0]`.
        field: String,
    },
    /// More than one source given.
    #[error(
        "{field}: several module sources ({sources}); set exactly one of builtin, configMap, url, oci or path"
    )]
    MultipleSources {
        /// Path of the entry.
        field: String,
        /// The sources that were set.
        sources: String,
    },
    /// A non-builtin source without a digest.
    #[error(
        "{field}.sha256: required unless the module is builtin; pin the module's SHA-256 (64 lowercase hex characters)"
    )]
    MissingSha256 {
        /// Path of the entry.
        field: String,
    },
    /// A digest on a builtin.
    #[error("{field}.sha256: must not be set on a builtin module; remove it")]
    Sha256OnBuiltin {
        /// Path of the entry.
        field: String,
    },
    /// A digest that is not 64 lowercase hex characters.
    #[error("{field}.sha256: {value:?} is not 64 lowercase hex characters")]
    BadSha256 {
        /// Path of the entry.
        field: String,
        /// The digest as written.
        value: String,
    },
    /// A URL that is not HTTPS.
    #[error("{field}.url: {value:?} must start with https://")]
    NotHttps {
        /// Path of the entry.
        field: String,
        /// The URL as written.
        value: String,
    },
    /// An unparsable timeout.
    #[error("{field}.timeout: {source}")]
    BadTimeout {
        /// Path of the entry.
        field: String,
        /// Why parsing failed.
        source: DurationError,
    },
    /// A timeout above [`MAX_TIMEOUT`].
    #[error("{field}.timeout: {value:?} is longer than the maximum of {MAX_TIMEOUT_TEXT}")]
    TimeoutTooLong {
        /// Path of the entry.
        field: String,
        /// The timeout as written.
        value: String,
    },
    /// A weight outside 1..100, or on something that is not a scorer.
    #[error("{field}.weight: {reason}")]
    BadWeight {
        /// Path of the entry.
        field: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// Signature keys on a module that is not `oci:`.
    #[error(
        "{field}.signatureKeys: only an oci module carries a cosign signature; remove signatureKeys or load the module with oci"
    )]
    SignatureKeysWithoutOci {
        /// Path of the entry.
        field: String,
    },
    /// Two entries of one list with the same name.
    #[error("{field}: name {name:?} is used twice; entry names must be unique within the list")]
    DuplicateName {
        /// Path of the list.
        field: String,
        /// The repeated name.
        name: String,
    },
}

impl ExtensionModule {
    /// A built-in module entry named after the module.
    pub fn builtin(name: &str) -> Self {
        Self {
            name: name.to_string(),
            builtin: Some(name.to_string()),
            config_map: None,
            url: None,
            oci: None,
            path: None,
            sha256: None,
            signature_keys: None,
            config: None,
            failure_policy: None,
            timeout: None,
            mode: None,
            weight: None,
        }
    }

    /// The single source of this entry, checked. `field` names the entry in errors.
    pub fn source(&self, field: &str) -> Result<ModuleSource, ExtensionError> {
        let mut sources = Vec::new();
        if let Some(name) = &self.builtin {
            sources.push(("builtin", ModuleSource::Builtin(name.clone())));
        }
        if let Some(config_map) = &self.config_map {
            sources.push(("configMap", ModuleSource::ConfigMap(config_map.clone())));
        }
        if let Some(url) = &self.url {
            if !url.starts_with("https://") {
                return Err(ExtensionError::NotHttps {
                    field: field.to_string(),
                    value: url.clone(),
                });
            }
            sources.push(("url", ModuleSource::Url(url.clone())));
        }
        if let Some(oci) = &self.oci {
            sources.push(("oci", ModuleSource::Oci(oci.clone())));
        }
        if let Some(path) = &self.path {
            sources.push(("path", ModuleSource::Path(path.clone())));
        }
        match sources.len() {
            0 => Err(ExtensionError::NoSource {
                field: field.to_string(),
            }),
            1 => Ok(sources.remove(0).1),
            _ => Err(ExtensionError::MultipleSources {
                field: field.to_string(),
                sources: sources
                    .iter()
                    .map(|(name, _)| *name)
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// Checks this entry and fills in its defaults. `field` names the entry in errors.
    pub fn resolve(&self, field: &str) -> Result<ResolvedModule, ExtensionError> {
        let source = self.source(field)?;
        let is_builtin = matches!(source, ModuleSource::Builtin(_));
        match (&self.sha256, is_builtin) {
            (Some(_), true) => {
                return Err(ExtensionError::Sha256OnBuiltin {
                    field: field.to_string(),
                });
            }
            (None, false) => {
                return Err(ExtensionError::MissingSha256 {
                    field: field.to_string(),
                });
            }
            (Some(digest), false) if !is_sha256_hex(digest) => {
                return Err(ExtensionError::BadSha256 {
                    field: field.to_string(),
                    value: digest.clone(),
                });
            }
            _ => {}
        }
        if self.signature_keys.is_some() && !matches!(source, ModuleSource::Oci(_)) {
            return Err(ExtensionError::SignatureKeysWithoutOci {
                field: field.to_string(),
            });
        }
        let timeout = match &self.timeout {
            Some(text) => {
                let timeout =
                    parse_go_duration(text).map_err(|source| ExtensionError::BadTimeout {
                        field: field.to_string(),
                        source,
                    })?;
                if timeout > MAX_TIMEOUT {
                    return Err(ExtensionError::TimeoutTooLong {
                        field: field.to_string(),
                        value: text.clone(),
                    });
                }
                timeout
            }
            None => DEFAULT_TIMEOUT,
        };
        Ok(ResolvedModule {
            name: self.name.clone(),
            source,
            sha256: self.sha256.clone(),
            signature_keys: self.signature_keys.clone(),
            config: self.config.clone().unwrap_or(serde_json::Value::Null),
            failure_policy: self.failure_policy.unwrap_or_default(),
            timeout,
            mode: self.mode.unwrap_or_default(),
        })
    }
}

fn is_sha256_hex(digest: &str) -> bool {
    digest.len() == 64
        && digest
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn check_unique_names(field: &str, entries: &[ExtensionModule]) -> Result<(), ExtensionError> {
    for (index, entry) in entries.iter().enumerate() {
        if entries
            .iter()
            .skip(index + 1)
            .any(|other| other.name == entry.name)
        {
            return Err(ExtensionError::DuplicateName {
                field: field.to_string(),
                name: entry.name.clone(),
            });
        }
    }
    Ok(())
}

fn reject_weight(field: &str, entry: &ExtensionModule) -> Result<(), ExtensionError> {
    if entry.weight.is_some() {
        return Err(ExtensionError::BadWeight {
            field: field.to_string(),
            reason: "only priorityScorers take a weight; remove it",
        });
    }
    Ok(())
}

/// The extensions to run for `extensions` (the optional `spec.extensions` of an
/// EC2NodeClass), with every default filled in. Fails on entries the CRD
/// schema would have refused, naming the offending field.
pub fn effective_extensions(
    extensions: Option<&Extensions>,
) -> Result<EffectiveExtensions, ExtensionError> {
    const BASE: &str = "spec.extensions";
    let default = Extensions::default();
    let extensions = extensions.unwrap_or(&default);

    let filters = extensions.instance_filters.as_deref().unwrap_or(&[]);
    check_unique_names(&format!("{BASE}.instanceFilters"), filters)?;
    let instance_filters = filters
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            let field = format!("{BASE}.instanceFilters[{index}]");
            reject_weight(&field, entry)?;
            entry.resolve(&field)
        })
        .collect::<Result<Vec<_>, _>>()?;

    let ami_selector = match &extensions.ami_selector {
        Some(entry) => {
            let field = format!("{BASE}.amiSelector");
            reject_weight(&field, entry)?;
            entry.resolve(&field)?
        }
        None => ExtensionModule::builtin(BUILTIN_AVAILABLE_AMIS)
            .resolve(&format!("{BASE}.amiSelector"))?,
    };

    let default_scorers = [ExtensionModule::builtin(BUILTIN_FLEX_FIRST)];
    let scorers = extensions
        .priority_scorers
        .as_deref()
        .unwrap_or(&default_scorers);
    check_unique_names(&format!("{BASE}.priorityScorers"), scorers)?;
    let priority_scorers = scorers
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            let field = format!("{BASE}.priorityScorers[{index}]");
            let weight = entry.weight.unwrap_or(DEFAULT_SCORER_WEIGHT);
            if !(1..=100).contains(&weight) {
                return Err(ExtensionError::BadWeight {
                    field,
                    reason: "must be between 1 and 100",
                });
            }
            Ok(ResolvedScorer {
                module: entry.resolve(&field)?,
                weight,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;

    Ok(EffectiveExtensions {
        instance_filters,
        ami_selector,
        priority_scorers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn url_module(name: &str) -> ExtensionModule {
        ExtensionModule {
            url: Some("https://example.com/f.wasm".into()),
            sha256: Some(DIGEST.into()),
            builtin: None,
            ..ExtensionModule::builtin(name)
        }
    }

    #[test]
    fn absent_extensions_mean_builtin_defaults() {
        let effective = effective_extensions(None).unwrap();
        assert!(effective.instance_filters.is_empty());
        assert_eq!(
            effective.ami_selector.source,
            ModuleSource::Builtin(BUILTIN_AVAILABLE_AMIS.into())
        );
        assert_eq!(effective.priority_scorers.len(), 1);
        assert_eq!(
            effective.priority_scorers[0].module.source,
            ModuleSource::Builtin(BUILTIN_FLEX_FIRST.into())
        );
        assert_eq!(effective.priority_scorers[0].weight, 1);
        assert_eq!(effective.ami_selector.timeout, DEFAULT_TIMEOUT);
        assert_eq!(effective.ami_selector.failure_policy, FailurePolicy::Fail);
    }

    #[test]
    fn empty_scorer_list_means_none() {
        let extensions = Extensions {
            priority_scorers: Some(vec![]),
            ..Extensions::default()
        };
        let effective = effective_extensions(Some(&extensions)).unwrap();
        assert!(effective.priority_scorers.is_empty());
    }

    #[test]
    fn resolves_explicit_entries() {
        let mut scorer = url_module("cheap");
        scorer.weight = Some(5);
        scorer.timeout = Some("250ms".into());
        scorer.failure_policy = Some(FailurePolicy::Ignore);
        let extensions = Extensions {
            instance_filters: Some(vec![url_module("no-gpu")]),
            ami_selector: None,
            priority_scorers: Some(vec![scorer]),
        };
        let effective = effective_extensions(Some(&extensions)).unwrap();
        assert_eq!(
            effective.instance_filters[0].sha256.as_deref(),
            Some(DIGEST)
        );
        assert_eq!(effective.priority_scorers[0].weight, 5);
        assert_eq!(
            effective.priority_scorers[0].module.timeout,
            Duration::from_millis(250)
        );
        assert_eq!(
            effective.priority_scorers[0].module.failure_policy,
            FailurePolicy::Ignore
        );
    }

    #[test]
    fn rejects_bad_entries_naming_the_field() {
        let mut two_sources = url_module("x");
        two_sources.path = Some("/tmp/x.wasm".into());
        let err = two_sources
            .resolve("spec.extensions.amiSelector")
            .unwrap_err();
        assert!(err.to_string().starts_with("spec.extensions.amiSelector:"));
        assert!(matches!(err, ExtensionError::MultipleSources { .. }));

        let mut no_digest = url_module("x");
        no_digest.sha256 = None;
        let err = no_digest.resolve("f").unwrap_err();
        assert_eq!(err, ExtensionError::MissingSha256 { field: "f".into() });
        assert!(err.to_string().contains("f.sha256"));

        let mut upper = url_module("x");
        upper.sha256 = Some(DIGEST.to_uppercase());
        assert!(matches!(
            upper.resolve("f"),
            Err(ExtensionError::BadSha256 { .. })
        ));

        let mut http = url_module("x");
        http.url = Some("http://example.com/x.wasm".into());
        assert!(matches!(
            http.resolve("f"),
            Err(ExtensionError::NotHttps { .. })
        ));

        let mut builtin_digest = ExtensionModule::builtin("flex-first");
        builtin_digest.sha256 = Some(DIGEST.into());
        assert!(matches!(
            builtin_digest.resolve("f"),
            Err(ExtensionError::Sha256OnBuiltin { .. })
        ));

        let mut slow = ExtensionModule::builtin("flex-first");
        slow.timeout = Some("soon".into());
        assert!(matches!(
            slow.resolve("f"),
            Err(ExtensionError::BadTimeout { .. })
        ));

        let mut forever = ExtensionModule::builtin("flex-first");
        forever.timeout = Some("100000000000000h".into());
        let err = forever.resolve("f").unwrap_err();
        assert!(
            matches!(err, ExtensionError::TimeoutTooLong { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("f.timeout"), "{err}");
        let mut longest = ExtensionModule::builtin("flex-first");
        longest.timeout = Some(MAX_TIMEOUT_TEXT.into());
        assert_eq!(longest.resolve("f").unwrap().timeout, MAX_TIMEOUT);

        let duplicate = Extensions {
            instance_filters: Some(vec![url_module("a"), url_module("a")]),
            ..Extensions::default()
        };
        assert!(matches!(
            effective_extensions(Some(&duplicate)),
            Err(ExtensionError::DuplicateName { .. })
        ));

        let mut keys_on_url = url_module("a");
        keys_on_url.signature_keys = Some(SignatureKeysSource {
            name: "keys".into(),
            namespace: "nodewright".into(),
        });
        let err = keys_on_url.resolve("f").unwrap_err();
        assert_eq!(
            err,
            ExtensionError::SignatureKeysWithoutOci { field: "f".into() }
        );
        assert!(err.to_string().contains("f.signatureKeys"), "{err}");
        keys_on_url.url = None;
        keys_on_url.oci = Some("registry.example.com/filters/a:1".into());
        let resolved = keys_on_url.resolve("f").unwrap();
        let effective = EffectiveExtensions {
            instance_filters: vec![resolved],
            ..effective_extensions(None).unwrap()
        };
        assert_eq!(
            effective.config_map_references(),
            [("nodewright", "keys")],
            "the key ConfigMap is read with the class"
        );

        let mut weighted = url_module("a");
        weighted.weight = Some(2);
        let filter_with_weight = Extensions {
            instance_filters: Some(vec![weighted]),
            ..Extensions::default()
        };
        assert!(matches!(
            effective_extensions(Some(&filter_with_weight)),
            Err(ExtensionError::BadWeight { .. })
        ));
    }
}
