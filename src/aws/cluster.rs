//! What EKS reports of the cluster that node bootstrap needs, read once at
//! start when `--cluster-endpoint` or `--service-cidr` is not given (as
//! Karpenter reads them): the controller's own address for the API server
//! (`kubernetes.default.svc`) is not one a node outside the cluster's
//! network can reach, and the service CIDR is not served by the API.

use super::errors::AwsError;

/// The cluster as `eks:DescribeCluster` reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterFacts {
    /// The API server URL nodes join; `None` while EKS serves none yet.
    pub endpoint: Option<String>,
    /// The service CIDR (IPv4, or IPv6 for an IPv6 cluster).
    pub service_cidr: Option<String>,
    /// The cluster's status (`ACTIVE`, `CREATING`, …), for messages.
    pub status: Option<String>,
}

/// Cluster `name` as EKS reports it (`eks:DescribeCluster`).
pub async fn describe(eks: &aws_sdk_eks::Client, name: &str) -> Result<ClusterFacts, AwsError> {
    let out = eks
        .describe_cluster()
        .name(name)
        .send()
        .await
        .map_err(|e| AwsError::from_sdk("eks:DescribeCluster", &e))?;
    let Some(cluster) = out.cluster else {
        return Ok(ClusterFacts::default());
    };
    let network = cluster.kubernetes_network_config.as_ref();
    let service_cidr = network
        .and_then(|n| n.service_ipv6_cidr.clone())
        .or_else(|| network.and_then(|n| n.service_ipv4_cidr.clone()))
        .filter(|c| !c.is_empty());
    Ok(ClusterFacts {
        endpoint: cluster.endpoint.filter(|e| !e.is_empty()),
        service_cidr,
        status: cluster.status.map(|s| s.as_str().to_string()),
    })
}
