//! The simulated cloud provider: launches from the catalog through the same
//! instance-type provider as everything else, falls back when an offering
//! runs out of capacity (and remembers it), and finds, lists and
//! terminates what it launched.

use std::sync::Arc;

use nodewright::apis::{EC2NodeClass, NodeClaim};
use nodewright::aws::catalog::Catalog;
use nodewright::aws::instance_types::InstanceTypeProvider;
use nodewright::cloudprovider::simulated::{SimulatedCloudProvider, SimulatedSettings};
use nodewright::cloudprovider::{
    CloudProvider, CloudProviderError, DriftReason, NodeClassContext, OfferingKey,
    UnavailableOfferings,
};
use nodewright::extensions::Extensions;
use nodewright_host::HostConfig;

fn class(extensions: &str) -> NodeClassContext {
    let yaml = format!(
        r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: NodeRole
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{id: subnet-1}}]
  securityGroupSelectorTerms: [{{id: sg-1}}]
{extensions}status:
  subnets:
  - {{id: subnet-1, zone: us-east-1a}}
  - {{id: subnet-2, zone: us-east-1b}}
  amis:
  - id: ami-amd64
    requirements: [{{key: kubernetes.io/arch, operator: In, values: [amd64]}}]
"#
    );
    NodeClassContext::new(nodewright::yaml::from_str::<EC2NodeClass>(&yaml).unwrap())
}

fn claim(name: &str, types: &[&str], capacity_type: &str) -> NodeClaim {
    nodewright::yaml::from_str(&format!(
        r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: {name}
  labels: {{karpenter.sh/nodepool: general}}
spec:
  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  resources: {{requests: {{cpu: "1", memory: 1Gi}}}}
  requirements:
  - {{key: node.kubernetes.io/instance-type, operator: In, values: [{}]}}
  - {{key: karpenter.sh/capacity-type, operator: In, values: [{capacity_type}]}}
  - {{key: karpenter.sh/nodepool, operator: In, values: [general]}}
"#,
        types.join(", ")
    ))
    .unwrap()
}

fn cloud() -> (Arc<InstanceTypeProvider>, SimulatedCloudProvider) {
    let unavailable = Arc::new(UnavailableOfferings::default());
    let provider = Arc::new(InstanceTypeProvider::new(
        Arc::new(Catalog::embedded("us-east-1").unwrap()),
        Arc::new(Extensions::new(HostConfig::default()).unwrap()),
        unavailable.clone(),
    ));
    let cloud =
        SimulatedCloudProvider::new(provider.clone(), unavailable, SimulatedSettings::default());
    (provider, cloud)
}

fn offering(instance_type: &str, zone: &str, capacity_type: &str) -> OfferingKey {
    OfferingKey {
        instance_type: instance_type.to_string(),
        zone: zone.to_string(),
        capacity_type: capacity_type.to_string(),
    }
}

fn label<'a>(claim: &'a NodeClaim, key: &str) -> &'a str {
    claim.metadata.labels.as_ref().unwrap()[key].as_str()
}

#[tokio::test]
async fn create_launches_the_cheapest_option_in_a_subnet_zone_and_labels_the_claim() {
    let (_, cloud) = cloud();
    let launched = cloud
        .create(
            &claim("a", &["m5.large", "m5.xlarge"], "on-demand"),
            &class(""),
        )
        .await
        .unwrap();
    assert_eq!(
        label(&launched, "node.kubernetes.io/instance-type"),
        "m5.large"
    );
    assert_eq!(label(&launched, "karpenter.sh/capacity-type"), "on-demand");
    assert_eq!(label(&launched, "karpenter.sh/nodepool"), "general");
    assert_eq!(label(&launched, "kubernetes.io/arch"), "amd64");
    assert_eq!(label(&launched, "karpenter.k8s.aws/instance-family"), "m5");
    let zone = label(&launched, "topology.kubernetes.io/zone");
    assert!(["us-east-1a", "us-east-1b"].contains(&zone), "{zone}");
    let status = launched.status.clone().unwrap();
    let provider_id = status.provider_id.unwrap();
    assert!(
        provider_id.starts_with(&format!("aws:///{zone}/i-")),
        "{provider_id}"
    );
    assert_eq!(status.image_id.as_deref(), Some("ami-amd64"));
    assert_eq!(status.capacity.unwrap()["cpu"].0, "2");
    assert!(status.allocatable.unwrap()["cpu"].0.ends_with('m'));

    // A retried create returns the same instance; get and list find it.
    let again = cloud
        .create(
            &claim("a", &["m5.large", "m5.xlarge"], "on-demand"),
            &class(""),
        )
        .await
        .unwrap();
    assert_eq!(again, launched);
    assert_eq!(cloud.get(&provider_id).await.unwrap(), launched);
    assert_eq!(cloud.list().await.unwrap().len(), 1);
}

#[tokio::test]
async fn insufficient_capacity_falls_back_and_marks_the_offering_for_the_next_solve() {
    let (provider, cloud) = cloud();
    for zone in ["us-east-1a", "us-east-1b"] {
        cloud.inject_insufficient_capacity(offering("m5.large", zone, "spot"));
    }
    let launched = cloud
        .create(&claim("a", &["m5.large", "m5.xlarge"], "spot"), &class(""))
        .await
        .unwrap();
    assert_eq!(
        label(&launched, "node.kubernetes.io/instance-type"),
        "m5.xlarge"
    );

    // The scheduler's next view of the pool has those offerings unavailable.
    let outcome = provider
        .for_pool(&class("").class, "general", &Vec::new())
        .unwrap();
    let m5 = outcome
        .instance_types
        .iter()
        .find(|it| it.name == "m5.large")
        .unwrap();
    for o in &m5.offerings {
        let refused = o.capacity_type.label_value() == "spot";
        assert_eq!(o.available, !refused, "{o:?}");
    }

    // With every allowed offering refused, the error lists them.
    let err = cloud
        .create(&claim("b", &["m5.large"], "spot"), &class(""))
        .await
        .unwrap_err();
    match err {
        CloudProviderError::InsufficientCapacity { .. } => {}
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn every_offering_refused_is_an_insufficient_capacity_error_naming_them() {
    let (_, cloud) = cloud();
    for zone in ["us-east-1a", "us-east-1b"] {
        cloud.inject_insufficient_capacity(offering("m5.large", zone, "on-demand"));
    }
    let err = cloud
        .create(&claim("a", &["m5.large"], "on-demand"), &class(""))
        .await
        .unwrap_err();
    let CloudProviderError::InsufficientCapacity { offerings, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(
        offerings,
        &[
            offering("m5.large", "us-east-1a", "on-demand"),
            offering("m5.large", "us-east-1b", "on-demand")
        ]
    );
    assert!(
        err.to_string().contains("on-demand m5.large in us-east-1a"),
        "{err}"
    );
}

#[tokio::test]
async fn a_class_blocked_by_its_extensions_is_not_ready() {
    let (_, cloud) = cloud();
    let broken = "  extensions:\n    instanceFilters:\n    - {name: missing, path: /nonexistent/filter.wasm, failurePolicy: Fail}\n";
    let err = cloud
        .create(&claim("a", &["m5.large"], "on-demand"), &class(broken))
        .await
        .unwrap_err();
    assert!(
        matches!(err, CloudProviderError::NodeClassNotReady { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("instanceFilters[0]"), "{err}");
}

#[tokio::test]
async fn delete_terminates_and_a_gone_instance_is_not_found() {
    let (_, cloud) = cloud();
    let launched = cloud
        .create(&claim("a", &["m5.large"], "on-demand"), &class(""))
        .await
        .unwrap();
    let provider_id = launched
        .status
        .as_ref()
        .unwrap()
        .provider_id
        .clone()
        .unwrap();
    cloud.delete(&launched).await.unwrap();
    assert!(cloud.get(&provider_id).await.unwrap_err().is_not_found());
    assert!(cloud.delete(&launched).await.unwrap_err().is_not_found());
    assert!(cloud.list().await.unwrap().is_empty());

    // An instance terminated behind our back is gone too.
    let other = cloud
        .create(&claim("b", &["m5.large"], "on-demand"), &class(""))
        .await
        .unwrap();
    let id = other.status.unwrap().provider_id.unwrap();
    let instance = id.rsplit('/').next().unwrap();
    assert!(cloud.terminate_out_of_band(instance));
    assert!(cloud.get(&id).await.unwrap_err().is_not_found());
}

#[tokio::test]
async fn an_image_no_longer_selected_is_ami_drift() {
    let (_, cloud) = cloud();
    let launched = cloud
        .create(&claim("a", &["m5.large"], "on-demand"), &class(""))
        .await
        .unwrap();
    assert_eq!(cloud.is_drifted(&launched, &class("")).await.unwrap(), None);
    let mut moved = EC2NodeClass::clone(&class("").class);
    if let Some(ami) = moved
        .status
        .as_mut()
        .and_then(|s| s.amis.as_mut())
        .and_then(|a| a.first_mut())
    {
        ami.id = "ami-newer".to_string();
    }
    assert_eq!(
        cloud
            .is_drifted(&launched, &NodeClassContext::new(moved))
            .await
            .unwrap(),
        Some(DriftReason::AmiDrift)
    );
}
