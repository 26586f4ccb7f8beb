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
