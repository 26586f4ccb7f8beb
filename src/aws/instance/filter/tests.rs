//! Karpenter's `instance/filter` cases that apply after `launch_options`.

use super::*;
use crate::scheduling::{InstanceType, Overhead, Requirement, Requirements, Resources};

fn option(name: &str, offerings: Vec<Offering>) -> LaunchOption {
    let size = name.split_once('.').map_or("", |(_, s)| s);
    let mut requirements = Requirements::new();
    requirements.add(Requirement::single(INSTANCE_SIZE_LABEL_KEY, size));
    let mut capacity = Resources::cpu_memory(4000, 16 << 30);
    if name.starts_with('g') {
        capacity = capacity.with_extended("nvidia.com/gpu", 1);
    }
    LaunchOption {
        instance_type: InstanceType::new(
            name,
            requirements,
            offerings.clone(),
            capacity,
            Overhead::default(),
        ),
        offerings,
        score: None,
    }
}

fn od(zone: &str, price: f64) -> Offering {
    Offering::new(zone, CapacityType::OnDemand, price)
}

fn spot(zone: &str, price: f64) -> Offering {
    Offering::new(zone, CapacityType::Spot, price)
}

fn reserved(zone: &str, price: f64, id: &str, capacity: u32) -> Offering {
    Offering::reserved(zone, price, id, capacity)
}

fn context(reservations: &[(&str, ReservationKind)]) -> FilterContext {
    FilterContext {
        has_min_values: false,
        reservations: reservations
            .iter()
            .map(|(id, kind)| (id.to_string(), *kind))
            .collect(),
    }
}

fn kept(options: &[LaunchOption]) -> Vec<&str> {
    options
        .iter()
        .map(|o| o.instance_type.name.as_str())
        .collect()
}

#[test]
fn a_reserved_launch_keeps_only_the_cheapest_reservation_kind() {
    for (cheap_kind, dear_kind) in [
        (ReservationKind::Default, ReservationKind::CapacityBlock),
        (
            ReservationKind::CapacityBlock,
            ReservationKind::Interruptible,
        ),
        (ReservationKind::Interruptible, ReservationKind::Default),
    ] {
        let ctx = context(&[("cr-cheap", cheap_kind), ("cr-dear", dear_kind)]);
        let options = vec![
            option(
                "m5.large",
                vec![reserved("a", 0.01, "cr-cheap", 1), od("a", 0.1)],
            ),
            option("m5.xlarge", vec![reserved("a", 0.02, "cr-dear", 1)]),
        ];
        let (out, dropped) = capacity_reservation_type(options, &ctx);
        assert_eq!(
            kept(&out),
            ["m5.large"],
            "{cheap_kind:?} over {dear_kind:?}"
        );
        assert_eq!(dropped, ["m5.xlarge"]);
        assert_eq!(out[0].offerings.len(), 1, "non-reserved offerings go");
    }
}

#[test]
fn reservation_kinds_of_equal_price_go_default_then_block_then_interruptible() {
    let ctx = context(&[
        ("cr-block", ReservationKind::CapacityBlock),
        ("cr-int", ReservationKind::Interruptible),
        ("cr-default", ReservationKind::Default),
    ]);
    let options = vec![
        option("m5.large", vec![reserved("a", 0.01, "cr-block", 1)]),
        option("m5.xlarge", vec![reserved("a", 0.01, "cr-int", 1)]),
        option("m5.2xlarge", vec![reserved("a", 0.01, "cr-default", 1)]),
    ];
    let (out, _) = capacity_reservation_type(options, &ctx);
    assert_eq!(kept(&out), ["m5.2xlarge"]);
}

#[test]
fn launches_without_reserved_offerings_pass_the_reservation_filters() {
    let options = vec![option("m5.large", vec![od("a", 0.1), spot("a", 0.03)])];
    let ctx = context(&[]);
    for filter in [capacity_reservation_type, capacity_block, reserved_offering] {
        let (out, dropped) = filter(options.clone(), &ctx);
        assert_eq!(out[0].offerings.len(), 2);
        assert!(dropped.is_empty());
    }
}

#[test]
fn a_capacity_block_launch_keeps_the_cheapest_block_only() {
    let ctx = context(&[
        ("cr-1", ReservationKind::CapacityBlock),
        ("cr-2", ReservationKind::CapacityBlock),
        ("cr-3", ReservationKind::CapacityBlock),
    ]);
    let options = vec![
        option("p5.48xlarge", vec![reserved("a", 0.3, "cr-1", 1)]),
        option(
            "p4d.24xlarge",
            vec![reserved("a", 0.2, "cr-2", 1), reserved("b", 0.1, "cr-3", 1)],
        ),
    ];
    let (out, dropped) = capacity_block(options, &ctx);
    assert_eq!(kept(&out), ["p4d.24xlarge"]);
    assert_eq!(out[0].offerings.len(), 1);
    assert_eq!(out[0].offerings[0].reservation_id.as_deref(), Some("cr-3"));
    assert_eq!(dropped, ["p5.48xlarge"]);
}

#[test]
fn one_reserved_offering_per_zone_the_one_with_the_most_room() {
    let options = vec![
        option(
            "m5.large",
            vec![
                reserved("a", 0.01, "cr-small", 1),
                reserved("a", 0.01, "cr-big", 5),
                reserved("b", 0.01, "cr-other", 2),
            ],
        ),
        option("m5.xlarge", vec![od("a", 0.2)]),
    ];
    let (out, dropped) = reserved_offering(options, &context(&[]));
    assert_eq!(kept(&out), ["m5.large"]);
    let ids: Vec<&str> = out[0]
        .offerings
        .iter()
        .filter_map(|o| o.reservation_id.as_deref())
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.contains(&"cr-big") && ids.contains(&"cr-other"));
    assert_eq!(dropped, ["m5.xlarge"]);
}

#[test]
fn exotic_types_are_used_only_when_nothing_else_is_left_or_min_values_is_set() {
    let options = vec![
        option("m5.metal", vec![od("a", 4.0)]),
        option("g5.xlarge", vec![od("a", 1.0)]),
        option("m5.large", vec![od("a", 0.1)]),
    ];
    let (out, dropped) = exotic_instance(options.clone(), &context(&[]));
    assert_eq!(kept(&out), ["m5.large"]);
    assert_eq!(dropped, ["m5.metal", "g5.xlarge"]);

    let only_exotic = options[..2].to_vec();
    let (out, dropped) = exotic_instance(only_exotic, &context(&[]));
    assert_eq!(kept(&out), ["m5.metal", "g5.xlarge"]);
    assert!(dropped.is_empty());

    let min_values = FilterContext {
        has_min_values: true,
        ..context(&[])
    };
    let (out, _) = exotic_instance(options, &min_values);
    assert_eq!(out.len(), 3);
}

#[test]
fn spot_dearer_than_the_cheapest_on_demand_is_dropped() {
    let options = vec![
        option("m5.large", vec![od("a", 0.1), spot("a", 0.05)]),
        option("m5.xlarge", vec![od("a", 0.2), spot("a", 0.15)]),
        option("c5.xlarge", vec![spot("a", 0.12)]),
    ];
    let (out, dropped) = spot_offering(options.clone(), &context(&[]));
    assert_eq!(kept(&out), ["m5.large", "m5.xlarge"]);
    assert_eq!(dropped, ["c5.xlarge"]);
    let xlarge: Vec<CapacityType> = out[1].offerings.iter().map(|o| o.capacity_type).collect();
    assert_eq!(
        xlarge,
        [CapacityType::OnDemand],
        "its spot offering costs more than 0.1"
    );

    let spot_only: Vec<LaunchOption> = vec![option("c5.xlarge", vec![spot("a", 0.12)])];
    assert_eq!(spot_offering(spot_only, &context(&[])).0.len(), 1);
    let min_values = FilterContext {
        has_min_values: true,
        ..context(&[])
    };
    assert_eq!(spot_offering(options, &min_values).0.len(), 3);
}

#[test]
fn the_chain_reports_the_filter_that_left_nothing() {
    let options = vec![option("m5.large", vec![od("a", 0.1)])];
    let (out, rejected) = apply(options, &context(&[])).unwrap();
    assert_eq!(kept(&out), ["m5.large"]);
    assert!(rejected.is_empty());
    assert_eq!(
        apply(Vec::new(), &context(&[])).unwrap_err(),
        "capacity-reservation-type-filter"
    );
}
