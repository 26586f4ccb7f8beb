//! Turns an EC2NodeClass's `amiSelectorTerms` into the lookups that find its
//! images: SSM parameters (aliases and `ssmParameter` terms) and
//! `DescribeImages` queries (ids, names, owners, tags), following
//! Karpenter's paths and rules so an existing class finds the same images.

use std::collections::BTreeMap;

use crate::apis::EC2NodeClassSpec;
use crate::apis::ec2nodeclass::{AMIFamily, AMISelectorTerm};

/// Which instance types an image serves, beyond its architecture. Known only
/// for images found through an alias, whose SSM path names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Variant {
    /// Neither GPUs nor accelerators.
    Standard,
    /// NVIDIA GPUs.
    Nvidia,
    /// AWS Neuron accelerators.
    Neuron,
}

impl Variant {
    /// The name the AMI record and SSM paths use.
    pub fn as_str(self) -> &'static str {
        match self {
            Variant::Standard => "standard",
            Variant::Nvidia => "nvidia",
            Variant::Neuron => "neuron",
        }
    }
}

/// An SSM parameter whose value is an image id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParameterQuery {
    /// Parameter name or ARN.
    pub name: String,
    /// The variants an image found here serves; empty when unknown (a user's
    /// `ssmParameter` term).
    pub variants: Vec<Variant>,
    /// The term that asked for it, for messages and the AMI record's source.
    pub term: String,
}

/// One `DescribeImages` request (its filters are ANDed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribeQuery {
    /// Owner filter (`Owners`); empty means any owner.
    pub owners: Vec<String>,
    /// `(filter name, values)` pairs.
    pub filters: Vec<(String, Vec<String>)>,
    /// The term that asked for it.
    pub term: String,
}

/// Everything a class's terms ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AmiQueries {
    /// SSM parameters to read first; their values join the id lookup.
    pub parameters: Vec<ParameterQuery>,
    /// Image ids from `id` terms, each with its term.
    pub ids: Vec<(String, String)>,
    /// Name / owner / tag lookups.
    pub describes: Vec<DescribeQuery>,
}

/// Why a class's terms cannot be turned into lookups.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// `spec.amiSelectorTerms` is empty.
    #[error(
        "spec.amiSelectorTerms is empty: add at least one term (alias, id, name, tags or ssmParameter)"
    )]
    NoTerms,
    /// An alias that is not `family@version` or names an unknown family.
    #[error(
        "spec.amiSelectorTerms[{index}].alias {alias:?} is not supported: use family@version with family one of al2, al2023, bottlerocket, windows2019, windows2022, windows2025"
    )]
    BadAlias {
        /// Position of the term.
        index: usize,
        /// The alias as written.
        alias: String,
    },
    /// An alias family the cluster's Kubernetes version no longer or not yet supports.
    #[error("spec.amiSelectorTerms[{index}].alias {alias:?}: {why}")]
    UnsupportedAlias {
        /// Position of the term.
        index: usize,
        /// The alias as written.
        alias: String,
        /// What the version allows instead.
        why: String,
    },
    /// A term with no field that selects anything.
    #[error(
        "spec.amiSelectorTerms[{index}] selects nothing: set one of alias, id, name, tags or ssmParameter"
    )]
    EmptyTerm {
        /// Position of the term.
        index: usize,
    },
    /// The Kubernetes version is not `major.minor`.
    #[error("Kubernetes version {0:?} is not major.minor (e.g. 1.34)")]
    BadKubernetesVersion(String),
}

/// The lookups for `spec`, with `kubernetes_version` (`1.34`) filling the
/// alias SSM paths.
pub fn queries(
    spec: &EC2NodeClassSpec,
    kubernetes_version: &str,
) -> Result<AmiQueries, QueryError> {
    if spec.ami_selector_terms.is_empty() {
        return Err(QueryError::NoTerms);
    }
    let minor = minor_version(kubernetes_version)?;
    let mut out = AmiQueries::default();
    for (index, term) in spec.ami_selector_terms.iter().enumerate() {
        if let Some(alias) = &term.alias {
            out.parameters
                .extend(alias_parameters(index, alias, kubernetes_version, minor)?);
        } else if let Some(id) = &term.id {
            out.ids.push((id.clone(), format!("id:{id}")));
        } else if let Some(name) = &term.ssm_parameter {
            out.parameters.push(ParameterQuery {
                name: name.clone(),
                variants: Vec::new(),
                term: format!("ssmParameter:{name}"),
            });
        } else {
            out.describes.push(describe_query(index, term)?);
        }
    }
    Ok(out)
}

/// The minor number of `major.minor`, for version gates.
fn minor_version(version: &str) -> Result<u32, QueryError> {
    let bad = || QueryError::BadKubernetesVersion(version.to_string());
    let (major, minor) = version.split_once('.').ok_or_else(bad)?;
    if major != "1" {
        return Err(bad());
    }
    minor.parse().map_err(|_| bad())
}

/// A name / owner / tags term as one `DescribeImages` request. Owners
/// default to `self` and `amazon` when a name is given without one (so a
/// name cannot pick up a stranger's public image); tags alone search every
/// owner the account can see. A tag value `*` only requires the key.
fn describe_query(index: usize, term: &AMISelectorTerm) -> Result<DescribeQuery, QueryError> {
    let mut filters = Vec::new();
    let mut label = Vec::new();
    if let Some(name) = &term.name {
        filters.push(("name".to_string(), vec![name.clone()]));
        label.push(format!("name:{name}"));
    }
    let owners = match (&term.owner, &term.name) {
        (Some(owner), _) => {
            label.push(format!("owner:{owner}"));
            vec![owner.clone()]
        }
        (None, Some(_)) => vec!["self".to_string(), "amazon".to_string()],
        (None, None) => Vec::new(),
    };
    let tags: BTreeMap<&String, &String> = term.tags.iter().flatten().collect();
    for (key, value) in &tags {
        if value.as_str() == "*" {
            filters.push(("tag-key".to_string(), vec![(*key).clone()]));
        } else {
            filters.push((format!("tag:{key}"), vec![(*value).clone()]));
        }
        label.push(format!("tag:{key}={value}"));
    }
    if filters.is_empty() && owners.is_empty() {
        return Err(QueryError::EmptyTerm { index });
    }
    Ok(DescribeQuery {
        owners,
        filters,
        term: label.join(","),
    })
}

/// The SSM parameters an alias reads (Karpenter's paths per family,
/// architecture and variant).
fn alias_parameters(
    index: usize,
    alias: &str,
    k: &str,
    minor: u32,
) -> Result<Vec<ParameterQuery>, QueryError> {
    let bad = || QueryError::BadAlias {
        index,
        alias: alias.to_string(),
    };
    let (family, version) = alias.split_once('@').ok_or_else(bad)?;
    if version.is_empty() {
        return Err(bad());
    }
    let family = AMIFamily::from_alias_family(family).ok_or_else(bad)?;
    let latest = version == "latest";
    let unsupported = |why: &str| QueryError::UnsupportedAlias {
        index,
        alias: alias.to_string(),
        why: why.to_string(),
    };
    let term = format!("alias:{alias}");
    let parameter = |name: String, variants: &[Variant]| ParameterQuery {
        name,
        variants: variants.to_vec(),
        term: term.clone(),
    };
    use Variant::{Neuron, Nvidia, Standard};
    let params = match family {
        AMIFamily::AL2023 => {
            let mut params = Vec::new();
            let per_arch: [(&str, &[Variant]); 2] = [
                ("x86_64", &[Standard, Nvidia, Neuron]),
                ("arm64", &[Standard, Nvidia]),
            ];
            for (arch, variants) in per_arch {
                for &variant in variants {
                    let v = variant.as_str();
                    let leaf = if latest {
                        "recommended".to_string()
                    } else {
                        format!("amazon-eks-node-al2023-{arch}-{v}-{k}-{version}")
                    };
                    params.push(parameter(
                        format!(
                            "/aws/service/eks/optimized-ami/{k}/amazon-linux-2023/{arch}/{v}/{leaf}/image_id"
                        ),
                        &[variant],
                    ));
                }
            }
            params
        }
        AMIFamily::AL2 => {
            if minor >= 33 {
                return Err(unsupported(
                    "Amazon Linux 2 AMIs are not published for Kubernetes 1.33 and later; use al2023@latest",
                ));
            }
            let paths: [(&str, &str, &[Variant]); 3] = [
                ("amazon-linux-2", "amazon-eks-node", &[Standard]),
                ("amazon-linux-2-arm64", "amazon-eks-arm64-node", &[Standard]),
                (
                    "amazon-linux-2-gpu",
                    "amazon-eks-gpu-node",
                    &[Nvidia, Neuron],
                ),
            ];
            paths
                .into_iter()
                .map(|(dir, prefix, variants)| {
                    let leaf = if latest {
                        "recommended".to_string()
                    } else {
                        format!("{prefix}-{k}-{version}")
                    };
                    parameter(
                        format!("/aws/service/eks/optimized-ami/{k}/{dir}/{leaf}/image_id"),
                        variants,
                    )
                })
                .collect()
        }
        AMIFamily::Bottlerocket => {
            let version = if latest {
                "latest"
            } else {
                version.strip_prefix('v').unwrap_or(version)
            };
            let paths: [(&str, &str, &[Variant]); 4] = [
                ("", "x86_64", &[Standard, Neuron]),
                ("", "arm64", &[Standard]),
                ("-nvidia", "x86_64", &[Nvidia]),
                ("-nvidia", "arm64", &[Nvidia]),
            ];
            paths
                .into_iter()
                .map(|(suffix, arch, variants)| {
                    parameter(
                        format!("/aws/service/bottlerocket/aws-k8s-{k}{suffix}/{arch}/{version}/image_id"),
                        variants,
                    )
                })
                .collect()
        }
        AMIFamily::Windows2019 | AMIFamily::Windows2022 | AMIFamily::Windows2025 => {
            if !latest {
                return Err(unsupported("Windows aliases support only @latest"));
            }
            let year = match family {
                AMIFamily::Windows2019 => "2019",
                AMIFamily::Windows2022 => "2022",
                _ => "2025",
            };
            if year == "2025" && minor < 35 {
                return Err(unsupported(
                    "Windows Server 2025 AMIs are published for Kubernetes 1.35 and later; use windows2022@latest",
                ));
            }
            vec![parameter(
                format!(
                    "/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k}/image_id"
                ),
                &[],
            )]
        }
        AMIFamily::Custom => return Err(bad()),
    };
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(terms: serde_json::Value) -> EC2NodeClassSpec {
        serde_json::from_value(serde_json::json!({
            "role": "node",
            "amiFamily": "AL2023",
            "amiSelectorTerms": terms,
            "subnetSelectorTerms": [{"tags": {"a": "b"}}],
            "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
        }))
        .expect("valid spec")
    }

    fn names(q: &AmiQueries) -> Vec<&str> {
        q.parameters.iter().map(|p| p.name.as_str()).collect()
    }

    #[test]
    fn al2023_latest_reads_five_recommended_parameters() {
        let q = queries(
            &spec(serde_json::json!([{"alias": "al2023@latest"}])),
            "1.34",
        )
        .unwrap();
        assert_eq!(
            names(&q),
            [
                "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/standard/recommended/image_id",
                "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
                "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/neuron/recommended/image_id",
                "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/arm64/standard/recommended/image_id",
                "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/arm64/nvidia/recommended/image_id",
            ]
        );
        assert_eq!(q.parameters[2].variants, [Variant::Neuron]);
        assert!(q.parameters.iter().all(|p| p.term == "alias:al2023@latest"));
    }

    #[test]
    fn pinned_versions_follow_each_family_pattern() {
        let al2023 = queries(
            &spec(serde_json::json!([{"alias": "al2023@v20240625"}])),
            "1.30",
        )
        .unwrap();
        assert_eq!(
            al2023.parameters[0].name,
            "/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.30-v20240625/image_id"
        );
        let al2 = queries(
            &spec(serde_json::json!([{"alias": "al2@v20240625"}])),
            "1.30",
        )
        .unwrap();
        assert_eq!(
            names(&al2),
            [
                "/aws/service/eks/optimized-ami/1.30/amazon-linux-2/amazon-eks-node-1.30-v20240625/image_id",
                "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-arm64/amazon-eks-arm64-node-1.30-v20240625/image_id",
                "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-gpu/amazon-eks-gpu-node-1.30-v20240625/image_id",
            ]
        );
        assert_eq!(
            al2.parameters[2].variants,
            [Variant::Nvidia, Variant::Neuron]
        );
        let br = queries(
            &spec(serde_json::json!([{"alias": "bottlerocket@v1.20.0"}])),
            "1.30",
        )
        .unwrap();
        assert_eq!(
            names(&br),
            [
                "/aws/service/bottlerocket/aws-k8s-1.30/x86_64/1.20.0/image_id",
                "/aws/service/bottlerocket/aws-k8s-1.30/arm64/1.20.0/image_id",
                "/aws/service/bottlerocket/aws-k8s-1.30-nvidia/x86_64/1.20.0/image_id",
                "/aws/service/bottlerocket/aws-k8s-1.30-nvidia/arm64/1.20.0/image_id",
            ]
        );
        let win = queries(
            &spec(serde_json::json!([{"alias": "windows2022@latest"}])),
            "1.30",
        )
        .unwrap();
        assert_eq!(
            names(&win),
            [
                "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.30/image_id"
            ]
        );
    }

    #[test]
    fn version_gates_name_the_alias_and_the_way_out() {
        let al2 = queries(&spec(serde_json::json!([{"alias": "al2@latest"}])), "1.33").unwrap_err();
        assert!(al2.to_string().contains("al2023@latest"), "{al2}");
        assert!(queries(&spec(serde_json::json!([{"alias": "al2@latest"}])), "1.32").is_ok());
        let w25 = queries(
            &spec(serde_json::json!([{"alias": "windows2025@latest"}])),
            "1.34",
        );
        assert!(matches!(
            w25,
            Err(QueryError::UnsupportedAlias { index: 0, .. })
        ));
        assert!(
            queries(
                &spec(serde_json::json!([{"alias": "windows2025@latest"}])),
                "1.35"
            )
            .is_ok()
        );
        let bad = queries(
            &spec(serde_json::json!([{"alias": "ubuntu@latest"}])),
            "1.34",
        )
        .unwrap_err();
        assert!(
            bad.to_string().contains("spec.amiSelectorTerms[0].alias"),
            "{bad}"
        );
        assert!(matches!(
            queries(
                &spec(serde_json::json!([{"alias": "al2023@latest"}])),
                "v1.34"
            ),
            Err(QueryError::BadKubernetesVersion(_))
        ));
    }

    #[test]
    fn custom_terms_become_id_parameter_and_describe_lookups() {
        let q = queries(
            &spec(serde_json::json!([
                {"id": "ami-0123"},
                {"ssmParameter": "/team/golden-ami"},
                {"name": "golden-*"},
                {"name": "golden-*", "owner": "123456789012"},
                {"tags": {"team": "infra", "env": "*"}},
            ])),
            "1.34",
        )
        .unwrap();
        assert_eq!(q.ids, [("ami-0123".to_string(), "id:ami-0123".to_string())]);
        assert_eq!(q.parameters[0].name, "/team/golden-ami");
        assert!(q.parameters[0].variants.is_empty());
        assert_eq!(q.describes[0].owners, ["self", "amazon"]);
        assert_eq!(q.describes[1].owners, ["123456789012"]);
        assert!(q.describes[2].owners.is_empty());
        assert_eq!(
            q.describes[2].filters,
            [
                ("tag-key".to_string(), vec!["env".to_string()]),
                ("tag:team".to_string(), vec!["infra".to_string()]),
            ]
        );
        let empty = queries(&spec(serde_json::json!([{}])), "1.34").unwrap_err();
        assert_eq!(empty, QueryError::EmptyTerm { index: 0 });
    }
}
