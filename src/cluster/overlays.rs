//! NodeOverlays evaluated against a cluster's NodePools: each pool's
//! instance types before overlays (its EC2NodeClass through the
//! instance-type provider, as the scheduler gets them), then the pure
//! evaluation of [`crate::scheduling::overlay`]. The result is set on the
//! provider, which applies it to everything it serves afterwards.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::ClusterSnapshot;
use super::pools::SharedConfigMaps;
use crate::apis::NodeOverlay;
use crate::aws::instance_types::InstanceTypeProvider;
use crate::scheduling::InstanceType;
use crate::scheduling::overlay::{Overlays, PoolTypes};

/// A NodePool's name, template labels and instance types before overlays.
type PoolOwned = (String, BTreeMap<String, String>, Arc<Vec<InstanceType>>);

/// Evaluates `overlays` against every NodePool of `snapshot` whose
/// EC2NodeClass resolves (a pool whose class is missing or broken is left
/// out, as Karpenter leaves out a pool whose instance types cannot be
/// listed; it has no instance types to overlay).
pub fn evaluate_overlays(
    snapshot: &ClusterSnapshot,
    overlays: &[&NodeOverlay],
    instance_types: &InstanceTypeProvider,
) -> Overlays {
    let config_maps = SharedConfigMaps(&snapshot.config_maps);
    let mut pools: Vec<PoolOwned> = Vec::new();
    for pool in &snapshot.node_pools {
        let reference = &pool.spec.template.spec.node_class_ref;
        if reference.group != "karpenter.k8s.aws" || reference.kind != "EC2NodeClass" {
            continue;
        }
        let Some(class) = snapshot
            .node_classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(reference.name.as_str()))
        else {
            continue;
        };
        let name = pool.metadata.name.clone().unwrap_or_default();
        let Ok(outcome) = instance_types.without_overlays(class, &name, &config_maps) else {
            continue;
        };
        let labels = pool
            .spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        pools.push((name, labels, outcome.instance_types.clone()));
    }
    let views: Vec<PoolTypes<'_>> = pools
        .iter()
        .map(|(pool, labels, types)| PoolTypes {
            pool,
            labels,
            types,
        })
        .collect();
    Overlays::evaluate(overlays, &views)
}
