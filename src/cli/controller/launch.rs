//! The cluster facts `--cloud-provider aws` launches with: the endpoint and
//! service CIDR (given, or as EKS reports them), CA bundle and DNS IP nodes
//! bootstrap against.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::Service;
use kube::Api;

use super::ControllerArgs;
use crate::aws::cluster::{ClusterFacts, describe};
use crate::aws::errors::AwsError;
use crate::aws::launch_template::{IpFamily, LaunchSettings};
use crate::cli::CliError;

/// The launch settings from the flags, filling what they leave out from
/// what the controller can see: the endpoint and service CIDR EKS reports,
/// the CA it trusts and the `kube-dns` Service.
pub async fn launch_settings(
    args: &ControllerArgs,
    config: &kube::Config,
    client: &kube::Client,
    eks: &aws_sdk_eks::Client,
) -> Result<LaunchSettings, CliError> {
    let given = Given {
        cluster: args.cluster_name.clone(),
        endpoint: args.cluster_endpoint()?,
        service_cidr: args.service_cidr.clone().filter(|c| !c.is_empty()),
    };
    let described = match (&given.endpoint, &given.service_cidr) {
        (Some(_), Some(_)) => None,
        _ => Some(describe(eks, &given.cluster).await),
    };
    let (cluster_endpoint, service_cidr) = settle(&given, described)?;
    let ca_bundle = match &args.cluster_ca_bundle {
        Some(bundle) => Some(bundle.clone()),
        None => config.root_cert.as_deref().map(pem_bundle),
    };
    let cluster_dns_ip = match &args.cluster_dns_ip {
        Some(ip) => Some(ip.clone()),
        None => kube_dns_ip(client).await,
    };
    let ip_family = match &service_cidr {
        Some(cidr) if cidr.contains(':') => IpFamily::Ipv6,
        _ => IpFamily::Ipv4,
    };
    Ok(LaunchSettings {
        cluster_name: args.cluster_name.clone(),
        cluster_endpoint,
        ca_bundle,
        service_cidr,
        cluster_dns_ip,
        ip_family,
    })
}

/// What the flags say of the cluster.
struct Given {
    cluster: String,
    endpoint: Option<String>,
    service_cidr: Option<String>,
}

/// The endpoint and service CIDR to launch with: what was given, the rest
/// from what EKS reported (`described`, `None` when it was not asked). No
/// endpoint is an error that says how to give one; no service CIDR is a
/// warning (only AL2023 nodes need it, and their launch says so).
fn settle(
    given: &Given,
    described: Option<Result<ClusterFacts, AwsError>>,
) -> Result<(String, Option<String>), CliError> {
    let cluster = &given.cluster;
    let facts = match described {
        None => ClusterFacts::default(),
        Some(Ok(facts)) => facts,
        Some(Err(error)) if given.endpoint.is_none() => {
            return Err(format!(
                "cannot discover the cluster endpoint: {error}; pass --cluster-endpoint \
                 (settings.clusterEndpoint in the chart), or let the controller's role \
                 call eks:DescribeCluster on cluster {cluster}"
            )
            .into());
        }
        Some(Err(error)) => {
            tracing::warn!(%error, %cluster, "cannot read the service CIDR from EKS; AL2023 nodes need --service-cidr");
            ClusterFacts::default()
        }
    };
    let endpoint = match (&given.endpoint, facts.endpoint) {
        (Some(endpoint), _) => endpoint.clone(),
        (None, Some(endpoint)) => {
            tracing::info!(%endpoint, %cluster, "the cluster endpoint, from eks:DescribeCluster");
            endpoint
        }
        (None, None) => {
            let status = facts.status.as_deref().unwrap_or("unknown");
            return Err(format!(
                "EKS reports no endpoint for cluster {cluster} (status {status}); \
                 pass --cluster-endpoint (settings.clusterEndpoint in the chart) \
                 or start the controller once the cluster is ACTIVE"
            )
            .into());
        }
    };
    let service_cidr = match (&given.service_cidr, facts.service_cidr) {
        (Some(cidr), _) => Some(cidr.clone()),
        (None, Some(cidr)) => {
            tracing::info!(%cidr, %cluster, "the service CIDR, from eks:DescribeCluster");
            Some(cidr)
        }
        (None, None) => None,
    };
    Ok((endpoint, service_cidr))
}

/// DER certificates as one PEM bundle, base64-encoded as bootstrap wants it.
fn pem_bundle(certificates: &[Vec<u8>]) -> String {
    let mut pem = String::new();
    for der in certificates {
        pem.push_str("-----BEGIN CERTIFICATE-----\n");
        let body = STANDARD.encode(der);
        for line in body.as_bytes().chunks(64) {
            pem.push_str(&String::from_utf8_lossy(line));
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
    }
    STANDARD.encode(pem)
}

/// The ClusterIP of `kube-system/kube-dns`, when there is one.
async fn kube_dns_ip(client: &kube::Client) -> Option<String> {
    let services: Api<Service> = Api::namespaced(client.clone(), "kube-system");
    match services.get_opt("kube-dns").await {
        Ok(found) => found
            .and_then(|s| s.spec)
            .and_then(|spec| spec.cluster_ip)
            .filter(|ip| !ip.is_empty() && ip != "None"),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read kube-system/kube-dns; nodes get no cluster DNS IP unless a class sets spec.kubelet.clusterDNS");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::errors::ErrorKind;

    fn given(endpoint: Option<&str>, cidr: Option<&str>) -> Given {
        Given {
            cluster: "demo".to_string(),
            endpoint: endpoint.map(String::from),
            service_cidr: cidr.map(String::from),
        }
    }

    fn reported(
        endpoint: Option<&str>,
        cidr: Option<&str>,
    ) -> Option<Result<ClusterFacts, AwsError>> {
        Some(Ok(ClusterFacts {
            endpoint: endpoint.map(String::from),
            service_cidr: cidr.map(String::from),
            status: Some("CREATING".to_string()),
        }))
    }

    fn refused() -> Option<Result<ClusterFacts, AwsError>> {
        Some(Err(AwsError {
            operation: "eks:DescribeCluster",
            code: Some("AccessDeniedException".to_string()),
            message: "AccessDeniedException: not allowed".to_string(),
            kind: ErrorKind::Permanent,
        }))
    }

    #[test]
    fn what_is_given_is_used_and_the_rest_is_what_eks_reports() {
        let both = given(Some("https://given"), Some("10.0.0.0/16"));
        assert_eq!(
            settle(&both, None).unwrap(),
            ("https://given".to_string(), Some("10.0.0.0/16".to_string()))
        );
        let neither = given(None, None);
        let eks = reported(Some("https://eks"), Some("fd00::/108"));
        assert_eq!(
            settle(&neither, eks.clone()).unwrap(),
            ("https://eks".to_string(), Some("fd00::/108".to_string()))
        );
        let cidr_only = given(None, Some("10.0.0.0/16"));
        assert_eq!(
            settle(&cidr_only, eks).unwrap(),
            ("https://eks".to_string(), Some("10.0.0.0/16".to_string()))
        );
    }

    #[test]
    fn without_an_endpoint_a_failed_call_is_an_error_that_says_what_to_do() {
        let error = settle(&given(None, None), refused())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("eks:DescribeCluster: AccessDeniedException"),
            "{error}"
        );
        assert!(error.contains("--cluster-endpoint"), "{error}");
        assert!(error.contains("settings.clusterEndpoint"), "{error}");
        let error = settle(&given(None, None), reported(None, None))
            .unwrap_err()
            .to_string();
        assert!(error.contains("status CREATING"), "{error}");
        assert!(error.contains("--cluster-endpoint"), "{error}");
    }

    #[test]
    fn with_an_endpoint_a_failed_call_only_leaves_the_service_cidr_out() {
        assert_eq!(
            settle(&given(Some("https://given"), None), refused()).unwrap(),
            ("https://given".to_string(), None)
        );
    }

    #[test]
    fn certificates_become_one_base64_pem_bundle() {
        let der: Vec<u8> = (0..100u8).collect();
        let bundle = pem_bundle(&[der.clone(), der.clone()]);
        let pem = String::from_utf8(STANDARD.decode(bundle).unwrap()).unwrap();
        assert_eq!(pem.matches("-----BEGIN CERTIFICATE-----\n").count(), 2);
        let first: String = pem
            .lines()
            .skip(1)
            .take_while(|l| !l.starts_with("-----END"))
            .collect();
        assert_eq!(STANDARD.decode(first).unwrap(), der);
        assert!(pem.lines().all(|l| l.len() <= 64 || l.starts_with("-----")));
    }
}
