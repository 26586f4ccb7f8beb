//! YAML the way nodewright reads and writes it everywhere: manifests and
//! snapshots given to `simulate` and the sandbox, user data, `crds/`, tests.
//!
//! serde-saphyr's defaults are YAML 1.1 friendly (`yes` is a bool, `<<`
//! merges, `0777` is a number) and reject duplicate keys. Kubernetes objects
//! are JSON at heart, so [`options`] reads the YAML 1.2 core schema instead:
//! only `true`/`false` are booleans, `<<` is an ordinary key, numbers with
//! leading zeros or underscores stay strings, and a repeated key keeps its
//! last value. The API server double reads request bodies by the same rules,
//! so they are defined there once and only the size budget is added here. Streams are read here, once, because serde-saphyr skips empty
//! documents without saying so, while errors and locations count them.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle};
use serde_saphyr::{Options, Spanned};

/// Why a YAML document could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not YAML, or not the shape asked for.
    #[error(transparent)]
    Yaml(#[from] serde_saphyr::Error),
    /// A plain integer that fits neither `i64` nor `u64`; read as a float it
    /// would silently lose digits.
    #[error("integer {text} at line {line} column {column} is out of range for 64 bits")]
    OutOfRange {
        /// The integer as written.
        text: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
    },
}

/// The reader options described in the module documentation.
pub fn options() -> Options {
    let mut options = apiserver_double::yaml_reading_options();
    // `kubectl get -o yaml` of a large cluster is one document of millions
    // of nodes; the defaults are sized for configuration files.
    let mut budget = options.budget.take().unwrap_or_default();
    budget.max_documents = 1 << 20;
    budget.max_events = usize::MAX;
    budget.max_nodes = usize::MAX;
    budget.max_total_scalar_bytes = 1 << 30;
    budget.max_depth = 128;
    budget.max_reader_input_bytes = None;
    options.budget = Some(budget);
    options
}

/// One YAML document as `T`.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    Ok(serde_saphyr::from_str_with_options(text, options())?)
}

/// `value` as one YAML document. Strings that a YAML 1.1 reader would take
/// for another type are quoted, multi-line strings are literal blocks, and a
/// long single-line string stays on one line (serde-saphyr would fold it).
pub fn to_string<T: Serialize>(value: &T) -> Result<String, serde_saphyr::SerializeError> {
    let mut options = serde_saphyr::SerializerOptions::default();
    options.folded_wrap_chars = usize::MAX;
    serde_saphyr::to_string_with_options(value, options)
}

/// Hands each non-empty document of a YAML stream to `each` as JSON, in
/// order, with its 1-based index among all documents (empty ones counted, as
/// `kubectl` counts them). After the first `Err` it hands over nothing more.
pub fn each_document<E>(
    text: &str,
    mut each: impl FnMut(usize, Result<Value, Error>) -> Result<(), E>,
) -> Result<(), E> {
    let mut scan = scan(text);
    let index_at = |line: u64| {
        scan.starts
            .partition_point(|&start| start as u64 <= line)
            .max(1)
    };
    let mut bytes = text.as_bytes();
    let mut last = 0;
    for item in serde_saphyr::read_with_options::<_, Spanned<Value>>(&mut bytes, options()) {
        let (index, result) = match item {
            Ok(document) => {
                let index = index_at(document.referenced.line()).max(last + 1);
                (index, Ok(document.value))
            }
            Err(error) => {
                let index = error
                    .location()
                    .map_or(last + 1, |at| index_at(at.line()).max(last + 1));
                (index, Err(Error::Yaml(error)))
            }
        };
        // An out-of-range integer is reported in the place of its document.
        if let Some((at, error)) = scan.out_of_range.take_if(|(at, _)| *at <= index) {
            return each(at, Err(error));
        }
        let failed = result.is_err();
        each(index, result)?;
        if failed {
            return Ok(());
        }
        last = index;
    }
    if let Some((at, error)) = scan.out_of_range {
        return each(at, Err(error));
    }
    Ok(())
}

/// What one pass over the parser's events finds.
struct Scan {
    /// The line each document starts on, in order.
    starts: Vec<usize>,
    /// The first plain integer too large for 64 bits, with its document's index.
    out_of_range: Option<(usize, Error)>,
}

fn scan(text: &str) -> Scan {
    let mut found = Scan {
        starts: Vec::new(),
        out_of_range: None,
    };
    // A syntax error ends the pass; the deserializer reports it.
    for (event, span) in Parser::new_from_str(text).map_while(Result::ok) {
        match event {
            Event::DocumentStart(..) => found.starts.push(span.start.line()),
            Event::Scalar(value, ScalarStyle::Plain, _, None)
                if found.out_of_range.is_none() && too_large(&value) =>
            {
                found.out_of_range = Some((
                    found.starts.len().max(1),
                    Error::OutOfRange {
                        text: value.into_owned(),
                        line: span.start.line(),
                        column: span.start.col() + 1,
                    },
                ));
            }
            _ => {}
        }
    }
    found
}

/// A decimal integer (without the leading zeros that keep it a string)
/// outside both `i64` and `u64`.
fn too_large(text: &str) -> bool {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
    {
        return false;
    }
    if text.starts_with('-') {
        text.parse::<i64>().is_err()
    } else {
        digits.parse::<u64>().is_err()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(text: &str) -> Result<Vec<(usize, Value)>, (usize, String)> {
        let mut out = Vec::new();
        each_document(text, |index, value| match value {
            Ok(value) => {
                out.push((index, value));
                Ok(())
            }
            Err(error) => Err((index, error.to_string())),
        })?;
        Ok(out)
    }

    #[test]
    fn empty_documents_are_skipped_and_counted() {
        let docs = read("# head\n---\na: 1\n---\n---\n~\n---\nb: 2\n...\nc: 3\n---\n").unwrap();
        assert_eq!(
            docs,
            [
                (1, json!({"a": 1})),
                (4, json!({"b": 2})),
                (5, json!({"c": 3}))
            ]
        );
        assert_eq!(read("").unwrap(), []);
        assert_eq!(read("a: 1\n").unwrap(), [(1, json!({"a": 1}))]);
    }

    #[test]
    fn errors_name_their_document() {
        let (index, message) = read("a: 1\n---\n---\nb: [\n").unwrap_err();
        assert_eq!(index, 3, "{message}");
        let (index, message) = read("a: 1\n---\nx: 99999999999999999999\n---\nb: [\n").unwrap_err();
        assert_eq!(index, 2);
        assert!(message.contains("out of range"), "{message}");
        assert!(message.contains("line 3"), "{message}");
        let (index, _) = read("a: 1\n---\nb: [\n---\nx: 99999999999999999999\n").unwrap_err();
        assert_eq!(index, 2);
    }

    #[test]
    fn integers_at_the_edges() {
        for fits in [
            "-9223372036854775808",
            "18446744073709551615",
            "007",
            "+1",
            "-0",
        ] {
            assert!(!too_large(fits), "{fits}");
        }
        for big in [
            "-9223372036854775809",
            "18446744073709551616",
            "+18446744073709551616",
        ] {
            assert!(too_large(big), "{big}");
        }
    }

    #[test]
    fn single_documents_use_the_same_rules() {
        assert!(from_str::<bool>("yes").is_err());
        assert_eq!(from_str::<bool>("false").ok(), Some(false));
        assert_eq!(
            from_str::<Value>("a: 0777\nb: 1_000\n<<: {c: 1}\nd: 1\nd: 2\n").unwrap(),
            json!({"a": "0777", "b": "1_000", "<<": {"c": 1}, "d": 2})
        );
        assert!(from_str::<Value>("a: 1\n---\nb: 2\n").is_err());
    }
}
