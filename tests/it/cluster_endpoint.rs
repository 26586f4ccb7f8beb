//! What EKS reports of the cluster, against moto's EKS over the wire: the
//! endpoint nodes join and the service CIDR, as `eks:DescribeCluster`
//! answers them (the controller asks when `--cluster-endpoint` or
//! `--service-cidr` is not given, as Karpenter does); a cluster EKS does
//! not know is an error that names the call and its code. Which of these
//! the controller uses, and what it says when the call fails, is decided
//! in `src/cli/controller/launch.rs` (its unit tests).

use nodewright::aws::cluster::describe;

use crate::moto::{eks_as, moto};

#[tokio::test]
async fn the_endpoint_and_service_cidr_are_what_eks_reports() {
    let eks = eks_as(&moto().endpoint, "testing", "testing").await;
    let created = eks
        .create_cluster()
        .name("endpoint-test")
        .role_arn("arn:aws:iam::123456789012:role/eks")
        .resources_vpc_config(
            aws_sdk_eks::types::VpcConfigRequest::builder()
                .subnet_ids("subnet-1")
                .build(),
        )
        .kubernetes_network_config(
            aws_sdk_eks::types::KubernetesNetworkConfigRequest::builder()
                .service_ipv4_cidr("10.100.0.0/16")
                .build(),
        )
        .send()
        .await
        .unwrap();
    let reported = created.cluster.and_then(|c| c.endpoint).unwrap();
    assert!(reported.starts_with("https://"), "{reported}");
    let facts = describe(&eks, "endpoint-test").await.unwrap();
    assert_eq!(facts.endpoint.as_deref(), Some(reported.as_str()));
    assert_eq!(facts.service_cidr.as_deref(), Some("10.100.0.0/16"));
    assert_eq!(facts.status.as_deref(), Some("ACTIVE"));
}

#[tokio::test]
async fn a_cluster_eks_does_not_know_is_an_error_naming_the_call() {
    let eks = eks_as(&moto().endpoint, "testing", "testing").await;
    let error = describe(&eks, "no-such-cluster").await.unwrap_err();
    assert_eq!(error.operation, "eks:DescribeCluster");
    assert_eq!(error.code.as_deref(), Some("ResourceNotFoundException"));
    let text = error.to_string();
    assert!(
        text.starts_with("eks:DescribeCluster: ResourceNotFoundException"),
        "{text}"
    );
}
