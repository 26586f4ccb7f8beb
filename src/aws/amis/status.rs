//! `status.amis` from the AMI selector's ordered choice (the EC2NodeClass
//! controller decides `AMIsReady` from it).

use std::collections::HashSet;

use nodewright_filter::{Ami, Architecture};

use crate::apis::ec2nodeclass::{AMIRequirement, AMIStatus};

use crate::apis::labels::{
    ARCH_LABEL_KEY as ARCH, INSTANCE_ACCELERATOR_COUNT_LABEL_KEY as ACCELERATOR_COUNT,
    INSTANCE_GPU_COUNT_LABEL_KEY as GPU_COUNT,
};

/// `status.amis` for the selector's ordered choice: the first image per
/// requirement set (architecture, plus the variant when its SSM path named
/// one), in the selector's order. A launch takes the first entry whose
/// requirements the instance type meets, so later images of the same set
/// could never boot and are left out, as in Karpenter.
pub fn status_amis(selected: &[Ami], now: i64) -> Vec<AMIStatus> {
    let mut seen = HashSet::new();
    selected
        .iter()
        .filter(|ami| seen.insert((arch_label(ami.architecture), ami.variant.as_str())))
        .map(|ami| AMIStatus {
            id: ami.id.clone(),
            name: (!ami.name.is_empty()).then(|| ami.name.clone()),
            deprecated: ami.is_deprecated(now).then_some(true),
            requirements: requirements(ami),
        })
        .collect()
}

/// The instance types an image serves, as node selector requirements sorted
/// by key length, then key.
fn requirements(ami: &Ami) -> Vec<AMIRequirement> {
    let mut out = vec![requirement(ARCH, "In", Some(arch_label(ami.architecture)))];
    match ami.variant.as_str() {
        "standard" => {
            out.push(requirement(GPU_COUNT, "DoesNotExist", None));
            out.push(requirement(ACCELERATOR_COUNT, "DoesNotExist", None));
        }
        "nvidia" => out.push(requirement(GPU_COUNT, "Exists", None)),
        "neuron" => out.push(requirement(ACCELERATOR_COUNT, "Exists", None)),
        _ => {}
    }
    out.sort_by(|a, b| {
        a.key
            .len()
            .cmp(&b.key.len())
            .then_with(|| a.key.cmp(&b.key))
    });
    out
}

/// The `kubernetes.io/arch` value of an image's architecture.
fn arch_label(architecture: Architecture) -> &'static str {
    match architecture {
        Architecture::Arm64 => "arm64",
        _ => "amd64",
    }
}

fn requirement(key: &str, operator: &str, value: Option<&str>) -> AMIRequirement {
    AMIRequirement {
        key: key.to_string(),
        operator: operator.to_string(),
        values: value.map(|v| vec![v.to_string()]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::amis::testing::ami;

    #[test]
    fn keeps_the_first_image_per_requirement_set_in_selector_order() {
        let mut old = ami("ami-old", Architecture::Amd64, "standard");
        old.deprecation_time = Some(50);
        let selected = [
            ami("ami-new", Architecture::Amd64, "standard"),
            ami("ami-gpu", Architecture::Amd64, "nvidia"),
            old,
            ami("ami-arm", Architecture::Arm64, ""),
            ami("ami-arm-older", Architecture::Arm64, ""),
        ];
        let status = status_amis(&selected, 1_000);
        let ids: Vec<&str> = status.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["ami-new", "ami-gpu", "ami-arm"]);
        assert_eq!(
            status[0]
                .requirements
                .iter()
                .map(|r| (r.key.as_str(), r.operator.as_str()))
                .collect::<Vec<_>>(),
            [
                (ARCH, "In"),
                (GPU_COUNT, "DoesNotExist"),
                (ACCELERATOR_COUNT, "DoesNotExist"),
            ]
        );
        assert_eq!(status[2].requirements.len(), 1);
        assert_eq!(
            status[2].requirements[0].values,
            Some(vec!["arm64".to_string()])
        );
    }

    #[test]
    fn marks_deprecated_images() {
        let mut old = ami("ami-old", Architecture::Amd64, "");
        old.deprecation_time = Some(50);
        assert_eq!(status_amis(&[old.clone()], 1_000)[0].deprecated, Some(true));
        assert_eq!(status_amis(&[old], 10)[0].deprecated, None);
    }
}
