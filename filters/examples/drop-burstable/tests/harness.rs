use nodewright_host::Role;
use nodewright_host::harness::{self, Harness, it};

fn harness() -> Harness {
    let wasm = harness::build_component(env!("CARGO_MANIFEST_DIR")).unwrap();
    Harness::load_file(Role::InstanceFilter, wasm).unwrap()
}

#[test]
fn drops_burstable_and_previous_generation() {
    let out = harness()
        .filter(&[
            it("t3.large").burstable().build(),
            it("t4g.medium").burstable().build(),
            it("m4.large").previous_generation().build(),
            it("m7g.large").build(),
            it("c7i-flex.xlarge").build(),
        ])
        .unwrap();
    out.assert_kept(&["m7g.large", "c7i-flex.xlarge"]);
    out.assert_dropped_because("t3.large", "burstable");
    out.assert_dropped_because("m4.large", "previous-generation");
}

#[test]
fn native_build_agrees() {
    use nodewright_filter::{Context, InstanceFilter, InstanceTypes, Verdict};
    let types = [it("t3.large").burstable().build(), it("m7g.large").build()];
    let table = InstanceTypes::from_infos(&types);
    let verdicts = nodewright_example_drop_burstable::DropBurstable
        .filter(&Context::default(), &table.views())
        .unwrap();
    assert!(matches!(verdicts[0], Verdict::Drop(_)));
    assert_eq!(verdicts[1], Verdict::Keep);
}
