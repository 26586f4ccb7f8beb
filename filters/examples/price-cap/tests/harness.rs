use nodewright_filter::CapacityType;
use nodewright_host::harness::{self, Harness, it};
use nodewright_host::{CallError, Role};

fn harness(config: &str) -> Harness {
    let wasm = harness::build_component(env!("CARGO_MANIFEST_DIR")).unwrap();
    Harness::load_file(Role::InstanceFilter, wasm)
        .unwrap()
        .with_config(config)
}

#[test]
fn drops_types_above_the_cap() {
    let out = harness(r#"{"maxHourlyPrice": 0.2}"#)
        .filter(&[
            it("m7g.large").price(0.0816).build(),
            it("m7i.4xlarge").price(0.8064).build(),
        ])
        .unwrap();
    out.assert_kept(&["m7g.large"]);
    out.assert_dropped_because("m7i.4xlarge", "above the cap of $0.2000/h");
}

#[test]
fn capacity_type_restricts_which_offerings_count() {
    let spot_cheap = it("c7i.2xlarge")
        .price(0.357)
        .offering("us-east-1b", CapacityType::Spot, 0.15, true)
        .build();
    let spot_gone = it("c7a.2xlarge")
        .price(0.41)
        .offering("us-east-1b", CapacityType::Spot, 0.12, false)
        .build();
    let out = harness(r#"{"maxHourlyPrice": 0.2, "capacityType": "spot"}"#)
        .filter(&[spot_cheap, spot_gone])
        .unwrap();
    out.assert_kept(&["c7i.2xlarge"]);
    out.assert_dropped_because("c7a.2xlarge", "no available offering");
}

#[test]
fn bad_config_is_an_error_naming_the_field() {
    let err = harness(r#"{"maxHourlyPrise": 1}"#)
        .filter(&[it("m7g.large").build()])
        .unwrap_err();
    assert!(
        matches!(&err, CallError::Rejected(m) if m.contains("maxHourlyPrise")),
        "{err}"
    );
    let err = harness(r#"{"maxHourlyPrice": -1}"#)
        .filter(&[it("m7g.large").build()])
        .unwrap_err();
    assert!(
        matches!(&err, CallError::Rejected(m) if m.contains("positive")),
        "{err}"
    );
}
