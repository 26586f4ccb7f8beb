//! User data per family against golden files in
//! `src/aws/launch_template/testdata/`, one file per case. The files are
//! the reviewed expectation; run with `NODEWRIGHT_UPDATE_GOLDEN=1` to
//! rewrite them after an intended change (then review the diff).

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Taint;

use super::*;
use crate::apis::ec2nodeclass::{AMIFamily, KubeletConfiguration};
use crate::aws::launch_template::LaunchSettings;

fn settings() -> LaunchSettings {
    LaunchSettings {
        cluster_name: "test-cluster".to_string(),
        cluster_endpoint: "https://test-cluster".to_string(),
        ca_bundle: Some("Y2EtYnVuZGxlCg==".to_string()),
        service_cidr: Some("10.100.0.0/16".to_string()),
        cluster_dns_ip: Some("10.0.100.10".to_string()),
        ip_family: crate::aws::launch_template::IpFamily::Ipv4,
    }
}

fn kubelet() -> KubeletConfiguration {
    let map = |pairs: &[(&str, &str)]| -> Option<BTreeMap<String, String>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    };
    KubeletConfiguration {
        system_reserved: map(&[("cpu", "100m"), ("memory", "100Mi")]),
        kube_reserved: map(&[("cpu", "200m")]),
        eviction_hard: map(&[("memory.available", "5%")]),
        eviction_soft: map(&[("memory.available", "10%")]),
        eviction_soft_grace_period: map(&[("memory.available", "1m0s")]),
        image_gc_high_threshold_percent: Some(85),
        cpu_cfs_quota: Some(true),
        ..KubeletConfiguration::default()
    }
}

fn render_case(
    family: AMIFamily,
    custom: Option<&str>,
    kubelet: Option<&KubeletConfiguration>,
) -> String {
    let settings = settings();
    let claim_labels: BTreeMap<String, String> = [
        ("karpenter.sh/nodepool", "default"),
        ("karpenter.k8s.aws/ec2nodeclass", "default"),
        ("team", "web"),
        ("kubernetes.io/arch", "amd64"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let taints = registration_taints(
        &[Taint {
            key: "dedicated".to_string(),
            value: Some("web".to_string()),
            effect: "NoSchedule".to_string(),
            time_added: None,
        }],
        &[],
    );
    let input = BootstrapInput {
        family,
        settings: &settings,
        kubelet,
        max_pods: Some(29),
        labels: node_labels(&claim_labels, "on-demand", family),
        taints,
        custom,
        instance_store_raid0: false,
    };
    render(&input).unwrap()
}

fn check(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/aws/launch_template/testdata")
        .join(format!("{name}.golden"));
    if std::env::var_os("NODEWRIGHT_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (NODEWRIGHT_UPDATE_GOLDEN=1 writes it)",
            path.display()
        )
    });
    assert_eq!(
        actual,
        expected,
        "user data differs from {}",
        path.display()
    );
}

const NODE_CONFIG: &str = "apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config:
      maxPods: 42
      shutdownGracePeriod: 30s
";

const SHELL: &str = "#!/bin/bash
echo \"Running custom user data script\"
";

const MIME: &str = "MIME-Version: 1.0
Content-Type: multipart/mixed; boundary=\"BOUNDARY\"

--BOUNDARY
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config:
      maxPods: 42
--BOUNDARY
Content-Type: text/x-shellscript; charset=\"us-ascii\"

#!/bin/bash
echo \"Hello, AL2023!\"
--BOUNDARY--
";

const BOTTLEROCKET: &str = "[settings.kubernetes]
api-server = 'replaceme'
cloud-provider = 'external'
cluster-certificate = 'replaceme'
cluster-name = 'replaceme'
max-pods = 9999

[settings.kubernetes.node-labels]
custom-node-label = 'custom'
'karpenter.sh/nodepool' = 'should-be-overridden'

[settings.kubernetes.node-taints]
replace = ['me:NoSchedule']

[settings.network]
hostname = 'test.local'
no-proxy = ['localhost', '127.0.0.1']

[settings.ntp]
time-servers = ['169.254.169.123']
";

const POWERSHELL: &str = "Write-Host \"Running custom user data script\"";

#[test]
fn al2023_without_user_data() {
    check(
        "al2023_unmerged",
        &render_case(AMIFamily::AL2023, None, Some(&kubelet())),
    );
}

#[test]
fn al2023_with_a_user_node_config() {
    check(
        "al2023_nodeconfig_merged",
        &render_case(AMIFamily::AL2023, Some(NODE_CONFIG), None),
    );
}

#[test]
fn al2023_with_a_user_mime_archive() {
    check(
        "al2023_mime_merged",
        &render_case(AMIFamily::AL2023, Some(MIME), None),
    );
}

#[test]
fn al2023_with_a_user_shell_script() {
    check(
        "al2023_shell_merged",
        &render_case(AMIFamily::AL2023, Some(SHELL), None),
    );
}

#[test]
fn bottlerocket_with_user_toml() {
    check(
        "bottlerocket_merged",
        &render_case(
            AMIFamily::Bottlerocket,
            Some(BOTTLEROCKET),
            Some(&kubelet()),
        ),
    );
}

#[test]
fn bottlerocket_without_user_data() {
    check(
        "bottlerocket_unmerged",
        &render_case(AMIFamily::Bottlerocket, None, None),
    );
}

#[test]
fn al2_with_a_user_mime_archive() {
    let mime = MIME.replace("Hello, AL2023!", "Hello, AL2!");
    check(
        "al2_mime_merged",
        &render_case(AMIFamily::AL2, Some(&mime), Some(&kubelet())),
    );
}

#[test]
fn al2_with_a_user_shell_script() {
    check(
        "al2_shell_merged",
        &render_case(AMIFamily::AL2, Some(SHELL), None),
    );
}

#[test]
fn windows_with_a_user_script() {
    check(
        "windows_merged",
        &render_case(AMIFamily::Windows2022, Some(POWERSHELL), None),
    );
}

#[test]
fn custom_is_passed_through() {
    let out = render_case(AMIFamily::Custom, Some(SHELL), Some(&kubelet()));
    assert_eq!(out, SHELL);
    check("custom", &out);
}

#[test]
fn al2023_needs_the_service_cidr() {
    let mut settings = settings();
    settings.service_cidr = None;
    let input = BootstrapInput {
        family: AMIFamily::AL2023,
        settings: &settings,
        kubelet: None,
        max_pods: None,
        labels: BTreeMap::new(),
        taints: Vec::new(),
        custom: None,
        instance_store_raid0: false,
    };
    assert_eq!(render(&input), Err(UserDataError::MissingServiceCidr));
}

#[test]
fn raid0_asks_nodeadm_and_bottlerocket_for_instance_store_volumes() {
    let settings = settings();
    let mut input = BootstrapInput {
        family: AMIFamily::AL2023,
        settings: &settings,
        kubelet: None,
        max_pods: None,
        labels: BTreeMap::new(),
        taints: Vec::new(),
        custom: None,
        instance_store_raid0: true,
    };
    assert!(
        render(&input)
            .unwrap()
            .contains("localStorage:\n      strategy: RAID0")
    );
    input.family = AMIFamily::Bottlerocket;
    let toml = render(&input).unwrap();
    assert!(
        toml.contains("[settings.bootstrap-commands.000-mount-instance-storage]"),
        "{toml}"
    );
    input.family = AMIFamily::AL2;
    assert!(render(&input).unwrap().contains("--local-disks raid0"));
}

#[test]
fn bad_user_data_names_the_field() {
    let settings = settings();
    let input = |family, custom| BootstrapInput {
        family,
        settings: &settings,
        kubelet: None,
        max_pods: None,
        labels: BTreeMap::new(),
        taints: Vec::new(),
        custom: Some(custom),
        instance_store_raid0: false,
    };
    let toml = render(&input(AMIFamily::Bottlerocket, "[settings\nbroken")).unwrap_err();
    assert!(
        toml.to_string()
            .starts_with("spec.userData is not valid TOML"),
        "{toml}"
    );
    // The fault is placed by line and column; no excerpt of the document
    // (which may hold a secret) is quoted.
    let secret = render(&input(
        AMIFamily::Bottlerocket,
        "[settings.kubernetes]\nbootstrap-token = s3cret-token\n",
    ))
    .unwrap_err()
    .to_string();
    assert!(
        secret.starts_with("spec.userData is not valid TOML for Bottlerocket: line 2, column"),
        "{secret}"
    );
    assert!(!secret.contains("s3cret"), "{secret}");
    let kind = render(&input(AMIFamily::Bottlerocket, "settings = 1")).unwrap_err();
    assert_eq!(
        kind.to_string(),
        "spec.userData: settings must be a TOML table"
    );
    let mime = render(&input(
        AMIFamily::AL2023,
        "MIME-Version: 1.0\nContent-Type: text/plain\n\nhi",
    ))
    .unwrap_err();
    assert!(
        mime.to_string()
            .starts_with("spec.userData is not a valid MIME"),
        "{mime}"
    );
}
