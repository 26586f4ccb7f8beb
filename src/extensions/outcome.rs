//! What a NodeClass's extensions did: one report per module, and the events
//! built from them. The texts about modules shown on the class (event notes,
//! and the parts the EC2NodeClass controller joins into `ExtensionsReady`)
//! are written here from the reports' data.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use nodewright_host::Role;
use serde::Serialize;

use crate::apis::FailurePolicy;
use crate::apis::extensions::ExtensionMode;
use crate::scheduling::{Blocked, InstanceType, LaunchRank, launch_order};

/// How many names a shadow summary quotes.
const EXAMPLES: usize = 3;

/// How a shadow module would have changed an order: the first options of
/// the order used and of the order with the module, and how many
/// candidates would move.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reorder {
    /// The first options as enforced.
    pub enforced: Vec<String>,
    /// The first options had the shadow module been enforced.
    pub shadow: Vec<String>,
    /// Candidates whose position would change.
    pub moved: usize,
    /// Candidates ordered.
    pub total: usize,
}

impl Reorder {
    /// How many options [`Reorder::enforced`] and [`Reorder::shadow`] keep.
    pub const SHOWN: usize = 5;

    /// Compares two orders of the same candidates (names, best first).
    pub fn between(enforced: &[String], shadow: &[String]) -> Reorder {
        let moved = enforced.iter().zip(shadow).filter(|(a, b)| a != b).count();
        Reorder {
            enforced: enforced.iter().take(Self::SHOWN).cloned().collect(),
            shadow: shadow.iter().take(Self::SHOWN).cloned().collect(),
            moved,
            total: enforced.len(),
        }
    }
}

/// Instance type names in [`launch_order`]: higher score first, then the
/// cheapest available offering, then by name.
pub fn try_order(types: &[InstanceType], scores: &dyn Fn(&str) -> i64) -> Vec<String> {
    let mut ranked: Vec<LaunchRank> = types
        .iter()
        .map(|it| {
            let price = it
                .offerings
                .iter()
                .filter(|o| o.available)
                .map(|o| o.price)
                .min_by(f64::total_cmp)
                .unwrap_or(f64::INFINITY);
            (scores(&it.name), price, it.name.as_str())
        })
        .collect();
    ranked.sort_by(|a, b| launch_order(*a, *b));
    ranked
        .into_iter()
        .map(|(_, _, name)| name.to_string())
        .collect()
}

/// What one module did in one evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct ModuleReport {
    /// The entry's `name`.
    pub name: String,
    /// `instance-filter`, `priority-scorer` or `ami-selector`.
    pub role: Role,
    /// Where the module came from (`builtin:flex-first`, a path, a ConfigMap key…).
    pub source: String,
    /// `Enforce`: its answer was used; `Shadow`: reported only.
    pub mode: ExtensionMode,
    /// Instance types an instance filter dropped, or images an AMI selector
    /// left out, with the reason for each (in shadow mode: would have).
    pub dropped: Vec<(String, String)>,
    /// A shadow scorer's or selector's order against the one used.
    pub reorder: Option<Reorder>,
    /// The failure, if the module could not be loaded or called.
    pub error: Option<String>,
    /// What a failure does: `Fail` blocks the NodeClass, `Ignore` skips the
    /// module (a shadow module is always skipped).
    pub failure_policy: FailurePolicy,
    /// Why the module's answer changed nothing although it ran (another
    /// module blocked the class).
    pub no_effect: Option<String>,
}

impl ModuleReport {
    /// A report before the module ran.
    pub fn new(
        name: &str,
        role: Role,
        source: String,
        mode: ExtensionMode,
        failure_policy: FailurePolicy,
    ) -> Self {
        ModuleReport {
            name: name.to_string(),
            role,
            source,
            mode,
            dropped: Vec::new(),
            reorder: None,
            error: None,
            failure_policy,
            no_effect: None,
        }
    }

    /// Whether its failure blocks the NodeClass.
    pub fn blocks_on_failure(&self) -> bool {
        self.mode == ExtensionMode::Enforce && self.failure_policy == FailurePolicy::Fail
    }

    /// It failed without blocking: skipped (`Ignore`) or a shadow module.
    pub fn skipped(&self) -> Option<String> {
        let error = self.error.as_ref()?;
        if self.blocks_on_failure() {
            return None;
        }
        Some(match self.mode {
            ExtensionMode::Shadow => format!("shadow module failed (not enforced): {error}"),
            ExtensionMode::Enforce => format!("skipped with failurePolicy Ignore: {error}"),
        })
    }

    /// What a shadow module that ran would have changed, in one sentence;
    /// `None` for enforced modules and failures.
    pub fn shadow_summary(&self) -> Option<String> {
        if self.mode != ExtensionMode::Shadow || self.error.is_some() || self.no_effect.is_some() {
            return None;
        }
        let head = format!("shadow {} {}", self.role, self.name);
        let text = match self.role {
            Role::InstanceFilter if self.dropped.is_empty() => {
                format!("{head} would drop no instance type")
            }
            Role::InstanceFilter => {
                let groups = drops_by_reason(&self.dropped);
                let examples: Vec<String> = groups
                    .iter()
                    .take(EXAMPLES)
                    .map(|(reason, names)| format!("{} ({reason})", names[0]))
                    .collect();
                format!(
                    "{head} would drop {} instance types, e.g. {}",
                    self.dropped.len(),
                    examples.join("; ")
                )
            }
            Role::PriorityScorer | Role::AmiSelector => match &self.reorder {
                Some(r) if r.moved == 0 => format!("{head} would keep the order"),
                Some(r) => format!(
                    "{head} would move {} of {}: first {} instead of {}",
                    r.moved,
                    r.total,
                    r.shadow.join(", "),
                    r.enforced.join(", ")
                ),
                None => format!("{head} ran"),
            },
        };
        Some(text)
    }
}

/// Instance types after a NodeClass's extensions ran, plus what each module did.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The instance types the filters kept; shared with the resolved list
    /// when no filter dropped any.
    pub instance_types: Arc<Vec<InstanceType>>,
    /// Weighted sum of scorer scores per instance type; `None` without scorers.
    pub priority_scores: Option<Arc<HashMap<String, i32>>>,
    /// One report per module, in evaluation order.
    pub reports: Vec<ModuleReport>,
    /// Set when a `failurePolicy: Fail` module failed or the extensions are
    /// invalid: the NodeClass may not launch.
    pub blocked: Option<Blocked>,
}

/// An event about a class's extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionEvent {
    /// Warning (a module failed) or Normal.
    pub warning: bool,
    /// The event's reason.
    pub reason: &'static str,
    /// The note.
    pub note: String,
}

impl Outcome {
    /// Events for this outcome: `ExtensionModuleFailed` for the module that
    /// blocks the class, `ExtensionModuleSkipped` per module that failed
    /// without blocking, `ExtensionShadowResult` per shadow module that ran.
    pub fn events(&self) -> Vec<ExtensionEvent> {
        let mut events = Vec::new();
        if let Some(blocked) = &self.blocked {
            events.push(ExtensionEvent {
                warning: true,
                reason: "ExtensionModuleFailed",
                note: blocked.to_string(),
            });
        }
        for report in &self.reports {
            if let Some(note) = report.skipped() {
                events.push(ExtensionEvent {
                    warning: true,
                    reason: "ExtensionModuleSkipped",
                    note,
                });
            }
            if let Some(note) = report.shadow_summary() {
                events.push(ExtensionEvent {
                    warning: false,
                    reason: "ExtensionShadowResult",
                    note,
                });
            }
        }
        events
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

#[cfg(test)]
mod tests {
    use super::*;

    fn report(mode: ExtensionMode, policy: FailurePolicy) -> ModuleReport {
        ModuleReport::new("m", Role::InstanceFilter, "x".into(), mode, policy)
    }

    #[test]
    fn shadow_failures_never_block_and_read_as_skipped() {
        let mut shadow = report(ExtensionMode::Shadow, FailurePolicy::Fail);
        shadow.error = Some("boom".into());
        assert!(!shadow.blocks_on_failure());
        assert_eq!(
            shadow.skipped().as_deref(),
            Some("shadow module failed (not enforced): boom")
        );
        assert!(shadow.shadow_summary().is_none());
        let mut enforced = report(ExtensionMode::Enforce, FailurePolicy::Fail);
        enforced.error = Some("boom".into());
        assert!(enforced.blocks_on_failure());
        assert!(enforced.skipped().is_none());
    }

    #[test]
    fn reorder_counts_moved_candidates() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let r = Reorder::between(&names(&["a", "b", "c"]), &names(&["b", "a", "c"]));
        assert_eq!(r.moved, 2);
        assert_eq!(r.total, 3);
        assert_eq!(r.shadow, names(&["b", "a", "c"]));
    }
}
