//! Text a component produced (errors, drop reasons, log lines, stdout and
//! stderr) on its way to logs, terminals, events and status conditions:
//! bounded in length with a visible truncation marker, control characters
//! escaped. Every such string passes through here, once, where it crosses
//! the sandbox boundary.

/// Longest error message of a component's own (`Err(..)`) kept, bytes.
pub const MAX_ERROR_BYTES: usize = 1024;

/// Longest excerpt of a component's stdout/stderr quoted in an error, bytes.
pub const MAX_OUTPUT_EXCERPT_BYTES: usize = 1024;

/// Longest `log` line kept, bytes.
pub const MAX_LOG_LINE_BYTES: usize = 1024;

/// Which part of an over-long text is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// The beginning (messages: the first words say the most).
    Head,
    /// The end (program output: a panic message comes last).
    Tail,
}

/// `text` as one line of at most `max_bytes` bytes plus a marker saying how
/// much was cut: control characters (newlines included) are escaped as
/// `\n`, `\t`, `\u{1b}` …, so the result cannot break a log line, a table
/// row or a terminal.
pub fn one_line(text: &str, max_bytes: usize, keep: Keep) -> String {
    bounded(text, max_bytes, keep, false)
}

/// Like [`one_line`], but newlines are kept (multi-line program output);
/// every other control character is escaped.
pub fn multi_line(text: &str, max_bytes: usize, keep: Keep) -> String {
    bounded(text, max_bytes, keep, true)
}

/// [`one_line`] for an owned string: handed back as is, without a copy,
/// when it is short enough and has no control character — the common case
/// on the per-call path (one drop reason per dropped instance type).
pub fn one_line_owned(text: String, max_bytes: usize, keep: Keep) -> String {
    if text.len() <= max_bytes && !may_have_control(&text) {
        return text;
    }
    one_line(&text, max_bytes, keep)
}

/// False only if `text` certainly has no control character: C0 and DEL are
/// single bytes; the C1 controls (U+0080–U+009F) start with byte 0xC2.
fn may_have_control(text: &str) -> bool {
    text.bytes().any(|b| b < 0x20 || b == 0x7f || b == 0xc2)
}

fn bounded(text: &str, max_bytes: usize, keep: Keep, keep_newlines: bool) -> String {
    // Only what can be shown is looked at: a 40 MiB message costs no more
    // than a short one.
    let width = |c: char| escaped_len(c, keep_newlines);
    let (start, end) = match keep {
        Keep::Head => {
            let mut shown = 0;
            let mut end = 0;
            for (i, c) in text.char_indices() {
                if shown + width(c) > max_bytes {
                    break;
                }
                shown += width(c);
                end = i + c.len_utf8();
            }
            (0, end)
        }
        Keep::Tail => {
            let mut shown = 0;
            let mut start = text.len();
            for (i, c) in text.char_indices().rev() {
                if shown + width(c) > max_bytes {
                    break;
                }
                shown += width(c);
                start = i;
            }
            (start, text.len())
        }
    };
    let mut body = String::with_capacity(end - start + 16);
    for c in text[start..end].chars() {
        push_escaped(&mut body, c, keep_newlines);
    }
    let cut = text.len() - (end - start);
    if cut == 0 {
        return body;
    }
    let marker = format!("… ({cut} more bytes)");
    match keep {
        Keep::Head => body + &marker,
        Keep::Tail => marker + &body,
    }
}

fn escaped_len(c: char, keep_newlines: bool) -> usize {
    match c {
        '\n' if keep_newlines => 1,
        '\n' | '\r' | '\t' => 2,
        c if c.is_control() => c.escape_unicode().len(),
        c => c.len_utf8(),
    }
}

fn push_escaped(out: &mut String, c: char, keep_newlines: bool) {
    match c {
        '\n' if keep_newlines => out.push('\n'),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if c.is_control() => out.extend(c.escape_unicode()),
        c => out.push(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_clean_text_is_unchanged() {
        assert_eq!(
            one_line("t3.large is burstable", 100, Keep::Head),
            "t3.large is burstable"
        );
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(
            one_line("a\nb\r\t\u{1b}[31mred\u{0}", 100, Keep::Head),
            "a\\nb\\r\\t\\u{1b}[31mred\\u{0}"
        );
        assert_eq!(multi_line("a\nb\u{1b}", 100, Keep::Head), "a\nb\\u{1b}");
    }

    #[test]
    fn owned_text_takes_the_same_path() {
        for text in ["plain", "a\nb", "c1 \u{85} control", "é", &"x".repeat(300)] {
            assert_eq!(
                one_line_owned(text.to_string(), 100, Keep::Head),
                one_line(text, 100, Keep::Head),
                "{text}"
            );
        }
    }

    #[test]
    fn long_text_is_cut_with_a_marker() {
        let head = one_line(&"x".repeat(5000), 100, Keep::Head);
        assert_eq!(head, format!("{}… (4900 more bytes)", "x".repeat(100)));
        let tail = one_line(&format!("{}panic", "y".repeat(5000)), 10, Keep::Tail);
        assert_eq!(tail, "… (4995 more bytes)yyyyypanic");
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        let text = "é".repeat(100); // two bytes each
        let head = one_line(&text, 5, Keep::Head);
        assert_eq!(head, "éé… (196 more bytes)");
        let tail = one_line(&text, 5, Keep::Tail);
        assert!(
            tail.starts_with("… (196 more bytes)") && tail.ends_with("éé"),
            "{tail}"
        );
    }
}
