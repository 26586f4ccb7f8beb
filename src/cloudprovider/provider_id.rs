//! The provider ID of an EC2 instance, `aws:///<zone>/<instance-id>`, as
//! a type: built once where an instance is launched or found, parsed one
//! way wherever a Node, NodeClaim or message names an instance.

use std::fmt;

use crate::apis::NodeClaim;

use super::CloudProviderError;

/// The scheme every provider ID nodewright writes starts with.
const PREFIX: &str = "aws:///";

/// An EC2 instance's provider ID.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProviderId {
    zone: String,
    instance_id: String,
}

impl ProviderId {
    /// The provider ID of instance `instance_id` in `zone`.
    pub fn new(zone: &str, instance_id: &str) -> Self {
        ProviderId {
            zone: zone.to_string(),
            instance_id: instance_id.to_string(),
        }
    }

    /// Parses `aws:///<zone>/<instance-id>`; `None` for anything else
    /// (another provider's ID, or no `i-` instance at the end).
    pub fn parse(text: &str) -> Option<Self> {
        let (zone, id) = text.strip_prefix(PREFIX)?.rsplit_once('/')?;
        id.starts_with("i-").then(|| ProviderId::new(zone, id))
    }

    /// The provider ID in a NodeClaim's `status.providerID`; `NotFound`
    /// when it has none or it names no EC2 instance.
    pub fn of_claim(claim: &NodeClaim) -> Result<Self, CloudProviderError> {
        let text = claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .ok_or_else(|| CloudProviderError::NotFound {
                provider_id: claim.metadata.name.clone().unwrap_or_default(),
                source: Some("the NodeClaim has no status.providerID".into()),
            })?;
        ProviderId::parse(&text).ok_or(CloudProviderError::NotFound {
            provider_id: text,
            source: Some("status.providerID names no EC2 instance".into()),
        })
    }

    /// The availability zone (empty when the ID gives none).
    pub fn zone(&self) -> &str {
        &self.zone
    }

    /// The EC2 instance ID (`i-…`).
    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }
}

impl fmt::Display for ProviderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}/{}", self.zone, self.instance_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provider_id_round_trips_and_others_are_refused() {
        let id = ProviderId::new("us-east-1a", "i-0abc");
        assert_eq!(id.to_string(), "aws:///us-east-1a/i-0abc");
        assert_eq!(ProviderId::parse("aws:///us-east-1a/i-0abc"), Some(id));
        let parsed = ProviderId::parse("aws:///us-east-1a/i-1").unwrap();
        assert_eq!((parsed.zone(), parsed.instance_id()), ("us-east-1a", "i-1"));
        for other in ["gce://x", "aws:///us-east-1a/vol-1", "i-1", "kwok://node-1"] {
            assert_eq!(ProviderId::parse(other), None, "{other}");
        }
    }
}
