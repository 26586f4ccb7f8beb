//! Reading an EC2NodeClass into the [`ResolverSettings`] that shape its
//! instance types' capacity and overhead.

use std::collections::{BTreeMap, BTreeSet};

use super::{KubeletSettings, ReservedCapacity, ResolveError, ResolverSettings};
use crate::apis::ec2nodeclass::{
    AMIFamily, CapacityReservationState, CapacityReservationType, EC2NodeClass, InstanceStorePolicy,
};
use crate::scheduling::parse_quantity;

/// The device an AMI family boots from, where Karpenter looks for the root
/// volume size when no mapping is marked `rootVolume: true`.
fn ephemeral_block_device(family: AMIFamily) -> Option<&'static str> {
    match family {
        AMIFamily::AL2 | AMIFamily::AL2023 => Some("/dev/xvda"),
        AMIFamily::Bottlerocket => Some("/dev/xvdb"),
        AMIFamily::Windows2019 | AMIFamily::Windows2022 | AMIFamily::Windows2025 => {
            Some("/dev/sda1")
        }
        AMIFamily::Custom => None,
    }
}

fn is_windows(family: AMIFamily) -> bool {
    matches!(
        family,
        AMIFamily::Windows2019 | AMIFamily::Windows2022 | AMIFamily::Windows2025
    )
}

impl ResolverSettings {
    /// The settings an EC2NodeClass implies, as Karpenter's AWS provider derives them:
    ///
    /// - OS `windows` for Windows families, else `linux`;
    /// - ENI-limited pod density except on Windows; `podsPerCore` ignored on Bottlerocket;
    /// - ephemeral storage from the `rootVolume: true` mapping, else the family's
    ///   boot device mapping (the last mapping for `Custom`), else 20Gi; the
    ///   local NVMe total with `instanceStorePolicy: RAID0`;
    /// - the kubelet block's reservations and eviction thresholds;
    /// - the zones of the subnets in `status.subnets` (every zone while the
    ///   status lists none, as in `simulate`);
    /// - the capacity reservations in `status.capacityReservations`, their
    ///   free counts not yet known (the instance-type provider fills them in).
    pub fn from_node_class(node_class: &EC2NodeClass) -> Result<Self, ResolveError> {
        let family = node_class
            .spec
            .effective_ami_family()
            .unwrap_or(AMIFamily::AL2023);
        let spec = &node_class.spec;
        let mut settings = ResolverSettings {
            os: if is_windows(family) {
                "windows"
            } else {
                "linux"
            }
            .to_string(),
            eni_limited_pods: !is_windows(family),
            instance_store_raid0: spec.instance_store_policy == Some(InstanceStorePolicy::RAID0),
            ..ResolverSettings::default()
        };
        if let Some(size) = root_volume_size(node_class, family)? {
            settings.root_volume_bytes = size;
        }
        let subnet_zones: BTreeSet<String> = node_class
            .status
            .iter()
            .flat_map(|status| status.subnets.iter().flatten())
            .map(|subnet| subnet.zone.clone())
            .collect();
        if !subnet_zones.is_empty() {
            settings.zones = Some(subnet_zones);
        }
        settings.capacity_reservations = node_class
            .status
            .iter()
            .flat_map(|status| status.capacity_reservations.iter().flatten())
            .map(|r| ReservedCapacity {
                id: r.id.clone(),
                instance_type: r.instance_type.clone(),
                zone: r.availability_zone.clone(),
                reservation_type: match r.reservation_type {
                    Some(CapacityReservationType::CapacityBlock) => "capacity-block",
                    _ => "default",
                }
                .to_string(),
                interruptible: r.interruptible.unwrap_or(false),
                expiring: r.state == Some(CapacityReservationState::Expiring),
                available: None,
            })
            .collect();
        settings.placement_group = node_class
            .status
            .as_ref()
            .and_then(|status| status.placement_group.clone());
        if let Some(kubelet) = &spec.kubelet {
            let map = |m: &Option<BTreeMap<String, String>>| m.clone().unwrap_or_default();
            settings.kubelet = KubeletSettings {
                max_pods: kubelet.max_pods.map(i64::from),
                pods_per_core: kubelet
                    .pods_per_core
                    .filter(|_| family != AMIFamily::Bottlerocket)
                    .map(i64::from),
                kube_reserved: map(&kubelet.kube_reserved),
                system_reserved: map(&kubelet.system_reserved),
                eviction_hard: map(&kubelet.eviction_hard),
                eviction_soft: map(&kubelet.eviction_soft),
            };
        }
        Ok(settings)
    }
}

fn root_volume_size(
    node_class: &EC2NodeClass,
    family: AMIFamily,
) -> Result<Option<i64>, ResolveError> {
    let mappings = node_class
        .spec
        .block_device_mappings
        .as_deref()
        .unwrap_or_default();
    let chosen = mappings
        .iter()
        .position(|m| m.root_volume == Some(true))
        .or_else(|| match ephemeral_block_device(family) {
            Some(device) => mappings
                .iter()
                .position(|m| m.device_name.as_deref() == Some(device)),
            None => mappings.len().checked_sub(1),
        });
    let Some(index) = chosen else {
        return Ok(None);
    };
    let Some(size) = mappings
        .get(index)
        .and_then(|m| m.ebs.as_ref())
        .and_then(|ebs| ebs.volume_size.as_deref())
    else {
        return Ok(None);
    };
    let field = format!("blockDeviceMappings[{index}].ebs.volumeSize");
    parse_quantity(&field, size, 0)
        .map(Some)
        .map_err(|source| ResolveError::Quantity { field, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::instance_types::capacity::GIB;

    fn node_class(yaml: &str) -> EC2NodeClass {
        crate::yaml::from_str(yaml).unwrap()
    }

    const BASE: &str = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"#;

    #[test]
    fn defaults_are_al2023_with_a_20gi_root_volume() {
        let settings = ResolverSettings::from_node_class(&node_class(BASE)).unwrap();
        assert_eq!(settings, ResolverSettings::default());
    }

    #[test]
    fn root_volume_kubelet_and_raid0_are_read() {
        let yaml = format!(
            "{BASE}  instanceStorePolicy: RAID0\n  blockDeviceMappings:\n  - deviceName: /dev/xvda\n    ebs: {{volumeSize: 100Gi}}\n  kubelet:\n    maxPods: 58\n    kubeReserved: {{cpu: 200m}}\n"
        );
        let settings = ResolverSettings::from_node_class(&node_class(&yaml)).unwrap();
        assert_eq!(settings.root_volume_bytes, 100 * GIB);
        assert!(settings.instance_store_raid0);
        assert_eq!(settings.kubelet.max_pods, Some(58));
        assert_eq!(
            settings
                .kubelet
                .kube_reserved
                .get("cpu")
                .map(String::as_str),
            Some("200m")
        );
    }

    #[test]
    fn zones_come_from_the_subnets_in_status() {
        let yaml = format!(
            "{BASE}status:\n  subnets:\n  - {{id: subnet-1, zone: us-east-1a}}\n  - {{id: subnet-2, zone: us-east-1c}}\n"
        );
        let settings = ResolverSettings::from_node_class(&node_class(&yaml)).unwrap();
        let zones: Vec<&str> = settings
            .zones
            .iter()
            .flatten()
            .map(String::as_str)
            .collect();
        assert_eq!(zones, ["us-east-1a", "us-east-1c"]);
    }

    #[test]
    fn capacity_reservations_come_from_the_status() {
        let yaml = format!(
            "{BASE}status:\n  capacityReservations:\n  - {{id: cr-1, instanceType: m5.large, availabilityZone: us-east-1a, instanceMatchCriteria: targeted, ownerID: '012345678901', reservationType: capacity-block, state: expiring, interruptible: true}}\n  - {{id: cr-2, instanceType: c5.large, availabilityZone: us-east-1b, instanceMatchCriteria: open, ownerID: '012345678901'}}\n"
        );
        let settings = ResolverSettings::from_node_class(&node_class(&yaml)).unwrap();
        assert_eq!(
            settings.capacity_reservations,
            [
                ReservedCapacity {
                    id: "cr-1".into(),
                    instance_type: "m5.large".into(),
                    zone: "us-east-1a".into(),
                    reservation_type: "capacity-block".into(),
                    interruptible: true,
                    expiring: true,
                    available: None,
                },
                ReservedCapacity {
                    id: "cr-2".into(),
                    instance_type: "c5.large".into(),
                    zone: "us-east-1b".into(),
                    reservation_type: "default".into(),
                    interruptible: false,
                    expiring: false,
                    available: None,
                },
            ]
        );
    }

    #[test]
    fn windows_families_are_windows_without_eni_density() {
        let yaml = BASE.replace("al2023@latest", "windows2022@latest");
        let settings = ResolverSettings::from_node_class(&node_class(&yaml)).unwrap();
        assert_eq!(settings.os, "windows");
        assert!(!settings.eni_limited_pods);
    }
}
