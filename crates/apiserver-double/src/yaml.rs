//! YAML bodies (`application/apply-patch+yaml`) and the test fixtures, read
//! as JSON with the rules nodewright reads manifests with, defined here once
//! ([`reading_options`]; nodewright's `yaml` module starts from them): the
//! YAML 1.2 core schema, so only `true`/`false` are booleans, `<<` is an
//! ordinary key, numbers with leading zeros or underscores stay strings, and
//! a repeated key keeps its last value. serde-saphyr's defaults differ on
//! each.

use serde_json::Value;
use serde_saphyr::{DuplicateKeyPolicy, MergeKeyPolicy, Options};

/// The reading rules in the module documentation, with one-line error
/// messages (callers put them into a Status or prefix them with a file).
/// Resource budgets are serde-saphyr's defaults.
pub fn reading_options() -> Options {
    let mut options = Options::default();
    options.strict_booleans = true;
    options.merge_keys = MergeKeyPolicy::AsOrdinary;
    options.leading_zero_numbers_as_strings = true;
    options.underscored_numbers_as_strings = true;
    options.duplicate_keys = DuplicateKeyPolicy::PassThrough;
    options.with_snippet = false;
    options
}

/// One YAML document as JSON.
pub(crate) fn to_json(text: &str) -> Result<Value, serde_saphyr::Error> {
    serde_saphyr::from_str_with_options(text, reading_options())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml_1_2_scalars_and_plain_keys() {
        assert_eq!(
            to_json("a: yes\nb: true\nc: 0777\n<<: {d: 1}\ne: 1\ne: 2\n").unwrap(),
            json!({"a": "yes", "b": true, "c": "0777", "<<": {"d": 1}, "e": 2})
        );
        assert!(to_json("a: [").is_err());
    }
}
