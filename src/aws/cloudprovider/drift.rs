//! The AWS provider's drift checks that read the running instance against
//! the class's resolved status (Karpenter's `areSecurityGroupsDrifted`,
//! `isSubnetDrifted`, `isCapacityReservationDrifted`).

use std::collections::BTreeSet;

use crate::apis::EC2NodeClass;
use crate::aws::instance::Instance;
use crate::cloudprovider::{CloudProviderError, DriftReason};
use crate::scheduling::CapacityType;

/// Security-group, subnet and capacity-reservation drift of a running
/// instance against the class's status. An instance in an open reservation
/// is on-demand (see [`Instance::capacity_type`]) and never reservation-drifted.
pub fn instance_drift(
    instance: &Instance,
    class: &EC2NodeClass,
) -> Result<Option<DriftReason>, CloudProviderError> {
    let status = class.status.clone().unwrap_or_default();
    let not_ready = |field: &str| CloudProviderError::NodeClassNotReady {
        node_class: class.metadata.name.clone().unwrap_or_default(),
        reason: format!("{field} is empty: the EC2NodeClass has not been resolved yet"),
    };
    let groups: BTreeSet<&str> = status
        .security_groups
        .iter()
        .flatten()
        .map(|g| g.id.as_str())
        .collect();
    if groups.is_empty() {
        return Err(not_ready("status.securityGroups"));
    }
    let subnets: BTreeSet<&str> = status
        .subnets
        .iter()
        .flatten()
        .map(|s| s.id.as_str())
        .collect();
    if subnets.is_empty() {
        return Err(not_ready("status.subnets"));
    }
    let instance_groups: BTreeSet<&str> = instance
        .security_group_ids
        .iter()
        .map(String::as_str)
        .collect();
    if groups != instance_groups {
        return Ok(Some(DriftReason::SecurityGroupDrift));
    }
    if instance
        .subnet_id
        .as_deref()
        .is_some_and(|subnet| !subnets.contains(subnet))
    {
        return Ok(Some(DriftReason::SubnetDrift));
    }
    if instance.capacity_type == CapacityType::Reserved
        && let Some(id) = &instance.capacity_reservation_id
        && !status
            .capacity_reservations
            .iter()
            .flatten()
            .any(|r| &r.id == id)
    {
        return Ok(Some(DriftReason::CapacityReservationDrift));
    }
    Ok(None)
}
