//! The CRD types: parse → serialize → parse is the identity for every
//! document that parses, and a document that does not parse is rejected
//! with the path of the field at fault. Seeds are the examples/ manifests,
//! each mutated at one random path.

use nodewright::apis::validation::validate_node_pool;
use nodewright::apis::{EC2NodeClass, NodeClaim, NodePool};
use proptest::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::mutate::{mutated, seeds};

/// Parses `value` as `T`: on success the typed value survives a round
/// trip; on failure the error's path is the mutated path, a parent of it
/// (the parent lost a required field) or a child of it.
fn round_trip<T>(value: Value, mutated_at: &str) -> Result<Option<T>, TestCaseError>
where
    T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug,
{
    match serde_path_to_error::deserialize::<_, T>(value.clone()) {
        Ok(first) => {
            let written = serde_json::to_value(&first).expect("serializes");
            let second: T = serde_json::from_value(written.clone())
                .map_err(|e| TestCaseError::fail(format!("re-parse of {written}: {e}")))?;
            prop_assert_eq!(&first, &second, "round trip of {}", written);
            let again = serde_json::to_value(&second).expect("serializes");
            prop_assert_eq!(&written, &again);
            Ok(Some(first))
        }
        Err(e) => {
            let path = e.path().to_string();
            let related = path == "."
                || path.starts_with(mutated_at)
                || mutated_at.starts_with(&path)
                || mutated_at == ".";
            prop_assert!(
                related,
                "mutated {} but the error names {}: {}",
                mutated_at,
                path,
                e
            );
            // A field at fault below the root is named, so the user can find it.
            prop_assert!(
                mutated_at.matches('.').count() < 2 || path != ".",
                "mutated {} but the error names no field: {}",
                mutated_at,
                e
            );
            Ok(None)
        }
    }
}

proptest! {
    #![proptest_config(super::config(256))]

    #[test]
    fn node_pools_round_trip_or_name_the_bad_field(
        (doc, at) in mutated(seeds(&["examples/nodepools", "examples/quickstart"], &["NodePool"])),
    ) {
        if let Some(pool) = round_trip::<NodePool>(doc, &at)?
            && let Err(errors) = validate_node_pool(&pool.spec)
        {
            for e in errors {
                let text = e.to_string();
                prop_assert!(text.starts_with("spec."), "validation error without a field: {}", text);
            }
        }
    }

    #[test]
    fn node_classes_round_trip_or_name_the_bad_field(
        (doc, at) in mutated(seeds(&["examples/ec2nodeclasses", "examples/quickstart"], &["EC2NodeClass"])),
    ) {
        if let Some(class) = round_trip::<EC2NodeClass>(doc, &at)? {
            // Deriving the effective extensions never panics; an error names
            // the module at fault.
            let _ = class.spec.effective_extensions();
            let _ = class.hash();
        }
    }

    #[test]
    fn node_claims_round_trip_or_name_the_bad_field(
        (doc, at) in mutated(seeds(&["examples/nodeclaims"], &["NodeClaim"])),
    ) {
        round_trip::<NodeClaim>(doc, &at)?;
    }
}
