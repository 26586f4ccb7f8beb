//! EC2NodeClass extensions wired into instance-type resolution: defaults,
//! failure policies and what `simulate` reports about them.

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
    let mut manifests = Manifests::default();
    manifests.add_yaml("test.yaml", yaml).unwrap();
    let catalog = Catalog::embedded("us-east-1").unwrap();
    let extensions = Extensions::new(HostConfig::default()).unwrap();
    let class = &manifests.node_classes[0];
    let settings =
        nodewright::aws::instance_types::ResolverSettings::from_node_class(class).unwrap();
    let types = nodewright::aws::instance_types::resolve_all(&catalog, &settings).unwrap();
    extensions.apply(class, "general", &catalog, types, &manifests.config_maps)
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
    let condition = ok.condition(Some(3), now.clone());
    assert_eq!(condition.type_, "ExtensionsReady");
    assert!(condition.is_true());
    assert_eq!(condition.observed_generation, Some(3));

    let digest = "0".repeat(64);
    let failing = |policy: &str| {
        outcome(&node_class(&format!(
            "  extensions:\n    instanceFilters:\n      - name: broken\n        path: /nonexistent/filter.wasm\n        sha256: \"{digest}\"\n        failurePolicy: {policy}\n"
        )))
    };
    let blocked = failing("Fail").condition(None, now.clone());
    assert!(!blocked.is_true());
    assert_eq!(blocked.reason.as_deref(), Some("ModuleFailed"));
    let message = blocked.message.unwrap();
    assert!(
        message.contains("broken") && message.contains("instanceFilters[0]"),
        "{message}"
    );

    let skipped = failing("Ignore").condition(None, now);
    assert!(skipped.is_true());
    assert_eq!(skipped.reason.as_deref(), Some("ModulesSkipped"));
}
