//! `ExtensionsReady`: runs the class's instance filters and priority
//! scorers for every NodePool that uses it (once for no pool while none
//! does, so a broken module shows up before a NodePool does), and reports
//! which module failed and why, together with the AMI selector's run.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nodewright_host::text::{self, Keep};

use crate::apis::conditions::EC2_NODE_CLASS_EXTENSIONS_READY;
use crate::apis::{Condition, ConditionStatus, EC2NodeClass};
use crate::aws::instance_types::InstanceTypeProvider;
use crate::extensions::{AmiSelection, ConfigMapSource, ModuleReport, Outcome, run_blocking};
use crate::scheduling::{Blocked, BlockedReason};

use super::super::{Context, ControllerError};
use super::conditions::Stamp;

/// Longest `ExtensionsReady` message: the CRD's `maxLength` for condition
/// messages (bytes, which is never fewer than characters).
pub const MAX_CONDITION_MESSAGE: usize = 32_768;

/// How a class whose instance types cannot be resolved is reported.
const UNRESOLVABLE: &str = "cannot resolve instance types";

/// What the extension part of a pass found.
pub struct ExtensionOutcomes {
    /// One outcome per NodePool (or one for no pool).
    pub outcomes: Vec<Arc<Outcome>>,
    /// The class's settings cannot be resolved into instance types at all.
    pub unresolvable: bool,
}

/// Runs the class's filters and scorers for each of `pools` (blocking work,
/// off the async threads).
pub async fn run(
    context: &Context,
    class: &EC2NodeClass,
    pools: Vec<String>,
    config_maps: &[ConfigMap],
) -> Result<ExtensionOutcomes, ControllerError> {
    let bound = context
        .instance_types
        .extensions()
        .time_bound(class, pools.len());
    let (class, config_maps) = (class.clone(), config_maps.to_vec());
    let provider = context.instance_types.clone();
    let (outcomes, unresolvable) = run_blocking(
        bound,
        move || instance_type_outcomes(&class, &pools, &provider, &config_maps),
        |why| {
            let blocked = Outcome {
                blocked: Some(Blocked::new(BlockedReason::ExtensionsTimedOut, why)),
                ..Outcome::default()
            };
            (vec![Arc::new(blocked)], false)
        },
    )
    .await?;
    Ok(ExtensionOutcomes {
        outcomes,
        unresolvable,
    })
}

fn instance_type_outcomes(
    class: &EC2NodeClass,
    pools: &[String],
    provider: &InstanceTypeProvider,
    config_maps: &dyn ConfigMapSource,
) -> (Vec<Arc<Outcome>>, bool) {
    let no_pool = [String::new()];
    let pools = if pools.is_empty() {
        &no_pool[..]
    } else {
        pools
    };
    let mut outcomes = Vec::with_capacity(pools.len());
    for pool in pools {
        match provider.for_pool(class, pool, config_maps) {
            Ok(outcome) => outcomes.push(outcome),
            Err(e) => {
                let blocked = Outcome {
                    blocked: Some(Blocked::new(
                        BlockedReason::NodeClassNotResolvable,
                        format!("{UNRESOLVABLE}: {e}"),
                    )),
                    ..Outcome::default()
                };
                return (vec![Arc::new(blocked)], true);
            }
        }
    }
    (outcomes, false)
}

/// `ExtensionsReady` from the filters' and scorers' outcomes and the AMI
/// selector's run.
pub fn condition(
    class: &EC2NodeClass,
    found: &ExtensionOutcomes,
    selection: Option<&AmiSelection>,
    stamp: &Stamp,
) -> Condition {
    let mut condition = extensions_ready(
        &combined(&found.outcomes, selection),
        stamp.generation,
        stamp.now.clone(),
    );
    // A blocked class whose modules never ran says why in the reason too.
    if class.spec.effective_extensions().is_err() {
        condition.reason = Some("InvalidExtensions".to_string());
    } else if found.unresolvable {
        condition.reason = Some("InvalidNodeClass".to_string());
    }
    condition
}

/// The `ExtensionsReady` condition `outcome` sets on its EC2NodeClass:
/// `False` (reason `ModuleFailed`) when a `failurePolicy: Fail` module
/// failed, naming the module and the error; `True` otherwise, with reason
/// `ModulesSkipped` listing `Ignore` and shadow modules that failed. What
/// shadow modules would have changed follows. The message is at most
/// [`MAX_CONDITION_MESSAGE`] bytes.
pub fn extensions_ready(
    outcome: &Outcome,
    observed_generation: Option<i64>,
    now: Time,
) -> Condition {
    let skipped: Vec<String> = outcome
        .reports
        .iter()
        .filter_map(ModuleReport::skipped)
        .collect();
    let (status, reason, mut parts) = match (&outcome.blocked, skipped.is_empty()) {
        (Some(blocked), _) => (
            ConditionStatus::False,
            "ModuleFailed",
            vec![blocked.to_string()],
        ),
        (None, true) => (
            ConditionStatus::True,
            "Ready",
            vec!["all extension modules ran".to_string()],
        ),
        (None, false) => (ConditionStatus::True, "ModulesSkipped", skipped),
    };
    parts.extend(
        outcome
            .reports
            .iter()
            .filter_map(ModuleReport::shadow_summary),
    );
    Condition {
        type_: EC2_NODE_CLASS_EXTENSIONS_READY.to_string(),
        status,
        observed_generation,
        last_transition_time: now,
        reason: Some(reason.to_string()),
        message: Some(text::one_line(
            &parts.join("; "),
            MAX_CONDITION_MESSAGE - 64,
            Keep::Head,
        )),
    }
}

/// One outcome for the condition: the first block, and every module report
/// once (a module fails the same way for every NodePool).
pub fn combined(outcomes: &[Arc<Outcome>], selection: Option<&AmiSelection>) -> Outcome {
    let mut reports: Vec<ModuleReport> = Vec::new();
    let all = outcomes
        .iter()
        .flat_map(|o| o.reports.iter())
        .chain(selection.and_then(|s| s.report.as_ref()));
    for report in all {
        let seen = reports
            .iter()
            .any(|r| r.name == report.name && r.role == report.role && r.error == report.error);
        if !seen {
            reports.push(report.clone());
        }
    }
    let blocked = outcomes
        .iter()
        .find_map(|o| o.blocked.clone())
        .or_else(|| selection.and_then(|s| s.blocked.clone()));
    Outcome {
        reports,
        blocked,
        ..Outcome::default()
    }
}

#[cfg(test)]
mod tests {
    use nodewright_host::Role;

    use super::*;
    use crate::apis::FailurePolicy;
    use crate::apis::extensions::ExtensionMode;

    fn report(mode: ExtensionMode, policy: FailurePolicy) -> ModuleReport {
        ModuleReport::new("m", Role::InstanceFilter, "x".into(), mode, policy)
    }

    #[test]
    fn condition_message_is_bounded() {
        let mut outcome = Outcome::default();
        for i in 0..50 {
            let mut r = report(ExtensionMode::Enforce, FailurePolicy::Ignore);
            r.name = format!("m{i}");
            r.error = Some("e".repeat(2000));
            outcome.reports.push(r);
        }
        let condition = extensions_ready(&outcome, None, Time(Default::default()));
        let message = condition.message.unwrap();
        assert!(message.len() <= MAX_CONDITION_MESSAGE, "{}", message.len());
        assert!(message.contains("more bytes)"), "cut without a marker");
    }
}
