//! Test fixtures shared by the AMI tests here and the EC2NodeClass
//! controller's.

use nodewright_filter::{Ami, AmiState, Architecture};

/// An available image `id` of `arch` and `variant`, created at time 100.
pub(crate) fn ami(id: &str, arch: Architecture, variant: &str) -> Ami {
    Ami {
        id: id.to_string(),
        name: format!("{id}-name"),
        owner: "amazon".to_string(),
        state: AmiState::Available,
        creation_time: 100,
        deprecation_time: None,
        architecture: arch,
        variant: variant.to_string(),
        tags: Default::default(),
        source: "test".to_string(),
    }
}
