//! Kubernetes quantity parsing against an exact model, on hostile text, and
//! through the format the controller writes quantities back in.

use std::collections::BTreeMap;

use nodewright::scheduling::{QuantityError, Resources, parse_quantity};
use proptest::prelude::*;

const SUFFIXES: &[(&str, i32, u32)] = &[
    ("", 0, 0),
    ("n", -9, 0),
    ("u", -6, 0),
    ("m", -3, 0),
    ("k", 3, 0),
    ("M", 6, 0),
    ("G", 9, 0),
    ("T", 12, 0),
    ("P", 15, 0),
    ("E", 18, 0),
    ("Ki", 0, 10),
    ("Mi", 0, 20),
    ("Gi", 0, 30),
    ("Ti", 0, 40),
    ("Pi", 0, 50),
    ("Ei", 0, 60),
    ("e3", 3, 0),
    ("E-2", -2, 0),
    ("e+1", 1, 0),
];

/// `ceil(digits × 10^exp10 × 2^shift2 × 10^scale)` exactly, or `None` when
/// the model itself would overflow (those cases are checked only for not
/// panicking).
fn model(int: &str, frac: &str, exp10: i32, shift2: u32, scale: i32) -> Option<i128> {
    let digits: String = format!("{int}{frac}");
    let mantissa: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let numerator = mantissa.checked_mul(1u128.checked_shl(shift2)?)?;
    let shift = exp10 - frac.len() as i32 + scale;
    let value = if shift >= 0 {
        numerator.checked_mul(10u128.checked_pow(shift as u32)?)?
    } else {
        let divisor = 10u128.checked_pow((-shift) as u32)?;
        numerator.div_ceil(divisor)
    };
    i128::try_from(value).ok()
}

/// Digit strings at the edges of the parser's 128-bit arithmetic and of i64.
const EDGE_MANTISSAS: &[&str] = &[
    "170141183460469231731687303715884105727",
    "170141183460469231731687303715884105000",
    "99999999999999999999999999999999999999",
    "9223372036854775807",
    "9223372036854775808",
    "9223372036854775807000",
    "0000000000000000000000000000000000000000001",
    "1",
    "0",
];

proptest! {
    #![proptest_config(super::config(512))]

    /// Well-formed quantities parse to exactly `ceil(value × 10^scale)`,
    /// and to `TooLarge` only when that does not fit in an i64.
    #[test]
    fn well_formed_quantities_match_the_exact_model(
        int in "[0-9]{0,15}",
        frac in proptest::option::of("[0-9]{0,10}"),
        suffix in 0..SUFFIXES.len(),
        plus in any::<bool>(),
        cpu in any::<bool>(),
    ) {
        prop_assume!(!int.is_empty() || frac.as_deref().is_some_and(|f| !f.is_empty()));
        let (name, exp10, shift2) = SUFFIXES[suffix];
        let scale = if cpu { 3 } else { 0 };
        let text = format!(
            "{}{int}{}{name}",
            if plus { "+" } else { "" },
            frac.as_deref().map(|f| format!(".{f}")).unwrap_or_default()
        );
        let got = parse_quantity("memory", &text, scale);
        let Some(want) = model(&int, frac.as_deref().unwrap_or(""), exp10, shift2, scale) else {
            return Ok(());
        };
        match i64::try_from(want) {
            Ok(want) => prop_assert_eq!(got, Ok(want), "{}", text),
            Err(_) => prop_assert!(
                matches!(got, Err(QuantityError::TooLarge { .. })),
                "{} gave {:?}, want too large", text, got
            ),
        }
    }

    /// Mantissas at the edge of the parser's arithmetic, with every suffix
    /// and both scales: an amount or a typed error, never a panic, and an
    /// exact answer whenever the model can compute one.
    #[test]
    fn edge_mantissas_never_overflow_the_parser(
        mantissa in proptest::sample::select(EDGE_MANTISSAS),
        suffix in 0..SUFFIXES.len(),
        cpu in any::<bool>(),
    ) {
        let (name, exp10, shift2) = SUFFIXES[suffix];
        let scale = if cpu { 3 } else { 0 };
        let text = format!("{mantissa}{name}");
        let got = parse_quantity("memory", &text, scale);
        match model(mantissa, "", exp10, shift2, scale).map(i64::try_from) {
            Some(Ok(want)) => prop_assert_eq!(got, Ok(want), "{}", text),
            Some(Err(_)) => prop_assert!(
                matches!(got, Err(QuantityError::TooLarge { .. })), "{} gave {:?}", text, got
            ),
            None => prop_assert!(
                matches!(got, Ok(_) | Err(QuantityError::TooLarge { .. })), "{} gave {:?}", text, got
            ),
        }
    }

    /// Any text at all: an amount or an error that names the resource.
    #[test]
    fn any_text_parses_or_is_rejected_naming_the_resource(
        text in "[-+ 0-9.eEkKmMGTPinu\\PC]{0,24}",
    ) {
        if let Err(e) = parse_quantity("example.com/widget", &text, 0) {
            prop_assert!(e.to_string().starts_with("example.com/widget: "), "{}", e);
        }
    }

    /// What the controller writes as a capacity (`to_quantities`) reads back
    /// as the same amounts.
    #[test]
    fn written_quantities_read_back_unchanged(
        cpu in 0i64..1 << 40,
        memory in prop_oneof![0i64..i64::MAX, (0i64..1 << 33).prop_map(|g| g << 30)],
        storage in prop_oneof![0i64..i64::MAX, (0i64..1 << 40).prop_map(|m| m << 20)],
        pods in 0i64..1 << 20,
        gpus in 0i64..64,
    ) {
        let resources = Resources {
            cpu_millis: cpu,
            memory,
            ephemeral_storage: storage,
            pods,
            extended: BTreeMap::new(),
        }
        .with_extended("nvidia.com/gpu", gpus);
        let written = resources.to_quantities();
        let read = Resources::parse(written.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        prop_assert_eq!(read, Ok(resources), "{:?}", written);
    }
}

/// Found by `edge_mantissas_never_overflow_the_parser`: rounding up a
/// mantissa near i128::MAX by adding `divisor - 1` overflowed (a panic in
/// debug builds).
#[test]
fn a_mantissa_at_the_edge_of_128_bits_rounds_up_without_overflow() {
    let max = "170141183460469231731687303715884105727";
    assert!(matches!(
        parse_quantity("memory", &format!("{max}n"), 0),
        Err(QuantityError::TooLarge { .. })
    ));
    assert_eq!(
        parse_quantity("memory", &format!("{max}e-30"), 0),
        Ok(170_141_184)
    );
}
