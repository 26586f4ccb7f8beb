//! `docs/reference.md` against the code, both ways where the code can be
//! read: the controller's flags (from clap), the chart's values (from
//! `values.yaml`), the metrics `/metrics` serves, the label, annotation,
//! taint and finalizer keys, the status conditions and the event reasons.
//!
//! The reference is parsed simply: every entry is a table row whose first
//! cell is its name in backticks, under a `## ` section (and, for the
//! settings, a `### ` subsection).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use clap::CommandFactory;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const REFERENCE: &str = "docs/reference.md";

/// One entry of the reference: the headings it is under and its cells.
#[derive(Debug)]
struct Row {
    section: String,
    subsection: String,
    name: String,
    cells: Vec<String>,
}

/// Every table row of the reference whose first cell is a name in backticks.
fn rows() -> Vec<Row> {
    let text = std::fs::read_to_string(root().join(REFERENCE)).expect("reading docs/reference.md");
    let mut section = String::new();
    let mut subsection = String::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(title) = line.strip_prefix("## ") {
            section = title.trim().to_string();
            subsection.clear();
        } else if let Some(title) = line.strip_prefix("### ") {
            subsection = title.trim().to_string();
        } else if let Some(inner) = line.strip_prefix("| `") {
            let cells: Vec<String> = format!("`{inner}")
                .trim_end_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect();
            let Some(name) = cells[0]
                .strip_prefix('`')
                .and_then(|c| c.strip_suffix('`'))
                .filter(|n| !n.contains('`'))
            else {
                continue; // several names in one cell: not an entry
            };
            out.push(Row {
                section: section.clone(),
                subsection: subsection.clone(),
                name: name.to_string(),
                cells,
            });
        }
    }
    out
}

/// The rows of the section titled `section` (and, if given, of its
/// subsection whose title contains `subsection`).
fn entries<'a>(rows: &'a [Row], section: &str, subsection: Option<&str>) -> Vec<&'a Row> {
    let found: Vec<&Row> = rows
        .iter()
        .filter(|r| r.section == section)
        .filter(|r| subsection.is_none_or(|s| r.subsection.contains(s)))
        .collect();
    assert!(
        !found.is_empty(),
        "{REFERENCE}: no entries under `## {section}`{}",
        subsection.map_or(String::new(), |s| format!(" / `### …{s}…`"))
    );
    found
}

fn names(rows: &[&Row]) -> BTreeSet<String> {
    rows.iter().map(|r| r.name.clone()).collect()
}

/// Both directions: what the code has and the reference lacks, and what
/// the reference lists and the code does not have.
fn assert_same(what: &str, code: &BTreeSet<String>, doc: &BTreeSet<String>) {
    let missing: Vec<&String> = code.difference(doc).collect();
    let unknown: Vec<&String> = doc.difference(code).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "{REFERENCE} and the code disagree on {what}:\n  not in the reference: {missing:?}\n  \
         in the reference but not in the code: {unknown:?}"
    );
}

// ---- reading the source ---------------------------------------------------

const CFG_TEST: &str = "#[cfg(test)]";

/// An inline module after `#[cfg(test)]`.
static TEST_MODULE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r"^\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+\w+\s*\{").expect("a valid regex")
});

/// A Rust file's code without comments, and without its inline
/// `#[cfg(test)] mod … { … }` modules; string literals are kept whole.
fn code_of(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').map_or(text.len(), |n| i + n);
            i = end;
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(text.len(), |n| i + n + 2);
            i = end;
        } else if let Some(after) = rest.strip_prefix(CFG_TEST) {
            // An inline test module is skipped to its closing brace; an
            // out-of-line one (`mod tests;`) is a file of its own, skipped
            // by `rust_sources`.
            match TEST_MODULE.find(after) {
                Some(m) => {
                    let open = i + CFG_TEST.len() + m.end() - 1;
                    i = closing(text, open).map_or(text.len(), |c| c + 1);
                }
                None => {
                    out.push_str(CFG_TEST);
                    i += CFG_TEST.len();
                }
            }
        } else if let Some(end) = literal_end(text, i) {
            out.push_str(&text[i..end]);
            i = end;
        } else {
            let c = rest.chars().next().expect("not at the end");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The end of the string or char literal starting at `i`, if one does
/// (`"…"`, `b"…"`, `r#"…"#`, `'x'`, `'\n'`; not a lifetime).
fn literal_end(text: &str, i: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let rest = &bytes[i..];
    let first = *rest.first()?;
    // A prefix `b` or `r` belongs to a literal only at a word's start.
    let word_start = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
    let mut j = 0;
    if first == b'b' && word_start {
        j = 1;
    }
    if rest.get(j) == Some(&b'r') && (j == 1 || word_start) {
        let hashes = rest[j + 1..].iter().take_while(|b| **b == b'#').count();
        if rest.get(j + 1 + hashes) == Some(&b'"') {
            let body = i + j + 2 + hashes;
            let closing = format!("\"{}", "#".repeat(hashes));
            return Some(
                text[body..]
                    .find(&closing)
                    .map_or(text.len(), |n| body + n + closing.len()),
            );
        }
        return None;
    }
    match rest.get(j) {
        Some(b'"') if j == 0 || word_start => {
            let mut escaped = false;
            for (n, b) in rest[j + 1..].iter().enumerate() {
                match (escaped, b) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => return Some(i + j + 1 + n + 1),
                    _ => {}
                }
            }
            Some(text.len())
        }
        Some(b'\'') if j == 0 || word_start => {
            let after = &text[i + j + 1..];
            let mut chars = after.char_indices();
            let (_, c) = chars.next()?;
            if c == '\\' {
                // An escape (`\n`, `\'`, `\u{…}`): to the next quote after it,
                // on the same line.
                let end = 2 + after.get(2..)?.find('\'')?;
                (!after[..end].contains('\n')).then_some(i + j + 1 + end + 1)
            } else {
                let (n, next) = chars.next()?;
                (next == '\'').then_some(i + j + 1 + n + 1)
            }
        }
        _ => None,
    }
}

/// The index of the brace closing the one at `open`, skipping literals.
fn closing(text: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = open;
    while i < text.len() {
        if let Some(end) = literal_end(text, i) {
            i = end;
            continue;
        }
        let c = text[i..].chars().next()?;
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += c.len_utf8();
    }
    None
}

/// Every `.rs` file under `src/` that is not a test module, by path
/// relative to the repository, as code (see [`code_of`]).
fn rust_sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("reading src/") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut paths = Vec::new();
    walk(&root().join("src"), &mut paths);
    paths.sort();
    let test_module = |path: &Path| {
        path.components().any(|c| {
            let c = c.as_os_str().to_string_lossy();
            matches!(
                c.trim_end_matches(".rs"),
                "tests" | "golden_tests" | "testing"
            )
        })
    };
    paths
        .into_iter()
        .filter(|p| !test_module(p.strip_prefix(root()).expect("under the root")))
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("reading a source file");
            let rel = p
                .strip_prefix(root())
                .expect("under the root")
                .to_string_lossy()
                .into_owned();
            (rel, code_of(&text))
        })
        .collect()
}

/// `const NAME: &str = "value";` across the sources, by name.
fn str_consts(sources: &[(String, String)]) -> BTreeMap<String, String> {
    let constant =
        regex::Regex::new(r#"const\s+([A-Z][A-Z0-9_]*)\s*:\s*&(?:'static\s+)?str\s*=\s*"([^"]*)""#)
            .expect("a valid regex");
    let mut out = BTreeMap::new();
    for (_, code) in sources {
        for c in constant.captures_iter(code) {
            out.insert(c[1].to_string(), c[2].to_string());
        }
    }
    out
}

/// The contents of the string literals of `code` (raw ones included).
fn literals(code: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < code.len() {
        if let Some(end) = literal_end(code, i) {
            let text = &code[i..end];
            if let Some(open) = text.find('"').filter(|_| !text.starts_with('\'')) {
                let hashes = &text[..open].trim_start_matches(['b', 'r']);
                let body = &text[open + 1..];
                out.push(body.strip_suffix(&format!("\"{hashes}")).unwrap_or(body));
            }
            i = end;
        } else {
            i += code[i..].chars().next().map_or(1, char::len_utf8);
        }
    }
    out
}

fn source<'a>(sources: &'a [(String, String)], path: &str) -> &'a str {
    &sources
        .iter()
        .find(|(p, _)| p == path)
        .unwrap_or_else(|| panic!("{path} is not among the sources"))
        .1
}

// ---- settings -------------------------------------------------------------

#[test]
fn every_controller_flag_and_its_variable_is_in_the_reference() {
    let cli = nodewright::cli::Cli::command();
    let controller = cli
        .find_subcommand("controller")
        .expect("nodewright has a controller subcommand");
    let mut flags = BTreeMap::new();
    for arg in controller.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if long == "help" || long == "version" {
            continue;
        }
        let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|d| d.to_string_lossy().into_owned())
            .filter(|d| !d.is_empty())
            .collect();
        flags.insert(format!("--{long}"), (env, defaults));
    }
    assert!(flags.len() > 20, "clap lists {} flags", flags.len());

    let rows = rows();
    let doc = entries(&rows, "Settings", Some("nodewright controller"));
    let listed: BTreeSet<String> = names(&doc)
        .into_iter()
        .filter(|n| n.starts_with("--"))
        .collect();
    assert_same(
        "the flags of `nodewright controller`",
        &flags.keys().cloned().collect(),
        &listed,
    );
    for row in &doc {
        let Some((env, defaults)) = flags.get(&row.name) else {
            continue;
        };
        let variable = row.cells.get(1).map(String::as_str).unwrap_or_default();
        match env {
            Some(env) => assert_eq!(
                variable,
                format!("`{env}`"),
                "{REFERENCE}: {} is read from {env}",
                row.name
            ),
            None => assert!(
                !variable.starts_with('`'),
                "{REFERENCE}: {} is read from no variable, the reference says {variable}",
                row.name
            ),
        }
        let default = row.cells.get(2).map(String::as_str).unwrap_or_default();
        for value in defaults {
            assert!(
                default.contains(&format!("`{value}`")),
                "{REFERENCE}: {} defaults to {value:?}, the reference says {default:?}",
                row.name
            );
        }
    }
}

/// The keys of `values.yaml`, dotted: a mapping is descended into where
/// `values.schema.json` gives it properties (`settings`,
/// `controller.image`), not where it is free-form (`affinity`,
/// `podSecurityContext`).
fn chart_keys() -> BTreeSet<String> {
    fn walk(
        value: &serde_json::Value,
        schema: &serde_json::Value,
        prefix: &str,
        out: &mut BTreeSet<String>,
    ) {
        let serde_json::Value::Object(map) = value else {
            return;
        };
        for (key, value) in map {
            let key = key.as_str();
            let path = if prefix.is_empty() {
                key.to_string()
            } else {
                format!("{prefix}.{key}")
            };
            let node = &schema["properties"][key];
            assert!(
                !node.is_null(),
                "values.yaml has {path}, which values.schema.json does not"
            );
            if node.get("properties").is_some() {
                walk(value, node, &path, out);
            } else {
                out.insert(path);
            }
        }
    }
    let chart = root().join("deploy/helm/nodewright");
    let values: serde_json::Value = nodewright::yaml::from_str(
        &std::fs::read_to_string(chart.join("values.yaml")).expect("reading values.yaml"),
    )
    .expect("values.yaml is YAML");
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(chart.join("values.schema.json"))
            .expect("reading values.schema.json"),
    )
    .expect("values.schema.json is JSON");
    let mut out = BTreeSet::new();
    walk(&values, &schema, "", &mut out);
    out
}

#[test]
fn every_chart_value_is_in_the_reference() {
    let keys = chart_keys();
    assert!(
        keys.contains("settings.clusterName") && keys.contains("controller.image.repository"),
        "{keys:?}"
    );
    let rows = rows();
    let doc = entries(&rows, "Settings", Some("Chart values"));
    assert_same("the chart's values", &keys, &names(&doc));
}

// ---- metrics --------------------------------------------------------------

#[test]
fn every_metric_the_controller_exports_is_in_the_reference() {
    let series = crate::deploy::exported_series();
    // A histogram is listed by its name, not by its `_bucket`, `_sum` and
    // `_count` series.
    let mut metrics = BTreeSet::new();
    for name in &series {
        let histogram = ["_bucket", "_sum", "_count"].iter().find_map(|suffix| {
            name.strip_suffix(suffix)
                .filter(|base| series.contains(&format!("{base}_bucket")))
        });
        metrics.insert(histogram.unwrap_or(name).to_string());
    }
    assert!(
        metrics.contains("karpenter_interruption_message_queue_duration_seconds")
            && metrics.contains("karpenter_nodeclaims_created_total"),
        "{metrics:?}"
    );
    let rows = rows();
    assert_same(
        "the metrics /metrics serves",
        &metrics,
        &names(&entries(&rows, "Metrics", None)),
    );
}

// ---- labels, annotations, taints, finalizers --------------------------------

/// The sections that hold keys.
const KEY_SECTIONS: &[&str] = &["Labels", "Annotations", "Taints, finalizers and tags"];

#[test]
fn every_label_and_annotation_key_is_in_the_reference() {
    let sources = rust_sources();
    let rows = rows();
    let keys: Vec<&Row> = KEY_SECTIONS
        .iter()
        .flat_map(|s| entries(&rows, s, None))
        .collect();
    let listed = names(&keys);
    let text = std::fs::read_to_string(root().join(REFERENCE)).expect("reading the reference");
    // A key (or a key prefix such as `readiness.k8s.io/`) is an entry, or
    // the start of one (`kubernetes.io/cluster/<cluster>`).
    let entry_for = |key: &str| listed.iter().any(|n| n == key || n.starts_with(key));

    // Every string in the table of labels: keys are entries, the rest
    // (groups, values such as `on-demand`) are named somewhere.
    let table = source(&sources, "src/apis/labels.rs");
    let mut checked = 0;
    for value in literals(table).into_iter().filter(|v| !v.contains('{')) {
        if value.contains('/') {
            assert!(
                entry_for(value),
                "{REFERENCE}: src/apis/labels.rs has {value:?}, which no entry under {KEY_SECTIONS:?} names"
            );
        } else {
            assert!(
                text.contains(&format!("`{value}`")),
                "{REFERENCE}: src/apis/labels.rs has {value:?}, which the reference does not name"
            );
        }
        checked += 1;
    }
    assert!(checked > 60, "only {checked} strings read from labels.rs");

    // Keys of Karpenter's and nodewright's domains spelled elsewhere.
    let key = regex::Regex::new(
        r"^(?:[a-z0-9-]+\.)*(?:karpenter\.sh|karpenter\.k8s\.aws|nodewright\.io)/[a-z0-9][a-z0-9-]*$",
    )
    .expect("a valid regex");
    let api_version = regex::Regex::new(r"/v\d+(?:alpha\d+|beta\d+)?$").expect("a valid regex");
    for (path, code) in &sources {
        for value in literals(code).into_iter().filter(|v| key.is_match(v)) {
            if api_version.is_match(value) {
                continue;
            }
            assert!(
                entry_for(value),
                "{REFERENCE}: {path} uses the key {value:?}, which no entry under {KEY_SECTIONS:?} names"
            );
        }
    }

    // And the other way: every key the reference lists is in the code.
    let all_code: String = sources.iter().map(|(_, code)| code.as_str()).collect();
    for row in &keys {
        let spelled = row.name.split('<').next().unwrap_or_default();
        assert!(
            all_code.contains(&format!("\"{spelled}")),
            "{REFERENCE}: {} {:?} is not in src/",
            row.section,
            row.name
        );
    }
}

// ---- status conditions ----------------------------------------------------

#[test]
fn every_status_condition_is_in_the_reference() {
    let sources = rust_sources();
    let constant =
        regex::Regex::new(r#"pub const [A-Z0-9_]+: &str = "([A-Za-z]+)";"#).expect("a valid regex");
    let mut conditions: BTreeSet<String> = constant
        .captures_iter(source(&sources, "src/apis/conditions.rs"))
        .map(|c| c[1].to_string())
        .collect();
    // The Node conditions node repair reads.
    let policy = regex::Regex::new(r#"policy\(\s*"([A-Za-z]+)""#).expect("a valid regex");
    conditions.extend(
        policy
            .captures_iter(source(&sources, "src/cloudprovider/repair.rs"))
            .map(|c| c[1].to_string()),
    );
    assert!(
        conditions.contains("ExtensionsReady") && conditions.contains("AcceleratedHardwareReady"),
        "{conditions:?}"
    );
    let rows = rows();
    assert_same(
        "the status conditions",
        &conditions,
        &names(&entries(&rows, "Status conditions", None)),
    );
}

// ---- events ---------------------------------------------------------------

/// The event reasons the sources publish, found where they are spelled:
///
/// - `reason: "…"` inside an `Event { … }` (kube's, or the extensions'
///   `ExtensionEvent`);
/// - a reason that follows its `EventType::…` in a tuple or an argument
///   list (`(EventType::Warning, "AMINotFound".into(), …)`), literally or
///   as a `const`;
/// - the literal given, at the reason's position, to a function that takes
///   `reason: &str` and builds an event with it (`warn(ctx, node,
///   "Drain", "FailedDraining", …)`), called in its own directory;
/// - the literals of an `…event_reason` function;
/// - the reasons of the EC2NodeClass conditions that turn `False`
///   (`not_ready(TYPE, "SubnetsNotFound", …)`), which the class's events
///   repeat.
fn event_reasons(sources: &[(String, String)]) -> BTreeMap<String, String> {
    let consts = str_consts(sources);
    let mut found: BTreeMap<String, String> = BTreeMap::new();
    let camel = regex::Regex::new(r#""([A-Z][A-Za-z0-9]+)""#).expect("a valid regex");
    let event = regex::Regex::new(r"\b(?:Kube|Extension)?Event\s*\{").expect("a valid regex");
    let literal_reason =
        regex::Regex::new(r#"\breason:\s*"([A-Za-z0-9]+)""#).expect("a valid regex");
    let after_type = regex::Regex::new(
        r#"EventType::(?:Warning|Normal)\s*,\s*(?:"([A-Za-z0-9]+)"|([A-Z][A-Z0-9_]*)\b)"#,
    )
    .expect("a valid regex");
    let helper =
        regex::Regex::new(r"\bfn\s+(\w+)\s*(?:<[^>]*>)?\(([^)]*)\)").expect("a valid regex");
    let not_ready = regex::Regex::new(r#"not_ready\(\s*[^,]+,\s*(?:"([A-Za-z0-9]+)"|reason\s*,)"#)
        .expect("a valid regex");
    let reason_match = regex::Regex::new(r"let\s+reason\s*=\s*match\b").expect("a valid regex");

    let mut helpers: Vec<(String, String, usize)> = Vec::new(); // (directory, name, reason index)
    for (path, code) in sources {
        let mut add = |reason: &str| {
            found
                .entry(reason.to_string())
                .or_insert_with(|| path.clone());
        };
        for m in event.find_iter(code) {
            let Some(end) = closing(code, m.end() - 1) else {
                continue;
            };
            for c in literal_reason.captures_iter(&code[m.end()..end]) {
                add(&c[1]);
            }
        }
        for c in after_type.captures_iter(code) {
            match (c.get(1), c.get(2)) {
                (Some(reason), _) => add(reason.as_str()),
                (None, Some(name)) => {
                    if let Some(value) = consts.get(name.as_str()) {
                        add(value);
                    }
                }
                (None, None) => {}
            }
        }
        for c in helper.captures_iter(code) {
            let name = &c[1];
            let Some(open) = code[c.get(0).expect("a match").end()..]
                .find('{')
                .map(|n| c.get(0).expect("a match").end() + n)
            else {
                continue;
            };
            let body = &code[open..closing(code, open).unwrap_or(code.len())];
            if name.ends_with("event_reason") {
                for r in camel.captures_iter(body) {
                    add(&r[1]);
                }
            }
            let params: Vec<&str> = c[2].split(',').map(str::trim).collect();
            let builds_event = event.is_match(body)
                && ["reason.to_string()", "reason.into()", "reason.to_owned()"]
                    .iter()
                    .any(|e| body.contains(&format!("reason: {e}")));
            if let Some(index) = params.iter().position(|p| p.starts_with("reason: &"))
                && builds_event
            {
                let dir = path.rsplit_once('/').map_or("", |(d, _)| d).to_string();
                helpers.push((dir, name.to_string(), index));
            }
        }
        if path.starts_with("src/controllers/nodeclass/") {
            for c in not_ready.captures_iter(code) {
                match c.get(1) {
                    Some(reason) => add(reason.as_str()),
                    None => {
                        // `let reason = match … { … => "…", … };`
                        for m in reason_match.find_iter(code) {
                            let Some(open) = code[m.end()..].find('{').map(|n| m.end() + n) else {
                                continue;
                            };
                            let end = closing(code, open).unwrap_or(code.len());
                            for r in camel.captures_iter(&code[open..end]) {
                                add(&r[1]);
                            }
                        }
                    }
                }
            }
        }
    }
    for (dir, name, index) in helpers {
        let call = regex::Regex::new(&format!(r"(?:^|[^.\w]){}\(", regex::escape(&name)))
            .expect("a valid regex");
        for (path, code) in sources
            .iter()
            .filter(|(p, _)| p.starts_with(&format!("{dir}/")))
        {
            for m in call.find_iter(code) {
                if code[..m.start() + 1].trim_end().ends_with("fn") {
                    continue; // the definition
                }
                let args = arguments(code, m.end() - 1);
                if let Some(arg) = args.get(index)
                    && let Some(reason) = arg.strip_prefix('"').and_then(|a| a.strip_suffix('"'))
                {
                    found
                        .entry(reason.to_string())
                        .or_insert_with(|| path.clone());
                }
            }
        }
    }
    found
}

/// The top-level arguments of the call whose `(` is at `open`, trimmed.
fn arguments(code: &str, open: usize) -> Vec<String> {
    let mut args = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    let mut i = open;
    while i < code.len() {
        if let Some(end) = literal_end(code, i) {
            current.push_str(&code[i..end]);
            i = end;
            continue;
        }
        let c = code[i..].chars().next().expect("not at the end");
        match c {
            '(' | '[' | '{' => {
                depth += 1;
                if depth > 1 {
                    current.push(c);
                }
            }
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    args.push(current.trim().to_string());
                    return args;
                }
                current.push(c);
            }
            ',' if depth == 1 => {
                args.push(current.trim().to_string());
                current.clear();
            }
            _ => current.push(c),
        }
        i += c.len_utf8();
    }
    args
}

#[test]
fn every_event_reason_is_in_the_reference() {
    let sources = rust_sources();
    let found = event_reasons(&sources);
    for expected in [
        "FailedScheduling",
        "FailedDraining",
        "NodeRepairBlocked",
        "DisruptionBlocked",
        "ExtensionModuleFailed",
        "SubnetsNotFound",
        "CreateFleetAuthCheckFailed",
        "InsufficientCapacityError",
        "SpotInterrupted",
        "Ready",
    ] {
        assert!(
            found.contains_key(expected),
            "the scan of src/ misses the event reason {expected}: {found:?}"
        );
    }
    let rows = rows();
    let doc = names(&entries(&rows, "Events", None));
    let code: BTreeSet<String> = found.keys().cloned().collect();
    let missing: Vec<String> = code
        .difference(&doc)
        .map(|r| format!("{r} ({})", found[r]))
        .collect();
    let unknown: Vec<&String> = doc.difference(&code).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "{REFERENCE} and the code disagree on the event reasons:\n  not in the reference: \
         {missing:?}\n  in the reference but not published by src/: {unknown:?}"
    );
}
