//! What `filter test` and `filter bench` call a component on: the embedded
//! catalog's instance types, a candidates file, the sample AMIs, or each
//! NodePool's instance types of a cluster snapshot with the NodePool and
//! its class as the call's context.

use std::path::Path;
use std::sync::Arc;

use nodewright_host::HostConfig;
use nodewright_host::sdk::{Ami, Context, InstanceTypeInfo};

use crate::aws::catalog::Catalog;
use crate::aws::instance_types::{InstanceTypeProvider, filter_records};
use crate::cli::CliError;
use crate::extensions::Extensions;
use crate::sim::Manifests;

/// The candidates of one run.
pub enum Candidates {
    /// Instance types (filters and scorers).
    Types(Vec<InstanceTypeInfo>),
    /// AMIs (selectors).
    Amis(Vec<Ami>),
}

/// One candidate set and the context its calls carry.
pub struct Workload {
    /// The NodePool (none for the catalog or the sample AMIs).
    pub node_pool: Option<String>,
    /// The context of each call.
    pub context: Context,
    /// The candidates.
    pub candidates: Candidates,
}

/// Each NodePool's instance types in the cluster snapshot or manifests at
/// `path` (`-`: standard input), resolved from its EC2NodeClass as the
/// controller resolves them before the class's extensions run, with the
/// NodePool and class as the calls' context.
pub fn snapshot_workloads(
    path: &Path,
    region: &str,
    config: &str,
    now: i64,
) -> Result<Vec<Workload>, CliError> {
    let manifests = Manifests::load(&[path.to_path_buf()])?;
    let catalog = Arc::new(Catalog::embedded(region)?);
    let extensions = Arc::new(Extensions::new(HostConfig::default())?);
    let provider = InstanceTypeProvider::new(catalog.clone(), extensions, Arc::default());
    let mut workloads = Vec::new();
    for pool in &manifests.node_pools {
        let pool_name = pool.metadata.name.clone().unwrap_or_default();
        let class_name = &pool.spec.template.spec.node_class_ref.name;
        let Some(class) = manifests
            .node_classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(class_name.as_str()))
        else {
            return Err(format!(
                "--snapshot: NodePool {pool_name:?} names EC2NodeClass {class_name:?}, which the snapshot does not hold; include it (kubectl get ec2nodeclasses -o yaml)"
            )
            .into());
        };
        let types = provider.resolve(class).map_err(|e| {
            format!("--snapshot: EC2NodeClass {class_name:?} cannot be resolved: {e}")
        })?;
        let set = filter_records(&catalog, &types);
        workloads.push(Workload {
            node_pool: Some(pool_name.clone()),
            context: Context {
                node_pool: pool_name,
                node_class: class_name.clone(),
                region: region.to_string(),
                config: config.to_string(),
                now,
            },
            candidates: Candidates::Types(set.views().iter().map(|t| t.to_info()).collect()),
        });
    }
    if workloads.is_empty() {
        return Err(
            "--snapshot: no NodePool in it; pass kubectl get nodepools,ec2nodeclasses -o yaml"
                .into(),
        );
    }
    Ok(workloads)
}
