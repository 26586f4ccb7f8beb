//! Helpers more than one area's tests use.

use std::sync::Arc;

use nodewright::aws::instance_types::InstanceTypeProvider;
use nodewright::sim::{Manifests, Plan};
use nodewright::{aws::catalog::Catalog, extensions::Extensions};
use nodewright_host::HostConfig;

/// Plans one YAML document stream as `simulate` would, with the us-east-1
/// catalog and default extension settings.
pub fn plan_yaml(yaml: &str) -> Plan {
    let mut manifests = Manifests::default();
    manifests.add_yaml("test.yaml", yaml).unwrap();
    let catalog = Arc::new(Catalog::embedded("us-east-1").unwrap());
    let extensions = Arc::new(Extensions::new(HostConfig::default()).unwrap());
    let provider = InstanceTypeProvider::new(catalog, extensions, Arc::default());
    nodewright::sim::plan(manifests, &provider, false).unwrap()
}
