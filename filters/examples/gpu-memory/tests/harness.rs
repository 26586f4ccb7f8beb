use nodewright_host::Role;
use nodewright_host::harness::{self, Harness, it};

#[test]
fn keeps_gpus_with_enough_memory_each() {
    let wasm = harness::build_component(env!("CARGO_MANIFEST_DIR")).unwrap();
    let h = Harness::load_file(Role::InstanceFilter, wasm)
        .unwrap()
        .with_config(r#"{"minGpuMemoryGiB": 24}"#);
    let out = h
        .filter(&[
            it("g4dn.xlarge").gpu("t4", "nvidia", 1, 16).build(),
            it("g5.xlarge").gpu("a10g", "nvidia", 1, 24).build(),
            it("p4d.24xlarge").gpu("a100", "nvidia", 8, 40).build(),
            it("m7i.large").build(),
        ])
        .unwrap();
    out.assert_kept(&["g5.xlarge", "p4d.24xlarge"]);
    out.assert_dropped_because("g4dn.xlarge", "16 GiB per GPU, needs 24 GiB");
    out.assert_dropped_because("m7i.large", "no GPU");
}

#[test]
fn missing_config_is_an_error() {
    let wasm = harness::build_component(env!("CARGO_MANIFEST_DIR")).unwrap();
    let h = Harness::load_file(Role::InstanceFilter, wasm).unwrap();
    let err = h.filter(&[it("g5.xlarge").build()]).unwrap_err();
    assert!(err.to_string().contains("minGpuMemoryGiB"), "{err}");
}
