//! Node selector, requirement and preference cases ported from Karpenter's
//! scheduling `suite_test.go`, named after its `It`s.

use super::*;

fn reqs(list: &[Requirement]) -> Requirements {
    list.iter().cloned().collect()
}

/// One pod against one pool: the claim it gets, if any.
fn place(np: NodePoolSpec, p: Pod) -> Option<NewNodeClaim> {
    let result = solve(vec![np], vec![p]);
    result.new_node_claims.into_iter().next()
}

fn labelled_pool(key: &str, value: &str) -> NodePoolSpec {
    let mut np = pool("default", 4);
    np.labels.insert(key.into(), value.into());
    np
}

fn required_pool(r: Requirement) -> NodePoolSpec {
    let mut np = pool("default", 4);
    np.requirements.add(r);
    np
}

fn with_selector(key: &str, value: &str) -> Pod {
    let mut p = pod("p", 100, 0);
    p.node_selector.insert(key.into(), value.into());
    p
}

fn with_requirements(list: &[Requirement]) -> Pod {
    let mut p = pod("p", 100, 0);
    p.required_node_affinity = vec![reqs(list)];
    p
}

fn label<'a>(claim: &'a NewNodeClaim, key: &str) -> Option<&'a str> {
    claim.labels.get(key).map(String::as_str)
}

#[test]
fn should_schedule_unconstrained_pods_that_dont_have_matching_node_selectors() {
    let claim = place(labelled_pool("test-key", "test-value"), pod("p", 100, 0)).unwrap();
    assert_eq!(label(&claim, "test-key"), Some("test-value"));
    // The same with a requirement instead of a label.
    let claim = place(
        required_pool(req("test-key", Operator::In, &["test-value"])),
        pod("p", 100, 0),
    )
    .unwrap();
    assert_eq!(label(&claim, "test-key"), Some("test-value"));
}

#[test]
fn should_not_schedule_pods_that_have_conflicting_node_selectors() {
    let p = with_selector("test-key", "different-value");
    assert!(place(labelled_pool("test-key", "test-value"), p).is_none());
}

#[test]
fn should_not_schedule_pods_that_have_node_selectors_with_undefined_key() {
    assert!(place(pool("default", 4), with_selector("test-key", "test-value")).is_none());
}

#[test]
fn should_schedule_pods_that_have_matching_requirements() {
    let p = with_requirements(&[req(
        "test-key",
        Operator::In,
        &["test-value", "another-value"],
    )]);
    let claim = place(labelled_pool("test-key", "test-value"), p).unwrap();
    assert_eq!(label(&claim, "test-key"), Some("test-value"));
}

#[test]
fn should_not_schedule_pods_that_have_conflicting_requirements() {
    let p = with_requirements(&[req("test-key", Operator::In, &["another-value"])]);
    assert!(place(labelled_pool("test-key", "test-value"), p).is_none());
}

#[test]
fn should_use_nodepool_constraints() {
    let np = required_pool(req(labels::ZONE, Operator::In, &["test-zone-2"]));
    let claim = place(np, pod("p", 100, 0)).unwrap();
    assert_eq!(claim.zone, "test-zone-2");
}

#[test]
fn should_use_node_selectors() {
    let np = required_pool(req(
        labels::ZONE,
        Operator::In,
        &["test-zone-1", "test-zone-2"],
    ));
    let claim = place(np, with_selector(labels::ZONE, "test-zone-2")).unwrap();
    assert_eq!(claim.zone, "test-zone-2");
}

#[test]
fn should_not_schedule_the_pod_if_nodeselector_unknown() {
    let np = required_pool(req(labels::ZONE, Operator::In, &["test-zone-1"]));
    assert!(place(np, with_selector(labels::ZONE, "unknown")).is_none());
}

#[test]
fn should_not_schedule_if_node_selector_outside_of_nodepool_constraints() {
    let np = required_pool(req(labels::ZONE, Operator::In, &["test-zone-1"]));
    assert!(place(np, with_selector(labels::ZONE, "test-zone-2")).is_none());
}

#[test]
fn should_schedule_compatible_requirements_with_operator_in() {
    let p = with_requirements(&[req(labels::ZONE, Operator::In, &["test-zone-3"])]);
    assert_eq!(place(pool("default", 4), p).unwrap().zone, "test-zone-3");
}

#[test]
fn should_schedule_compatible_requirements_with_operator_gt_lt_gte_lte() {
    // Karpenter's Gt, Lt, Gte and Lte cases, on a numeric pool label.
    for (op, value, schedules) in [
        (Operator::Gt, "7", true),
        (Operator::Gt, "8", false),
        (Operator::Lt, "9", true),
        (Operator::Lt, "8", false),
        (Operator::Gte, "8", true),
        (Operator::Gte, "9", false),
        (Operator::Lte, "8", true),
        (Operator::Lte, "7", false),
    ] {
        let p = with_requirements(&[req("example.com/size", op, &[value])]);
        let placed = place(labelled_pool("example.com/size", "8"), p).is_some();
        assert_eq!(placed, schedules, "{op:?} {value}");
    }
}

#[test]
fn should_not_schedule_incompatible_preferences_and_requirements_with_operator_in() {
    let p = with_requirements(&[req(labels::ZONE, Operator::In, &["unknown"])]);
    assert!(place(pool("default", 4), p).is_none());
}

#[test]
fn should_schedule_compatible_requirements_with_operator_not_in() {
    let p = with_requirements(&[req(
        labels::ZONE,
        Operator::NotIn,
        &["test-zone-1", "test-zone-2", "unknown"],
    )]);
    assert_eq!(place(pool("default", 4), p).unwrap().zone, "test-zone-3");
}

#[test]
fn should_not_schedule_incompatible_preferences_and_requirements_with_operator_not_in() {
    let p = with_requirements(&[req(
        labels::ZONE,
        Operator::NotIn,
        &["test-zone-1", "test-zone-2", "test-zone-3", "unknown"],
    )]);
    assert!(place(pool("default", 4), p).is_none());
}

fn preferring(required: &[Requirement], preferred: &[Requirement]) -> Pod {
    let mut p = pod("p", 100, 0);
    if !required.is_empty() {
        p.required_node_affinity = vec![reqs(required)];
    }
    p.preferred_node_affinity = vec![Weighted {
        weight: 1,
        term: reqs(preferred),
    }];
    p
}

#[test]
fn should_schedule_compatible_preferences_and_requirements_with_operator_in() {
    let p = preferring(
        &[req(
            labels::ZONE,
            Operator::In,
            &["test-zone-1", "test-zone-2", "test-zone-3", "unknown"],
        )],
        &[req(labels::ZONE, Operator::In, &["test-zone-2", "unknown"])],
    );
    assert_eq!(place(pool("default", 4), p).unwrap().zone, "test-zone-2");
}

#[test]
fn should_schedule_incompatible_preferences_and_requirements_with_operator_in() {
    let p = preferring(
        &[req(
            labels::ZONE,
            Operator::In,
            &["test-zone-1", "test-zone-2", "test-zone-3", "unknown"],
        )],
        &[req(labels::ZONE, Operator::In, &["unknown"])],
    );
    assert!(place(pool("default", 4), p).is_some());
}

#[test]
fn should_schedule_compatible_preferences_and_requirements_with_operator_not_in() {
    let p = preferring(
        &[req(
            labels::ZONE,
            Operator::In,
            &["test-zone-1", "test-zone-2", "test-zone-3", "unknown"],
        )],
        &[req(
            labels::ZONE,
            Operator::NotIn,
            &["test-zone-1", "test-zone-3"],
        )],
    );
    assert_eq!(place(pool("default", 4), p).unwrap().zone, "test-zone-2");
}

#[test]
fn should_schedule_incompatible_preferences_and_requirements_with_operator_not_in() {
    let p = preferring(
        &[req(
            labels::ZONE,
            Operator::In,
            &["test-zone-1", "test-zone-2", "test-zone-3", "unknown"],
        )],
        &[req(
            labels::ZONE,
            Operator::NotIn,
            &["test-zone-1", "test-zone-2", "test-zone-3"],
        )],
    );
    assert!(place(pool("default", 4), p).is_some());
}

#[test]
fn should_combine_multidimensional_node_selectors_preferences_and_requirements() {
    let mut p = preferring(
        &[
            req(
                labels::ZONE,
                Operator::In,
                &["test-zone-1", "test-zone-2", "test-zone-3"],
            ),
            req(
                labels::INSTANCE_TYPE,
                Operator::In,
                &["fake-it-1", "fake-it-2"],
            ),
        ],
        &[
            req(labels::ZONE, Operator::NotIn, &["unknown"]),
            req(labels::INSTANCE_TYPE, Operator::NotIn, &["unknown"]),
        ],
    );
    p.node_selector
        .insert(labels::ZONE.into(), "test-zone-3".into());
    p.node_selector
        .insert(labels::INSTANCE_TYPE.into(), "fake-it-2".into());
    let claim = place(pool("default", 4), p).unwrap();
    assert_eq!(claim.zone, "test-zone-3");
    assert_eq!(claim.instance_type, "fake-it-2");
}

#[test]
fn should_not_schedule_pods_that_have_node_selectors_with_restricted_labels() {
    let p = with_requirements(&[req(labels::HOSTNAME, Operator::In, &["test"])]);
    assert!(place(pool("default", 4), p).is_none());
}

#[test]
fn should_not_schedule_pods_that_have_node_selectors_with_restricted_domains() {
    for domain in crate::apis::labels::RESTRICTED_LABEL_DOMAINS {
        let key = format!("{domain}/test");
        let p = with_requirements(&[req(&key, Operator::In, &["test"])]);
        // Even a pool that sets the label cannot serve the pod.
        assert!(place(labelled_pool(&key, "test"), p).is_none(), "{key}");
    }
}

#[test]
fn should_schedule_pods_that_have_node_selectors_with_label_in_the_kubernetes_domains() {
    for key in [
        "kubernetes.io/test",
        "k8s.io/test",
        "subdomain.kubernetes.io/test",
        "subdomain.k8s.io/test",
    ] {
        let np = required_pool(req(key, Operator::In, &["test-value"]));
        let claim = place(np, with_selector(key, "test-value")).unwrap();
        assert_eq!(label(&claim, key), Some("test-value"));
    }
}

#[test]
fn should_schedule_pods_that_have_node_selectors_with_label_in_wellknown_label_list() {
    for (key, value) in [
        (labels::ZONE, "test-zone-1"),
        (labels::INSTANCE_TYPE, "fake-it-2"),
        (labels::ARCH, "amd64"),
        (labels::CAPACITY_TYPE, "spot"),
    ] {
        assert!(
            place(pool("default", 4), with_selector(key, value)).is_some(),
            "{key}"
        );
    }
}

#[test]
fn should_not_schedule_pods_that_have_node_selectors_with_in_operator_and_undefined_key() {
    let p = with_requirements(&[req("test-key", Operator::In, &["test-value"])]);
    assert!(place(pool("default", 4), p).is_none());
}

#[test]
fn should_schedule_pods_that_have_node_selectors_with_not_in_operator_and_undefined_key() {
    let p = with_requirements(&[req("test-key", Operator::NotIn, &["test-value"])]);
    let claim = place(pool("default", 4), p).unwrap();
    assert_ne!(label(&claim, "test-key"), Some("test-value"));
}

#[test]
fn should_not_schedule_pods_that_have_node_selectors_with_exists_operator_and_undefined_key() {
    let p = with_requirements(&[req("test-key", Operator::Exists, &[])]);
    assert!(place(pool("default", 4), p).is_none());
}

#[test]
fn should_schedule_pods_that_with_does_not_exists_operator_and_undefined_key() {
    let p = with_requirements(&[req("test-key", Operator::DoesNotExist, &[])]);
    let claim = place(pool("default", 4), p).unwrap();
    assert_eq!(label(&claim, "test-key"), None);
}

fn test_key_pool() -> NodePoolSpec {
    required_pool(req("test-key", Operator::In, &["test-value"]))
}

#[test]
fn should_schedule_pods_that_have_node_selectors_with_matching_value_and_in_operator() {
    let p = with_requirements(&[req("test-key", Operator::In, &["test-value"])]);
    let claim = place(test_key_pool(), p).unwrap();
    assert_eq!(label(&claim, "test-key"), Some("test-value"));
}

#[test]
fn should_not_schedule_pods_that_have_node_selectors_with_matching_value_and_not_in_operator() {
    let p = with_requirements(&[req("test-key", Operator::NotIn, &["test-value"])]);
    assert!(place(test_key_pool(), p).is_none());
}

#[test]
fn should_schedule_the_pod_with_exists_operator_and_defined_key() {
    let p = with_requirements(&[req("test-key", Operator::Exists, &[])]);
    assert!(place(test_key_pool(), p).is_some());
}

#[test]
fn should_not_schedule_the_pod_with_does_not_exists_operator_and_defined_key() {
    let p = with_requirements(&[req("test-key", Operator::DoesNotExist, &[])]);
    assert!(place(test_key_pool(), p).is_none());
}

#[test]
fn should_not_schedule_pods_that_have_node_selectors_with_different_value_and_in_operator() {
    let p = with_requirements(&[req("test-key", Operator::In, &["another-value"])]);
    assert!(place(test_key_pool(), p).is_none());
}

#[test]
fn should_schedule_pods_that_have_node_selectors_with_different_value_and_not_in_operator() {
    let p = with_requirements(&[req("test-key", Operator::NotIn, &["another-value"])]);
    let claim = place(test_key_pool(), p).unwrap();
    assert_eq!(label(&claim, "test-key"), Some("test-value"));
}

#[test]
fn should_schedule_compatible_pods_to_the_same_node() {
    let np = required_pool(req(
        "test-key",
        Operator::In,
        &["test-value", "another-value"],
    ));
    let mut a = pod("a", 100, 0);
    a.required_node_affinity = vec![reqs(&[req("test-key", Operator::In, &["test-value"])])];
    let mut b = pod("b", 100, 0);
    b.required_node_affinity = vec![reqs(&[req(
        "test-key",
        Operator::NotIn,
        &["another-value"],
    )])];
    let result = solve(vec![np], vec![a, b]);
    assert_eq!(result.new_node_claims.len(), 1);
    assert_eq!(
        label(&result.new_node_claims[0], "test-key"),
        Some("test-value")
    );
}

#[test]
fn should_schedule_incompatible_pods_to_the_different_node() {
    let np = required_pool(req(
        "test-key",
        Operator::In,
        &["test-value", "another-value"],
    ));
    let mut a = pod("a", 100, 0);
    a.required_node_affinity = vec![reqs(&[req("test-key", Operator::In, &["test-value"])])];
    let mut b = pod("b", 100, 0);
    b.required_node_affinity = vec![reqs(&[req("test-key", Operator::In, &["another-value"])])];
    let result = solve(vec![np], vec![a, b]);
    assert_eq!(result.new_node_claims.len(), 2);
    assert_eq!(
        label(claim_of(&result, "a"), "test-key"),
        Some("test-value")
    );
    assert_eq!(
        label(claim_of(&result, "b"), "test-key"),
        Some("another-value")
    );
}

#[test]
fn exists_operator_should_not_overwrite_the_existing_value() {
    let p = with_requirements(&[
        req(labels::ZONE, Operator::In, &["non-existent-zone"]),
        req(labels::ZONE, Operator::Exists, &[]),
    ]);
    assert!(place(pool("default", 4), p).is_none());
}

#[test]
fn should_not_relax_the_final_term() {
    let mut np = required_pool(req(labels::ZONE, Operator::In, &["test-zone-1"]));
    np.requirements
        .add(req(labels::INSTANCE_TYPE, Operator::In, &["fake-it-1"]));
    let p = with_requirements(&[req(labels::ZONE, Operator::In, &["invalid"])]);
    assert!(place(np, p).is_none());
}

#[test]
fn should_relax_multiple_terms() {
    let mut p = pod("p", 100, 0);
    p.required_node_affinity = ["invalid", "invalid", "test-zone-1", "test-zone-2"]
        .iter()
        .map(|z| reqs(&[req(labels::ZONE, Operator::In, &[z])]))
        .collect();
    assert_eq!(place(pool("default", 4), p).unwrap().zone, "test-zone-1");
}

#[test]
fn should_relax_all_terms() {
    let mut p = pod("p", 100, 0);
    p.preferred_node_affinity = vec![
        Weighted {
            weight: 1,
            term: reqs(&[req(labels::ZONE, Operator::In, &["invalid"])]),
        },
        Weighted {
            weight: 1,
            term: reqs(&[req(labels::INSTANCE_TYPE, Operator::In, &["invalid"])]),
        },
    ];
    assert!(place(pool("default", 4), p).is_some());
}

#[test]
fn should_relax_to_use_lighter_weights() {
    let np = required_pool(req(
        labels::ZONE,
        Operator::In,
        &["test-zone-1", "test-zone-2"],
    ));
    let mut p = pod("p", 100, 0);
    p.preferred_node_affinity = vec![
        Weighted {
            weight: 100,
            term: reqs(&[req(labels::INSTANCE_TYPE, Operator::In, &["test-zone-3"])]),
        },
        Weighted {
            weight: 50,
            term: reqs(&[req(labels::ZONE, Operator::In, &["test-zone-2"])]),
        },
        Weighted {
            weight: 1,
            term: reqs(&[req(labels::ZONE, Operator::In, &["test-zone-1"])]),
        },
    ];
    assert_eq!(place(np, p).unwrap().zone, "test-zone-2");
}

#[test]
fn should_schedule_even_if_preference_is_conflicting_with_requirement() {
    let p = preferring(
        &[req(labels::ZONE, Operator::In, &["test-zone-3"])],
        &[req(labels::ZONE, Operator::NotIn, &["test-zone-3"])],
    );
    assert_eq!(place(pool("default", 4), p).unwrap().zone, "test-zone-3");
}

#[test]
fn should_schedule_even_if_preference_requirements_are_conflicting() {
    let p = preferring(
        &[],
        &[
            req(labels::ZONE, Operator::In, &["invalid"]),
            req(labels::ZONE, Operator::NotIn, &["invalid"]),
        ],
    );
    assert!(place(pool("default", 4), p).is_some());
}
