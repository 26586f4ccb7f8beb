//! `simulate` end to end on the quickstart: the plan a user sees must place
//! every placeable pod, honour the zone spread, and explain the rest.

use std::collections::BTreeMap;
use std::path::PathBuf;

use nodewright::sim::{Plan, SimulateError, SimulateOptions, simulate};

use crate::support::plan_yaml;

fn run(paths: &[&str]) -> Result<Plan, SimulateError> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    simulate(&SimulateOptions {
        paths: paths.iter().map(|p| root.join(p)).collect(),
        region: "us-east-1".to_string(),
        ignore_preferences: false,
        node_overlay: false,
        static_capacity: false,
    })
}

#[test]
fn quickstart_places_every_cpu_pod_and_explains_the_gpu_job() {
    let plan = run(&["examples/quickstart"]).unwrap();
    let placed: Vec<&String> = plan.node_claims.iter().flat_map(|c| &c.pods).collect();
    for i in 0..8 {
        assert!(placed.contains(&&format!("shop/web-{i}")), "web-{i}");
    }
    for i in 0..6 {
        assert!(
            placed.contains(&&format!("shop/checkout-{i}")),
            "checkout-{i}"
        );
    }
    assert!(!placed.iter().any(|p| p.starts_with("ml/")));
    assert_eq!(plan.unschedulable.len(), 1);
    assert_eq!(plan.unschedulable[0].pod, "ml/train-0");
    assert!(
        plan.unschedulable[0].reason.contains("nvidia.com/gpu"),
        "{}",
        plan.unschedulable[0].reason
    );

    for claim in &plan.node_claims {
        assert_eq!(claim.node_pool, "general-purpose");
        assert_eq!(claim.capacity_type, "on-demand");
        assert!(!claim.instance_type_options.is_empty() && claim.instance_type_options.len() <= 60);
        assert!(claim.instance_type_options.contains(&claim.instance_type));
        // Labels are the claim's single-valued requirements; category has
        // three allowed values, so it is checked on the options instead.
        assert_eq!(claim.labels["karpenter.sh/nodepool"], "general-purpose");
        assert_eq!(claim.labels["kubernetes.io/arch"], "amd64");
        for option in &claim.instance_type_options {
            assert!(option.starts_with(['c', 'm', 'r']), "{option}");
        }
        assert!(claim.price_per_hour > 0.0 && !claim.price_is_estimate);
        assert!(claim.cpu_fill.is_some_and(|f| f > 0.0 && f <= 1.0));
        assert!(claim.memory_fill.is_some_and(|f| f > 0.0 && f <= 1.0));
    }
    let total: f64 = plan.node_claims.iter().map(|c| c.price_per_hour).sum();
    assert!((plan.total_price_per_hour - total).abs() < 1e-9);

    // checkout spreads over zones with a skew of at most one.
    let mut per_zone: BTreeMap<&str, usize> = BTreeMap::new();
    for claim in &plan.node_claims {
        let n = claim
            .pods
            .iter()
            .filter(|p| p.starts_with("shop/checkout-"))
            .count();
        *per_zone.entry(claim.zone.as_str()).or_default() += n;
    }
    per_zone.retain(|_, n| *n > 0);
    assert!(per_zone.len() >= 3, "{per_zone:?}");
    let max = per_zone.values().max().unwrap();
    let min = per_zone.values().min().unwrap();
    assert!(max - min <= 1, "{per_zone:?}");
}

#[test]
fn plan_json_has_the_documented_shape() {
    let plan = run(&["examples/quickstart"]).unwrap();
    let doc = serde_json::to_value(&plan).unwrap();
    for key in [
        "region",
        "nodeClaims",
        "existingNodes",
        "unschedulable",
        "totalPricePerHour",
        "solveMillis",
    ] {
        assert!(doc.get(key).is_some(), "{key}");
    }
    let claim = &doc["nodeClaims"][0];
    for key in [
        "name",
        "nodePool",
        "instanceType",
        "instanceTypeOptions",
        "capacityType",
        "zone",
        "pricePerHour",
        "pods",
        "requests",
        "labels",
    ] {
        assert!(claim.get(key).is_some(), "{key}");
    }
    assert!(claim["requests"]["cpu"].is_string() && claim["requests"]["memory"].is_string());
    assert_eq!(doc["unschedulable"][0]["pod"], "ml/train-0");
}

#[test]
fn missing_node_pools_are_an_error() {
    let err = run(&["examples/quickstart/web.yaml"]).unwrap_err();
    assert!(matches!(err, SimulateError::NoNodePool), "{err}");
}

/// The quickstart's NodePool and EC2NodeClass, inline.
const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: NodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"#;

fn claim_with<'a>(plan: &'a Plan, pod: &str) -> &'a nodewright::sim::plan::PlannedNodeClaim {
    plan.node_claims
        .iter()
        .find(|c| c.pods.iter().any(|p| p == pod))
        .unwrap_or_else(|| panic!("{pod} not placed: {:?}", plan.unschedulable))
}

/// db and cache are the largest pods, so they are placed first, together.
/// client's anti-affinity selects db through the Namespace manifest's label;
/// sidecar's affinity selects cache through `kubernetes.io/metadata.name` of
/// a namespace that has no manifest.
const NAMESPACED: &str = r#"
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {team: a}}
---
apiVersion: v1
kind: Pod
metadata: {name: db-0, namespace: team-a, labels: {app: db}}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 256Mi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: cache-0, namespace: plain, labels: {app: cache}}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 256Mi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: 100m, memory: 256Mi}}}]
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - labelSelector: {matchLabels: {app: db}}
          namespaceSelector: {matchLabels: {team: a}}
          topologyKey: kubernetes.io/hostname
---
apiVersion: v1
kind: Pod
metadata: {name: sidecar, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: 100m, memory: 256Mi}}}]
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - labelSelector: {matchLabels: {app: cache}}
          namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: plain}}
          topologyKey: kubernetes.io/hostname
"#;

#[test]
fn namespace_selectors_match_namespace_manifests_and_the_name_label() {
    let plan = plan_yaml(&format!("{POOL}{NAMESPACED}"));
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    let shared = claim_with(&plan, "team-a/db-0");
    assert!(shared.pods.contains(&"plain/cache-0".to_string()));
    assert!(
        !claim_with(&plan, "default/client")
            .pods
            .contains(&"team-a/db-0".to_string()),
        "client's anti-affinity must keep it off db's node"
    );
    assert!(
        claim_with(&plan, "default/sidecar")
            .pods
            .contains(&"plain/cache-0".to_string())
    );
}

#[test]
fn a_node_pool_blocked_by_a_failing_extension_is_named_in_each_reason() {
    let digest = "0".repeat(64);
    let broken = format!(
        r#"
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: filtered}}
spec:
  weight: 100
  template:
    spec:
      requirements: []
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: broken}}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: broken}}
spec:
  role: NodeRole
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
  extensions:
    instanceFilters:
      - name: missing
        path: /nonexistent/filter.wasm
        sha256: "{digest}"
---
apiVersion: v1
kind: Pod
metadata: {{name: pinned}}
spec:
  nodeSelector: {{karpenter.sh/nodepool: filtered}}
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: 100m}}}}}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: free}}
spec:
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: 100m}}}}}}]
"#
    );
    let plan = plan_yaml(&format!("{POOL}{broken}"));
    // The heavier, blocked pool launches nothing; the other one is used.
    assert_eq!(claim_with(&plan, "default/free").node_pool, "general");
    assert!(plan.node_claims.iter().all(|c| c.node_pool != "filtered"));
    assert_eq!(plan.unschedulable.len(), 1, "{:?}", plan.unschedulable);
    let reason = &plan.unschedulable[0].reason;
    assert_eq!(plan.unschedulable[0].pod, "default/pinned");
    for part in [
        "nodepool \"filtered\"",
        "EC2NodeClass \"broken\"",
        "spec.extensions.instanceFilters[0] (missing)",
    ] {
        assert!(reason.contains(part), "{part} not in {reason}");
    }
    assert!(!reason.contains("no instance type"), "{reason}");
}

#[test]
fn the_amd_gpu_workload_schedules_on_g4ad() {
    let plan = run(&["examples/workloads/gpu-amd"]).unwrap();
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(plan.node_claims.len(), 1);
    let claim = &plan.node_claims[0];
    assert!(
        claim.instance_type.starts_with("g4ad."),
        "{}",
        claim.instance_type
    );
    assert!(
        claim
            .instance_type_options
            .iter()
            .all(|o| o.starts_with("g4ad.")),
        "{:?}",
        claim.instance_type_options
    );
}

#[test]
fn placement_group_example_plans_one_broker_per_partition() {
    let plan = run(&["examples/workloads/placement-group"]).unwrap();
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    let label =
        |claim: &nodewright::sim::plan::PlannedNodeClaim, key: &str| claim.labels.get(key).cloned();
    let mut partitions: Vec<String> = plan
        .node_claims
        .iter()
        .filter(|c| c.node_pool == "kafka")
        .filter_map(|c| label(c, "karpenter.k8s.aws/placement-group-partition"))
        .collect();
    partitions.sort();
    assert_eq!(partitions, ["1", "2", "3"], "one broker per partition");
    let etcd: Vec<_> = plan
        .node_claims
        .iter()
        .filter(|c| c.node_pool == "etcd")
        .collect();
    assert_eq!(etcd.len(), 1);
    assert_eq!(
        label(etcd[0], "karpenter.k8s.aws/placement-group-id").as_deref(),
        Some("pg-0a1b2c3d4e5f60002")
    );
}

#[test]
fn a_pod_selecting_another_placement_group_is_not_placed() {
    let dir = std::env::temp_dir().join(format!(
        "nodewright-simulate-placement-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for file in ["ec2nodeclasses.yaml", "nodepools.yaml"] {
        std::fs::copy(
            root.join("examples/workloads/placement-group").join(file),
            dir.join(file),
        )
        .unwrap();
    }
    std::fs::write(
        dir.join("pod.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: lost, namespace: default}\nspec:\n  nodeSelector: {karpenter.k8s.aws/placement-group-id: pg-0000000000000000f}\n  containers: [{name: c, image: busybox, resources: {requests: {cpu: 100m}}}]\n",
    )
    .unwrap();
    let plan = simulate(&SimulateOptions {
        paths: vec![dir.clone()],
        region: "us-east-1".to_string(),
        ignore_preferences: false,
        node_overlay: false,
        static_capacity: false,
    })
    .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(plan.node_claims.is_empty(), "{:?}", plan.node_claims);
    assert_eq!(plan.unschedulable.len(), 1);
}

/// The quickstart with its NodePool annotated `nodewright.io/price-limit-per-hour: limit`.
fn quickstart_limited_to(limit: &str) -> Result<Plan, SimulateError> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::temp_dir().join(format!(
        "nodewright-simulate-price-limit-{}-{limit}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(root.join("examples/quickstart")).unwrap() {
        let path = entry.unwrap().path();
        let mut text = std::fs::read_to_string(&path).unwrap();
        if path.ends_with("nodepool.yaml") {
            text = text.replace(
                "  name: general-purpose\n",
                &format!(
                    "  name: general-purpose\n  annotations:\n    nodewright.io/price-limit-per-hour: \"{limit}\"\n"
                ),
            );
            assert!(text.contains("price-limit"));
        }
        std::fs::write(dir.join(path.file_name().unwrap()), text).unwrap();
    }
    let plan = simulate(&SimulateOptions {
        paths: vec![dir.clone()],
        region: "us-east-1".to_string(),
        ignore_preferences: false,
        node_overlay: false,
        static_capacity: false,
    });
    std::fs::remove_dir_all(&dir).unwrap();
    plan
}

#[test]
fn a_price_limit_caps_the_plan_and_the_pods_past_it_say_why() {
    let free = run(&["examples/quickstart"]).unwrap();
    let limit = free.total_price_per_hour / 2.0;
    let plan = quickstart_limited_to(&format!("{limit:.4}")).unwrap();
    assert!(!plan.node_claims.is_empty());
    assert!(
        plan.total_price_per_hour <= limit + 1e-4,
        "{} over {limit}",
        plan.total_price_per_hour
    );
    let capped: Vec<_> = plan
        .unschedulable
        .iter()
        .filter(|u| u.reason.contains("nodewright.io/price-limit-per-hour"))
        .collect();
    assert!(!capped.is_empty(), "{:?}", plan.unschedulable);
    // The plan says what the pool spends against its limit.
    assert_eq!(plan.price_limits.len(), 1);
    let spent = &plan.price_limits[0];
    assert_eq!(spent.node_pool, "general-purpose");
    assert!((spent.limit_per_hour - limit).abs() < 1e-3, "{spent:?}");
    assert_eq!(spent.nodes_per_hour, 0.0);
    assert!((spent.planned_per_hour - plan.total_price_per_hour).abs() < 1e-9);
    assert!(
        (spent.left_per_hour - (spent.limit_per_hour - spent.planned_per_hour)).abs() < 1e-9
            && spent.left_per_hour >= -1e-9,
        "{spent:?}"
    );
    let json = serde_json::to_value(&plan).unwrap();
    for key in [
        "nodePool",
        "limitPerHour",
        "nodesPerHour",
        "plannedPerHour",
        "leftPerHour",
    ] {
        assert!(
            json["priceLimits"][0].get(key).is_some(),
            "priceLimits[].{key}"
        );
    }
    assert!(free.price_limits.is_empty());
    assert!(
        serde_json::to_value(&free)
            .unwrap()
            .get("priceLimits")
            .is_none()
    );
    // Room for everything: the same plan as without a limit.
    let roomy = quickstart_limited_to(&format!("{:.4}", free.total_price_per_hour + 1.0)).unwrap();
    assert_eq!(roomy.node_claims.len(), free.node_claims.len());
    // A limit that is not a price leaves the pool out, saying why.
    let error = quickstart_limited_to("lots").unwrap_err().to_string();
    assert!(
        error.contains("nodewright.io/price-limit-per-hour") || error.contains("no NodePool"),
        "{error}"
    );
}

/// `simulate --feature-gates StaticCapacity=true` on the example static
/// pool: three NodeClaims of the template's type opened, with their price;
/// without the gate the pool is listed as held; a pod that only the static
/// pool could take is not planned a NodeClaim, and says the pool is
/// static.
#[test]
fn a_static_node_pool_opens_its_replicas_and_takes_no_pending_pod() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::temp_dir().join(format!("nodewright-static-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("pod.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: ingress, namespace: default}\nspec:\n  nodeSelector: {karpenter.sh/nodepool: static-ingress}\n  containers: [{name: c, image: nginx, resources: {requests: {cpu: 100m}}}]\n",
    )
    .unwrap();
    let options = |gate: bool| SimulateOptions {
        paths: vec![
            root.join("examples/quickstart/ec2nodeclass.yaml"),
            root.join("examples/nodepools/static.yaml"),
            dir.join("pod.yaml"),
        ],
        region: "us-east-1".to_string(),
        ignore_preferences: false,
        node_overlay: false,
        static_capacity: gate,
    };
    let plan = simulate(&options(true)).unwrap();
    assert_eq!(plan.static_node_pools.len(), 1);
    let pool = &plan.static_node_pools[0];
    assert_eq!(
        (
            pool.node_pool.as_str(),
            pool.replicas,
            pool.active,
            pool.open
        ),
        ("static-ingress", 3, 0, 3)
    );
    let claim = pool.node_claim.as_ref().unwrap();
    assert_eq!(claim.instance_type, "m7i.large");
    assert!((pool.price_per_hour - 3.0 * claim.price_per_hour).abs() < 1e-9);
    assert!(pool.held.is_none());
    assert!(plan.node_claims.is_empty(), "{:?}", plan.node_claims);
    assert_eq!(plan.unschedulable.len(), 1);
    assert!(
        plan.unschedulable[0].reason.contains("static"),
        "{}",
        plan.unschedulable[0].reason
    );
    let json = serde_json::to_value(&plan).unwrap();
    let listed = &json["staticNodePools"][0];
    for key in [
        "nodePool",
        "replicas",
        "active",
        "open",
        "remove",
        "nodeClaim",
        "pricePerHour",
        "held",
    ] {
        assert!(
            listed.get(key).is_some(),
            "staticNodePools[].{key}: {listed}"
        );
    }
    let off = simulate(&options(false)).unwrap();
    assert_eq!(off.static_node_pools[0].open, 0);
    assert!(
        off.static_node_pools[0]
            .held
            .as_deref()
            .is_some_and(|h| h.contains("StaticCapacity")),
        "{:?}",
        off.static_node_pools[0]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
