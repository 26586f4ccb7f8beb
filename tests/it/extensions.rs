//! EC2NodeClass extensions wired into instance-type resolution: defaults,
//! failure policies and what `simulate` reports about them.

use nodewright::controllers::nodeclass::extensions_ready;
use nodewright::sim::Manifests;
use nodewright::{aws::catalog::Catalog, extensions::Extensions};
use nodewright_host::HostConfig;

use crate::support::plan_yaml;

const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, t]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
"#;

fn node_class(extensions: &str) -> String {
    format!(
        r#"
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: NodeRole
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
{extensions}"#
    )
}

fn outcome(yaml: &str) -> std::sync::Arc<nodewright::extensions::Outcome> {
    outcome_of_resolved(yaml).0
}

/// What the extensions made of the class's resolved instance types, and
/// those types.
fn outcome_of_resolved(
    yaml: &str,
) -> (
    std::sync::Arc<nodewright::extensions::Outcome>,
    std::sync::Arc<Vec<nodewright::scheduling::InstanceType>>,
) {
    let mut manifests = Manifests::default();
    manifests.add_yaml("test.yaml", yaml).unwrap();
    let catalog = Catalog::embedded("us-east-1").unwrap();
    let extensions = Extensions::new(HostConfig::default()).unwrap();
    let class = &manifests.node_classes[0];
    let settings =
        nodewright::aws::instance_types::ResolverSettings::from_node_class(class).unwrap();
    let types = std::sync::Arc::new(
        nodewright::aws::instance_types::resolve_all(&catalog, &settings).unwrap(),
    );
    let outcome = extensions.apply(
        class,
        "general",
        &catalog,
        types.clone(),
        &manifests.config_maps,
    );
    (outcome, types)
}

#[test]
fn without_extensions_flex_families_come_first() {
    let plan = plan_yaml(&format!("{POOL}{}", node_class("")));
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert!(!plan.node_claims.is_empty());
    for claim in &plan.node_claims {
        let options = &claim.instance_type_options;
        let first_fallback = options
            .iter()
            .position(|o| !o.split('.').next().unwrap_or_default().ends_with("-flex"))
            .unwrap_or(options.len());
        assert!(first_fallback > 0, "first option is not flex: {options:?}");
        // Every flex option precedes every fallback option.
        assert!(
            options[first_fallback..].iter().all(|o| !o
                .split('.')
                .next()
                .unwrap_or_default()
                .ends_with("-flex")),
            "{options:?}"
        );
        assert!(first_fallback < options.len(), "fallback types are kept");
    }
    let run = &plan.extensions[0];
    assert_eq!(
        (run.role.as_str(), run.source.as_str()),
        ("priority-scorer", "builtin:flex-first")
    );
    assert!(run.error.is_none());
}

#[test]
fn a_scorer_list_without_flex_first_keeps_price_order() {
    // An explicit empty scorer list switches the default off: cheapest first.
    let plan = plan_yaml(&format!(
        "{POOL}{}",
        node_class("  extensions:\n    priorityScorers: []\n")
    ));
    for claim in &plan.node_claims {
        assert!(
            !claim.instance_type.contains("-flex"),
            "{}",
            claim.instance_type
        );
    }
    assert!(plan.extensions.is_empty());
}

#[test]
fn failing_module_with_fail_policy_stops_launches_for_its_node_class() {
    let digest = "0".repeat(64);
    let plan = plan_yaml(&format!(
        "{POOL}{}",
        node_class(&format!(
            "  extensions:\n    instanceFilters:\n      - name: missing\n        path: /nonexistent/filter.wasm\n        sha256: \"{digest}\"\n"
        ))
    ));
    assert!(plan.node_claims.is_empty());
    assert_eq!(plan.unschedulable.len(), 4);
    let run = plan
        .extensions
        .iter()
        .find(|r| r.module == "missing")
        .unwrap();
    let error = run.error.as_deref().unwrap();
    assert!(
        error.contains("spec.extensions.instanceFilters[0]"),
        "{error}"
    );
    assert_eq!(run.failure_policy, "Fail");
}

#[test]
fn failing_module_with_ignore_policy_is_skipped() {
    let digest = "0".repeat(64);
    let plan = plan_yaml(&format!(
        "{POOL}{}",
        node_class(&format!(
            "  extensions:\n    instanceFilters:\n      - name: missing\n        path: /nonexistent/filter.wasm\n        sha256: \"{digest}\"\n        failurePolicy: Ignore\n"
        ))
    ));
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert!(!plan.node_claims.is_empty());
    let run = plan
        .extensions
        .iter()
        .find(|r| r.module == "missing")
        .unwrap();
    assert!(run.error.is_some());
    assert_eq!(run.failure_policy, "Ignore");
}

#[test]
fn config_map_sources_must_exist() {
    let digest = "0".repeat(64);
    let plan = plan_yaml(&format!(
        "{POOL}{}",
        node_class(&format!(
            "  extensions:\n    instanceFilters:\n      - name: from-cm\n        configMap: {{name: filters, namespace: kube-system, key: f.wasm}}\n        sha256: \"{digest}\"\n"
        ))
    ));
    let error = plan.extensions[0].error.as_deref().unwrap();
    assert!(
        error.contains("configMap") && error.contains("kube-system/filters"),
        "{error}"
    );
    assert!(plan.node_claims.is_empty());
}

#[test]
fn extensions_ready_condition_names_the_failing_module() {
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default());
    let ok = outcome(&node_class(""));
    let condition = extensions_ready(&ok, Some(3), now.clone());
    assert_eq!(condition.type_, "ExtensionsReady");
    assert!(condition.is_true());
    assert_eq!(condition.observed_generation, Some(3));

    let digest = "0".repeat(64);
    let failing = |policy: &str| {
        outcome(&node_class(&format!(
            "  extensions:\n    instanceFilters:\n      - name: broken\n        path: /nonexistent/filter.wasm\n        sha256: \"{digest}\"\n        failurePolicy: {policy}\n"
        )))
    };
    let blocked = extensions_ready(&failing("Fail"), None, now.clone());
    assert!(!blocked.is_true());
    assert_eq!(blocked.reason.as_deref(), Some("ModuleFailed"));
    let message = blocked.message.unwrap();
    assert!(
        message.contains("broken") && message.contains("instanceFilters[0]"),
        "{message}"
    );

    let skipped = extensions_ready(&failing("Ignore"), None, now);
    assert!(skipped.is_true());
    assert_eq!(skipped.reason.as_deref(), Some("ModulesSkipped"));
}

/// The purpose-built misbehaving filter of the host's sandbox tests, built
/// once, with its digest.
fn misbehaving_filter() -> (String, String) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("filters/host/test-components/misbehaving-filter");
    let wasm = nodewright_host::harness::build_component(&dir).unwrap();
    let digest = nodewright_host::sha256_hex(&std::fs::read(&wasm).unwrap());
    (wasm.display().to_string(), digest)
}

/// An instance filter entry for the misbehaving filter in `mode`.
fn misbehaving_entry(name: &str, behaviour: &str, extra: &str) -> String {
    let (path, digest) = misbehaving_filter();
    format!(
        "      - name: {name}\n        path: {path}\n        sha256: \"{digest}\"\n        timeout: 5s\n        config: {{mode: {behaviour}}}\n{extra}"
    )
}

#[test]
fn a_40_mib_component_error_is_bounded_in_simulate_and_the_condition() {
    let yaml = format!(
        "{POOL}{}",
        node_class(&format!(
            "  extensions:\n    instanceFilters:\n{}",
            misbehaving_entry("huge", "huge-error", "")
        ))
    );
    let plan = plan_yaml(&yaml);
    assert!(plan.node_claims.is_empty());
    assert_eq!(plan.unschedulable.len(), 4);
    for pod in &plan.unschedulable {
        assert!(pod.reason.len() < 2048, "{} bytes", pod.reason.len());
        assert!(pod.reason.contains("more bytes)"), "{}", pod.reason);
        assert!(!pod.reason.chars().any(char::is_control), "{}", pod.reason);
    }
    assert!(serde_json::to_string(&plan).unwrap().len() < 64 * 1024);

    let condition = extensions_ready(&outcome(&yaml), None, now());
    let message = condition.message.unwrap();
    assert!(message.len() <= 32_768, "{} bytes", message.len());
    assert!(
        message.contains("\\u{1b}[31mbad\\nconfig"),
        "{message:.200}"
    );
}

#[test]
fn a_shadow_filter_reports_what_it_would_drop_and_drops_nothing() {
    let enforced = plan_yaml(&format!("{POOL}{}", node_class("")));
    let shadowed = plan_yaml(&format!(
        "{POOL}{}",
        node_class(&format!(
            "  extensions:\n    instanceFilters:\n{}",
            misbehaving_entry("long-names", "name-length", "        mode: Shadow\n")
        ))
    ));
    // Same decisions as without the filter.
    let options = |plan: &nodewright::sim::Plan| -> Vec<Vec<String>> {
        plan.node_claims
            .iter()
            .map(|c| c.instance_type_options.clone())
            .collect()
    };
    assert_eq!(options(&shadowed), options(&enforced));
    let run = shadowed
        .extensions
        .iter()
        .find(|r| r.module == "long-names")
        .unwrap();
    assert_eq!(run.mode, "Shadow");
    assert!(run.error.is_none());
    let would_drop: Vec<&String> = run.dropped.iter().flat_map(|g| &g.instance_types).collect();
    assert!(
        would_drop.iter().any(|n| n.as_str() == "c7i-flex.xlarge"),
        "{would_drop:?}"
    );
    // And the dropped types are still offered.
    assert!(
        shadowed
            .node_claims
            .iter()
            .flat_map(|c| &c.instance_type_options)
            .any(|o| o.len() > 10),
        "long names were dropped"
    );
    let json = serde_json::to_value(&shadowed).unwrap();
    assert!(
        json["extensions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["mode"] == "Shadow"),
        "{json}"
    );
}

#[test]
fn the_resolved_types_are_copied_only_when_a_filter_drops_one() {
    // The built-in scorer orders without filtering: the outcome holds the
    // resolved list itself, not a copy of it.
    let (outcome, resolved) = outcome_of_resolved(&format!("{POOL}{}", node_class("")));
    assert!(std::sync::Arc::ptr_eq(&outcome.instance_types, &resolved));
    // A filter that drops types leaves the kept ones, in order.
    let (outcome, resolved) = outcome_of_resolved(&format!(
        "{POOL}{}",
        node_class(&format!(
            "  extensions:\n    instanceFilters:\n{}",
            misbehaving_entry("long-names", "name-length", "")
        ))
    ));
    assert!(outcome.blocked.is_none(), "{:?}", outcome.blocked);
    let kept: Vec<&str> = outcome
        .instance_types
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    let expected: Vec<&str> = resolved
        .iter()
        .map(|t| t.name.as_str())
        .filter(|name| name.len() <= 10)
        .collect();
    assert!(!kept.is_empty() && kept.len() < resolved.len(), "{kept:?}");
    assert_eq!(kept, expected);
}

#[test]
fn a_shadow_scorer_reports_the_reorder_without_applying_it() {
    let shadow_scorer = "  extensions:\n    priorityScorers:\n      - name: flex-first\n        builtin: flex-first\n        mode: Shadow\n";
    let plan = plan_yaml(&format!("{POOL}{}", node_class(shadow_scorer)));
    // Without an enforced scorer the options are in price order.
    let cheapest_first = plan_yaml(&format!(
        "{POOL}{}",
        node_class("  extensions:\n    priorityScorers: []\n")
    ));
    let options = |plan: &nodewright::sim::Plan| -> Vec<Vec<String>> {
        plan.node_claims
            .iter()
            .map(|c| c.instance_type_options.clone())
            .collect()
    };
    assert_eq!(options(&plan), options(&cheapest_first));
    let run = &plan.extensions[0];
    assert_eq!(
        (run.module.as_str(), run.mode.as_str()),
        ("flex-first", "Shadow")
    );
    let reorder = run.reorder.as_ref().unwrap();
    assert!(reorder.moved > 0, "{reorder:?}");
    assert!(
        reorder.shadow[0]
            .split('.')
            .next()
            .unwrap()
            .ends_with("-flex"),
        "{reorder:?}"
    );
    assert!(
        !reorder.enforced[0]
            .split('.')
            .next()
            .unwrap()
            .ends_with("-flex"),
        "{reorder:?}"
    );

    let condition = extensions_ready(&outcome(&node_class(shadow_scorer)), None, now());
    assert!(condition.is_true());
    let message = condition.message.unwrap();
    assert!(
        message.contains("shadow priority-scorer flex-first would move"),
        "{message}"
    );
    let events = outcome(&node_class(shadow_scorer)).events();
    assert!(
        events.iter().any(|e| e.reason == "ExtensionShadowResult"
            && !e.warning
            && e.note.contains("would move")),
        "{events:?}"
    );
}

#[test]
fn a_failing_shadow_module_never_blocks() {
    let digest = "0".repeat(64);
    let yaml = format!(
        "{POOL}{}",
        node_class(&format!(
            "  extensions:\n    instanceFilters:\n      - name: missing\n        path: /nonexistent/filter.wasm\n        sha256: \"{digest}\"\n        failurePolicy: Fail\n        mode: Shadow\n"
        ))
    );
    let plan = plan_yaml(&yaml);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert!(!plan.node_claims.is_empty());
    let condition = extensions_ready(&outcome(&yaml), None, now());
    assert!(condition.is_true());
    assert_eq!(condition.reason.as_deref(), Some("ModulesSkipped"));
    assert!(
        condition
            .message
            .unwrap()
            .starts_with("shadow module failed (not enforced): spec.extensions.instanceFilters[0]")
    );
    let events = outcome(&yaml).events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].reason, "ExtensionModuleSkipped");
}

#[test]
fn a_scorer_on_a_blocked_class_is_not_said_to_have_ordered_anything() {
    let digest = "0".repeat(64);
    let plan = plan_yaml(&format!(
        "{POOL}{}",
        node_class(&format!(
            "  extensions:\n    instanceFilters:\n      - name: missing\n        path: /nonexistent/filter.wasm\n        sha256: \"{digest}\"\n"
        ))
    ));
    let scorer = plan
        .extensions
        .iter()
        .find(|r| r.module == "flex-first")
        .unwrap();
    assert!(scorer.error.is_none());
    let why = scorer.no_effect.as_deref().unwrap();
    assert!(why.contains("launches nothing"), "{why}");
}

#[test]
fn an_oversized_timeout_blocks_the_class_naming_the_field() {
    let plan = plan_yaml(&format!(
        "{POOL}{}",
        node_class(
            "  extensions:\n    priorityScorers:\n      - name: flex-first\n        builtin: flex-first\n        timeout: 100000000000000h\n"
        )
    ));
    assert!(plan.node_claims.is_empty());
    let reason = &plan.unschedulable[0].reason;
    assert!(
        reason.contains("spec.extensions.priorityScorers[0].timeout")
            && reason.contains("maximum of 10s"),
        "{reason}"
    );
}

#[test]
fn the_outer_bound_covers_every_module_and_evaluation() {
    let yaml = node_class(
        "  extensions:\n    instanceFilters:\n      - name: slow\n        url: https://example.com/f.wasm\n        sha256: \"0000000000000000000000000000000000000000000000000000000000000000\"\n        timeout: 2s\n",
    );
    let mut manifests = Manifests::default();
    manifests.add_yaml("class.yaml", &yaml).unwrap();
    let class = &manifests.node_classes[0];
    let extensions = Extensions::new(HostConfig::default()).unwrap();
    let one = extensions.time_bound(class, 1);
    let three = extensions.time_bound(class, 3);
    // Three evaluations add two more of each module's deadline: the 2 s
    // filter, and the 100 ms defaults of flex-first and available-amis.
    assert_eq!(three - one, std::time::Duration::from_millis(2 * 2200));
    // A download and a compile are allowed for the one fetched module.
    let defaults = extensions.time_bound(&manifests_class(&node_class("")), 1);
    assert!(
        one - defaults
            >= std::time::Duration::from_secs(2) + HostConfig::default().download_timeout
    );
}

fn manifests_class(yaml: &str) -> nodewright::apis::EC2NodeClass {
    let mut manifests = Manifests::default();
    manifests.add_yaml("class.yaml", yaml).unwrap();
    manifests.node_classes[0].clone()
}

fn now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default())
}

/// `nodewright simulate`'s table on `yaml`.
fn simulate_table(yaml: &str, tag: &str) -> String {
    let dir = std::env::temp_dir().join(format!("nodewright-ext-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("input.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(["simulate", file.to_str().unwrap()])
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_simulate_table_says_what_each_module_changed() {
    let digest = "0".repeat(64);
    let blocked = simulate_table(
        &format!(
            "{POOL}{}",
            node_class(&format!(
                "  extensions:\n    instanceFilters:\n      - name: missing\n        path: /nonexistent/filter.wasm\n        sha256: \"{digest}\"\n"
            ))
        ),
        "blocked",
    );
    assert!(
        !blocked.contains("ordered the instance-type options"),
        "{blocked}"
    );
    assert!(
        blocked.contains("flex-first (builtin:flex-first): ran, no effect"),
        "{blocked}"
    );

    let shadow = simulate_table(
        &format!(
            "{POOL}{}",
            node_class(&format!(
                "  extensions:\n    instanceFilters:\n{}    priorityScorers:\n      - name: flex-first\n        builtin: flex-first\n        mode: Shadow\n",
                misbehaving_entry("long-names", "name-length", "        mode: Shadow\n")
            ))
        ),
        "shadow",
    );
    assert!(shadow.contains("[shadow]: would drop "), "{shadow}");
    assert!(shadow.contains("(nothing dropped)"), "{shadow}");
    assert!(shadow.contains("has a long name: "), "{shadow}");
    assert!(
        shadow.contains("flex-first (builtin:flex-first) [shadow]: would move "),
        "{shadow}"
    );
}
