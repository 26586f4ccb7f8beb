//! Manifest reading (what `simulate` and the sandbox's apply take in) on
//! example manifests mutated at one path, and on arbitrary text: the body
//! is the `manifests` fuzz target's (manifest_target.rs).

use proptest::prelude::*;

use super::manifest_target::check;
use super::mutate::{mutated, seeds};

fn all_seeds() -> Vec<serde_json::Value> {
    seeds(
        &[
            "examples/quickstart",
            "examples/disruption",
            "examples/nodepools",
            "examples/ec2nodeclasses",
        ],
        &[
            "NodePool",
            "EC2NodeClass",
            "Deployment",
            "Job",
            "StatefulSet",
            "DaemonSet",
            "Pod",
            "Namespace",
        ],
    )
}

proptest! {
    #![proptest_config(super::config(192))]

    #[test]
    fn mutated_manifests_read_or_fail_with_a_location((doc, _at) in mutated(all_seeds())) {
        check(&nodewright::yaml::to_string(&doc).expect("YAML"));
    }

    #[test]
    fn arbitrary_text_reads_or_fails_with_a_location(text in "[-a-z:{}\\[\\] \n\"'|>&*!%@#0-9.]{0,200}") {
        check(&text);
    }
}

/// Found while writing this target: a Job whose `completions` is i32::MIN
/// and that has succeeded pods overflowed `completions - succeeded` (a
/// panic in debug builds, a wrapped pod count in release).
#[test]
fn a_job_with_extreme_completions_expands_without_overflow() {
    check(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  completions: -2147483648\n  template: {spec: {containers: [{name: c, image: x}]}}\nstatus: {succeeded: 1}\n",
    );
}
