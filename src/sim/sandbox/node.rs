//! The Node a simulated kubelet registers for a launched instance, as an EKS
//! node's kubelet registers it: named after its private IP
//! (`ip-10-0-17-23.ec2.internal` in us-east-1,
//! `ip-10-0-17-23.<region>.compute.internal` elsewhere), with the NodeClaim's
//! provider ID, labels, taints and startup taints plus
//! `karpenter.sh/unregistered:NoExecute` (what Karpenter's bootstrap passes
//! to `--node-labels` and `--register-with-taints`), the instance's capacity
//! and allocatable, and `Ready=False` until the kubelet reports ready.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Node, Taint};
use serde_json::{Value, json};

use crate::apis::NodeClaim;
use crate::apis::labels::{
    ARCH_LABEL_KEY, HOSTNAME_LABEL_KEY, OS_LABEL_KEY, REGION_LABEL_KEY, UNREGISTERED_TAINT_KEY,
};

/// Hosts per zone subnet (a /20 without the addresses AWS reserves).
const HOSTS_PER_ZONE: u32 = 4091;

/// The private IP of host number `host` in the zone with index `zone`: zone
/// `i` is the subnet `10.0.(16·i).0/20`, hosts start at `.4` (AWS keeps the
/// first four addresses of a subnet).
pub fn private_ip(zone: usize, host: u32) -> Ipv4Addr {
    let offset = 4 + host % HOSTS_PER_ZONE;
    let third = (16 * (zone as u32 % 16)) + offset / 256;
    Ipv4Addr::new(10, 0, third as u8, (offset % 256) as u8)
}

/// The host number an instance gets first (later ones if it is taken): a
/// hash of its ID, so names do not depend on launch order.
pub fn preferred_host(instance_id: &str) -> u32 {
    // FNV-1a.
    let hash = instance_id.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    hash % HOSTS_PER_ZONE
}

/// The node name EC2's private DNS gives an address in `region`.
pub fn node_name(region: &str, ip: Ipv4Addr) -> String {
    let [a, b, c, d] = ip.octets();
    let domain = if region == "us-east-1" {
        "ec2.internal".to_string()
    } else {
        format!("{region}.compute.internal")
    };
    format!("ip-{a}-{b}-{c}-{d}.{domain}")
}

/// What a registration needs besides the launched claim.
#[derive(Debug, Clone)]
pub struct Registration<'a> {
    /// The Node's name.
    pub name: &'a str,
    /// Its private IP.
    pub ip: Ipv4Addr,
    /// The region (`topology.kubernetes.io/region`).
    pub region: &'a str,
    /// `major.minor` of the cluster, for the kubelet version.
    pub kubernetes_version: &'a str,
}

/// The annotation on every Node the simulated kubelet registered: on a
/// real cluster the sandbox's kubelet duties (pods, leases, heartbeats)
/// concern these Nodes only.
pub const SIMULATED_ANNOTATION: &str = "sandbox.nodewright.io/simulated-kubelet";

/// Whether the simulated kubelet registered `node`.
pub fn is_simulated(node: &Node) -> bool {
    node.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(SIMULATED_ANNOTATION))
}

/// The taint the node lifecycle controller keeps on a cordoned node.
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";
/// The taint a node carries while it is not `Ready`.
pub const NOT_READY_TAINT_KEY: &str = "node.kubernetes.io/not-ready";

fn no_schedule(key: &str) -> Taint {
    Taint {
        key: key.to_string(),
        effect: "NoSchedule".to_string(),
        ..Taint::default()
    }
}

/// The taints a node registers with for `claim`: its taints, its startup
/// taints, `karpenter.sh/unregistered:NoExecute`, and
/// `node.kubernetes.io/not-ready:NoSchedule` until it is ready.
pub fn registration_taints(claim: &NodeClaim) -> Vec<Taint> {
    let mut taints: Vec<Taint> = Vec::new();
    let unregistered = Taint {
        key: UNREGISTERED_TAINT_KEY.to_string(),
        effect: "NoExecute".to_string(),
        ..Taint::default()
    };
    let not_ready = no_schedule(NOT_READY_TAINT_KEY);
    for taint in claim
        .spec
        .taints
        .iter()
        .flatten()
        .chain(claim.spec.startup_taints.iter().flatten())
        .chain([&unregistered, &not_ready])
    {
        if !taints
            .iter()
            .any(|t| t.key == taint.key && t.effect == taint.effect)
        {
            taints.push(taint.clone());
        }
    }
    taints
}

/// The Node the kubelet of `claim`'s instance registers, not ready yet.
pub fn registering_node(claim: &NodeClaim, registration: &Registration<'_>) -> Node {
    let mut labels: BTreeMap<String, String> = claim.metadata.labels.clone().unwrap_or_default();
    labels.insert(
        HOSTNAME_LABEL_KEY.to_string(),
        registration.name.to_string(),
    );
    labels
        .entry(REGION_LABEL_KEY.to_string())
        .or_insert_with(|| registration.region.to_string());
    labels
        .entry(OS_LABEL_KEY.to_string())
        .or_insert_with(|| "linux".to_string());
    let arch = labels
        .entry(ARCH_LABEL_KEY.to_string())
        .or_insert_with(|| "amd64".to_string())
        .clone();
    let status = claim.status.clone().unwrap_or_default();
    let instance = status
        .provider_id
        .as_deref()
        .and_then(crate::cloudprovider::ProviderId::parse)
        .map(|p| p.instance_id().to_string())
        .unwrap_or_default();
    let ip = registration.ip.to_string();
    let value = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": registration.name,
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                SIMULATED_ANNOTATION: "true",
            },
        },
        "spec": {
            "providerID": status.provider_id,
            "taints": registration_taints(claim),
        },
        "status": {
            "capacity": status.capacity,
            "allocatable": status.allocatable,
            "conditions": conditions(false),
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "InternalDNS", "address": registration.name},
                {"type": "Hostname", "address": registration.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": arch,
                "bootID": format!("{:08x}-sim", preferred_host(&format!("boot/{instance}"))),
                "containerRuntimeVersion": "containerd://1.7.27",
                "kernelVersion": format!(
                    "6.1.141-165.249.amzn2023.{}",
                    if arch == "arm64" { "aarch64" } else { "x86_64" }
                ),
                "kubeProxyVersion": "",
                "kubeletVersion": format!("v{}.0-eks-sandbox", registration.kubernetes_version),
                "machineID": format!("ec2{:08x}sim", preferred_host(&instance)),
                "operatingSystem": "linux",
                "osImage": "Amazon Linux 2023 (simulated)",
                "systemUUID": format!("ec2{:08x}-sim", preferred_host(&format!("uuid/{instance}"))),
            },
        },
    });
    // Every field above is one a Node has; a failure here is a bug in this file.
    serde_json::from_value(value).unwrap_or_default()
}

/// The taints the node lifecycle controller would leave on `node`, when
/// they differ from its own: `node.kubernetes.io/unschedulable:NoSchedule`
/// exactly while it is cordoned, and (for a node whose kubelet reports,
/// `reported`) `node.kubernetes.io/not-ready:NoSchedule` exactly while it
/// is not `Ready`.
pub fn lifecycle_taints(node: &Node, reported: bool) -> Option<Vec<Taint>> {
    let spec = node.spec.clone().unwrap_or_default();
    let current = spec.taints.unwrap_or_default();
    let mut wanted: Vec<Taint> = current.clone();
    let mut keep = |key: &str, present: bool| {
        let has = wanted
            .iter()
            .any(|t| t.key == key && t.effect == "NoSchedule");
        if present && !has {
            wanted.push(no_schedule(key));
        } else if !present && has {
            wanted.retain(|t| !(t.key == key && t.effect == "NoSchedule"));
        }
    };
    keep(UNSCHEDULABLE_TAINT_KEY, spec.unschedulable.unwrap_or(false));
    if reported {
        keep(NOT_READY_TAINT_KEY, !is_ready(node));
    }
    (wanted != current).then_some(wanted)
}

/// The node conditions a kubelet posts: no pressure, and `Ready` as given.
pub fn conditions(ready: bool) -> Value {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    let ready = if ready {
        condition(
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status",
        )
    } else {
        condition(
            "Ready",
            "False",
            "KubeletNotReady",
            "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady",
        )
    };
    json!([
        condition(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available"
        ),
        condition(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure"
        ),
        condition(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available"
        ),
        ready,
    ])
}

/// Whether `node` reports `Ready=True`.
pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// The node's private IP, from its addresses.
pub fn internal_ip(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim() -> NodeClaim {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "general-abc", "labels": {
                "karpenter.sh/nodepool": "general", "kubernetes.io/arch": "arm64",
                "topology.kubernetes.io/zone": "us-west-2b", "node.kubernetes.io/instance-type": "m7g.large"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [],
                "taints": [{"key": "team", "value": "ml", "effect": "NoSchedule"}],
                "startupTaints": [{"key": "agent.example.com/starting", "effect": "NoSchedule"},
                                  {"key": "team", "value": "ml", "effect": "NoSchedule"}]
            },
            "status": {"providerID": "aws:///us-west-2b/i-0000000000000002a",
                       "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                       "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"}}
        }))
        .unwrap()
    }

    #[test]
    fn names_follow_ec2_private_dns() {
        let ip = private_ip(1, 300);
        assert_eq!(ip, Ipv4Addr::new(10, 0, 17, 48));
        assert_eq!(node_name("us-east-1", ip), "ip-10-0-17-48.ec2.internal");
        assert_eq!(
            node_name("us-west-2", ip),
            "ip-10-0-17-48.us-west-2.compute.internal"
        );
        // The last host of a zone stays inside its /20.
        assert_eq!(
            private_ip(0, HOSTS_PER_ZONE - 1),
            Ipv4Addr::new(10, 0, 15, 254)
        );
    }

    #[test]
    fn a_node_registers_with_the_claims_identity_and_the_unregistered_taint() {
        let claim = claim();
        let node = registering_node(
            &claim,
            &Registration {
                name: "ip-10-0-17-48.us-west-2.compute.internal",
                ip: Ipv4Addr::new(10, 0, 17, 48),
                region: "us-west-2",
                kubernetes_version: "1.34",
            },
        );
        let spec = node.spec.as_ref().unwrap();
        assert_eq!(
            spec.provider_id.as_deref(),
            Some("aws:///us-west-2b/i-0000000000000002a")
        );
        let taints: Vec<(String, String)> = spec
            .taints
            .iter()
            .flatten()
            .map(|t| (t.key.clone(), t.effect.clone()))
            .collect();
        assert_eq!(
            taints,
            [
                ("team".to_string(), "NoSchedule".to_string()),
                (
                    "agent.example.com/starting".to_string(),
                    "NoSchedule".to_string()
                ),
                (
                    "karpenter.sh/unregistered".to_string(),
                    "NoExecute".to_string()
                ),
                (
                    "node.kubernetes.io/not-ready".to_string(),
                    "NoSchedule".to_string()
                ),
            ]
        );
        let labels = node.metadata.labels.as_ref().unwrap();
        assert_eq!(
            labels["kubernetes.io/hostname"],
            "ip-10-0-17-48.us-west-2.compute.internal"
        );
        assert_eq!(labels["karpenter.sh/nodepool"], "general");
        assert_eq!(labels["topology.kubernetes.io/region"], "us-west-2");
        assert_eq!(labels["kubernetes.io/os"], "linux");
        let status = node.status.as_ref().unwrap();
        assert_eq!(status.allocatable.as_ref().unwrap()["cpu"].0, "1930m");
        assert_eq!(status.capacity.as_ref().unwrap()["memory"].0, "8Gi");
        assert_eq!(status.node_info.as_ref().unwrap().architecture, "arm64");
        assert!(!is_ready(&node));
        assert_eq!(internal_ip(&node).as_deref(), Some("10.0.17.48"));
    }

    #[test]
    fn cordoned_and_unready_nodes_are_tainted_as_the_node_lifecycle_controller_does() {
        let mut node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n"},
            "spec": {"taints": [{"key": "team", "effect": "NoSchedule"},
                                {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
            "status": {"conditions": conditions(false)}
        }))
        .unwrap();
        assert_eq!(lifecycle_taints(&node, true), None);
        // A node no kubelet reports for keeps what it has.
        assert_eq!(lifecycle_taints(&node, false), None);
        node.status = serde_json::from_value(json!({"conditions": conditions(true)})).unwrap();
        let ready = lifecycle_taints(&node, true).unwrap();
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].key, "team");
        node.spec.as_mut().unwrap().taints = Some(ready);
        node.spec.as_mut().unwrap().unschedulable = Some(true);
        let cordoned = lifecycle_taints(&node, true).unwrap();
        assert!(cordoned.iter().any(|t| t.key == UNSCHEDULABLE_TAINT_KEY));
        node.spec.as_mut().unwrap().taints = Some(cordoned);
        assert_eq!(lifecycle_taints(&node, true), None);
        node.spec.as_mut().unwrap().unschedulable = None;
        assert_eq!(lifecycle_taints(&node, true).unwrap().len(), 1);
    }
}
