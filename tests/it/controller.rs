//! The EC2NodeClass status controller against the in-process API server:
//! `ExtensionsReady`, `AMIsReady`, `status.amis` and events. AWS is the
//! mocked account of `crate::nodeclass` (moto refuses the alias parameters
//! under `/aws/service/...`).

use std::sync::Arc;
use std::time::Duration;

use apiserver_double::ApiServer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodewright::apis::{ConditionStatus, EC2NodeClass, NodePool};
use nodewright::cluster::ClusterState;
use nodewright::controllers::{self, Context, nodeclass::reconcile_node_class};
use serde_json::{Value, json};

use crate::nodeclass::{FakeAws, context_on};

/// A server, a context on it, and the client the test writes with.
fn cluster() -> (ApiServer, Arc<Context>) {
    cluster_on(nodewright::sim::double::server())
}

/// A context on `server`.
fn cluster_on(server: ApiServer) -> (ApiServer, Arc<Context>) {
    let context = context_on(&server, &FakeAws::default().mocked().clients);
    (server, context)
}

fn class(name: &str, extensions: Option<Value>) -> EC2NodeClass {
    let mut value = json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "role": "KarpenterNodeRole",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        },
    });
    if let Some(extensions) = extensions {
        value["spec"]["extensions"] = extensions;
    }
    serde_json::from_value(value).unwrap()
}

fn pool(name: &str, class: &str) -> NodePool {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"template": {"spec": {
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class},
        }}},
    }))
    .unwrap()
}

fn missing_filter(policy: &str) -> Value {
    json!({"instanceFilters": [{
        "name": "missing", "path": "/nonexistent/filter.wasm",
        "sha256": "0".repeat(64), "failurePolicy": policy,
    }]})
}

/// Creates `class` and reconciles it once, returning the stored object.
async fn create_and_reconcile(context: &Context, class: EC2NodeClass) -> EC2NodeClass {
    let api: Api<EC2NodeClass> = Api::all(context.client.clone());
    let created = api.create(&PostParams::default(), &class).await.unwrap();
    reconcile_node_class(context, &created).await.unwrap();
    api.get(&created.metadata.name.unwrap()).await.unwrap()
}

fn condition<'a>(class: &'a EC2NodeClass, type_: &str) -> &'a nodewright::apis::Condition {
    let conditions = class.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions
        .and_then(|c| c.iter().find(|c| c.type_ == type_))
        .unwrap_or_else(|| panic!("no {type_} condition on {:?}", class.metadata.name))
}

/// Polls class `name` every 100 ms until its status satisfies `done`, or
/// `None` after `limit` (a generous bound, not a timing assertion).
async fn wait_for(
    classes: &Api<EC2NodeClass>,
    name: &str,
    limit: Duration,
    done: impl Fn(&nodewright::apis::EC2NodeClassStatus) -> bool,
) -> Option<EC2NodeClass> {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        let current = classes.get(name).await.unwrap();
        if current.status.as_ref().is_some_and(&done) {
            return Some(current);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// Waits until the context's cluster state shows what `seen` looks for: the
/// watch delivers a write a moment after the API server took it.
async fn until_stored(context: &Context, seen: impl Fn(&ClusterState) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !seen(&context.state) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cluster state never saw the write"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `(type, reason, note)` of every event about EC2NodeClass `name`.
fn events_about(server: &ApiServer, name: &str) -> Vec<(String, String, String)> {
    server
        .objects("events.k8s.io", "events")
        .iter()
        .filter(|e| e["regarding"]["name"] == name && e["regarding"]["kind"] == "EC2NodeClass")
        .map(|e| {
            let text = |field: &str| e[field].as_str().unwrap_or_default().to_string();
            (text("type"), text("reason"), text("note"))
        })
        .collect()
}

#[tokio::test]
async fn default_extensions_make_a_class_ready_with_its_amis() {
    let (_server, context) = cluster();
    Api::<NodePool>::all(context.client.clone())
        .create(&PostParams::default(), &pool("general", "default"))
        .await
        .unwrap();
    until_stored(&context, |state| !state.node_pools_of("default").is_empty()).await;
    let stored = create_and_reconcile(&context, class("default", None)).await;

    let ready = condition(&stored, "ExtensionsReady");
    assert_eq!(ready.status, ConditionStatus::True);
    assert_eq!(ready.reason.as_deref(), Some("Ready"));
    assert_eq!(ready.observed_generation, Some(1));
    let amis = condition(&stored, "AMIsReady");
    assert_eq!(amis.status, ConditionStatus::True);
    let ids: Vec<&str> = stored
        .status
        .as_ref()
        .and_then(|s| s.amis.as_ref())
        .unwrap()
        .iter()
        .map(|a| a.id.as_str())
        .collect();
    assert_eq!(ids, ["ami-gpu"], "the pending image is never offered");
}

#[tokio::test]
async fn a_failing_module_with_fail_blocks_its_class_and_says_so_in_an_event() {
    let (server, context) = cluster();
    // A Fail module, and after it an Ignore module that fails too.
    let mut filters = missing_filter("Fail");
    let mut ignored = missing_filter("Ignore")["instanceFilters"][0].clone();
    ignored["name"] = json!("also-missing");
    filters["instanceFilters"]
        .as_array_mut()
        .unwrap()
        .push(ignored);
    let broken = create_and_reconcile(&context, class("broken", Some(filters))).await;
    let healthy = create_and_reconcile(&context, class("healthy", None)).await;

    let failed = condition(&broken, "ExtensionsReady");
    assert_eq!(failed.status, ConditionStatus::False);
    assert_eq!(failed.reason.as_deref(), Some("ModuleFailed"));
    let message = failed.message.as_deref().unwrap();
    assert!(
        message.contains("spec.extensions.instanceFilters[0] (missing)"),
        "{message}"
    );
    assert!(message.contains("/nonexistent/filter.wasm"), "{message}");
    let events = events_about(&server, "broken");
    assert!(
        events.iter().any(|(t, r, note)| t == "Warning"
            && r == "ExtensionModuleFailed"
            && note.contains("instanceFilters[0]")),
        "{events:?}"
    );
    assert!(
        events.iter().any(|(t, r, note)| t == "Warning"
            && r == "ExtensionModuleSkipped"
            && note.contains("instanceFilters[1] (also-missing)")),
        "{events:?}"
    );
    assert_eq!(
        condition(&healthy, "ExtensionsReady").status,
        ConditionStatus::True
    );
    assert!(events_about(&server, "healthy").is_empty());
}

#[tokio::test]
async fn an_ignored_failure_is_skipped_with_one_warning_event() {
    let (server, context) = cluster();
    let stored =
        create_and_reconcile(&context, class("lenient", Some(missing_filter("Ignore")))).await;
    let skipped = condition(&stored, "ExtensionsReady");
    assert_eq!(skipped.status, ConditionStatus::True);
    assert_eq!(skipped.reason.as_deref(), Some("ModulesSkipped"));
    // A second pass with nothing new publishes nothing new.
    reconcile_node_class(&context, &stored).await.unwrap();
    let events = events_about(&server, "lenient");
    let warnings: Vec<_> = events
        .iter()
        .filter(|(t, r, _)| t == "Warning" && r == "ExtensionModuleSkipped")
        .collect();
    assert_eq!(warnings.len(), 1, "{events:?}");
}

#[tokio::test]
async fn a_config_map_module_recovers_when_its_config_map_appears() {
    let (server, context) = cluster();
    let crate_dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/filters/examples/drop-burstable"
    );
    let wasm =
        std::fs::read(nodewright_host::harness::build_component(crate_dir).unwrap()).unwrap();
    let digest = nodewright_host::sha256_hex(&wasm);
    let extensions = json!({"instanceFilters": [{
        "name": "no-burstable",
        "configMap": {"name": "filters", "namespace": "kube-system", "key": "drop-burstable.wasm"},
        "sha256": digest,
    }]});
    let classes: Api<EC2NodeClass> = Api::all(context.client.clone());
    let created = classes
        .create(&PostParams::default(), &class("from-cm", Some(extensions)))
        .await
        .unwrap();
    // Another controller's condition, which this one must leave alone.
    let other = json!({"status": {"conditions": [{
        "type": "example.com/Audited", "status": "True", "reason": "Audited",
        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]}});
    classes
        .patch_status("from-cm", &PatchParams::default(), &Patch::Merge(&other))
        .await
        .unwrap();

    let current = classes.get("from-cm").await.unwrap();
    reconcile_node_class(&context, &current).await.unwrap();
    let missing = classes.get("from-cm").await.unwrap();
    let failed = condition(&missing, "ExtensionsReady");
    assert_eq!(failed.status, ConditionStatus::False);
    assert!(
        failed
            .message
            .as_deref()
            .unwrap()
            .contains("kube-system/filters not found")
    );

    let config_map: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "filters", "namespace": "kube-system"},
        "binaryData": {"drop-burstable.wasm": k8s_openapi::ByteString(wasm)},
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(context.client.clone(), "kube-system")
        .create(&PostParams::default(), &config_map)
        .await
        .unwrap();
    until_stored(&context, |state| !state.config_maps_of(&missing).is_empty()).await;
    reconcile_node_class(&context, &missing).await.unwrap();
    let recovered = classes.get("from-cm").await.unwrap();
    assert_eq!(
        condition(&recovered, "ExtensionsReady").status,
        ConditionStatus::True
    );
    assert_eq!(
        condition(&recovered, "example.com/Audited").status,
        ConditionStatus::True
    );
    let events = events_about(&server, "from-cm");
    assert!(
        events
            .iter()
            .any(|(t, r, _)| t == "Normal" && r == "ExtensionsReady"),
        "{events:?}"
    );
    assert_eq!(created.metadata.generation, Some(1));
}

#[tokio::test]
async fn invalid_extensions_are_reported_as_such() {
    // The CRD's CEL rules refuse this class; the controller must still
    // report it when it reaches the cluster another way.
    let (server, context) = cluster_on(
        nodewright::sim::double::builder()
            .validate_custom_resources(false)
            .build(),
    );
    let no_source = json!({"instanceFilters": [{"name": "nothing"}]});
    let stored = create_and_reconcile(&context, class("invalid", Some(no_source))).await;
    let invalid = condition(&stored, "ExtensionsReady");
    assert_eq!(invalid.status, ConditionStatus::False);
    assert_eq!(invalid.reason.as_deref(), Some("InvalidExtensions"));
    assert!(
        invalid
            .message
            .as_deref()
            .unwrap()
            .contains("spec.extensions.instanceFilters[0]"),
        "{invalid:?}"
    );
    assert!(!events_about(&server, "invalid").is_empty());
}

#[tokio::test]
async fn a_class_deleted_before_its_status_is_written_is_left_alone() {
    let (_server, context) = cluster();
    let classes: Api<EC2NodeClass> = Api::all(context.client.clone());
    let created = classes
        .create(&PostParams::default(), &class("gone", None))
        .await
        .unwrap();
    classes
        .delete("gone", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    let result = reconcile_node_class(&context, &created).await.unwrap();
    assert!(result.is_none());
}

#[tokio::test]
async fn the_controller_loop_writes_status_for_a_new_class() {
    let (_server, context) = cluster();
    let running = tokio::spawn(controllers::nodeclass::run(context.clone()));
    let classes: Api<EC2NodeClass> = Api::all(context.client.clone());
    classes
        .create(&PostParams::default(), &class("watched", None))
        .await
        .unwrap();
    let ready = wait_for(&classes, "watched", Duration::from_secs(30), |status| {
        status.conditions.is_some()
    })
    .await;
    running.abort();
    let ready = ready.expect("the controller wrote no status within 30 s");
    assert_eq!(
        condition(&ready, "ExtensionsReady").status,
        ConditionStatus::True
    );
    assert_eq!(condition(&ready, "AMIsReady").status, ConditionStatus::True);
}

/// The `nodewright controller` binary, configured only through a kubeconfig
/// and the standard AWS environment, against the API server emulator served
/// on 127.0.0.1 and moto: it finds the API server's version, the region's
/// catalog and the class's image, writes the status, logs JSON lines, and
/// exits cleanly on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_binary_runs_against_a_kubeconfig_and_the_aws_environment() {
    let clients = crate::moto::moto_clients().await;
    let image = crate::amis::register(
        &clients,
        "binary-test-golden",
        aws_sdk_ec2::types::ArchitectureValues::X8664,
        &[("team", "binary-test")],
    )
    .await;

    let server = nodewright::sim::double::server();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let serving = tokio::spawn(server.clone().serve(listener));
    let dir = std::env::temp_dir().join(format!("nodewright-controller-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: emu, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\nusers: [{{name: emu, user: {{}}}}]\ncontexts: [{{name: emu, context: {{cluster: emu, user: emu}}}}]\ncurrent-context: emu\n"
        ),
    )
    .unwrap();
    let mut golden = class("golden", None);
    golden.spec.ami_family = Some(nodewright::apis::ec2nodeclass::AMIFamily::AL2023);
    golden.spec.ami_selector_terms =
        vec![serde_json::from_value(json!({"tags": {"team": "binary-test"}})).unwrap()];
    let classes: Api<EC2NodeClass> = Api::all(server.client());
    classes
        .create(&PostParams::default(), &golden)
        .await
        .unwrap();

    let child = std::process::Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args([
            "controller",
            "--region",
            "us-east-1",
            "--cluster-name",
            "binary-test",
            "--cluster-endpoint",
            "https://binary-test.example",
            "--bind-address",
            "127.0.0.1",
            "--metrics-port",
            "0",
            "--health-probe-port",
            "0",
        ])
        .env("KUBECONFIG", &kubeconfig)
        .env("AWS_ENDPOINT_URL", &crate::moto::moto().endpoint)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_REGION")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let written = wait_for(&classes, "golden", Duration::from_secs(60), |status| {
        status.amis.is_some()
    })
    .await;
    std::process::Command::new("kill")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    let output = child.wait_with_output().unwrap();
    serving.abort();
    std::fs::remove_dir_all(&dir).unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let written = written.unwrap_or_else(|| {
        panic!("no status.amis within 60 s\nstdout:\n{stdout}\nstderr:\n{stderr}")
    });

    let amis = written
        .status
        .as_ref()
        .and_then(|s| s.amis.as_ref())
        .unwrap();
    assert_eq!(
        amis.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
        [image.as_str()]
    );
    assert_eq!(
        condition(&written, "ExtensionsReady").status,
        ConditionStatus::True
    );
    assert!(
        output.status.success(),
        "exit {:?}\n{stderr}",
        output.status
    );
    let starting = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["fields"]["message"] == "starting")
        .unwrap_or_else(|| panic!("no JSON 'starting' line in:\n{stdout}"));
    assert_eq!(starting["fields"]["region"], "us-east-1");
    assert_eq!(starting["fields"]["kubernetes_version"], "1.34");
}

/// The real `cosign` and registry of the host's signature tests.
#[path = "../../filters/host/tests/support/oci_tools.rs"]
mod oci_tools;

#[tokio::test(flavor = "multi_thread")]
async fn an_entrys_signature_keys_refuse_a_module_signed_by_another_key_until_the_key_is_listed() {
    let tools = oci_tools::tools();
    let dir = std::env::temp_dir().join(format!("nodewright-entry-keys-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("other")).unwrap();
    let registry = oci_tools::start_registry(&tools, &dir);
    let repo = format!("{}/filters/keep-all", registry.authority);
    // The team's key signs; the ConfigMap first holds another one.
    oci_tools::cosign(&tools, &dir, &["generate-key-pair"]);
    oci_tools::cosign(&tools, &dir.join("other"), &["generate-key-pair"]);
    let component = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("filters/host/test-components/misbehaving-filter");
    let wasm = nodewright_host::harness::build_component(&component).unwrap();
    let pin = nodewright_host::sha256_hex(&std::fs::read(&wasm).unwrap());
    let digest = oci_tools::upload(&tools, &dir, &wasm, &repo, "1.0.0");
    oci_tools::sign(&tools, &dir, "cosign.key", &repo, &digest);

    let server = nodewright::sim::double::server();
    let host = nodewright_host::HostConfig {
        plain_http_hosts: vec![registry.authority.clone()],
        ..nodewright_host::HostConfig::default()
    };
    let context = crate::nodeclass::context_with_host(
        "demo",
        &server,
        &FakeAws::default().mocked().clients,
        host,
    );
    let pem = |path: &str| std::fs::read_to_string(dir.join(path)).unwrap();
    let namespace: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": "nodewright"}})).unwrap();
    Api::all(context.client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let keys: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "filter-keys", "namespace": "nodewright"},
        "data": {"other.pub": pem("other/cosign.pub")},
    }))
    .unwrap();
    let config_maps: Api<ConfigMap> = Api::namespaced(context.client.clone(), "nodewright");
    config_maps
        .create(&PostParams::default(), &keys)
        .await
        .unwrap();
    let reference = format!("{repo}:1.0.0");
    let filters = json!({"instanceFilters": [{
        "name": "keep-all", "oci": reference, "sha256": pin,
        "signatureKeys": {"name": "filter-keys", "namespace": "nodewright"},
    }]});
    let signed = class("signed", Some(filters));
    until_stored(&context, |state| !state.config_maps_of(&signed).is_empty()).await;
    let stored = create_and_reconcile(&context, signed.clone()).await;

    let refused = condition(&stored, "ExtensionsReady");
    assert_eq!(refused.status, ConditionStatus::False);
    assert_eq!(refused.reason.as_deref(), Some("ModuleFailed"));
    let message = refused.message.as_deref().unwrap();
    for part in [
        "spec.extensions.instanceFilters[0] (keep-all)",
        &format!("oci://{reference}"),
        "configmap/nodewright/filter-keys (other.pub)",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    let events = events_about(&server, "signed");
    assert!(
        events.iter().any(|(t, r, note)| t == "Warning"
            && r == "ExtensionModuleFailed"
            && note.contains("configmap/nodewright/filter-keys")),
        "{events:?}"
    );

    // The team's key added to the ConfigMap: the same class loads it.
    config_maps
        .patch(
            "filter-keys",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"team.pub": pem("cosign.pub")}})),
        )
        .await
        .unwrap();
    until_stored(&context, |state| {
        state
            .config_maps_of(&signed)
            .iter()
            .any(|cm| cm.data.as_ref().is_some_and(|d| d.contains_key("team.pub")))
    })
    .await;
    let api: Api<EC2NodeClass> = Api::all(context.client.clone());
    reconcile_node_class(&context, &api.get("signed").await.unwrap())
        .await
        .unwrap();
    let ready = api.get("signed").await.unwrap();
    let ready = condition(&ready, "ExtensionsReady");
    assert_eq!(ready.status, ConditionStatus::True, "{:?}", ready.message);

    drop(registry);
    std::fs::remove_dir_all(&dir).unwrap();
}
