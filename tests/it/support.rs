//! Helpers more than one area's tests use.

use nodewright::sim::{Manifests, Plan};
use nodewright::{aws::catalog::Catalog, extensions::Extensions};
use nodewright_host::HostConfig;

/// Plans one YAML document stream as `simulate` would, with the us-east-1
/// catalog and default extension settings.
pub fn plan_yaml(yaml: &str) -> Plan {
    let mut manifests = Manifests::default();
    manifests.add_yaml("test.yaml", yaml).unwrap();
    let catalog = Catalog::embedded("us-east-1").unwrap();
    let extensions = Extensions::new(HostConfig::default()).unwrap();
    nodewright::sim::plan(&manifests, &catalog, &extensions, false).unwrap()
}
