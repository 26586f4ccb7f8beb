//! `status.amis` and `AMIsReady`: the class's AMI lookups, then its AMI
//! selector over what they found (see `crate::aws::amis`).

use k8s_openapi::api::core::v1::ConfigMap;
use nodewright_filter::Ami;

use crate::apis::ec2nodeclass::AMIStatus;
use crate::apis::{Condition, EC2NodeClass};
use crate::aws::amis::{AmiError, amis_ready_condition, status_amis};
use crate::extensions::{AmiSelection, unix_now};

use super::super::{Context, ControllerError};
use super::conditions::Stamp;

/// What the AMI part of a pass decided.
pub struct AmiOutcome {
    /// `status.amis`.
    pub amis: Vec<AMIStatus>,
    /// `AMIsReady`.
    pub condition: Condition,
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
    let (selection, why) = match found {
        Ok(found) => {
            let (class, config_maps) = (class.clone(), config_maps.to_vec());
            let extensions = context.instance_types.extensions().clone();
            let region = context.region();
            let selection = tokio::task::spawn_blocking(move || {
                extensions.select_amis(&class, &region, found, &config_maps, now)
            })
            .await?;
            let why = selection.blocked.clone();
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
        amis,
        condition,
        selection,
    })
}
