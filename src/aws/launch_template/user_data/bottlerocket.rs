//! Bottlerocket: TOML settings. The user's document is kept whole; the keys
//! that define how the node joins the cluster are nodewright's: cluster
//! name, API server, CA (when known), max pods, cluster DNS, the kubelet
//! settings of `spec.kubelet` that are set, and the node taints (replaced,
//! so they match the NodeClaim). Node labels are merged, nodewright's
//! winning. `instanceStorePolicy: RAID0` adds a bootstrap command that
//! mounts the instance-store volumes for ephemeral storage.

use std::collections::BTreeMap;

use toml::{Table, Value};

use super::{BootstrapInput, UserDataError};

/// Where the document fails to parse and why, without the excerpt of the
/// document that `toml`'s own `Display` prints: user data may hold secrets,
/// and this message reaches logs, events and conditions.
fn toml_fault(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim().replace('\n', "; ");
    match error.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message,
    }
}

pub fn render(input: &BootstrapInput<'_>) -> Result<String, UserDataError> {
    let mut document: Table = match input.custom.filter(|c| !c.trim().is_empty()) {
        Some(custom) => custom
            .parse::<Table>()
            .map_err(|e| UserDataError::Toml(toml_fault(custom, &e)))?,
        None => Table::new(),
    };
    let settings = table_at(&mut document, "settings", "settings")?;
    let kubernetes = table_at(settings, "kubernetes", "settings.kubernetes")?;
    set_cluster(kubernetes, input);
    set_kubelet(kubernetes, input);

    let labels = table_at(kubernetes, "node-labels", "settings.kubernetes.node-labels")?;
    for (key, value) in &input.labels {
        labels.insert(key.clone(), Value::String(value.clone()));
    }
    let mut taints: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for taint in &input.taints {
        let value = taint.value.clone().unwrap_or_default();
        taints
            .entry(taint.key.clone())
            .or_default()
            .push(Value::String(format!("{value}:{}", taint.effect)));
    }
    kubernetes.insert(
        "node-taints".to_string(),
        Value::Table(
            taints
                .into_iter()
                .map(|(k, v)| (k, Value::Array(v)))
                .collect(),
        ),
    );

    if input.instance_store_raid0 {
        let commands = table_at(
            settings,
            "bootstrap-commands",
            "settings.bootstrap-commands",
        )?;
        commands.insert(
            "000-mount-instance-storage".to_string(),
            Value::Table(mount_instance_storage()),
        );
    }
    toml::to_string(&document).map_err(|e| UserDataError::Render(format!("TOML: {e}")))
}

fn set_cluster(kubernetes: &mut Table, input: &BootstrapInput<'_>) {
    let settings = input.settings;
    let mut set = |key: &str, value: Value| {
        kubernetes.insert(key.to_string(), value);
    };
    set("cluster-name", Value::String(settings.cluster_name.clone()));
    set(
        "api-server",
        Value::String(settings.cluster_endpoint.clone()),
    );
    if let Some(ca) = settings.ca_bundle.clone().filter(|c| !c.is_empty()) {
        set("cluster-certificate", Value::String(ca));
    }
    if let Some(max_pods) = input.max_pods {
        set("max-pods", Value::Integer(max_pods));
    }
    if let Some(dns) = input.cluster_dns().into_iter().next() {
        set("cluster-dns-ip", Value::String(dns));
    }
}

fn set_kubelet(kubernetes: &mut Table, input: &BootstrapInput<'_>) {
    let Some(kubelet) = input.kubelet else {
        return;
    };
    let string_table = |map: &BTreeMap<String, String>| {
        Value::Table(
            map.iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        )
    };
    let maps = [
        ("system-reserved", &kubelet.system_reserved),
        ("kube-reserved", &kubelet.kube_reserved),
        ("eviction-hard", &kubelet.eviction_hard),
        ("eviction-soft", &kubelet.eviction_soft),
        (
            "eviction-soft-grace-period",
            &kubelet.eviction_soft_grace_period,
        ),
    ];
    for (key, map) in maps {
        if let Some(map) = map {
            kubernetes.insert(key.to_string(), string_table(map));
        }
    }
    if let Some(seconds) = kubelet.eviction_max_pod_grace_period {
        kubernetes.insert(
            "eviction-max-pod-grace-period".to_string(),
            Value::Integer(seconds.into()),
        );
    }
    if let Some(high) = kubelet.image_gc_high_threshold_percent {
        kubernetes.insert(
            "image-gc-high-threshold-percent".to_string(),
            Value::String(high.to_string()),
        );
    }
    if let Some(low) = kubelet.image_gc_low_threshold_percent {
        kubernetes.insert(
            "image-gc-low-threshold-percent".to_string(),
            Value::String(low.to_string()),
        );
    }
    if let Some(quota) = kubelet.cpu_cfs_quota {
        kubernetes.insert("cpu-cfs-quota-enforced".to_string(), Value::Boolean(quota));
    }
}

/// `apiclient ephemeral-storage init`, then bind the kubelet's, containerd's
/// and the pod logs' directories onto the array.
fn mount_instance_storage() -> Table {
    let words = |w: &[&str]| Value::Array(w.iter().map(|s| Value::String(s.to_string())).collect());
    let mut command = Table::new();
    command.insert(
        "commands".to_string(),
        Value::Array(vec![
            words(&["apiclient", "ephemeral-storage", "init"]),
            words(&[
                "apiclient",
                "ephemeral-storage",
                "bind",
                "--dirs",
                "/var/lib/containerd",
                "/var/lib/kubelet",
                "/var/log/pods",
            ]),
        ]),
    );
    command.insert("mode".to_string(), Value::String("always".to_string()));
    command.insert("essential".to_string(), Value::Boolean(true));
    command
}

/// The table at `key` of `parent`, created when absent.
fn table_at<'a>(
    parent: &'a mut Table,
    key: &str,
    path: &str,
) -> Result<&'a mut Table, UserDataError> {
    let value = parent
        .entry(key.to_string())
        .or_insert_with(|| Value::Table(Table::new()));
    value
        .as_table_mut()
        .ok_or_else(|| UserDataError::Bottlerocket(format!("{path} must be a TOML table")))
}
