//! Defaults and the basic validation of built-in kinds: what the real
//! server fills in on create (pod and workload defaults, the
//! `DefaultTolerationSeconds` tolerations, a Job's selector, a Service's
//! cluster IP, a Namespace's phase) and the checks users hit first
//! (names, containers, selectors matching templates). Full built-in
//! validation is out of scope.

use serde_json::{Value, json};

use super::error::Cause;
use super::meta;
use super::selector::LabelSelector;

/// Fills the defaults of `kind` on create (`uid` is the new object's).
pub fn default_on_create(kind: &str, object: &mut Value, uid: &str, serial: u64) {
    match kind {
        "Pod" => {
            if let Some(spec) = object.get_mut("spec") {
                default_pod_spec(spec);
                let tolerations = spec
                    .get("tolerations")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let mut tolerations = tolerations;
                for key in [
                    "node.kubernetes.io/not-ready",
                    "node.kubernetes.io/unreachable",
                ] {
                    if !tolerations.iter().any(|t| meta::text(t, "/key") == key) {
                        tolerations.push(json!({
                            "key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300,
                        }));
                    }
                }
                spec["tolerations"] = Value::Array(tolerations);
                if spec.get("serviceAccountName").is_none() {
                    spec["serviceAccountName"] = json!("default");
                }
                if spec.get("priorityClassName").is_none() {
                    set_default(spec, "priority", json!(0));
                }
            }
            let qos = qos_class(object.get("spec").unwrap_or(&Value::Null));
            object["status"] = json!({"phase": "Pending", "qosClass": qos});
        }
        "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet" | "Job" => {
            default_workload(kind, object, uid);
            object["status"] = json!({});
        }
        "Namespace" => {
            let name = meta::name(object).to_string();
            let labels = meta::metadata_mut(object)
                .entry("labels")
                .or_insert_with(|| json!({}));
            if labels.is_object() {
                labels["kubernetes.io/metadata.name"] = json!(name);
            }
            object["spec"] = json!({"finalizers": ["kubernetes"]});
            object["status"] = json!({"phase": "Active"});
        }
        "Service" => {
            let spec = object.get_mut("spec").filter(|s| s.is_object());
            if let Some(spec) = spec {
                set_default(spec, "type", json!("ClusterIP"));
                set_default(spec, "sessionAffinity", json!("None"));
                set_default(spec, "internalTrafficPolicy", json!("Cluster"));
                set_default(spec, "ipFamilies", json!(["IPv4"]));
                set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
                if spec.get("clusterIP").is_none() {
                    let ip = format!("10.96.{}.{}", (serial >> 8) & 0xff, serial & 0xff);
                    spec["clusterIP"] = json!(ip);
                    spec["clusterIPs"] = json!([ip]);
                }
                if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
                    for port in ports {
                        set_default(port, "protocol", json!("TCP"));
                        if let Some(number) = port.get("port").cloned() {
                            set_default(port, "targetPort", number);
                        }
                    }
                }
            }
            object["status"] = json!({"loadBalancer": {}});
        }
        "Secret" => set_default(object, "type", json!("Opaque")),
        "PersistentVolumeClaim" => {
            object["status"] = json!({"phase": "Pending"});
        }
        "PodDisruptionBudget" => {
            object["status"] = json!({
                "currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0,
            });
        }
        _ => {}
    }
}

/// A rolling-update strategy unless another type is given.
fn default_strategy(spec: &mut Value, key: &str, rolling_update: Value) {
    set_default(spec, key, json!({}));
    let strategy = &mut spec[key];
    set_default(strategy, "type", json!("RollingUpdate"));
    if meta::text(strategy, "/type") == "RollingUpdate" {
        set_default(strategy, "rollingUpdate", rolling_update);
    }
}

fn set_default(object: &mut Value, key: &str, value: Value) {
    if object.is_object() && object.get(key).is_none() {
        object[key] = value;
    }
}

fn default_pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "enableServiceLinks", json!(true));
    for list in ["containers", "initContainers"] {
        if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for container in containers {
                let image = meta::text(container, "/image");
                let latest = !image.rsplit('/').next().unwrap_or_default().contains(':')
                    || image.ends_with(":latest");
                set_default(
                    container,
                    "imagePullPolicy",
                    json!(if latest { "Always" } else { "IfNotPresent" }),
                );
                set_default(
                    container,
                    "terminationMessagePath",
                    json!("/dev/termination-log"),
                );
                set_default(container, "terminationMessagePolicy", json!("File"));
                set_default(container, "resources", json!({}));
            }
        }
    }
}

/// `BestEffort`, `Guaranteed` or `Burstable`, from the containers' resources.
fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|l| spec.get(*l).and_then(Value::as_array))
        .flatten()
        .collect();
    let any = containers.iter().any(|c| {
        ["requests", "limits"].iter().any(|k| {
            c.pointer(&format!("/resources/{k}"))
                .and_then(Value::as_object)
                .is_some_and(|m| !m.is_empty())
        })
    });
    if !any {
        return "BestEffort";
    }
    let guaranteed = containers.iter().all(|c| {
        ["cpu", "memory"].iter().all(|r| {
            let limit = c.pointer(&format!("/resources/limits/{r}"));
            let request = c.pointer(&format!("/resources/requests/{r}")).or(limit);
            limit.is_some() && limit == request
        })
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

fn default_workload(kind: &str, object: &mut Value, uid: &str) {
    let name = meta::name(object).to_string();
    let Some(spec) = object.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    if let Some(pod_spec) = spec.pointer_mut("/template/spec") {
        default_pod_spec(pod_spec);
    }
    match kind {
        "Deployment" => {
            set_default(spec, "replicas", json!(1));
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(spec, "progressDeadlineSeconds", json!(600));
            default_strategy(
                spec,
                "strategy",
                json!({"maxSurge": "25%", "maxUnavailable": "25%"}),
            );
        }
        "ReplicaSet" => set_default(spec, "replicas", json!(1)),
        "StatefulSet" => {
            set_default(spec, "replicas", json!(1));
            set_default(spec, "podManagementPolicy", json!("OrderedReady"));
            set_default(spec, "revisionHistoryLimit", json!(10));
            default_strategy(spec, "updateStrategy", json!({"partition": 0}));
            set_default(
                spec,
                "persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
        }
        "DaemonSet" => {
            set_default(spec, "revisionHistoryLimit", json!(10));
            default_strategy(
                spec,
                "updateStrategy",
                json!({"maxUnavailable": 1, "maxSurge": 0}),
            );
        }
        "Job" => {
            if spec.get("parallelism").is_none() && spec.get("completions").is_none() {
                spec["completions"] = json!(1);
            }
            set_default(spec, "parallelism", json!(1));
            set_default(spec, "backoffLimit", json!(6));
            set_default(spec, "completionMode", json!("NonIndexed"));
            set_default(spec, "suspend", json!(false));
            set_default(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
            if spec.get("manualSelector").and_then(Value::as_bool) != Some(true) {
                let labels = json!({
                    "batch.kubernetes.io/controller-uid": uid, "controller-uid": uid,
                    "batch.kubernetes.io/job-name": name, "job-name": name,
                });
                spec["selector"] =
                    json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
                if let Some(template) = spec.get_mut("template").filter(|t| t.is_object()) {
                    set_default(template, "metadata", json!({}));
                    set_default(&mut template["metadata"], "labels", json!({}));
                    if let (Some(target), Some(labels)) = (
                        template["metadata"]["labels"].as_object_mut(),
                        labels.as_object(),
                    ) {
                        target.extend(labels.clone());
                    }
                }
            }
        }
        _ => {}
    }
}

/// Whether `name` is a DNS-1123 subdomain (most object names).
pub fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty() && name.len() <= 253 && name.split('.').all(is_dns_label)
}

/// Whether `name` is a DNS-1123 label (namespace names).
pub fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            name.len() <= 63
                && first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        }
        _ => false,
    }
}

/// The checks of a built-in kind the double makes (beyond the name).
pub fn validate(kind: &str, object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let template = match kind {
        "Pod" => Some(("spec", object.get("spec"))),
        "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet" | "Job" => {
            Some(("spec.template.spec", object.pointer("/spec/template/spec")))
        }
        _ => None,
    };
    if let Some((path, spec)) = template {
        let containers = spec
            .and_then(|s| s.get("containers"))
            .and_then(Value::as_array);
        match containers {
            None => causes.push(Cause::new(
                "FieldValueRequired",
                format!("{path}.containers"),
                "Required value",
            )),
            Some(list) if list.is_empty() => causes.push(Cause::new(
                "FieldValueRequired",
                format!("{path}.containers"),
                "Required value",
            )),
            Some(list) => {
                for (i, container) in list.iter().enumerate() {
                    for field in ["name", "image"] {
                        if meta::text(container, &format!("/{field}")).is_empty() {
                            causes.push(Cause::new(
                                "FieldValueRequired",
                                format!("{path}.containers[{i}].{field}"),
                                "Required value",
                            ));
                        }
                    }
                }
            }
        }
    }
    if matches!(
        kind,
        "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet"
    ) {
        validate_selector(object, &mut causes);
        if kind != "ReplicaSet"
            && let Some(old) = old
            && old.pointer("/spec/selector") != object.pointer("/spec/selector")
        {
            causes.push(Cause::new(
                "FieldValueInvalid",
                "spec.selector",
                format!(
                    "Invalid value: {}: field is immutable",
                    object.pointer("/spec/selector").unwrap_or(&Value::Null)
                ),
            ));
        }
    }
    if kind == "Job" {
        let policy = meta::text(object, "/spec/template/spec/restartPolicy");
        if policy != "Never" && policy != "OnFailure" {
            causes.push(Cause::new(
                "FieldValueRequired",
                "spec.template.spec.restartPolicy",
                "Required value: valid values: \"OnFailure\", \"Never\"",
            ));
        }
    }
    if kind == "PodDisruptionBudget"
        && object.pointer("/spec/minAvailable").is_some()
        && object.pointer("/spec/maxUnavailable").is_some()
    {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "spec",
            "Invalid value: \"object\": minAvailable and maxUnavailable cannot be both set",
        ));
    }
    causes
}

fn validate_selector(object: &Value, causes: &mut Vec<Cause>) {
    let Some(selector) = object.pointer("/spec/selector") else {
        causes.push(Cause::new(
            "FieldValueRequired",
            "spec.selector",
            "Required value",
        ));
        return;
    };
    let parsed = match LabelSelector::from_object(Some(selector)) {
        Ok(parsed) => parsed,
        Err(e) => {
            causes.push(Cause::new(
                "FieldValueInvalid",
                "spec.selector",
                format!("Invalid value: {selector}: {e}"),
            ));
            return;
        }
    };
    if parsed.is_empty() {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "spec.selector",
            format!("Invalid value: {selector}: empty selector is invalid for deployment"),
        ));
        return;
    }
    let labels = object.pointer("/spec/template/metadata/labels");
    if !parsed.matches_labels(labels.and_then(Value::as_object)) {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "spec.template.metadata.labels",
            format!(
                "Invalid value: {}: `selector` does not match template `labels`",
                labels.unwrap_or(&Value::Null)
            ),
        ));
    }
}
