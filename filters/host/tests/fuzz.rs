//! The `component_text` fuzz target's body (fuzz_body/) run on stable with
//! proptest over text mixing controls, multi-byte characters and text that
//! looks like the truncation marker. `scripts/fuzz` runs it longer and
//! under cargo-fuzz.

mod fuzz_body;

use proptest::prelude::*;

fn cases(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[a-z ]{0,8}",
        "[\\x00-\\x1f\\x7f]{1,3}",
        "[\u{80}-\u{9f}]{1,2}",
        "[é€😀\u{2028}\u{202e}]{1,3}",
        Just("… (12 more bytes)".to_string()),
        Just(" more bytes)".to_string()),
        "\\PC{0,6}",
    ];
    proptest::collection::vec(piece, 0..12).prop_map(|p| p.concat())
}

proptest! {
    #![proptest_config(cases(1024))]

    #[test]
    fn component_text_is_bounded_escaped_and_honest(
        text in text(),
        max in prop_oneof![0usize..40, Just(1024usize)],
        tail in any::<bool>(),
    ) {
        fuzz_body::check(&text, max, tail);
    }
}
