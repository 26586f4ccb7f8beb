//! The small part of MIME multipart that EC2 user data uses: reading a
//! user's `multipart/mixed` archive into its parts, and writing parts out
//! under the boundary `//` (the layout cloud-init and nodeadm read, and the
//! one Karpenter writes). Carriage returns are dropped on output.

use super::UserDataError;

/// The boundary nodewright writes.
pub const BOUNDARY: &str = "//";
/// Content type of a shell script part.
pub const SHELL_SCRIPT: &str = r#"text/x-shellscript; charset="us-ascii""#;
/// Content type of a nodeadm `NodeConfig` part.
pub const NODE_CONFIG: &str = "application/node.eks.aws";

/// One part: its headers (name, value) in the order given, and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// Headers, `Content-Type` among them.
    pub headers: Vec<(String, String)>,
    /// The body, without the line break that precedes the next boundary.
    pub content: String,
}

impl Part {
    /// A part with only a `Content-Type` header.
    pub fn new(content_type: &str, content: impl Into<String>) -> Self {
        Part {
            headers: vec![("Content-Type".to_string(), content_type.to_string())],
            content: content.into(),
        }
    }
}

/// Whether `text` starts like a MIME document (as Karpenter tells them apart).
pub fn is_mime(text: &str) -> bool {
    let trimmed = text.trim_start();
    trimmed.starts_with("MIME-Version:") || trimmed.starts_with("Content-Type:")
}

/// The parts of a `multipart/*` document.
pub fn parse(text: &str) -> Result<Vec<Part>, UserDataError> {
    let text = text.replace("\r\n", "\n");
    let text = text.trim_start();
    let (head, body) = split_headers(text);
    let headers = parse_headers(head)?;
    let content_type = header(&headers, "Content-Type").ok_or_else(|| {
        UserDataError::Mime("the MIME document has no Content-Type header".to_string())
    })?;
    if !content_type
        .trim_start()
        .to_ascii_lowercase()
        .starts_with("multipart/")
    {
        return Err(UserDataError::Mime(format!(
            "the MIME document is {content_type:?}, not multipart"
        )));
    }
    let boundary = boundary_of(content_type).ok_or_else(|| {
        UserDataError::Mime(format!(
            "the Content-Type {content_type:?} names no boundary"
        ))
    })?;
    let delimiter = format!("--{boundary}");
    let mut parts = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    let mut closed = false;
    for line in body.split('\n') {
        let trimmed = line.trim_end();
        if trimmed == delimiter || trimmed == format!("{delimiter}--") {
            if let Some(lines) = current.take() {
                parts.push(parse_part(&lines.join("\n"))?);
            }
            if trimmed != delimiter {
                closed = true;
                break;
            }
            current = Some(Vec::new());
        } else if let Some(lines) = current.as_mut() {
            lines.push(line);
        }
    }
    if !closed && let Some(lines) = current.take() {
        // An archive without its closing delimiter: keep its last part.
        let joined = lines.join("\n");
        if !joined.trim().is_empty() {
            parts.push(parse_part(joined.trim_end_matches('\n'))?);
        }
    }
    if parts.is_empty() {
        return Err(UserDataError::Mime(format!(
            "no part starts with the boundary line {delimiter:?}"
        )));
    }
    Ok(parts)
}

/// Writes `parts` as one `multipart/mixed` document with boundary `//`.
pub fn serialize(parts: &[Part]) -> Result<String, UserDataError> {
    let delimiter = format!("--{BOUNDARY}");
    let mut out =
        format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n");
    for (index, part) in parts.iter().enumerate() {
        let content = part.content.replace('\r', "");
        if content
            .lines()
            .any(|l| l.trim_end().starts_with(&delimiter))
        {
            return Err(UserDataError::Mime(format!(
                "a part contains the line {delimiter:?}, the boundary nodewright writes; remove it"
            )));
        }
        if index > 0 {
            out.push('\n');
        }
        out.push_str(&delimiter);
        out.push('\n');
        for (name, value) in &part.headers {
            out.push_str(&format!("{name}: {value}\n"));
        }
        out.push('\n');
        out.push_str(&content);
    }
    out.push('\n');
    out.push_str(&delimiter);
    out.push_str("--\n");
    Ok(out)
}

fn parse_part(text: &str) -> Result<Part, UserDataError> {
    let (head, body) = split_headers(text);
    Ok(Part {
        headers: parse_headers(head)?,
        content: body.to_string(),
    })
}

/// Splits at the first empty line: (headers, body).
fn split_headers(text: &str) -> (&str, &str) {
    if let Some(body) = text.strip_prefix('\n') {
        return ("", body);
    }
    match text.find("\n\n") {
        Some(at) => (&text[..at], &text[at + 2..]),
        None => (text, ""),
    }
}

fn parse_headers(head: &str) -> Result<Vec<(String, String)>, UserDataError> {
    let mut headers: Vec<(String, String)> = Vec::new();
    // Errors name a line by its number, never by its text: user data may
    // hold secrets, and these messages reach logs, events and conditions.
    for (number, line) in head.lines().enumerate().map(|(i, l)| (i + 1, l)) {
        if line.starts_with([' ', '\t']) {
            // A folded continuation of the previous header.
            match headers.last_mut() {
                Some((_, value)) => {
                    value.push(' ');
                    value.push_str(line.trim());
                }
                None => {
                    return Err(UserDataError::Mime(format!(
                        "line {number} of a header block is indented but continues no header"
                    )));
                }
            }
            continue;
        }
        let (name, value) = line.split_once(':').ok_or_else(|| {
            UserDataError::Mime(format!(
                "line {number} of a header block is not a \"Name: value\" header (an empty line must separate a part's headers from its content)"
            ))
        })?;
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    Ok(headers)
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn boundary_of(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| value.trim().trim_matches('"').to_string())
            .filter(|b| !b.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARCHIVE: &str = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho hi\n\n--BOUNDARY\nContent-Type: application/node.eks.aws\n\nkind: NodeConfig\n--BOUNDARY--\n";

    #[test]
    fn parses_parts_and_keeps_their_headers() {
        let parts = parse(ARCHIVE).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].headers[0].1, SHELL_SCRIPT);
        assert_eq!(parts[0].content, "#!/bin/bash\necho hi\n");
        assert_eq!(parts[1].content, "kind: NodeConfig");
    }

    #[test]
    fn content_type_may_come_before_the_version_and_lines_may_end_in_crlf() {
        let text = ARCHIVE
            .replacen(
                "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"",
                "Content-Type: multipart/mixed; boundary=BOUNDARY\nMIME-Version: 1.0",
                1,
            )
            .replace('\n', "\r\n");
        let parts = parse(&text).unwrap();
        assert_eq!(parts[1].content, "kind: NodeConfig");
    }

    #[test]
    fn round_trips_through_serialize() {
        let parts = parse(ARCHIVE).unwrap();
        let text = serialize(&parts).unwrap();
        assert!(text.starts_with(
            "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\n"
        ));
        assert!(text.ends_with("kind: NodeConfig\n--//--\n"));
        assert_eq!(parse(&text).unwrap(), parts);
    }

    #[test]
    fn rejects_what_is_not_multipart() {
        let single = "Content-Type: text/plain\n\nhello";
        assert!(
            matches!(parse(single), Err(UserDataError::Mime(m)) if m.contains("not multipart"))
        );
        let no_boundary = "Content-Type: multipart/mixed\n\nhello";
        assert!(
            matches!(parse(no_boundary), Err(UserDataError::Mime(m)) if m.contains("boundary"))
        );
        assert!(serialize(&[Part::new(SHELL_SCRIPT, "echo\n--//\n")]).is_err());
    }

    #[test]
    fn header_errors_name_the_line_by_number_not_by_its_text() {
        // A part whose headers run into its script: the script's lines are
        // read as headers, and may hold secrets.
        let text = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript\necho s3cret-token | login\n--B--\n";
        let Err(UserDataError::Mime(message)) = parse(text) else {
            panic!("accepted");
        };
        assert!(message.contains("line 2 of a header block"), "{message}");
        assert!(!message.contains("s3cret"), "{message}");
        let folded = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\n  s3cret-token\n\necho\n--B--\n";
        let Err(UserDataError::Mime(message)) = parse(folded) else {
            panic!("accepted");
        };
        assert!(message.contains("line 1 of a header block"), "{message}");
        assert!(!message.contains("s3cret"), "{message}");
    }
}
