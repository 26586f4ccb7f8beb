//! What one launch template holds, and the EC2 request that creates it. The
//! name is Karpenter's form, `karpenter.k8s.aws/<number>`, where the number
//! is a hash of everything the template holds: two launches that need the
//! same template share it, and any change makes a new one.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{
    CapacityReservationPreference, CapacityReservationTarget,
    ConnectionTrackingSpecificationRequest, LaunchTemplateBlockDeviceMappingRequest,
    LaunchTemplateCapacityReservationSpecificationRequest, LaunchTemplateCpuOptionsRequest,
    LaunchTemplateEbsBlockDeviceRequest, LaunchTemplateHttpTokensState,
    LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMarketOptionsRequest, LaunchTemplateInstanceMetadataEndpointState,
    LaunchTemplateInstanceMetadataOptionsRequest, LaunchTemplateInstanceMetadataProtocolIpv6,
    LaunchTemplateInstanceMetadataTagsState,
    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, LaunchTemplatePlacementRequest,
    LaunchTemplateTagSpecificationRequest, LaunchTemplatesMonitoringRequest, MarketType,
    NestedVirtualizationSpecification, RequestLaunchTemplateData, ResourceType, Tag,
    TagSpecification, Tenancy, VolumeType as Ec2VolumeType,
};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::IpFamily;
use crate::apis::ec2nodeclass::{
    AMIFamily, BlockDevice, BlockDeviceMapping, ConnectionTracking, CpuOptions, EnabledDisabled,
    HttpTokens, InterfaceType, MetadataOptions, NetworkInterface, VolumeType,
};

/// Prefix of every launch template name (Karpenter's).
pub const NAME_PREFIX: &str = "karpenter.k8s.aws/";

/// The capacity reservation a template launches into.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReservationTarget {
    /// `cr-…`.
    pub id: String,
    /// A capacity block (market type `capacity-block`).
    pub capacity_block: bool,
    /// An interruptible ODCR (market type `interruptible-capacity-reservation`).
    pub interruptible: bool,
}

/// Everything one launch template holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaunchTemplateSpec {
    /// The EC2NodeClass it belongs to (also a tag).
    pub node_class: String,
    /// AMI.
    pub image_id: String,
    /// `status.instanceProfile`.
    pub instance_profile: String,
    /// `status.securityGroups`.
    pub security_group_ids: Vec<String>,
    /// Base64 user data.
    pub user_data: String,
    /// The class's block devices, or the family's defaults.
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    /// Metadata service options, defaults filled in.
    pub metadata_options: MetadataOptions,
    /// `spec.detailedMonitoring`.
    pub detailed_monitoring: bool,
    /// `spec.associatePublicIPAddress`.
    pub associate_public_ip_address: Option<bool>,
    /// `spec.ipPrefixCount`.
    pub ip_prefix_count: Option<i32>,
    /// `spec.networkInterfaces`.
    pub network_interfaces: Vec<NetworkInterface>,
    /// `spec.connectionTracking`.
    pub connection_tracking: Option<ConnectionTracking>,
    /// `spec.cpuOptions`.
    pub cpu_options: Option<CpuOptions>,
    /// The cluster's IP family (IPv6 gives the primary interface an IPv6 address).
    pub ip_family: IpFamily,
    /// `on-demand`, `spot` or `reserved`.
    pub capacity_type: String,
    /// The reservation a reserved launch targets.
    pub reservation: Option<ReservationTarget>,
    /// `dedicated` when the NodeClaim asks only for dedicated tenancy.
    pub dedicated_tenancy: bool,
    /// `status.placementGroup`'s id: every instance launches into it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement_group_id: Option<String>,
    /// The partition a launch into a partition group targets, when the
    /// NodeClaim asks for particular ones (EC2 picks one otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement_group_partition: Option<i32>,
    /// Tags of the template and of the interfaces it creates.
    pub tags: BTreeMap<String, String>,
}

/// The block devices a family gets when the class names none: an encrypted
/// 20 GiB gp3 root volume (Bottlerocket: a 4 GiB OS volume plus a 20 GiB data
/// volume; Windows: 50 GiB); Custom AMIs keep their own.
pub fn default_block_device_mappings(family: AMIFamily) -> Vec<BlockDeviceMapping> {
    let volume = |device: &str, size: &str| BlockDeviceMapping {
        device_name: Some(device.to_string()),
        ebs: Some(BlockDevice {
            encrypted: Some(true),
            volume_type: Some(VolumeType::Gp3),
            volume_size: Some(size.to_string()),
            ..BlockDevice::default()
        }),
        root_volume: None,
    };
    match family {
        AMIFamily::AL2 | AMIFamily::AL2023 => vec![volume("/dev/xvda", "20Gi")],
        AMIFamily::Bottlerocket => vec![volume("/dev/xvda", "4Gi"), volume("/dev/xvdb", "20Gi")],
        AMIFamily::Windows2019 | AMIFamily::Windows2022 | AMIFamily::Windows2025 => {
            vec![volume("/dev/sda1", "50Gi")]
        }
        AMIFamily::Custom => Vec::new(),
    }
}

impl LaunchTemplateSpec {
    /// `karpenter.k8s.aws/<first 8 bytes of SHA-256 of the spec, as a number>`.
    pub fn name(&self) -> String {
        let bytes = serde_json::to_vec(self).unwrap_or_default();
        let digest = Sha256::digest(&bytes);
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        format!("{NAME_PREFIX}{}", u64::from_be_bytes(first))
    }

    /// Tags as EC2 wants them, sorted by key.
    pub fn ec2_tags(&self) -> Vec<Tag> {
        ec2_tags(&self.tags)
    }

    /// The template's tags (resource type `launch-template`).
    pub fn tag_specification(&self) -> TagSpecification {
        TagSpecification::builder()
            .resource_type(ResourceType::LaunchTemplate)
            .set_tags(Some(self.ec2_tags()))
            .build()
    }

    /// The launch template data.
    pub fn data(&self) -> Result<RequestLaunchTemplateData, String> {
        let interfaces = self.interfaces();
        let mut data = RequestLaunchTemplateData::builder()
            .image_id(&self.image_id)
            .user_data(&self.user_data)
            .iam_instance_profile(
                LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                    .name(&self.instance_profile)
                    .build(),
            )
            .monitoring(
                LaunchTemplatesMonitoringRequest::builder()
                    .enabled(self.detailed_monitoring)
                    .build(),
            )
            .metadata_options(self.metadata_request())
            .set_block_device_mappings(self.block_devices()?)
            .tag_specifications(self.data_tags(ResourceType::NetworkInterface));
        if interfaces.is_empty() {
            data = data.set_security_group_ids(Some(self.security_group_ids.clone()));
        } else {
            data = data.set_network_interfaces(Some(interfaces));
        }
        if self.capacity_type == "spot" {
            data = data.tag_specifications(self.data_tags(ResourceType::SpotInstancesRequest));
        }
        if let Some(nested) = self
            .cpu_options
            .as_ref()
            .and_then(|c| c.nested_virtualization)
        {
            data = data.cpu_options(
                LaunchTemplateCpuOptionsRequest::builder()
                    .nested_virtualization(match nested {
                        EnabledDisabled::Enabled => NestedVirtualizationSpecification::Enabled,
                        EnabledDisabled::Disabled => NestedVirtualizationSpecification::Disabled,
                    })
                    .build(),
            );
        }
        if self.dedicated_tenancy || self.placement_group_id.is_some() {
            let mut placement = LaunchTemplatePlacementRequest::builder()
                .set_group_id(self.placement_group_id.clone())
                .set_partition_number(self.placement_group_partition);
            if self.dedicated_tenancy {
                placement = placement.tenancy(Tenancy::Dedicated);
            }
            data = data.placement(placement.build());
        }
        // Karpenter's targeted launch mode: reserved launches use only their
        // reservation; on-demand and spot launches never use a reservation,
        // so no instance lands in one the class does not track.
        let reservation = match &self.reservation {
            Some(target) => LaunchTemplateCapacityReservationSpecificationRequest::builder()
                .capacity_reservation_preference(
                    CapacityReservationPreference::CapacityReservationsOnly,
                )
                .capacity_reservation_target(
                    CapacityReservationTarget::builder()
                        .capacity_reservation_id(&target.id)
                        .build(),
                )
                .build(),
            None => LaunchTemplateCapacityReservationSpecificationRequest::builder()
                .capacity_reservation_preference(CapacityReservationPreference::None)
                .build(),
        };
        data = data.capacity_reservation_specification(reservation);
        if let Some(target) = &self.reservation {
            let market = if target.capacity_block {
                Some(MarketType::CapacityBlock)
            } else if target.interruptible {
                Some(MarketType::InterruptibleCapacityReservation)
            } else {
                None
            };
            if let Some(market) = market {
                data = data.instance_market_options(
                    LaunchTemplateInstanceMarketOptionsRequest::builder()
                        .market_type(market)
                        .build(),
                );
            }
        }
        Ok(data.build())
    }

    fn data_tags(&self, resource: ResourceType) -> LaunchTemplateTagSpecificationRequest {
        LaunchTemplateTagSpecificationRequest::builder()
            .resource_type(resource)
            .set_tags(Some(self.ec2_tags()))
            .build()
    }

    fn metadata_request(&self) -> LaunchTemplateInstanceMetadataOptionsRequest {
        let options = &self.metadata_options;
        let enabled = |v: Option<EnabledDisabled>| v == Some(EnabledDisabled::Enabled);
        LaunchTemplateInstanceMetadataOptionsRequest::builder()
            .http_endpoint(if enabled(options.http_endpoint) {
                LaunchTemplateInstanceMetadataEndpointState::Enabled
            } else {
                LaunchTemplateInstanceMetadataEndpointState::Disabled
            })
            .http_protocol_ipv6(if enabled(options.http_protocol_ipv6) {
                LaunchTemplateInstanceMetadataProtocolIpv6::Enabled
            } else {
                LaunchTemplateInstanceMetadataProtocolIpv6::Disabled
            })
            .http_put_response_hop_limit(
                options
                    .http_put_response_hop_limit
                    .and_then(|h| i32::try_from(h).ok())
                    .unwrap_or(1),
            )
            .http_tokens(match options.http_tokens {
                Some(HttpTokens::Optional) => LaunchTemplateHttpTokensState::Optional,
                _ => LaunchTemplateHttpTokensState::Required,
            })
            // Instance tags in the metadata service would fail on tag keys
            // with `/` (all of nodewright's), whatever the account default.
            .instance_metadata_tags(LaunchTemplateInstanceMetadataTagsState::Disabled)
            .build()
    }

    fn block_devices(
        &self,
    ) -> Result<Option<Vec<LaunchTemplateBlockDeviceMappingRequest>>, String> {
        if self.block_device_mappings.is_empty() {
            return Ok(None);
        }
        let mut out = Vec::new();
        for (index, mapping) in self.block_device_mappings.iter().enumerate() {
            let mut request = LaunchTemplateBlockDeviceMappingRequest::builder()
                .set_device_name(mapping.device_name.clone());
            if let Some(ebs) = &mapping.ebs {
                let size = match &ebs.volume_size {
                    Some(size) => Some(volume_size_gib(size).map_err(|e| {
                        format!("spec.blockDeviceMappings[{index}].ebs.volumeSize: {e}")
                    })?),
                    None => None,
                };
                request = request.ebs(
                    LaunchTemplateEbsBlockDeviceRequest::builder()
                        .set_delete_on_termination(ebs.delete_on_termination)
                        .set_encrypted(ebs.encrypted)
                        .set_iops(ebs.iops.and_then(|i| i32::try_from(i).ok()))
                        .set_throughput(ebs.throughput.and_then(|t| i32::try_from(t).ok()))
                        .set_kms_key_id(ebs.kms_key_id.clone())
                        .set_snapshot_id(ebs.snapshot_id.clone())
                        .set_volume_initialization_rate(ebs.volume_initialization_rate)
                        .set_volume_size(size)
                        .set_volume_type(ebs.volume_type.map(ec2_volume_type))
                        .build(),
                );
            }
            out.push(request.build());
        }
        Ok(Some(out))
    }

    /// Interface specifications: the class's `networkInterfaces`, or one
    /// primary interface when a setting lives only on an interface (public
    /// IP, prefix delegation, IPv6, connection tracking). Empty otherwise:
    /// the security groups then go on the template itself.
    fn interfaces(&self) -> Vec<LaunchTemplateInstanceNetworkInterfaceSpecificationRequest> {
        let ipv6 = self.ip_family == IpFamily::Ipv6;
        let tracking = self.connection_tracking.as_ref().map(|c| {
            ConnectionTrackingSpecificationRequest::builder()
                .set_tcp_established_timeout(c.tcp_established_timeout)
                .set_udp_stream_timeout(c.udp_stream_timeout)
                .set_udp_timeout(c.udp_timeout)
                .build()
        });
        let primary = |network_card: i32, device: i32, efa_only: bool, kind: Option<&str>| {
            let mut interface =
                LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                    .network_card_index(network_card)
                    .device_index(device)
                    .set_interface_type(kind.map(str::to_string))
                    .set_groups(Some(self.security_group_ids.clone()));
            if !efa_only {
                interface = interface
                    .set_associate_public_ip_address(self.associate_public_ip_address)
                    .set_connection_tracking_specification(tracking.clone());
                if ipv6 {
                    interface = interface
                        .set_ipv6_prefix_count(self.ip_prefix_count)
                        .primary_ipv6(true)
                        .ipv6_address_count(1);
                } else {
                    interface = interface.set_ipv4_prefix_count(self.ip_prefix_count);
                }
            }
            interface.build()
        };
        if !self.network_interfaces.is_empty() {
            return self
                .network_interfaces
                .iter()
                .map(|ni| {
                    let efa_only = ni.interface_type == InterfaceType::EfaOnly;
                    let kind = match ni.interface_type {
                        InterfaceType::Interface => "interface",
                        InterfaceType::EfaOnly => "efa-only",
                    };
                    primary(ni.network_card_index, ni.device_index, efa_only, Some(kind))
                })
                .collect();
        }
        let needs_interface = self.associate_public_ip_address.is_some()
            || self.ip_prefix_count.is_some()
            || self.connection_tracking.is_some()
            || ipv6;
        if needs_interface {
            vec![primary(0, 0, false, None)]
        } else {
            Vec::new()
        }
    }
}

/// Tags as EC2 wants them, sorted by key.
pub fn ec2_tags(tags: &BTreeMap<String, String>) -> Vec<Tag> {
    tags.iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

/// A volume size quantity in whole GiB, rounded up (`20Gi` → 20, `100G` → 94).
pub fn volume_size_gib(size: &str) -> Result<i32, String> {
    let bytes =
        crate::scheduling::parse_quantity("volumeSize", size, 0).map_err(|e| e.to_string())?;
    const GIB: i64 = 1 << 30;
    let gib = (bytes + GIB - 1) / GIB;
    i32::try_from(gib).map_err(|_| format!("{size:?} is too large"))
}

fn ec2_volume_type(volume: VolumeType) -> Ec2VolumeType {
    match volume {
        VolumeType::Standard => Ec2VolumeType::Standard,
        VolumeType::Io1 => Ec2VolumeType::Io1,
        VolumeType::Io2 => Ec2VolumeType::Io2,
        VolumeType::Gp2 => Ec2VolumeType::Gp2,
        VolumeType::Sc1 => Ec2VolumeType::Sc1,
        VolumeType::St1 => Ec2VolumeType::St1,
        VolumeType::Gp3 => Ec2VolumeType::Gp3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> LaunchTemplateSpec {
        LaunchTemplateSpec {
            node_class: "default".to_string(),
            image_id: "ami-1".to_string(),
            instance_profile: "nodes".to_string(),
            security_group_ids: vec!["sg-1".to_string()],
            user_data: "aGk=".to_string(),
            block_device_mappings: default_block_device_mappings(AMIFamily::AL2023),
            metadata_options: MetadataOptions::default(),
            detailed_monitoring: false,
            associate_public_ip_address: None,
            ip_prefix_count: None,
            network_interfaces: Vec::new(),
            connection_tracking: None,
            cpu_options: None,
            ip_family: IpFamily::Ipv4,
            capacity_type: "on-demand".to_string(),
            reservation: None,
            dedicated_tenancy: false,
            placement_group_id: None,
            placement_group_partition: None,
            tags: [("team".to_string(), "web".to_string())].into(),
        }
    }

    #[test]
    fn the_name_is_a_hash_of_the_content() {
        let name = spec().name();
        assert!(name.starts_with(NAME_PREFIX));
        assert_eq!(name, spec().name());
        let other = LaunchTemplateSpec {
            image_id: "ami-2".to_string(),
            ..spec()
        };
        assert_ne!(name, other.name());
    }

    #[test]
    fn security_groups_go_on_the_template_unless_an_interface_is_needed() {
        let data = spec().data().unwrap();
        assert_eq!(data.security_group_ids(), ["sg-1"]);
        assert!(data.network_interfaces().is_empty());
        let public = LaunchTemplateSpec {
            associate_public_ip_address: Some(true),
            ip_prefix_count: Some(2),
            ..spec()
        }
        .data()
        .unwrap();
        assert!(public.security_group_ids().is_empty());
        let primary = &public.network_interfaces()[0];
        assert_eq!(primary.groups(), ["sg-1"]);
        assert_eq!(primary.associate_public_ip_address(), Some(true));
        assert_eq!(primary.ipv4_prefix_count(), Some(2));
        let efa = LaunchTemplateSpec {
            network_interfaces: vec![
                NetworkInterface {
                    network_card_index: 0,
                    device_index: 0,
                    interface_type: InterfaceType::Interface,
                },
                NetworkInterface {
                    network_card_index: 1,
                    device_index: 0,
                    interface_type: InterfaceType::EfaOnly,
                },
            ],
            associate_public_ip_address: Some(true),
            ..spec()
        }
        .data()
        .unwrap();
        let kinds: Vec<(Option<&str>, Option<bool>)> = efa
            .network_interfaces()
            .iter()
            .map(|i| (i.interface_type(), i.associate_public_ip_address()))
            .collect();
        assert_eq!(
            kinds,
            [(Some("interface"), Some(true)), (Some("efa-only"), None)]
        );
    }

    #[test]
    fn imds_defaults_to_v2_with_instance_tags_off() {
        let data = spec().data().unwrap();
        let metadata = data.metadata_options().unwrap();
        assert_eq!(
            metadata.http_tokens(),
            Some(&LaunchTemplateHttpTokensState::Required)
        );
        assert_eq!(metadata.http_put_response_hop_limit(), Some(1));
        assert_eq!(
            metadata.instance_metadata_tags(),
            Some(&LaunchTemplateInstanceMetadataTagsState::Disabled)
        );
    }

    #[test]
    fn reservations_are_targeted_and_other_launches_opt_out() {
        let on_demand = spec().data().unwrap();
        let preference = on_demand
            .capacity_reservation_specification()
            .unwrap()
            .capacity_reservation_preference();
        assert_eq!(preference, Some(&CapacityReservationPreference::None));
        let block = LaunchTemplateSpec {
            capacity_type: "reserved".to_string(),
            reservation: Some(ReservationTarget {
                id: "cr-1".to_string(),
                capacity_block: true,
                interruptible: false,
            }),
            ..spec()
        }
        .data()
        .unwrap();
        let reservation = block.capacity_reservation_specification().unwrap();
        assert_eq!(
            reservation.capacity_reservation_preference(),
            Some(&CapacityReservationPreference::CapacityReservationsOnly)
        );
        assert_eq!(
            reservation
                .capacity_reservation_target()
                .unwrap()
                .capacity_reservation_id(),
            Some("cr-1")
        );
        assert_eq!(
            block.instance_market_options().unwrap().market_type(),
            Some(&MarketType::CapacityBlock)
        );
    }

    #[test]
    fn spot_templates_tag_the_spot_request_too() {
        let resources = |spec: LaunchTemplateSpec| -> Vec<String> {
            spec.data()
                .unwrap()
                .tag_specifications()
                .iter()
                .map(|t| t.resource_type().unwrap().as_str().to_string())
                .collect()
        };
        assert_eq!(resources(spec()), ["network-interface"]);
        let spot = LaunchTemplateSpec {
            capacity_type: "spot".to_string(),
            ..spec()
        };
        assert_eq!(
            resources(spot),
            ["network-interface", "spot-instances-request"]
        );
    }

    #[test]
    fn family_block_devices_and_sizes() {
        let sizes = |family| -> Vec<(String, String)> {
            default_block_device_mappings(family)
                .into_iter()
                .map(|m| (m.device_name.unwrap(), m.ebs.unwrap().volume_size.unwrap()))
                .collect()
        };
        assert_eq!(
            sizes(AMIFamily::AL2023),
            [("/dev/xvda".into(), "20Gi".into())]
        );
        assert_eq!(
            sizes(AMIFamily::Bottlerocket),
            [
                ("/dev/xvda".into(), "4Gi".into()),
                ("/dev/xvdb".into(), "20Gi".into())
            ]
        );
        assert_eq!(
            sizes(AMIFamily::Windows2022),
            [("/dev/sda1".into(), "50Gi".into())]
        );
        assert!(sizes(AMIFamily::Custom).is_empty());
        assert_eq!(volume_size_gib("20Gi"), Ok(20));
        assert_eq!(volume_size_gib("100G"), Ok(94));
        assert!(volume_size_gib("lots").is_err());
    }
}
