//! Table columns of the built-in kinds, after the real server's printers
//! (the same column names, wide columns at priority 1).

use serde_json::{Value, json};

use super::meta::{self, text};
use super::selector::LabelSelector;
use super::table::{Column, age};

fn c(name: &str) -> Column {
    Column::new(name, "string", 0)
}

fn n(name: &str) -> Column {
    Column::new(name, "integer", 0)
}

fn wide(name: &str) -> Column {
    Column::new(name, "string", 1)
}

/// The columns of built-in `kind`.
pub fn columns(kind: &str) -> Vec<Column> {
    match kind {
        "Pod" => vec![
            c("Name"),
            c("Ready"),
            c("Status"),
            n("Restarts"),
            c("Age"),
            wide("IP"),
            wide("Node"),
            wide("Nominated Node"),
            wide("Readiness Gates"),
        ],
        "Node" => vec![
            c("Name"),
            c("Status"),
            c("Roles"),
            c("Age"),
            c("Version"),
            wide("Internal-IP"),
            wide("External-IP"),
            wide("OS-Image"),
            wide("Kernel-Version"),
            wide("Container-Runtime"),
        ],
        "Namespace" => vec![c("Name"), c("Status"), c("Age")],
        "Deployment" => vec![
            c("Name"),
            c("Ready"),
            n("Up-to-date"),
            n("Available"),
            c("Age"),
            wide("Containers"),
            wide("Images"),
            wide("Selector"),
        ],
        "ReplicaSet" => vec![
            c("Name"),
            n("Desired"),
            n("Current"),
            n("Ready"),
            c("Age"),
            wide("Containers"),
            wide("Images"),
            wide("Selector"),
        ],
        "StatefulSet" => vec![
            c("Name"),
            c("Ready"),
            c("Age"),
            wide("Containers"),
            wide("Images"),
        ],
        "DaemonSet" => vec![
            c("Name"),
            n("Desired"),
            n("Current"),
            n("Ready"),
            n("Up-to-date"),
            n("Available"),
            c("Node Selector"),
            c("Age"),
            wide("Containers"),
            wide("Images"),
            wide("Selector"),
        ],
        "Job" => vec![
            c("Name"),
            c("Status"),
            c("Completions"),
            c("Duration"),
            c("Age"),
            wide("Containers"),
            wide("Images"),
            wide("Selector"),
        ],
        "Service" => vec![
            c("Name"),
            c("Type"),
            c("Cluster-IP"),
            c("External-IP"),
            c("Port(s)"),
            c("Age"),
            wide("Selector"),
        ],
        "ConfigMap" => vec![c("Name"), n("Data"), c("Age")],
        "Secret" => vec![c("Name"), c("Type"), n("Data"), c("Age")],
        "ServiceAccount" => vec![c("Name"), n("Secrets"), c("Age")],
        "PersistentVolumeClaim" => vec![
            c("Name"),
            c("Status"),
            c("Volume"),
            c("Capacity"),
            c("Access Modes"),
            c("StorageClass"),
            c("Age"),
        ],
        "PersistentVolume" => vec![
            c("Name"),
            c("Capacity"),
            c("Access Modes"),
            c("Reclaim Policy"),
            c("Status"),
            c("Claim"),
            c("StorageClass"),
            c("Age"),
        ],
        "PodDisruptionBudget" => vec![
            c("Name"),
            c("Min Available"),
            c("Max Unavailable"),
            n("Allowed Disruptions"),
            c("Age"),
        ],
        "Lease" => vec![c("Name"), c("Holder"), c("Age")],
        "Event" => vec![
            c("Last Seen"),
            c("Type"),
            c("Reason"),
            c("Object"),
            c("Message"),
        ],
        "StorageClass" => vec![
            c("Name"),
            c("Provisioner"),
            c("ReclaimPolicy"),
            c("VolumeBindingMode"),
            c("Age"),
        ],
        "PriorityClass" => vec![c("Name"), n("Value"), c("Global-Default"), c("Age")],
        "CustomResourceDefinition" => vec![c("Name"), c("Created At")],
        _ => vec![c("Name"), c("Age")],
    }
}

fn or_none(value: &str) -> Value {
    if value.is_empty() {
        json!("<none>")
    } else {
        json!(value)
    }
}

fn int(object: &Value, pointer: &str) -> i64 {
    meta::int(object, pointer, 0)
}

fn containers_and_images(object: &Value) -> (Value, Value) {
    let containers = object
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = containers.iter().map(|c| text(c, "/name")).collect();
    let images: Vec<&str> = containers.iter().map(|c| text(c, "/image")).collect();
    (json!(names.join(",")), json!(images.join(",")))
}

fn selector(object: &Value) -> Value {
    let selector = LabelSelector::from_object(object.pointer("/spec/selector"))
        .map(|s| s.to_string_form())
        .unwrap_or_default();
    or_none(&selector)
}

fn pod_cells(pod: &Value) -> Vec<Value> {
    let total = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let statuses = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let ready = statuses
        .iter()
        .filter(|s| s.get("ready") == Some(&json!(true)))
        .count();
    let restarts: i64 = statuses.iter().map(|s| int(s, "/restartCount")).sum();
    let mut status = text(pod, "/status/reason").to_string();
    if status.is_empty() {
        status = text(pod, "/status/phase").to_string();
    }
    if meta::is_being_deleted(pod) {
        status = "Terminating".into();
    }
    let gates = pod
        .pointer("/spec/readinessGates")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    vec![
        json!(meta::name(pod)),
        json!(format!("{ready}/{total}")),
        json!(status),
        json!(restarts),
        age(text(pod, "/metadata/creationTimestamp")),
        or_none(text(pod, "/status/podIP")),
        or_none(text(pod, "/spec/nodeName")),
        or_none(text(pod, "/status/nominatedNodeName")),
        if gates == 0 {
            json!("<none>")
        } else {
            json!(format!("0/{gates}"))
        },
    ]
}

fn node_cells(node: &Value) -> Vec<Value> {
    let ready = node
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| text(c, "/type") == "Ready"))
        .map(|c| text(c, "/status"));
    let mut status = match ready {
        Some("True") => "Ready".to_string(),
        Some("False") => "NotReady".to_string(),
        _ => "Unknown".to_string(),
    };
    if node.pointer("/spec/unschedulable") == Some(&json!(true)) {
        status.push_str(",SchedulingDisabled");
    }
    let roles: Vec<String> = node
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let address = |type_: &str| {
        node.pointer("/status/addresses")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|a| text(a, "/type") == type_))
            .map_or(String::new(), |a| text(a, "/address").to_string())
    };
    vec![
        json!(meta::name(node)),
        json!(status),
        or_none(&roles.join(",")),
        age(text(node, "/metadata/creationTimestamp")),
        json!(text(node, "/status/nodeInfo/kubeletVersion")),
        or_none(&address("InternalIP")),
        or_none(&address("ExternalIP")),
        or_none(text(node, "/status/nodeInfo/osImage")),
        or_none(text(node, "/status/nodeInfo/kernelVersion")),
        or_none(text(node, "/status/nodeInfo/containerRuntimeVersion")),
    ]
}

fn job_status(job: &Value) -> &'static str {
    let conditions = job
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let has = |t: &str| {
        conditions
            .iter()
            .any(|c| text(c, "/type") == t && text(c, "/status") == "True")
    };
    if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else if has("Suspended") {
        "Suspended"
    } else {
        "Running"
    }
}

fn service_ports(service: &Value) -> String {
    let ports = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let shown: Vec<String> = ports
        .iter()
        .map(|p| {
            let protocol = text(p, "/protocol");
            let node_port = int(p, "/nodePort");
            if node_port > 0 {
                format!("{}:{node_port}/{protocol}", int(p, "/port"))
            } else {
                format!("{}/{protocol}", int(p, "/port"))
            }
        })
        .collect();
    if shown.is_empty() {
        "<none>".into()
    } else {
        shown.join(",")
    }
}

fn count(object: &Value, field: &str) -> i64 {
    object
        .get(field)
        .and_then(Value::as_object)
        .map_or(0, |m| m.len() as i64)
}

fn int_or_string(object: &Value, pointer: &str) -> Value {
    match object.pointer(pointer) {
        Some(Value::Number(n)) => json!(n.to_string()),
        Some(Value::String(s)) => json!(s),
        _ => json!("N/A"),
    }
}

/// The cells of one built-in object.
pub fn cells(kind: &str, object: &Value) -> Vec<Value> {
    let name = json!(meta::name(object));
    let created = age(text(object, "/metadata/creationTimestamp"));
    let (containers, images) = containers_and_images(object);
    match kind {
        "Pod" => pod_cells(object),
        "Node" => node_cells(object),
        "Namespace" => vec![name, json!(text(object, "/status/phase")), created],
        "Deployment" => vec![
            name,
            json!(format!(
                "{}/{}",
                int(object, "/status/readyReplicas"),
                meta::int(object, "/spec/replicas", 1)
            )),
            json!(int(object, "/status/updatedReplicas")),
            json!(int(object, "/status/availableReplicas")),
            created,
            containers,
            images,
            selector(object),
        ],
        "ReplicaSet" => vec![
            name,
            json!(meta::int(object, "/spec/replicas", 1)),
            json!(int(object, "/status/replicas")),
            json!(int(object, "/status/readyReplicas")),
            created,
            containers,
            images,
            selector(object),
        ],
        "StatefulSet" => vec![
            name,
            json!(format!(
                "{}/{}",
                int(object, "/status/readyReplicas"),
                meta::int(object, "/spec/replicas", 1)
            )),
            created,
            containers,
            images,
        ],
        "DaemonSet" => {
            let node_selector = object
                .pointer("/spec/template/spec/nodeSelector")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            vec![
                name,
                json!(int(object, "/status/desiredNumberScheduled")),
                json!(int(object, "/status/currentNumberScheduled")),
                json!(int(object, "/status/numberReady")),
                json!(int(object, "/status/updatedNumberScheduled")),
                json!(int(object, "/status/numberAvailable")),
                or_none(&node_selector),
                created,
                containers,
                images,
                selector(object),
            ]
        }
        "Job" => {
            let completions = match object.pointer("/spec/completions").and_then(Value::as_i64) {
                Some(c) => format!("{}/{c}", int(object, "/status/succeeded")),
                None => format!(
                    "{}/1 of {}",
                    int(object, "/status/succeeded"),
                    meta::int(object, "/spec/parallelism", 1)
                ),
            };
            let duration = match (
                object.pointer("/status/startTime"),
                object.pointer("/status/completionTime"),
            ) {
                (Some(Value::String(start)), Some(Value::String(end))) => {
                    let seconds =
                        meta::age_seconds(start).unwrap_or(0) - meta::age_seconds(end).unwrap_or(0);
                    json!(super::table::human_duration(seconds))
                }
                (Some(Value::String(start)), _) => age(start),
                _ => json!(""),
            };
            vec![
                name,
                json!(job_status(object)),
                json!(completions),
                duration,
                created,
                containers,
                images,
                selector(object),
            ]
        }
        "Service" => {
            let selector = object
                .pointer("/spec/selector")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            vec![
                name,
                json!(text(object, "/spec/type")),
                or_none(text(object, "/spec/clusterIP")),
                json!("<none>"),
                json!(service_ports(object)),
                created,
                or_none(&selector),
            ]
        }
        "ConfigMap" => vec![
            name,
            json!(count(object, "data") + count(object, "binaryData")),
            created,
        ],
        "Secret" => vec![
            name,
            json!(text(object, "/type")),
            json!(count(object, "data")),
            created,
        ],
        "ServiceAccount" => vec![
            name,
            json!(
                object
                    .get("secrets")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len)
            ),
            created,
        ],
        "PersistentVolumeClaim" => vec![
            name,
            json!(text(object, "/status/phase")),
            json!(text(object, "/spec/volumeName")),
            json!(text(object, "/status/capacity/storage")),
            json!(""),
            or_none(text(object, "/spec/storageClassName")),
            created,
        ],
        "PersistentVolume" => vec![
            name,
            json!(text(object, "/spec/capacity/storage")),
            json!(""),
            json!(text(object, "/spec/persistentVolumeReclaimPolicy")),
            json!(text(object, "/status/phase")),
            json!(format!(
                "{}/{}",
                text(object, "/spec/claimRef/namespace"),
                text(object, "/spec/claimRef/name")
            )),
            json!(text(object, "/spec/storageClassName")),
            created,
        ],
        "PodDisruptionBudget" => vec![
            name,
            int_or_string(object, "/spec/minAvailable"),
            int_or_string(object, "/spec/maxUnavailable"),
            json!(int(object, "/status/disruptionsAllowed")),
            created,
        ],
        "Lease" => vec![name, or_none(text(object, "/spec/holderIdentity")), created],
        "Event" => {
            let last = [
                "/lastTimestamp",
                "/eventTime",
                "/metadata/creationTimestamp",
            ]
            .iter()
            .map(|p| text(object, p))
            .find(|t| !t.is_empty())
            .unwrap_or_default();
            vec![
                age(last),
                json!(text(object, "/type")),
                json!(text(object, "/reason")),
                json!(format!(
                    "{}/{}",
                    text(object, "/involvedObject/kind").to_lowercase(),
                    text(object, "/involvedObject/name")
                )),
                json!(text(object, "/message")),
            ]
        }
        "StorageClass" => vec![
            name,
            json!(text(object, "/provisioner")),
            json!(text(object, "/reclaimPolicy")),
            json!(text(object, "/volumeBindingMode")),
            created,
        ],
        "PriorityClass" => vec![
            name,
            json!(int(object, "/value")),
            json!(object.get("globalDefault") == Some(&json!(true))),
            created,
        ],
        "CustomResourceDefinition" => {
            vec![name, json!(text(object, "/metadata/creationTimestamp"))]
        }
        _ => vec![name, created],
    }
}
