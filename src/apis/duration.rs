//! Go-style duration strings as Karpenter writes them (`720h`, `1h30m`, `100ms`),
//! plus `NillableDuration`, which also accepts `Never`.
//!
//! The original text is kept so a manifest serializes back unchanged; parsing
//! happens when a controller needs the value.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The literal that disables a `NillableDuration` (`expireAfter`, `consolidateAfter`).
pub const NEVER: &str = "Never";

/// Why a duration string could not be parsed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DurationError {
    /// The string was empty.
    #[error("duration is empty; write e.g. \"30s\", \"10m\" or \"720h\"")]
    Empty,
    /// A number was not followed by a unit, or the unit is unknown.
    #[error(
        "duration {input:?} has a missing or unknown unit; use ns, us, ms, s, m or h (e.g. \"1h30m\")"
    )]
    BadUnit {
        /// The whole input string.
        input: String,
    },
    /// A unit was not preceded by a number, or the number is malformed.
    #[error("duration {input:?} is malformed; write numbers followed by units, e.g. \"1h30m\"")]
    BadNumber {
        /// The whole input string.
        input: String,
    },
    /// The value does not fit in a `std::time::Duration`.
    #[error("duration {input:?} is too large")]
    Overflow {
        /// The whole input string.
        input: String,
    },
    /// Negative durations make no sense for any Karpenter field.
    #[error("duration {input:?} is negative; durations must be zero or positive")]
    Negative {
        /// The whole input string.
        input: String,
    },
}

/// Parses a Go `time.ParseDuration` string (`300ms`, `1.5h`, `2h45m`, `0`).
///
/// Negative values are rejected because no field of these APIs accepts them.
pub fn parse_go_duration(input: &str) -> Result<Duration, DurationError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    let s = if let Some(rest) = s.strip_prefix('-') {
        if rest == "0" {
            return Ok(Duration::ZERO);
        }
        return Err(DurationError::Negative {
            input: input.to_string(),
        });
    } else {
        s.strip_prefix('+').unwrap_or(s)
    };
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total_nanos: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(DurationError::BadNumber {
                input: input.to_string(),
            });
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, remaining) = after.split_at(unit_len);
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            _ => {
                return Err(DurationError::BadUnit {
                    input: input.to_string(),
                });
            }
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| DurationError::Overflow {
                input: input.to_string(),
            })?
        };
        let mut part = whole
            .checked_mul(unit_nanos)
            .ok_or_else(|| DurationError::Overflow {
                input: input.to_string(),
            })?;
        // Fractional digits beyond nanosecond precision are dropped, as Go does.
        let mut scale = unit_nanos;
        for digit in fraction.chars() {
            scale /= 10;
            if scale == 0 {
                break;
            }
            let value = u128::from(digit.to_digit(10).ok_or_else(|| DurationError::BadNumber {
                input: input.to_string(),
            })?);
            part += value * scale;
        }
        total_nanos = total_nanos
            .checked_add(part)
            .ok_or_else(|| DurationError::Overflow {
                input: input.to_string(),
            })?;
        rest = remaining;
    }
    let secs = u64::try_from(total_nanos / 1_000_000_000).map_err(|_| DurationError::Overflow {
        input: input.to_string(),
    })?;
    // The remainder of a division by 1e9 always fits in u32.
    let nanos = u32::try_from(total_nanos % 1_000_000_000).unwrap_or(0);
    Ok(Duration::new(secs, nanos))
}

/// A duration that may also be `Never` (Karpenter's `NillableDuration`).
///
/// Holds the text as written so manifests round-trip byte for byte; call
/// [`NillableDuration::duration`] for the value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NillableDuration(pub String);

impl NillableDuration {
    /// A `NillableDuration` that never elapses.
    pub fn never() -> Self {
        Self(NEVER.to_string())
    }

    /// The parsed value: `None` for `Never`, otherwise the duration.
    pub fn duration(&self) -> Result<Option<Duration>, DurationError> {
        if self.0 == NEVER {
            return Ok(None);
        }
        parse_go_duration(&self.0).map(Some)
    }

    /// The text as written in the manifest.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for NillableDuration {
    fn from(value: &str) -> Self {
        Self(value.to_string())
    }
}

impl JsonSchema for NillableDuration {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NillableDuration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": crate::apis::schema::NILLABLE_DURATION_PATTERN,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(
            parse_go_duration("720h"),
            Ok(Duration::from_secs(720 * 3600))
        );
        assert_eq!(parse_go_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_go_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_go_duration("250us"), Ok(Duration::from_micros(250)));
    }

    #[test]
    fn rejects_bad_durations() {
        assert!(matches!(parse_go_duration(""), Err(DurationError::Empty)));
        assert!(matches!(
            parse_go_duration("10"),
            Err(DurationError::BadUnit { .. })
        ));
        assert!(matches!(
            parse_go_duration("10d"),
            Err(DurationError::BadUnit { .. })
        ));
        assert!(matches!(
            parse_go_duration("h"),
            Err(DurationError::BadNumber { .. })
        ));
        assert!(matches!(
            parse_go_duration("-5s"),
            Err(DurationError::Negative { .. })
        ));
        assert!(matches!(
            parse_go_duration("99999999999999999999999h"),
            Err(DurationError::Overflow { .. })
        ));
    }

    #[test]
    fn never_is_none() {
        assert_eq!(NillableDuration::never().duration(), Ok(None));
        assert_eq!(
            NillableDuration::from("30s").duration(),
            Ok(Some(Duration::from_secs(30)))
        );
    }
}
