//! Drift, readiness, client tokens and instance read-back.

use super::*;
use crate::scheduling::CapacityType;

fn class() -> EC2NodeClass {
    crate::yaml::from_str(
        r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: NodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{id: subnet-a}]
  securityGroupSelectorTerms: [{id: sg-1}]
status:
  subnets: [{id: subnet-a, zone: us-east-1a}]
  securityGroups: [{id: sg-1}, {id: sg-2}]
  instanceProfile: nodes
  amis: [{id: ami-1, requirements: []}]
  capacityReservations:
  - {id: cr-kept, availabilityZone: us-east-1a, instanceMatchCriteria: targeted, instanceType: m5.large, ownerID: '012345678901'}
"#,
    )
    .unwrap()
}

fn instance() -> Instance {
    Instance {
        id: "i-1".to_string(),
        instance_type: "m5.large".to_string(),
        zone: "us-east-1a".to_string(),
        zone_id: None,
        image_id: Some("ami-1".to_string()),
        subnet_id: Some("subnet-a".to_string()),
        security_group_ids: vec!["sg-2".to_string(), "sg-1".to_string()],
        capacity_type: CapacityType::OnDemand,
        capacity_reservation_id: None,
        state: "running".to_string(),
        launch_time: None,
        partition_number: None,
        tags: BTreeMap::new(),
    }
}

#[test]
fn security_groups_subnets_and_reservations_drift() {
    assert_eq!(instance_drift(&instance(), &class()).unwrap(), None);
    let mut groups = instance();
    groups.security_group_ids.pop();
    assert_eq!(
        instance_drift(&groups, &class()).unwrap(),
        Some(DriftReason::SecurityGroupDrift)
    );
    let mut subnet = instance();
    subnet.subnet_id = Some("subnet-old".to_string());
    assert_eq!(
        instance_drift(&subnet, &class()).unwrap(),
        Some(DriftReason::SubnetDrift)
    );
    let mut reserved = instance();
    reserved.capacity_type = CapacityType::Reserved;
    reserved.capacity_reservation_id = Some("cr-kept".to_string());
    assert_eq!(instance_drift(&reserved, &class()).unwrap(), None);
    reserved.capacity_reservation_id = Some("cr-gone".to_string());
    assert_eq!(
        instance_drift(&reserved, &class()).unwrap(),
        Some(DriftReason::CapacityReservationDrift)
    );
}

#[test]
fn a_class_without_resolved_status_is_not_ready() {
    let mut class = class();
    class.status.as_mut().unwrap().security_groups = None;
    let err = check_status(&class).unwrap_err();
    assert!(err.to_string().contains("status.securityGroups"), "{err}");
    assert!(instance_drift(&instance(), &class).is_err());
    class.status = None;
    assert!(
        check_status(&class)
            .unwrap_err()
            .to_string()
            .contains("status.subnets")
    );
}

#[test]
fn the_client_token_follows_the_claim_and_the_request() {
    let mut claim: NodeClaim = crate::yaml::from_str(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: a}\nspec:\n  requirements: []\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n",
    )
    .unwrap();
    let mut request = FleetRequest {
        capacity_type: CapacityType::OnDemand,
        reservation_kind: None,
        templates: vec![FleetTemplate {
            name: "karpenter.k8s.aws/1".to_string(),
            overrides: vec![crate::aws::instance::FleetOverride {
                instance_type: "m5.large".to_string(),
                zone: "us-east-1a".to_string(),
                subnet_id: "subnet-a".to_string(),
                image_id: "ami-1".to_string(),
                priority: None,
            }],
        }],
        prioritized: false,
        tags: BTreeMap::new(),
        client_token: String::new(),
        context: None,
        placement: None,
    };
    let by_name = client_token(&claim, &request);
    assert_eq!(by_name.len(), "nodewright-".len() + 40);
    assert_eq!(by_name, client_token(&claim, &request), "a retry reuses it");
    claim.metadata.uid = Some("0b7c".to_string());
    let by_uid = client_token(&claim, &request);
    assert_ne!(by_uid, by_name);
    request.templates[0].overrides[0].zone = "us-east-1b".to_string();
    assert_ne!(
        client_token(&claim, &request),
        by_uid,
        "a changed launch gets a new one"
    );
}

#[test]
fn an_instance_reads_back_as_a_node_claim() {
    let mut instance = instance();
    instance.tags = [
        ("karpenter.sh/nodeclaim", "web-abc"),
        ("karpenter.sh/nodepool", "web"),
        ("karpenter.k8s.aws/ec2nodeclass", "default"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    instance.state = "shutting-down".to_string();
    instance.launch_time = Some(1_795_305_600);
    let claim = instance_node_claim(&instance);
    assert_eq!(claim.metadata.name.as_deref(), Some("web-abc"));
    assert_eq!(claim.spec.node_class_ref.name, "default");
    let labels = claim.metadata.labels.unwrap();
    assert_eq!(labels["karpenter.sh/nodepool"], "web");
    assert_eq!(labels["karpenter.sh/capacity-type"], "on-demand");
    assert!(claim.metadata.deletion_timestamp.is_some());
    assert_eq!(
        claim.status.unwrap().provider_id.as_deref(),
        Some("aws:///us-east-1a/i-1")
    );
}
