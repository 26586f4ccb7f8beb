use super::*;
use crate::scheduling::{InstanceType, Overhead, Requirement, Requirements, Resources};

fn class(extra_status: &str) -> EC2NodeClass {
    crate::yaml::from_str(&format!(
        r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: NodeRole
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{id: subnet-a1}}]
  securityGroupSelectorTerms: [{{id: sg-1}}]
status:
  subnets:
  - {{id: subnet-a1, zone: us-east-1a}}
  - {{id: subnet-a2, zone: us-east-1a}}
  - {{id: subnet-b1, zone: us-east-1b}}
  amis:
  - id: ami-arm
    requirements: [{{key: kubernetes.io/arch, operator: In, values: [arm64]}}]
  - id: ami-amd
    requirements: [{{key: kubernetes.io/arch, operator: In, values: [amd64]}}]
{extra_status}"#
    ))
    .unwrap()
}

fn option(
    name: &str,
    arch: &str,
    pods: i64,
    offerings: Vec<Offering>,
    score: Option<i32>,
) -> LaunchOption {
    let mut requirements = Requirements::new();
    requirements.add(Requirement::single("kubernetes.io/arch", arch));
    LaunchOption {
        instance_type: InstanceType::new(
            name,
            requirements,
            offerings.clone(),
            Resources::cpu_memory(2000, 8 << 30).with_pods(pods),
            Overhead::default(),
        ),
        offerings,
        score,
    }
}

fn od(zone: &str, price: f64) -> Offering {
    Offering::new(zone, CapacityType::OnDemand, price)
}

fn spot(zone: &str, price: f64) -> Offering {
    Offering::new(zone, CapacityType::Spot, price)
}

fn overrides(launch: &LaunchPlan) -> Vec<(String, String, String, Option<f64>)> {
    launch
        .templates
        .iter()
        .flat_map(|t| &t.overrides)
        .map(|o| {
            (
                o.instance_type.clone(),
                o.zone.clone(),
                o.subnet_id.clone(),
                o.priority,
            )
        })
        .collect()
}

#[test]
fn scored_pools_get_priorities_in_launch_order_one_rank_per_type() {
    let options = vec![
        option(
            "m7g.large",
            "arm64",
            29,
            vec![od("us-east-1a", 0.08), od("us-east-1b", 0.08)],
            Some(10),
        ),
        option(
            "m5.large",
            "amd64",
            29,
            vec![od("us-east-1b", 0.096)],
            Some(5),
        ),
    ];
    let launch = plan(&class(""), options, false).unwrap();
    assert!(launch.prioritized);
    assert_eq!(launch.capacity_type, CapacityType::OnDemand);
    let got = overrides(&launch);
    assert_eq!(
        got,
        [
            (
                "m7g.large".into(),
                "us-east-1a".into(),
                "subnet-a1".into(),
                Some(0.0)
            ),
            (
                "m7g.large".into(),
                "us-east-1b".into(),
                "subnet-b1".into(),
                Some(0.0)
            ),
            (
                "m5.large".into(),
                "us-east-1b".into(),
                "subnet-b1".into(),
                Some(1.0)
            ),
        ]
    );
    let images: Vec<&str> = launch
        .templates
        .iter()
        .map(|t| t.image_id.as_str())
        .collect();
    assert_eq!(images, ["ami-arm", "ami-amd"], "one template per AMI");
}

#[test]
fn unscored_pools_use_no_priorities() {
    let options = vec![option(
        "m5.large",
        "amd64",
        29,
        vec![od("us-east-1a", 0.096)],
        None,
    )];
    let launch = plan(&class(""), options, false).unwrap();
    assert!(!launch.prioritized);
    assert_eq!(overrides(&launch)[0].3, None);
}

#[test]
fn an_overlaid_price_makes_the_launch_prioritized_in_the_overlaid_order() {
    // A NodeOverlay made m5.large (listed at 0.096) cheaper than m6i.large:
    // EC2's lowest-price would go by list prices, so our order is sent.
    let mut cheap = od("us-east-1a", 0.096);
    cheap.price = 0.01;
    let options = vec![
        option("m5.large", "amd64", 29, vec![cheap], None),
        option("m6i.large", "amd64", 29, vec![od("us-east-1a", 0.05)], None),
    ];
    let launch = plan(&class(""), options, false).unwrap();
    assert!(launch.prioritized);
    let got: Vec<(String, Option<f64>)> = overrides(&launch)
        .into_iter()
        .map(|(name, _, _, priority)| (name, priority))
        .collect();
    assert_eq!(
        got,
        [
            ("m5.large".into(), Some(0.0)),
            ("m6i.large".into(), Some(1.0))
        ]
    );
}

#[test]
fn spot_is_chosen_when_offered_and_only_spot_offerings_are_used() {
    let options = vec![
        option(
            "m5.large",
            "amd64",
            29,
            vec![spot("us-east-1a", 0.03), od("us-east-1a", 0.096)],
            None,
        ),
        option(
            "m5.xlarge",
            "amd64",
            58,
            vec![od("us-east-1a", 0.192)],
            None,
        ),
    ];
    let launch = plan(&class(""), options, false).unwrap();
    assert_eq!(launch.capacity_type, CapacityType::Spot);
    let got: Vec<String> = overrides(&launch).into_iter().map(|o| o.0).collect();
    assert_eq!(got, ["m5.large"]);
}

#[test]
fn different_pod_counts_get_different_templates_and_overrides_stop_at_sixty() {
    let options: Vec<LaunchOption> = (0..40)
        .map(|i| {
            option(
                &format!("c{i}.large"),
                "amd64",
                if i % 2 == 0 { 29 } else { 58 },
                vec![
                    od("us-east-1a", 0.1 + f64::from(i)),
                    od("us-east-1b", 0.1 + f64::from(i)),
                ],
                None,
            )
        })
        .collect();
    let launch = plan(&class(""), options, false).unwrap();
    assert_eq!(launch.templates.len(), 2);
    let count: usize = launch.templates.iter().map(|t| t.overrides.len()).sum();
    assert_eq!(count, MAX_OVERRIDES);
    let pods: Vec<Option<i64>> = launch.templates.iter().map(|t| t.max_pods).collect();
    assert_eq!(pods, [Some(29), Some(58)]);
}

#[test]
fn offerings_outside_the_subnets_zones_are_skipped() {
    let options = vec![option(
        "m5.large",
        "amd64",
        29,
        vec![od("us-east-1c", 0.09), od("us-east-1a", 0.096)],
        None,
    )];
    let launch = plan(&class(""), options, false).unwrap();
    let zones: Vec<String> = overrides(&launch).into_iter().map(|o| o.1).collect();
    assert_eq!(zones, ["us-east-1a"]);

    let nowhere = vec![option(
        "m5.large",
        "amd64",
        29,
        vec![od("us-east-1c", 0.09)],
        None,
    )];
    let err = plan(&class(""), nowhere, false).unwrap_err();
    assert!(
        matches!(err, CloudProviderError::InsufficientCapacity { .. }),
        "{err}"
    );
}

#[test]
fn a_type_no_ami_fits_is_not_ready() {
    let options = vec![option(
        "x1.large",
        "riscv64",
        29,
        vec![od("us-east-1a", 0.1)],
        None,
    )];
    let err = plan(&class(""), options, false).unwrap_err();
    match err {
        CloudProviderError::NodeClassNotReady { reason, .. } => {
            assert!(
                reason.contains("status.amis") && reason.contains("x1.large"),
                "{reason}"
            )
        }
        other => panic!("{other}"),
    }
}

#[test]
fn a_reserved_launch_targets_one_template_per_reservation() {
    let reservations = "  capacityReservations:\n  - {id: cr-1, availabilityZone: us-east-1a, instanceMatchCriteria: targeted, instanceType: m5.large, ownerID: '012345678901'}\n  - {id: cr-2, availabilityZone: us-east-1b, instanceMatchCriteria: targeted, instanceType: m5.large, ownerID: '012345678901', reservationType: capacity-block}\n";
    let options = vec![option(
        "m5.large",
        "amd64",
        29,
        vec![
            Offering::reserved("us-east-1a", 0.00001, "cr-1", 2),
            od("us-east-1a", 0.096),
        ],
        None,
    )];
    let launch = plan(&class(reservations), options, false).unwrap();
    assert_eq!(launch.capacity_type, CapacityType::Reserved);
    assert_eq!(launch.reservation_kind, Some(ReservationKind::Default));
    assert_eq!(launch.templates.len(), 1);
    assert_eq!(launch.templates[0].reservation_id.as_deref(), Some("cr-1"));
    let kinds = reservation_kinds(&class(reservations));
    assert_eq!(kinds["cr-2"], ReservationKind::CapacityBlock);
}
