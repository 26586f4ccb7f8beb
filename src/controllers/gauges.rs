//! Keeps state gauges current every 30 seconds: the cluster state's
//! (`karpenter_cluster_state_synced`, `karpenter_cluster_state_node_count`)
//! and each offering's availability and price for every NodePool's instance
//! types (`karpenter_cloudprovider_instance_type_offering_available` and
//! `…_price_estimate`), so capacity errors and price changes show on a
//! dashboard.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;

use crate::aws::instance_types::InstanceTypeProvider;
use crate::cluster::ClusterState;
use crate::metrics::{labels, metrics};

/// How often the gauges are refreshed.
pub const PERIOD: Duration = Duration::from_secs(30);

/// Refreshes the gauges until the process ends.
pub async fn run(state: Arc<ClusterState>, instance_types: Arc<InstanceTypeProvider>) {
    let m = metrics();
    m.cluster_state_synced.get_or_create(&Vec::new()).set(0.0);
    state.synced().await;
    loop {
        m.cluster_state_synced.get_or_create(&Vec::new()).set(1.0);
        refresh(&state, &instance_types).await;
        tokio::time::sleep(PERIOD).await;
    }
}

/// One refresh.
pub async fn refresh(state: &Arc<ClusterState>, instance_types: &Arc<InstanceTypeProvider>) {
    let m = metrics();
    m.cluster_state_node_count
        .get_or_create(&Vec::new())
        .set(state.nodes.all().len() as f64);
    let pools: Vec<(String, String)> = state
        .node_pools
        .all()
        .iter()
        .map(|p| {
            (
                p.name_any(),
                p.spec.template.spec.node_class_ref.name.clone(),
            )
        })
        .collect();
    let (state, provider) = (state.clone(), instance_types.clone());
    // Resolving may run Wasm modules: off the async threads.
    let done = tokio::task::spawn_blocking(move || {
        for (pool, class_name) in pools {
            let Some(class) = state.node_class_context(&class_name) else {
                continue;
            };
            let Ok(outcome) = provider.for_pool(&class.class, &pool, class.config_maps.as_ref())
            else {
                continue;
            };
            for it in outcome.instance_types.iter() {
                for offering in &it.offerings {
                    let key = labels(&[
                        ("instance_type", &it.name),
                        ("capacity_type", offering.capacity_type.label_value()),
                        ("zone", &offering.zone),
                    ]);
                    m.offering_available
                        .get_or_create(&key)
                        .set(if offering.available { 1.0 } else { 0.0 });
                    m.offering_price.get_or_create(&key).set(offering.price);
                }
            }
        }
    })
    .await;
    if let Err(error) = done {
        tracing::warn!(%error, "offering gauges task failed");
    }
}
