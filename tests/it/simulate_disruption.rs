//! `simulate --disruption`: the disruption passes on small clusters, case by
//! case as Karpenter's disruption suites check them (emptiness, drift,
//! single- and multi-node consolidation, budgets, do-not-disrupt, PDBs,
//! policies, expiration, spot-to-spot), and the CLI on the examples.

use std::process::Command;

use nodewright::controllers::disruption::events::approved_events;
use serde_json::{Value, json};

use super::disruption_fixture::{
    AT, NodeSpec, class, cluster, decisions, default_disruption, kept_reason, node, plan_of, pool,
    run,
};

#[test]
fn empty_nodes_are_deleted_together_in_one_command() {
    let out = run(
        &cluster(
            default_disruption(),
            &[
                NodeSpec {
                    name: "a",
                    instance_type: "m5.large",
                    capacity_type: "on-demand",
                    pods: &[],
                },
                NodeSpec {
                    name: "b",
                    instance_type: "m5.large",
                    capacity_type: "on-demand",
                    pods: &[],
                },
            ],
        ),
        false,
    );
    assert_eq!(
        decisions(&out),
        vec![(
            "emptiness".into(),
            "delete".into(),
            vec!["a".into(), "b".into()]
        )]
    );
    assert_eq!(out.disruption.price_per_hour_after, 0.0);
}

#[test]
fn emptiness_respects_the_budget_and_says_so() {
    let mut disruption = default_disruption();
    disruption["budgets"] = json!([{"nodes": "1"}]);
    let out = run(
        &cluster(
            disruption,
            &[
                NodeSpec {
                    name: "a",
                    instance_type: "m5.large",
                    capacity_type: "on-demand",
                    pods: &[],
                },
                NodeSpec {
                    name: "b",
                    instance_type: "m5.large",
                    capacity_type: "on-demand",
                    pods: &[],
                },
            ],
        ),
        false,
    );
    assert_eq!(
        decisions(&out),
        vec![("emptiness".into(), "delete".into(), vec!["a".into()])]
    );
    assert_eq!(kept_reason(&out, "b"), "budget");
}

#[test]
fn a_zero_budget_or_a_closed_window_disrupts_nothing() {
    let nodes = [NodeSpec {
        name: "a",
        instance_type: "m5.large",
        capacity_type: "on-demand",
        pods: &[],
    }];
    for budgets in [
        json!([{"nodes": "0"}]),
        // Active only from 01:00 to 02:00 UTC; the plan is at 12:00.
        json!([{"nodes": "100%", "schedule": "0 1 * * *", "duration": "1h"}, {"nodes": "0", "schedule": "0 2 * * *", "duration": "23h"}]),
    ] {
        let mut disruption = default_disruption();
        disruption["budgets"] = budgets.clone();
        let out = run(&cluster(disruption, &nodes), false);
        assert!(decisions(&out).is_empty(), "{budgets}");
        assert_eq!(kept_reason(&out, "a"), "budget", "{budgets}");
    }
}

#[test]
fn a_budget_whose_schedule_cannot_be_read_fails_closed_and_names_it() {
    let mut disruption = default_disruption();
    disruption["budgets"] = json!([{"nodes": "100%", "schedule": "@wrongly", "duration": "1h"}]);
    let nodes = [NodeSpec {
        name: "a",
        instance_type: "m5.large",
        capacity_type: "on-demand",
        pods: &[],
    }];
    let out = run(&cluster(disruption, &nodes), false);
    assert!(decisions(&out).is_empty());
    let kept = &out.disruption.kept[0];
    assert_eq!(kept.reason, "budget");
    assert!(kept.message.contains("@wrongly"), "{}", kept.message);
}

#[test]
fn an_underutilized_node_is_deleted_when_its_pods_fit_elsewhere() {
    // `keep` cannot go (a do-not-disrupt pod) but has room for big's pod.
    let mut docs = cluster(
        default_disruption(),
        &[
            NodeSpec {
                name: "big",
                instance_type: "m5.2xlarge",
                capacity_type: "on-demand",
                pods: &[("p1", "500m")],
            },
            NodeSpec {
                name: "keep",
                instance_type: "m5.xlarge",
                capacity_type: "on-demand",
                pods: &[("p2", "500m")],
            },
        ],
    );
    for doc in &mut docs {
        if doc["kind"] == "Pod" && doc["metadata"]["name"] == "p2" {
            doc["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "true"});
        }
    }
    let out = run(&docs, false);
    assert_eq!(
        decisions(&out),
        vec![(
            "single-node-consolidation".into(),
            "delete".into(),
            vec!["big".into()]
        )]
    );
    let moved = &out.disruption.decisions[0].pods;
    assert_eq!(moved[0].to.as_deref(), Some("keep"), "{moved:?}");
    assert!(out.disruption.price_per_hour_after < out.disruption.price_per_hour_before);
}

#[test]
fn pods_of_a_node_being_deleted_keep_the_room_they_will_need() {
    // As above, but a node being deleted has a pod that needs keep's room:
    // big's pod no longer fits there, so big is not simply deleted.
    let mut docs = cluster(
        default_disruption(),
        &[
            NodeSpec {
                name: "big",
                instance_type: "m5.2xlarge",
                capacity_type: "on-demand",
                pods: &[("p1", "500m")],
            },
            NodeSpec {
                name: "keep",
                instance_type: "m5.xlarge",
                capacity_type: "on-demand",
                pods: &[("p2", "500m")],
            },
            NodeSpec {
                name: "going",
                instance_type: "m5.xlarge",
                capacity_type: "on-demand",
                pods: &[("p3", "3200m")],
            },
        ],
    );
    for doc in &mut docs {
        let name = doc["metadata"]["name"].clone();
        if doc["kind"] == "Pod" && name == "p2" {
            doc["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "true"});
        }
        if name == "going" || name == "claim-going" {
            doc["metadata"]["deletionTimestamp"] = json!("2026-11-26T11:59:00Z");
        }
    }
    let out = run(&docs, false);
    assert_eq!(kept_reason(&out, "going"), "already-disrupting");
    for decision in &out.disruption.decisions {
        assert!(
            decision
                .pods
                .iter()
                .all(|m| m.to.as_deref() != Some("keep")),
            "{:?}",
            decision.pods
        );
    }
}

#[test]
fn several_consolidatable_nodes_go_to_multi_node_consolidation_first() {
    let out = run(
        &cluster(
            default_disruption(),
            &[
                NodeSpec {
                    name: "big",
                    instance_type: "m5.2xlarge",
                    capacity_type: "on-demand",
                    pods: &[("p1", "500m")],
                },
                NodeSpec {
                    name: "small",
                    instance_type: "m5.xlarge",
                    capacity_type: "on-demand",
                    pods: &[("p2", "500m")],
                },
            ],
        ),
        false,
    );
    let d = decisions(&out);
    assert_eq!(d[0].0, "multi-node-consolidation", "{d:?}");
    assert_eq!(d[0].2, ["big", "small"]);
}

#[test]
fn an_underutilized_node_is_replaced_by_a_cheaper_one() {
    let out = run(
        &cluster(
            default_disruption(),
            &[NodeSpec {
                name: "big",
                instance_type: "m5.2xlarge",
                capacity_type: "on-demand",
                pods: &[("p1", "500m")],
            }],
        ),
        false,
    );
    let d = &out.disruption.decisions[0];
    assert_eq!(d.method, "single-node-consolidation");
    assert_eq!(d.decision, "replace");
    assert_eq!(d.replacements.len(), 1);
    assert!(d.price_per_hour_after < d.price_per_hour_before, "{d:?}");
    assert_eq!(
        d.pods[0].to.as_deref(),
        Some(d.replacements[0].name.as_str())
    );
}

#[test]
fn a_node_with_no_cheaper_option_is_kept() {
    // m5.large is near the cheapest on-demand m/c type for 1.5 CPU.
    let out = run(
        &cluster(
            default_disruption(),
            &[NodeSpec {
                name: "a",
                instance_type: "m5.large",
                capacity_type: "on-demand",
                pods: &[("p1", "1500m")],
            }],
        ),
        false,
    );
    let d = decisions(&out);
    assert!(d.is_empty() || d[0].1 == "replace", "{d:?}");
    if d.is_empty() {
        assert_eq!(kept_reason(&out, "a"), "no-cheaper-option");
    }
}

#[test]
fn several_underutilized_nodes_are_consolidated_into_one() {
    let out = run(
        &cluster(
            default_disruption(),
            &[
                NodeSpec {
                    name: "a",
                    instance_type: "m5.2xlarge",
                    capacity_type: "on-demand",
                    pods: &[("p1", "1")],
                },
                NodeSpec {
                    name: "b",
                    instance_type: "m5.2xlarge",
                    capacity_type: "on-demand",
                    pods: &[("p2", "1")],
                },
                NodeSpec {
                    name: "c",
                    instance_type: "m5.2xlarge",
                    capacity_type: "on-demand",
                    pods: &[("p3", "1")],
                },
            ],
        ),
        false,
    );
    let first = &out.disruption.decisions[0];
    assert_eq!(
        first.method,
        "multi-node-consolidation",
        "{:?}",
        decisions(&out)
    );
    assert!(first.candidates.len() >= 2);
    assert!(first.replacements.len() <= 1);
    assert!(first.price_per_hour_after < first.price_per_hour_before);
}

#[test]
fn consolidation_never_moves_a_node_down_the_priority_order() {
    // A flex node (flex families first, the built-in order) with a small
    // pod: non-flex types that fit cost less, but provisioning would launch
    // this type again, so replacing it would only churn.
    let out = run(
        &cluster(
            default_disruption(),
            &[NodeSpec {
                name: "flex",
                instance_type: "c7i-flex.large",
                capacity_type: "on-demand",
                pods: &[("p1", "250m")],
            }],
        ),
        false,
    );
    assert!(decisions(&out).is_empty(), "{:?}", decisions(&out));
    assert_eq!(kept_reason(&out, "flex"), "no-cheaper-option");
    let kept = &out.disruption.kept[0];
    assert!(kept.message.contains("priority order"), "{}", kept.message);
}

#[test]
fn a_replacement_that_would_break_min_values_keeps_the_node() {
    // Four families (the pool allows categories m and c), minValues 4: only
    // c5 and c6i are cheaper than m5.large.
    let spec = |min: u32| {
        let mut docs = cluster(
            default_disruption(),
            &[NodeSpec {
                name: "one",
                instance_type: "m5.large",
                capacity_type: "on-demand",
                pods: &[("p1", "500m")],
            }],
        );
        let families = json!({"key": "karpenter.k8s.aws/instance-family", "operator": "In",
                              "values": ["m5", "c5", "m6i", "c6i"], "minValues": min});
        docs[0]["spec"]["template"]["spec"]["requirements"]
            .as_array_mut()
            .unwrap()
            .push(families);
        for doc in &mut docs {
            if doc["kind"] == "Node" || doc["kind"] == "NodeClaim" {
                doc["metadata"]["labels"]["karpenter.k8s.aws/instance-family"] = json!("m5");
            }
        }
        docs
    };
    let out = run(&spec(4), false);
    assert!(decisions(&out).is_empty(), "{:?}", decisions(&out));
    assert_eq!(kept_reason(&out, "one"), "min-values");
    let kept = &out.disruption.kept[0];
    assert!(
        kept.message.contains("minValues asks for 4"),
        "{}",
        kept.message
    );
    // With minValues 2 the two cheaper families are enough.
    let out = run(&spec(2), false);
    assert_eq!(decisions(&out)[0].1, "replace");
}

#[test]
fn do_not_disrupt_pods_and_nodes_keep_their_node() {
    let mut docs = cluster(
        default_disruption(),
        &[
            NodeSpec {
                name: "a",
                instance_type: "m5.2xlarge",
                capacity_type: "on-demand",
                pods: &[("p1", "500m")],
            },
            NodeSpec {
                name: "b",
                instance_type: "m5.2xlarge",
                capacity_type: "on-demand",
                pods: &[],
            },
        ],
    );
    for doc in &mut docs {
        if doc["kind"] == "Pod" {
            doc["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "true"});
        }
        if doc["kind"] == "Node" && doc["metadata"]["name"] == "b" {
            doc["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "true"});
        }
    }
    let out = run(&docs, false);
    assert!(decisions(&out).is_empty(), "{:?}", decisions(&out));
    assert_eq!(kept_reason(&out, "a"), "do-not-disrupt");
    assert_eq!(kept_reason(&out, "b"), "do-not-disrupt");
}

#[test]
fn a_pdb_allowing_no_disruption_keeps_the_node() {
    let mut docs = cluster(
        default_disruption(),
        &[NodeSpec {
            name: "a",
            instance_type: "m5.2xlarge",
            capacity_type: "on-demand",
            pods: &[("p1", "500m")],
        }],
    );
    docs.push(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "p1", "namespace": "default"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "p1"}}},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
    }));
    let out = run(&docs, false);
    assert!(decisions(&out).is_empty());
    assert_eq!(kept_reason(&out, "a"), "pdb");
}

#[test]
fn policies_keep_nodes_and_say_which_field() {
    let nodes = [NodeSpec {
        name: "a",
        instance_type: "m5.2xlarge",
        capacity_type: "on-demand",
        pods: &[("p1", "500m")],
    }];
    for (disruption, expect) in [
        (
            json!({"consolidateAfter": "30s", "consolidationPolicy": "WhenEmpty"}),
            "WhenEmpty",
        ),
        (json!({"consolidateAfter": "Never"}), "Never"),
    ] {
        let out = run(&cluster(disruption.clone(), &nodes), false);
        assert!(decisions(&out).is_empty(), "{disruption}");
        let kept = out.disruption.kept.iter().find(|k| k.node == "a").unwrap();
        assert_eq!(kept.reason, "policy", "{disruption}");
        assert!(kept.message.contains(expect), "{}", kept.message);
    }
}

#[test]
fn a_node_within_consolidate_after_is_not_consolidatable() {
    let mut disruption = default_disruption();
    disruption["consolidateAfter"] = json!("720h");
    let nodes = [NodeSpec {
        name: "a",
        instance_type: "m5.2xlarge",
        capacity_type: "on-demand",
        pods: &[("p1", "500m")],
    }];
    let out = run(&cluster(disruption, &nodes), false);
    assert!(decisions(&out).is_empty());
    assert_eq!(kept_reason(&out, "a"), "not-consolidatable");
    assert!(!out.disruption.marked[0].consolidatable);
}

#[test]
fn drift_replaces_a_node_the_requirements_no_longer_allow() {
    let mut docs = cluster(
        json!({"consolidateAfter": "Never", "budgets": [{"nodes": "100%"}]}),
        &[NodeSpec {
            name: "a",
            instance_type: "m5.large",
            capacity_type: "on-demand",
            pods: &[("p1", "1")],
        }],
    );
    // The pool now allows only the c family.
    docs[0]["spec"]["template"]["spec"]["requirements"][1]["values"] = json!(["c"]);
    let out = run(&docs, false);
    let d = &out.disruption.decisions[0];
    assert_eq!(
        (d.method.as_str(), d.decision.as_str()),
        ("drift", "replace")
    );
    assert_eq!(
        d.candidates[0].drift_reason.as_deref(),
        Some("RequirementsDrifted")
    );
    assert!(
        d.replacements[0].instance_type.starts_with('c'),
        "{:?}",
        d.replacements[0]
    );
    assert_eq!(
        out.disruption.marked[0].drifted.as_deref(),
        Some("RequirementsDrifted")
    );
}

#[test]
fn a_template_change_drifts_a_claim_stamped_with_our_hash_but_not_one_of_another_version() {
    for (version, drifted) in [("nw1", true), ("v3", false)] {
        let mut docs = cluster(
            json!({"consolidateAfter": "Never", "budgets": [{"nodes": "100%"}]}),
            &[NodeSpec {
                name: "a",
                instance_type: "m5.large",
                capacity_type: "on-demand",
                pods: &[],
            }],
        );
        docs[2]["metadata"]["annotations"] = json!({
            "karpenter.sh/nodepool-hash": "1", "karpenter.sh/nodepool-hash-version": version});
        let out = run(&docs, false);
        assert_eq!(
            out.disruption.marked[0].drifted.as_deref(),
            drifted.then_some("NodePoolDrifted"),
            "{version}"
        );
    }
}

// Karpenter's static drift on the EC2NodeClass: a change of a hashed field
// (userData) drifts a claim launched under our hash version; a selector
// change is not hashed (it drifts through the class's status); a claim of
// another hash version (Karpenter's) is re-stamped, not drifted.
#[test]
fn a_class_change_drifts_claims_stamped_with_our_class_hash() {
    let launched: nodewright::apis::EC2NodeClass = serde_json::from_value(class()).unwrap();
    let hash = launched.hash();
    let ours = nodewright::apis::ec2nodeclass::EC2_NODE_CLASS_HASH_VERSION;
    let user_data = ("userData", json!("echo changed"));
    let subnets = ("subnetSelectorTerms", json!([{"id": "subnet-2"}]));
    for (change, stamped, version, drifted) in [
        (None, hash.as_str(), ours, false),
        (Some(&user_data), hash.as_str(), ours, true),
        (Some(&subnets), hash.as_str(), ours, false),
        (Some(&user_data), "1234", "v4", false),
    ] {
        let mut docs = cluster(
            json!({"consolidateAfter": "Never", "budgets": [{"nodes": "100%"}]}),
            &[NodeSpec {
                name: "a",
                instance_type: "m5.large",
                capacity_type: "on-demand",
                pods: &[],
            }],
        );
        if let Some((field, value)) = change {
            docs[1]["spec"][*field] = value.clone();
        }
        docs[2]["metadata"]["annotations"] = json!({
            "karpenter.k8s.aws/ec2nodeclass-hash": stamped,
            "karpenter.k8s.aws/ec2nodeclass-hash-version": version});
        let out = run(&docs, false);
        assert_eq!(
            out.disruption.marked[0].drifted.as_deref(),
            drifted.then_some("NodeClassDrift"),
            "{change:?} {version}"
        );
    }
}

#[test]
fn expiration_deletes_past_do_not_disrupt_and_leaves_the_pods_to_provisioning() {
    let mut docs = cluster(
        json!({"consolidateAfter": "Never", "budgets": [{"nodes": "0"}]}),
        &[NodeSpec {
            name: "a",
            instance_type: "m5.large",
            capacity_type: "on-demand",
            pods: &[("p1", "1")],
        }],
    );
    docs[2]["spec"]["expireAfter"] = json!("24h");
    for doc in &mut docs {
        if doc["kind"] == "Pod" {
            doc["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "true"});
        }
    }
    let out = run(&docs, false);
    let d = &out.disruption.decisions[0];
    assert_eq!(
        (d.method.as_str(), d.reason.as_str()),
        ("expiration", "Expired")
    );
    assert!(out.disruption.marked[0].expired);
    // A delete: with no other node to take it, the pod is left pending for
    // provisioning to launch capacity once the node goes.
    assert_eq!(d.decision, "delete");
    assert!(d.replacements.is_empty());
    assert_eq!(d.pods[0].to, None);
}

#[test]
fn spot_is_replaced_by_spot_only_behind_the_gate() {
    let mut docs = vec![pool("default", default_disruption(), &["spot"]), class()];
    node(
        &NodeSpec {
            name: "a",
            instance_type: "m5.2xlarge",
            capacity_type: "spot",
            pods: &[("p1", "500m")],
        },
        "default",
        &mut docs,
    );
    let off = run(&docs, false);
    assert!(decisions(&off).is_empty(), "{:?}", decisions(&off));
    assert_eq!(kept_reason(&off, "a"), "spot-to-spot");
    let on = run(&docs, true);
    let d = &on.disruption.decisions[0];
    assert_eq!(d.decision, "replace");
    assert_eq!(d.replacements[0].capacity_type, "spot");
    assert!(d.replacements[0].instance_type_options.len() <= 15);
}

fn nodewright(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

#[test]
fn the_cli_prints_the_example_decisions_as_json_and_a_table() {
    let out = nodewright(&[
        "simulate",
        "examples/disruption",
        "--disruption",
        "--at",
        AT,
        "--output",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let methods: Vec<&str> = json["disruption"]["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods, ["emptiness", "drift", "single-node-consolidation"]);
    assert_eq!(json["disruption"]["at"], AT);
    for key in ["region", "catalog", "cluster"] {
        assert!(json.get(key).is_some(), "{key}");
    }
    let table = nodewright(&[
        "simulate",
        "examples/disruption",
        "--disruption",
        "--at",
        AT,
    ]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("single-node-consolidation"), "{text}");
    assert!(text.contains("do-not-disrupt (1)"), "{text}");
}

#[test]
fn the_cli_names_a_bad_time_or_gate() {
    let out = nodewright(&[
        "simulate",
        "examples/disruption",
        "--disruption",
        "--at",
        "yesterday",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--at \"yesterday\""));
    let out = nodewright(&[
        "simulate",
        "examples/disruption",
        "--disruption",
        "--feature-gates",
        "Nope=true",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown gate \"Nope\""));
}

#[test]
fn the_snapshot_example_keeps_nodes_its_pdb_protects() {
    let out = nodewright(&[
        "simulate",
        "examples/snapshot/cluster.yaml",
        "--disruption",
        "--at",
        "2025-06-01T00:00:00Z",
        "--output",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let reasons: Vec<&str> = json["disruption"]["kept"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["reason"].as_str().unwrap())
        .collect();
    assert!(reasons.contains(&"pdb"), "{reasons:?}");
    assert!(reasons.contains(&"not-managed"), "{reasons:?}");
    // `cluster` counts as the provisioning plan does: the node group's
    // node is a node, the NodeClaim without a Node is in flight.
    assert_eq!(json["cluster"]["nodes"], 3, "{}", json["cluster"]);
    assert_eq!(
        json["cluster"]["inFlightNodeClaims"], 1,
        "{}",
        json["cluster"]
    );
}

// Karpenter's multi-node `filterOutSameInstanceType`: two m5.large nodes
// whose pods fit on one are not both replaced by a new m5.large; one is
// deleted and its pods move to the other.
#[test]
fn nodes_are_not_replaced_by_one_of_their_own_type_when_deleting_one_will_do() {
    let mut only_m5_large = pool("default", default_disruption(), &["on-demand"]);
    only_m5_large["spec"]["template"]["spec"]["requirements"]
        .as_array_mut()
        .unwrap()
        .push(json!({"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}));
    let mut docs = vec![only_m5_large, class()];
    for name in ["a", "b"] {
        let spec = NodeSpec {
            name,
            instance_type: "m5.large",
            capacity_type: "on-demand",
            pods: &[("p", "500m")],
        };
        node(&spec, "default", &mut docs);
    }
    let out = run(&docs, false);
    let first = &out.disruption.decisions[0];
    assert_eq!(
        (
            first.method.as_str(),
            first.decision.as_str(),
            first.candidates.len()
        ),
        ("single-node-consolidation", "delete", 1),
        "{:?}",
        decisions(&out)
    );
}

fn balanced(policy: &str) -> Value {
    json!({"consolidateAfter": "30s", "consolidationPolicy": policy, "budgets": [{"nodes": "100%"}]})
}

// Karpenter v1.14's Balanced: a move saving a small share of the pool's
// cost for a large share of its disruption is not made; the same cluster
// under WhenEmptyOrUnderutilized is consolidated.
#[test]
fn balanced_refuses_moves_that_save_little_for_much_disruption() {
    let names = ["a", "b", "c", "d"];
    let pods: Vec<[(String, &str); 2]> = names
        .iter()
        .map(|n| [(format!("{n}1"), "1500m"), (format!("{n}2"), "1500m")])
        .collect();
    let pod_refs: Vec<Vec<(&str, &str)>> = pods
        .iter()
        .map(|p| p.iter().map(|(n, c)| (n.as_str(), *c)).collect())
        .collect();
    let nodes: Vec<NodeSpec> = names
        .iter()
        .zip(&pod_refs)
        .map(|(name, pods)| NodeSpec {
            name,
            instance_type: "m5.xlarge",
            capacity_type: "on-demand",
            pods,
        })
        .collect();
    let underutilized = run(
        &cluster(balanced("WhenEmptyOrUnderutilized"), &nodes),
        false,
    );
    assert!(
        !decisions(&underutilized).is_empty(),
        "a cheaper packing exists"
    );
    let out = run(&cluster(balanced("Balanced"), &nodes), false);
    assert!(decisions(&out).is_empty(), "{:?}", decisions(&out));
    for name in names {
        let kept = out.disruption.kept.iter().find(|k| k.node == name).unwrap();
        assert_eq!(kept.reason, "policy", "{name}");
        assert!(kept.message.contains("Balanced"), "{}", kept.message);
    }
    // The moves the scores refused are what the metrics count as rejected;
    // none gets a ConsolidationApproved event.
    let found = plan_of(&cluster(balanced("Balanced"), &nodes));
    assert!(!found.moves.is_empty(), "moves were scored");
    for m in &found.moves {
        assert!(!m.approved, "{m:?}");
        let part = &m.pools[0];
        assert_eq!((part.pool.as_str(), part.policy), ("default", "Balanced"));
        assert!(part.score.is_some_and(|s| s.value() < 0.5), "{part:?}");
    }
    assert!(approved_events(&found.moves).is_empty());
    // Under another policy moves are counted, never scored.
    let found = plan_of(&cluster(balanced("WhenEmptyOrUnderutilized"), &nodes));
    assert!(
        found
            .moves
            .iter()
            .all(|m| m.pools.iter().all(|p| p.score.is_none()))
    );
}

#[test]
fn balanced_makes_moves_that_save_as_much_as_they_disrupt() {
    let nodes = [
        NodeSpec {
            name: "a",
            instance_type: "m5.2xlarge",
            capacity_type: "on-demand",
            pods: &[("p1", "1")],
        },
        NodeSpec {
            name: "b",
            instance_type: "m5.2xlarge",
            capacity_type: "on-demand",
            pods: &[("p2", "1")],
        },
    ];
    let out = run(&cluster(balanced("Balanced"), &nodes), false);
    let first = out.disruption.decisions.first().expect("a consolidation");
    assert!(first.price_per_hour_after < first.price_per_hour_before);
    assert!(first.method.contains("consolidation"), "{}", first.method);
    // The approved move is scored at or above the threshold and gets
    // Karpenter's ConsolidationApproved text.
    let found = plan_of(&cluster(balanced("Balanced"), &nodes));
    let approved = found
        .moves
        .iter()
        .find(|m| m.approved)
        .expect("an approved move");
    assert!(approved.pools[0].score.is_some_and(|s| s.value() >= 0.5));
    let events = approved_events(&found.moves);
    assert!(!events.is_empty());
    assert!(
        events[0].3.starts_with("score ") && events[0].3.contains(">= threshold 0.50 (k: 2"),
        "{:?}",
        events[0]
    );
}
