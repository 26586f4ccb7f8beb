//! IAM instance profiles for EC2NodeClasses: the profile a class with
//! `spec.role` gets (created, tagged, its role attached or replaced, reused,
//! and deleted again by the garbage collector), and the lookup of a profile
//! named in `spec.instanceProfile`.
//!
//! Names and paths are Karpenter's: `<cluster>_<number>`, the number a hash
//! of the region, the class name and a random value, so every new profile
//! gets a fresh name; path `/karpenter/<region>/<cluster>/<class uid>/`, by
//! which a class's profiles are found again. Tags are Karpenter's
//! `InstanceProfileTags` (see [`instance_profile_tags`]).
//!
//! Caches: profiles by name live [`PROFILE_TTL`] (15 minutes, Karpenter's
//! `InstanceProfileTTL`); a role IAM said does not exist is remembered for
//! [`ROLE_NOT_FOUND_TTL`] (1 minute) so a missing role does not create and
//! delete a profile on every pass; the profile just made for a (class,
//! role) is remembered for [`RECREATION_TTL`] (1 minute, `RecreationTTL`),
//! so a status write that lost a conflict does not make a second one; a
//! profile just made or just replaced is protected from the garbage
//! collector for [`PROTECTED_TTL`] (1 hour, `ProtectedProfilesTTL`), as the
//! class or NodeClaim naming it may not be in the watch yet.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_iam::types::Tag;

use super::errors::AwsError;
use super::ttl_cache;
use crate::apis::EC2NodeClass;
use crate::apis::labels::{EC2_NODE_CLASS_LABEL_KEY, REGION_LABEL_KEY};

/// How long a profile read from IAM is trusted.
pub const PROFILE_TTL: Duration = Duration::from_secs(15 * 60);
/// How long a role IAM reported missing is not tried again.
pub const ROLE_NOT_FOUND_TTL: Duration = Duration::from_secs(60);
/// How long the profile made for a (class, role) is remembered.
pub const RECREATION_TTL: Duration = Duration::from_secs(60);
/// How long a profile just made or just replaced is kept from the garbage collector.
pub const PROTECTED_TTL: Duration = Duration::from_secs(60 * 60);
/// Entries each cache keeps at most (the least recently used goes first).
const MAX_CACHED: u64 = 4096;
/// IAM's error code for a missing entity.
const NO_SUCH_ENTITY: &str = "NoSuchEntity";
/// The tag key EKS reads a resource's cluster from.
pub const EKS_CLUSTER_NAME_TAG_KEY: &str = "eks:eks-cluster-name";

/// An instance profile as IAM reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceProfile {
    /// The profile's name.
    pub name: String,
    /// Its path (`/karpenter/…/`).
    pub path: String,
    /// The role attached, if any (a profile holds at most one).
    pub role: Option<String>,
}

/// Why a profile could not be made ready.
#[derive(Debug, thiserror::Error)]
pub enum InstanceProfileError {
    /// IAM has no role of that name.
    #[error("IAM role {role:?} does not exist: {message}")]
    RoleNotFound {
        /// The role, without its path.
        role: String,
        /// IAM's message.
        message: String,
    },
    /// IAM refused or failed a call.
    #[error("instance profile {profile}: {source}")]
    Aws {
        /// The profile the call was about.
        profile: String,
        /// The call's error.
        #[source]
        source: AwsError,
    },
}

impl InstanceProfileError {
    /// Whether waiting may help (throttling, a server fault).
    pub fn is_transient(&self) -> bool {
        matches!(self, InstanceProfileError::Aws { source, .. } if source.is_transient())
    }
}

/// Creates, reads and deletes instance profiles.
pub struct InstanceProfileProvider {
    iam: aws_sdk_iam::Client,
    profiles: moka::sync::Cache<String, InstanceProfile>,
    missing_roles: moka::sync::Cache<String, String>,
    recently_created: moka::sync::Cache<(String, String), String>,
    protected: moka::sync::Cache<String, ()>,
}

/// `spec.tags` plus the tags Karpenter puts on every instance profile it
/// makes: `kubernetes.io/cluster/<cluster>=owned`, `eks:eks-cluster-name`,
/// `karpenter.k8s.aws/ec2nodeclass` and `topology.kubernetes.io/region`.
pub fn instance_profile_tags(
    class: &EC2NodeClass,
    cluster: &str,
    region: &str,
) -> BTreeMap<String, String> {
    let mut tags = class.spec.tags.clone().unwrap_or_default();
    tags.insert(
        format!("kubernetes.io/cluster/{cluster}"),
        "owned".to_string(),
    );
    tags.insert(EKS_CLUSTER_NAME_TAG_KEY.to_string(), cluster.to_string());
    tags.insert(
        EC2_NODE_CLASS_LABEL_KEY.to_string(),
        class.metadata.name.clone().unwrap_or_default(),
    );
    tags.insert(REGION_LABEL_KEY.to_string(), region.to_string());
    tags
}

/// The IAM path under which every profile nodewright makes for the cluster
/// lies: `/karpenter/<region>/<cluster>/`.
pub fn cluster_instance_profile_path(region: &str, cluster: &str) -> String {
    format!("/karpenter/{region}/{cluster}/")
}

/// The IAM path of a class's profiles: `/karpenter/<region>/<cluster>/<uid>/`.
pub fn instance_profile_path(region: &str, cluster: &str, class_uid: &str) -> String {
    format!(
        "{}{class_uid}/",
        cluster_instance_profile_path(region, cluster)
    )
}

/// A fresh profile name for a class: `<cluster>_<number>`, the number a
/// hash of the region, the class name and a random value.
pub fn new_instance_profile_name(cluster: &str, region: &str, class_name: &str) -> String {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write(region.as_bytes());
    hasher.write(class_name.as_bytes());
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    hasher.write_u128(nanos);
    format!("{cluster}_{}", hasher.finish())
}

/// The role's name without an IAM path (`path/to/Role` → `Role`):
/// instance profiles take role names only.
pub fn role_name(role: &str) -> &str {
    role.rsplit('/').next().unwrap_or(role)
}

impl InstanceProfileProvider {
    /// A provider over `iam` (real AWS, moto, or SDK mocks).
    pub fn new(iam: aws_sdk_iam::Client) -> Self {
        InstanceProfileProvider {
            iam,
            // TTLs and bound: see the module doc and the constants above.
            profiles: ttl_cache(PROFILE_TTL, MAX_CACHED),
            missing_roles: ttl_cache(ROLE_NOT_FOUND_TTL, MAX_CACHED),
            recently_created: ttl_cache(RECREATION_TTL, MAX_CACHED),
            protected: ttl_cache(PROTECTED_TTL, MAX_CACHED),
        }
    }

    /// The profile `name`, or `None` when IAM has none of that name.
    pub async fn get(&self, name: &str) -> Result<Option<InstanceProfile>, InstanceProfileError> {
        if let Some(hit) = self.profiles.get(name) {
            return Ok(Some(hit));
        }
        let profile = match self
            .iam
            .get_instance_profile()
            .instance_profile_name(name)
            .send()
            .await
        {
            Ok(output) => output.instance_profile.map(|p| InstanceProfile {
                name: p.instance_profile_name,
                path: p.path,
                role: p.roles.into_iter().next().map(|r| r.role_name),
            }),
            Err(e) => {
                let error = AwsError::from_sdk("iam:GetInstanceProfile", &e);
                if error.has_code(NO_SUCH_ENTITY) {
                    return Ok(None);
                }
                return Err(self.aws(name, error));
            }
        };
        if let Some(profile) = &profile {
            self.profiles.insert(name.to_string(), profile.clone());
        }
        Ok(profile)
    }

    /// Makes sure profile `name` exists with `role` as its only role: creates
    /// it (with `tags` and `path`) if it does not exist, removes another role
    /// it holds, and adds `role`. When the role cannot be attached, a profile
    /// this call created is deleted again.
    pub async fn ensure(
        &self,
        name: &str,
        role: &str,
        tags: &BTreeMap<String, String>,
        path: &str,
    ) -> Result<(), InstanceProfileError> {
        let role = role_name(role);
        if let Some(message) = self.missing_roles.get(role) {
            return Err(InstanceProfileError::RoleNotFound {
                role: role.to_string(),
                message,
            });
        }
        let (profile, created) = match self.get(name).await? {
            Some(profile) => (profile, false),
            None => (self.create(name, tags, path).await?, true),
        };
        if let Err(e) = self.ensure_role(&profile, role).await {
            if created && let Err(cleanup) = self.delete(name).await {
                tracing::warn!(profile = name, error = %cleanup, "cannot delete the instance profile whose role could not be set");
            }
            return Err(e);
        }
        self.profiles.insert(
            name.to_string(),
            InstanceProfile {
                role: Some(role.to_string()),
                ..profile
            },
        );
        Ok(())
    }

    /// Deletes profile `name` (removing its role first); a profile that does
    /// not exist is not an error.
    pub async fn delete(&self, name: &str) -> Result<(), InstanceProfileError> {
        self.profiles.invalidate(name);
        self.protected.invalidate(name);
        let profile = match self
            .iam
            .get_instance_profile()
            .instance_profile_name(name)
            .send()
            .await
        {
            Ok(output) => output.instance_profile,
            Err(e) => {
                let error = AwsError::from_sdk("iam:GetInstanceProfile", &e);
                if error.has_code(NO_SUCH_ENTITY) {
                    return Ok(());
                }
                return Err(self.aws(name, error));
            }
        };
        for role in profile.map(|p| p.roles).unwrap_or_default() {
            self.iam
                .remove_role_from_instance_profile()
                .instance_profile_name(name)
                .role_name(&role.role_name)
                .send()
                .await
                .map_err(|e| {
                    self.aws(
                        name,
                        AwsError::from_sdk("iam:RemoveRoleFromInstanceProfile", &e),
                    )
                })?;
        }
        match self
            .iam
            .delete_instance_profile()
            .instance_profile_name(name)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => {
                let error = AwsError::from_sdk("iam:DeleteInstanceProfile", &e);
                if error.has_code(NO_SUCH_ENTITY) {
                    Ok(())
                } else {
                    Err(self.aws(name, error))
                }
            }
        }
    }

    /// Every profile under `path_prefix` (e.g. one class's path), for the
    /// garbage collector. IAM filters by the prefix; the answer is checked
    /// again, so a service that ignores it cannot hand over profiles of
    /// other classes.
    pub async fn list(
        &self,
        path_prefix: &str,
    ) -> Result<Vec<InstanceProfile>, InstanceProfileError> {
        let mut pages = self
            .iam
            .list_instance_profiles()
            .path_prefix(path_prefix)
            .into_paginator()
            .send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| {
                self.aws(
                    path_prefix,
                    AwsError::from_sdk("iam:ListInstanceProfiles", &e),
                )
            })?;
            out.extend(
                page.instance_profiles
                    .into_iter()
                    .filter(|p| p.path.starts_with(path_prefix))
                    .map(|p| InstanceProfile {
                        name: p.instance_profile_name,
                        path: p.path,
                        role: p.roles.into_iter().next().map(|r| r.role_name),
                    }),
            );
        }
        Ok(out)
    }

    /// The profile made for class `class_uid` and `role` within the last
    /// [`RECREATION_TTL`].
    pub fn recently_created(&self, class_uid: &str, role: &str) -> Option<String> {
        self.recently_created
            .get(&(class_uid.to_string(), role.to_string()))
    }

    /// Drops what is cached of profile `name`: the next [`Self::get`] asks
    /// IAM (EC2 said it does not know the profile).
    pub fn forget(&self, name: &str) {
        self.profiles.invalidate(name);
    }

    /// Remembers that `profile` was made for class `class_uid` and `role`.
    pub fn remember_created(&self, class_uid: &str, role: &str, profile: &str) {
        self.recently_created.insert(
            (class_uid.to_string(), role.to_string()),
            profile.to_string(),
        );
    }

    /// Keeps `profile` from the garbage collector for [`PROTECTED_TTL`].
    pub fn protect(&self, profile: &str) {
        if !profile.is_empty() {
            self.protected.insert(profile.to_string(), ());
        }
    }

    /// Whether `profile` was protected within the last [`PROTECTED_TTL`].
    pub fn is_protected(&self, profile: &str) -> bool {
        self.protected.contains_key(profile)
    }

    async fn create(
        &self,
        name: &str,
        tags: &BTreeMap<String, String>,
        path: &str,
    ) -> Result<InstanceProfile, InstanceProfileError> {
        let tags: Vec<Tag> = tags
            .iter()
            .filter_map(|(key, value)| Tag::builder().key(key).value(value).build().ok())
            .collect();
        let mut request = self
            .iam
            .create_instance_profile()
            .instance_profile_name(name)
            .set_tags(Some(tags));
        if !path.is_empty() {
            request = request.path(path);
        }
        let output = request
            .send()
            .await
            .map_err(|e| self.aws(name, AwsError::from_sdk("iam:CreateInstanceProfile", &e)))?;
        Ok(match output.instance_profile {
            Some(p) => InstanceProfile {
                name: p.instance_profile_name,
                path: p.path,
                role: p.roles.into_iter().next().map(|r| r.role_name),
            },
            None => InstanceProfile {
                name: name.to_string(),
                path: path.to_string(),
                role: None,
            },
        })
    }

    /// Leaves `role` as the profile's only role.
    async fn ensure_role(
        &self,
        profile: &InstanceProfile,
        role: &str,
    ) -> Result<(), InstanceProfileError> {
        match profile.role.as_deref() {
            Some(current) if current == role => return Ok(()),
            Some(other) => {
                self.iam
                    .remove_role_from_instance_profile()
                    .instance_profile_name(&profile.name)
                    .role_name(other)
                    .send()
                    .await
                    .map_err(|e| {
                        self.aws(
                            &profile.name,
                            AwsError::from_sdk("iam:RemoveRoleFromInstanceProfile", &e),
                        )
                    })?;
            }
            None => {}
        }
        let added = self
            .iam
            .add_role_to_instance_profile()
            .instance_profile_name(&profile.name)
            .role_name(role)
            .send()
            .await;
        match added {
            Ok(_) => Ok(()),
            Err(e) => {
                let error = AwsError::from_sdk("iam:AddRoleToInstanceProfile", &e);
                // IAM says NoSuchEntity for a missing role and for a missing
                // profile; its message names which.
                if error.has_code(NO_SUCH_ENTITY) && error.message.to_lowercase().contains("role") {
                    self.missing_roles
                        .insert(role.to_string(), error.message.clone());
                    return Err(InstanceProfileError::RoleNotFound {
                        role: role.to_string(),
                        message: error.message,
                    });
                }
                Err(self.aws(&profile.name, error))
            }
        }
    }

    fn aws(&self, profile: &str, source: AwsError) -> InstanceProfileError {
        InstanceProfileError::Aws {
            profile: profile.to_string(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_paths_and_tags_follow_karpenter() {
        let a = new_instance_profile_name("demo", "us-east-1", "default");
        let b = new_instance_profile_name("demo", "us-east-1", "default");
        assert!(a.starts_with("demo_") && a.len() > 5, "{a}");
        assert!(a["demo_".len()..].parse::<u64>().is_ok(), "{a}");
        assert_ne!(a, b, "every new profile gets a fresh name");
        assert_eq!(
            instance_profile_path("us-east-1", "demo", "1234"),
            "/karpenter/us-east-1/demo/1234/"
        );
        assert_eq!(
            role_name("team/nodes/KarpenterNodeRole"),
            "KarpenterNodeRole"
        );
        assert_eq!(role_name("KarpenterNodeRole"), "KarpenterNodeRole");

        let class: EC2NodeClass = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"id": "subnet-1"}],
                "securityGroupSelectorTerms": [{"id": "sg-1"}],
                "tags": {"team": "infra"},
            },
        }))
        .unwrap();
        let tags = instance_profile_tags(&class, "demo", "us-east-1");
        let expected = [
            ("eks:eks-cluster-name", "demo"),
            ("karpenter.k8s.aws/ec2nodeclass", "default"),
            ("kubernetes.io/cluster/demo", "owned"),
            ("team", "infra"),
            ("topology.kubernetes.io/region", "us-east-1"),
        ];
        let got: Vec<(&str, &str)> = tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got, expected);
    }
}
