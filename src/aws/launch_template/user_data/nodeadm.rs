//! AL2023: a MIME archive whose last part is the nodeadm `NodeConfig`
//! nodewright generates. The user's parts come first (a MIME archive as
//! given, a YAML document as a `NodeConfig` part, anything else as a shell
//! script), so nodeadm merges the user's `NodeConfig` first and the
//! generated one over it, and shell scripts run before the node joins.

use std::collections::BTreeMap;

use serde::Serialize;

use super::mime::{self, NODE_CONFIG, Part, SHELL_SCRIPT};
use super::{BootstrapInput, UserDataError};

/// The header line of the generated part.
pub const HEADER: &str = "# nodewright generated NodeConfig";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeConfig {
    api_version: &'static str,
    kind: &'static str,
    spec: Spec,
}

#[derive(Serialize)]
struct Spec {
    cluster: Cluster,
    #[serde(skip_serializing_if = "Option::is_none")]
    instance: Option<Instance>,
    kubelet: Kubelet,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Cluster {
    api_server_endpoint: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    certificate_authority: Option<String>,
    cidr: String,
    name: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Instance {
    local_storage: LocalStorage,
}

#[derive(Serialize)]
struct LocalStorage {
    strategy: &'static str,
}

#[derive(Serialize)]
struct Kubelet {
    config: BTreeMap<String, serde_json::Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    flags: Vec<String>,
}

pub fn render(input: &BootstrapInput<'_>) -> Result<String, UserDataError> {
    let mut parts = user_parts(input.custom)?;
    parts.push(Part::new(NODE_CONFIG, node_config(input)?));
    mime::serialize(&parts)
}

fn user_parts(custom: Option<&str>) -> Result<Vec<Part>, UserDataError> {
    let Some(custom) = custom.filter(|c| !c.is_empty()) else {
        return Ok(Vec::new());
    };
    if mime::is_mime(custom) {
        return mime::parse(custom);
    }
    let content_type =
        if crate::yaml::from_str::<serde_json::Map<String, serde_json::Value>>(custom).is_ok() {
            NODE_CONFIG
        } else {
            SHELL_SCRIPT
        };
    Ok(vec![Part::new(content_type, custom)])
}

/// The generated `NodeConfig` YAML, header line included.
fn node_config(input: &BootstrapInput<'_>) -> Result<String, UserDataError> {
    let cidr = input
        .settings
        .service_cidr
        .clone()
        .filter(|c| !c.is_empty())
        .ok_or(UserDataError::MissingServiceCidr)?;
    let mut config: BTreeMap<String, serde_json::Value> = match input.kubelet {
        Some(kubelet) => match serde_json::to_value(kubelet) {
            Ok(serde_json::Value::Object(map)) => map.into_iter().collect(),
            _ => BTreeMap::new(),
        },
        None => BTreeMap::new(),
    };
    if let Some(max_pods) = input.max_pods {
        config.insert("maxPods".to_string(), max_pods.into());
    }
    let dns = input.cluster_dns();
    if !dns.is_empty() {
        config.insert("clusterDNS".to_string(), dns.into());
    }
    config.insert(
        "registerWithTaints".to_string(),
        serde_json::to_value(&input.taints).unwrap_or_default(),
    );
    let document = NodeConfig {
        api_version: "node.eks.aws/v1alpha1",
        kind: "NodeConfig",
        spec: Spec {
            cluster: Cluster {
                api_server_endpoint: input.settings.cluster_endpoint.clone(),
                certificate_authority: input.settings.ca_bundle.clone().filter(|c| !c.is_empty()),
                cidr,
                name: input.settings.cluster_name.clone(),
            },
            instance: input.instance_store_raid0.then_some(Instance {
                local_storage: LocalStorage { strategy: "RAID0" },
            }),
            kubelet: Kubelet {
                config,
                flags: input.node_labels_arg().into_iter().collect(),
            },
        },
    };
    let yaml = crate::yaml::to_string(&document)
        .map_err(|e| UserDataError::Render(format!("NodeConfig: {e}")))?;
    Ok(format!("{HEADER}\n{yaml}"))
}
