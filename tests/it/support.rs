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

/// A `kubectl` command: `NODEWRIGHT_KUBECTL` when set (scripts/test sets it
/// to the kubectl built with the control plane when the PATH has none),
/// else `kubectl` on the PATH. The tests that drive kubectl cannot run
/// without it, so a machine with neither fails the test and says how to
/// get one; it never passes by skipping.
pub fn kubectl() -> std::process::Command {
    static PROGRAM: std::sync::OnceLock<std::ffi::OsString> = std::sync::OnceLock::new();
    let program = PROGRAM.get_or_init(|| {
        let program = std::env::var_os("NODEWRIGHT_KUBECTL").unwrap_or_else(|| "kubectl".into());
        let runs = std::process::Command::new(&program)
            .args(["version", "--client"])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            runs,
            "kubectl ({}) does not run: run scripts/test, which builds one with the control plane, \
             or put kubectl 1.32 or later on the PATH, or set NODEWRIGHT_KUBECTL",
            program.to_string_lossy()
        );
        program
    });
    std::process::Command::new(program)
}
