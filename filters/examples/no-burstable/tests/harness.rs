use nodewright_host::Role;
use nodewright_host::harness::{self, Harness, it};

#[test]
fn component_drops_burstable_types_and_listed_families() {
    let wasm = harness::build_component(env!("CARGO_MANIFEST_DIR")).unwrap();
    let out = Harness::load_file(Role::InstanceFilter, wasm)
        .unwrap()
        .with_config(r#"{"families": ["c5"]}"#)
        .filter(&[
            it("t3.large").burstable().build(),
            it("c5.large").build(),
            it("m7g.large").build(),
        ])
        .unwrap();
    out.assert_kept(&["m7g.large"]);
    out.assert_dropped_because("t3.large", "burstable");
    out.assert_dropped_because("c5.large", "excluded by config.families");
}

/// The call recorded on `examples/snapshot/cluster.yaml`'s NodePool
/// (`nodewright filter test … --snapshot examples/snapshot/cluster.yaml
/// --record fixtures`, trimmed to eight instance types) gets the recorded
/// answer.
#[test]
fn recorded_calls_get_the_recorded_answers() {
    let wasm = harness::build_component(env!("CARGO_MANIFEST_DIR")).unwrap();
    let replayed = Harness::load_file(Role::InstanceFilter, wasm)
        .unwrap()
        .assert_fixtures(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures"));
    assert_eq!(replayed, 1);
}
