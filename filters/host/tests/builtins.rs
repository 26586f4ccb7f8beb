//! The built-ins linked natively and the same crates built as components
//! give the same answers on the real catalog.

mod support {
    pub mod catalog;
}

use std::path::PathBuf;

use nodewright_filter::{AmiState, Architecture, Context};
use nodewright_host::harness::{self, ami};
use nodewright_host::{Host, HostConfig, InstanceTypeSet, Limits, ModuleRef, Role, sha256_hex};

fn relaxed() -> Limits {
    Limits {
        timeout: std::time::Duration::from_secs(10),
        ..Limits::default()
    }
}

fn component(crate_dir: &str) -> (ModuleRef, String) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crate_dir);
    let path = harness::build_component(&dir).unwrap();
    let pin = sha256_hex(&std::fs::read(&path).unwrap());
    (ModuleRef::Path(path), pin)
}

#[test]
fn flex_first_native_and_component_agree_on_the_catalog() {
    let host = Host::new(HostConfig::default()).unwrap();
    let types = InstanceTypeSet::new(support::catalog::us_east_1());
    assert!(types.len() > 700, "catalog has {} types", types.len());
    let native = host
        .load(
            Role::PriorityScorer,
            &ModuleRef::parse("builtin:flex-first"),
            None,
        )
        .unwrap();
    let (source, pin) = component("flex-first");
    // Equality is tested here, not the deadline: an unoptimised test build
    // on a busy machine may need more than the production 100 ms.
    let wasm = host
        .load(Role::PriorityScorer, &source, Some(&pin))
        .unwrap()
        .with_limits(relaxed());
    let ctx = Context {
        region: "us-east-1".to_string(),
        config: "{}".to_string(),
        ..Context::default()
    };
    let from_native = native.score(&ctx, &types).unwrap();
    let from_wasm = wasm.score(&ctx, &types).unwrap();
    assert_eq!(from_native, from_wasm);
    let flex: Vec<&str> = types
        .views()
        .iter()
        .zip(&from_native)
        .filter(|(_, s)| **s > 0)
        .map(|(t, _)| t.name())
        .collect();
    assert!(flex.contains(&"m7i-flex.large"), "{flex:?}");
    assert!(
        flex.iter()
            .all(|n| n.split('.').next().unwrap().ends_with("-flex")),
        "{flex:?}"
    );
}

#[test]
fn available_amis_native_and_component_agree() {
    let host = Host::new(HostConfig::default()).unwrap();
    let native = host
        .load(
            Role::AmiSelector,
            &ModuleRef::parse("builtin:available-amis"),
            None,
        )
        .unwrap();
    let (source, pin) = component("available-amis");
    let wasm = host
        .load(Role::AmiSelector, &source, Some(&pin))
        .unwrap()
        .with_limits(relaxed());
    let now = 1_800_000_000;
    let amis = vec![
        ami("ami-arm-old", now - 900)
            .arch(Architecture::Arm64)
            .build(),
        ami("ami-pending-newest", now - 10)
            .state(AmiState::Pending)
            .build(),
        ami("ami-amd-new", now - 100).build(),
        ami("ami-amd-deprecated", now - 50)
            .deprecated_at(now - 1)
            .build(),
        ami("ami-nvidia", now - 300).variant("nvidia").build(),
        ami("ami-failed", now - 20).state(AmiState::Failed).build(),
        ami("ami-arm-new", now - 200)
            .arch(Architecture::Arm64)
            .build(),
    ];
    let ctx = Context {
        now,
        ..Context::default()
    };
    let from_native = native.select(&ctx, &amis).unwrap();
    let from_wasm = wasm.select(&ctx, &amis).unwrap();
    assert_eq!(from_native, from_wasm);
    let ids: Vec<&str> = from_native
        .iter()
        .map(|&i| amis[i as usize].id.as_str())
        .collect();
    assert_eq!(
        ids,
        [
            "ami-amd-new",
            "ami-arm-new",
            "ami-nvidia",
            "ami-arm-old",
            "ami-amd-deprecated"
        ]
    );
}
