use nodewright_host::Role;
use nodewright_host::harness::{self, Harness, it};

#[test]
fn graviton_then_intel_then_amd_with_price_breaking_ties() {
    let wasm = harness::build_component(env!("CARGO_MANIFEST_DIR")).unwrap();
    let h = Harness::load_file(Role::PriorityScorer, wasm).unwrap();
    let out = h
        .score(&[
            it("m7a.large").price(0.1159).build(),
            it("m7i.large").price(0.1008).build(),
            it("m7g.large").price(0.0816).build(),
            it("c7g.large").price(0.0725).build(),
            it("m6i.large").price(0.096).build(),
        ])
        .unwrap();
    out.assert_order(&[
        "c7g.large",
        "m7g.large",
        "m6i.large",
        "m7i.large",
        "m7a.large",
    ]);
    assert_eq!(out.score_of("m7g.large"), Some(30));
}
