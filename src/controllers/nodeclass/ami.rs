//! `status.amis` and `AMIsReady`: the class's AMI lookups, then its AMI
//! selector over what they found (see `crate::aws::amis`).

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nodewright_filter::Ami;

use crate::apis::conditions::EC2_NODE_CLASS_AMIS_READY;
use crate::apis::ec2nodeclass::AMIStatus;
use crate::apis::{Condition, ConditionStatus, EC2NodeClass};
use crate::aws::amis::{AmiError, status_amis};
use crate::extensions::{AmiSelection, run_blocking, unix_now};
use crate::scheduling::{Blocked, BlockedReason};

use super::super::{Context, ControllerError};
use super::conditions::{Resolved, Stamp};

/// What the AMI part of a pass decided.
pub struct AmiOutcome {
    /// `status.amis` and `AMIsReady`; `None` and `requeue_after` set when a
    /// lookup hit a fault worth waiting out, so the stored ones stand.
    pub resolved: Resolved<Vec<AMIStatus>>,
    /// The selector's run, for `ExtensionsReady` and events; `None` when
    /// discovery failed.
    pub selection: Option<AmiSelection>,
}

/// The images the class's terms find.
pub async fn discover(context: &Context, class: &EC2NodeClass) -> Result<Vec<Ami>, AmiError> {
    context
        .amis
        .discover(&class.spec, &context.kubernetes_version)
        .await
}

/// Runs the class's AMI selector over `found` (blocking work, off the
/// async threads) and decides `status.amis` and `AMIsReady`.
pub async fn select(
    context: &Context,
    class: &EC2NodeClass,
    found: Result<Vec<Ami>, AmiError>,
    config_maps: &[ConfigMap],
    stamp: &Stamp,
) -> Result<AmiOutcome, ControllerError> {
    let now = unix_now();
    let found = match found {
        Err(e) if e.is_transient() => {
            tracing::warn!(error = %e, "AMI lookup failed; keeping the stored AMIs");
            return Ok(AmiOutcome {
                resolved: Resolved::keep(),
                selection: None,
            });
        }
        found => found,
    };
    let (selection, why) = match found {
        Ok(found) => {
            let (class, config_maps) = (class.clone(), config_maps.to_vec());
            let extensions = context.instance_types.extensions().clone();
            let region = context.region();
            let bound = extensions.time_bound(&class, 1);
            let selection = run_blocking(
                bound,
                move || extensions.select_amis(&class, &region, found, &config_maps, now),
                |why| AmiSelection {
                    amis: Vec::new(),
                    report: None,
                    blocked: Some(Blocked::new(BlockedReason::ExtensionsTimedOut, why)),
                },
            )
            .await?;
            let why = selection.blocked.as_ref().map(ToString::to_string);
            (Some(selection), why)
        }
        Err(e) => (None, Some(format!("discovering AMIs: {e}"))),
    };
    let amis = selection
        .as_ref()
        .map(|s| status_amis(&s.amis, now))
        .unwrap_or_default();
    let condition =
        amis_ready_condition(&amis, why.as_deref(), stamp.generation, stamp.now.clone());
    Ok(AmiOutcome {
        resolved: Resolved::to(amis, condition),
        selection,
    })
}

/// `AMIsReady`: `True` when the selector left at least one image, else
/// `False` with reason `AMINotFound` and `why` (the discovery or selector
/// failure, or that nothing matched).
pub fn amis_ready_condition(
    amis: &[AMIStatus],
    why: Option<&str>,
    observed_generation: Option<i64>,
    now: Time,
) -> Condition {
    let (status, reason, message) = match (amis.is_empty(), why) {
        (false, _) => (
            ConditionStatus::True,
            "AMIsReady",
            format!("{} AMI(s) selected", amis.len()),
        ),
        (true, Some(why)) => (ConditionStatus::False, "AMINotFound", why.to_string()),
        (true, None) => (
            ConditionStatus::False,
            "AMINotFound",
            "no available AMI matches spec.amiSelectorTerms: check the terms, and that the images are in state available".to_string(),
        ),
    };
    Condition {
        type_: EC2_NODE_CLASS_AMIS_READY.to_string(),
        status,
        observed_generation,
        last_transition_time: now,
        reason: Some(reason.to_string()),
        message: Some(message),
    }
}

#[cfg(test)]
mod tests {
    use nodewright_filter::Architecture;

    use super::*;
    use crate::aws::amis::testing::ami;

    #[test]
    fn condition_is_false_with_the_reason_when_nothing_is_left() {
        let now = Time(Default::default());
        let none = amis_ready_condition(&[], Some("SSM said no"), Some(3), now.clone());
        assert_eq!(none.status, ConditionStatus::False);
        assert_eq!(none.message.as_deref(), Some("SSM said no"));
        let some = status_amis(&[ami("ami-1", Architecture::Amd64, "")], 0);
        let ready = amis_ready_condition(&some, None, Some(3), now);
        assert_eq!(ready.status, ConditionStatus::True);
        assert_eq!(ready.observed_generation, Some(3));
    }
}
