//! The cluster facts `--cloud-provider aws` launches with: the endpoint, CA
//! bundle, service CIDR and DNS IP nodes bootstrap against.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::Service;
use kube::Api;

use super::ControllerArgs;
use crate::aws::launch_template::{IpFamily, LaunchSettings};
use crate::cli::CliError;

/// The launch settings from the flags, filling what they leave out from
/// what the controller can see: the CA it trusts and the `kube-dns` Service.
pub async fn launch_settings(
    args: &ControllerArgs,
    config: &kube::Config,
    client: &kube::Client,
) -> Result<LaunchSettings, CliError> {
    let cluster_endpoint = args.cluster_endpoint()?;
    let ca_bundle = match &args.cluster_ca_bundle {
        Some(bundle) => Some(bundle.clone()),
        None => config.root_cert.as_deref().map(pem_bundle),
    };
    let cluster_dns_ip = match &args.cluster_dns_ip {
        Some(ip) => Some(ip.clone()),
        None => kube_dns_ip(client).await,
    };
    let ip_family = match &args.service_cidr {
        Some(cidr) if cidr.contains(':') => IpFamily::Ipv6,
        _ => IpFamily::Ipv4,
    };
    Ok(LaunchSettings {
        cluster_name: args.cluster_name.clone(),
        cluster_endpoint,
        ca_bundle,
        service_cidr: args.service_cidr.clone(),
        cluster_dns_ip,
        ip_family,
    })
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
