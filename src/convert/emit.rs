//! Writes a [`Document`] as block YAML: two-space indentation, sequences indented under their
//! key, comments where they were attached, scalars in their source style (or the safest style
//! that reads back as the same value).

use super::tree::{Comments, Document, Item, Node, Scalar, Style};

/// The YAML text of a document (ends with a newline).
pub fn emit(doc: &Document) -> String {
    let mut out = String::new();
    match &doc.root {
        Node::Map(m) if !m.flow && !m.entries.is_empty() => {
            for e in &m.entries {
                entry(&mut out, 0, &e.key, &e.value, &e.comments);
            }
        }
        Node::Seq(s) if !s.flow && !s.items.is_empty() => {
            for it in &s.items {
                item(&mut out, 0, it);
            }
        }
        other => {
            out.push_str(&inline(other));
            out.push('\n');
        }
    }
    for c in &doc.tail {
        out.push_str(&format!("#{c}\n"));
    }
    out
}

fn head_comments(out: &mut String, indent: usize, c: &Comments) {
    for h in &c.head {
        out.push_str(&format!("{:indent$}#{h}\n", ""));
    }
}

fn line_comment(c: &Comments) -> String {
    c.line.as_ref().map(|l| format!(" #{l}")).unwrap_or_default()
}

fn entry(out: &mut String, indent: usize, key: &str, value: &Node, c: &Comments) {
    head_comments(out, indent, c);
    out.push_str(&format!(
        "{:indent$}{}:",
        "",
        scalar_inline(key, Style::Auto, false)
    ));
    value_after_key(out, indent, value, c);
}

/// Writes what follows `key:` (or `- ` for nested sequences).
fn value_after_key(out: &mut String, indent: usize, value: &Node, c: &Comments) {
    match value {
        Node::Map(m) if !m.flow && !m.entries.is_empty() => {
            out.push_str(&format!("{}\n", line_comment(c)));
            for e in &m.entries {
                entry(out, indent + 2, &e.key, &e.value, &e.comments);
            }
        }
        Node::Seq(s) if !s.flow && !s.items.is_empty() => {
            out.push_str(&format!("{}\n", line_comment(c)));
            for it in &s.items {
                item(out, indent + 2, it);
            }
        }
        Node::Scalar(s) if is_block(s) => {
            block_scalar(out, indent + 2, s, &line_comment(c));
        }
        other => out.push_str(&format!(" {}{}\n", inline(other), line_comment(c))),
    }
}

fn item(out: &mut String, indent: usize, it: &Item) {
    head_comments(out, indent, &it.comments);
    match &it.value {
        Node::Map(m) if !m.flow && !m.entries.is_empty() => {
            let mut first = true;
            for e in &m.entries {
                if first {
                    // The first entry shares the `- ` line; its own head comments go above it.
                    head_comments(out, indent, &e.comments);
                    out.push_str(&format!(
                        "{:indent$}- {}:",
                        "",
                        scalar_inline(&e.key, Style::Auto, false)
                    ));
                    let mut c = e.comments.clone();
                    c.head.clear();
                    if c.line.is_none() {
                        c.line = it.comments.line.clone();
                    }
                    value_after_key(out, indent + 2, &e.value, &c);
                    first = false;
                } else {
                    entry(out, indent + 2, &e.key, &e.value, &e.comments);
                }
            }
        }
        Node::Seq(s) if !s.flow && !s.items.is_empty() => {
            out.push_str(&format!("{:indent$}-{}\n", "", line_comment(&it.comments)));
            for inner in &s.items {
                item(out, indent + 2, inner);
            }
        }
        Node::Scalar(s) if is_block(s) => {
            out.push_str(&format!("{:indent$}-", ""));
            block_scalar(out, indent + 2, s, &line_comment(&it.comments));
        }
        other => out.push_str(&format!(
            "{:indent$}- {}{}\n",
            "",
            inline(other),
            line_comment(&it.comments)
        )),
    }
}

fn is_block(s: &Scalar) -> bool {
    s.text.contains('\n')
        && matches!(
            s.style,
            Style::Literal | Style::Folded | Style::Auto | Style::Plain
        )
        && !s.text.chars().any(|c| c.is_control() && c != '\n')
        && !s.text.lines().any(|l| l.ends_with(' ') || l.ends_with('\t'))
}

/// ` |…` header plus the lines, each indented by `indent`.
fn block_scalar(out: &mut String, indent: usize, s: &Scalar, comment: &str) {
    let text = &s.text;
    let trailing = text.len() - text.trim_end_matches('\n').len();
    let chomp = match trailing {
        0 => "-",
        1 => "",
        _ => "+",
    };
    let indicator = if text.starts_with(' ') || text.starts_with('\n') {
        "2"
    } else {
        ""
    };
    out.push_str(&format!(" |{indicator}{chomp}{comment}\n"));
    let body = text.strip_suffix('\n').unwrap_or(text);
    for line in body.split('\n') {
        if line.is_empty() {
            out.push('\n');
        } else {
            out.push_str(&format!("{:indent$}{line}\n", ""));
        }
    }
}

/// A node on one line (flow collections, scalars).
fn inline(node: &Node) -> String {
    match node {
        Node::Scalar(s) => scalar_inline(&s.text, s.style, false),
        Node::Seq(s) => {
            let items: Vec<String> = s.items.iter().map(|i| flow_inline(&i.value)).collect();
            format!("[{}]", items.join(", "))
        }
        Node::Map(m) => {
            let entries: Vec<String> = m
                .entries
                .iter()
                .map(|e| {
                    format!(
                        "{}: {}",
                        scalar_inline(&e.key, Style::Auto, true),
                        flow_inline(&e.value)
                    )
                })
                .collect();
            if entries.is_empty() {
                "{}".into()
            } else {
                format!("{{{}}}", entries.join(", "))
            }
        }
    }
}

fn flow_inline(node: &Node) -> String {
    match node {
        Node::Scalar(s) => scalar_inline(&s.text, s.style, true),
        other => inline(other),
    }
}

/// A scalar on one line in the given style, falling back to double quotes where the style
/// cannot represent the text.
pub fn scalar_inline(text: &str, style: Style, in_flow: bool) -> String {
    match style {
        Style::Plain if !text.contains('\n') && (!in_flow || !text.contains([',', '[', ']', '{', '}'])) => {
            text.to_owned()
        }
        Style::Single if !text.contains('\n') => format!("'{}'", text.replace('\'', "''")),
        Style::Auto | Style::Literal | Style::Folded if plain_safe(text, in_flow) => text.to_owned(),
        _ => double_quoted(text),
    }
}

/// `"…"` with JSON-compatible escapes (valid YAML).
pub fn double_quoted(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether `text` written unquoted reads back as the same string (in YAML 1.1 and 1.2).
pub fn plain_safe(text: &str, in_flow: bool) -> bool {
    let Some(first) = text.chars().next() else {
        return false;
    };
    if text.starts_with(' ') || text.ends_with(' ') || text.ends_with(':') {
        return false;
    }
    if "-?:,[]{}#&*!|>'\"%@`".contains(first) {
        return false;
    }
    if text.contains(": ") || text.contains(" #") || text.chars().any(|c| c.is_control()) {
        return false;
    }
    if in_flow && text.contains([',', '[', ']', '{', '}']) {
        return false;
    }
    let lower = text.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "y" | "n" | "yes" | "no" | "on" | "off" | ".inf" | "-.inf" | "+.inf" | ".nan"
    ) {
        return false;
    }
    matches!(super::tree::resolve_plain(text), serde_json::Value::String(_))
}

#[cfg(test)]
mod tests {
    use super::super::tree::parse_document;
    use super::*;

    fn roundtrip(src: &str) -> String {
        emit(&parse_document(src).unwrap().unwrap())
    }

    #[test]
    fn keeps_comments_styles_and_flow() {
        let src = "# head\napiVersion: v1 # right\nkind: X\nspec:\n  # above a\n  a: 1\n  b: \"q\"\n  c: 'it''s'\n  list: [a, b]\n  empty: []\n  seq:\n    # above item\n    - x\n    - y # right y\n    - name: n\n      value: v\n  block: |\n    line one\n\n    line three\n  nested: # right nested\n    d: e\n# tail\n";
        let want = "# head\napiVersion: v1 # right\nkind: X\nspec:\n  # above a\n  a: 1\n  b: \"q\"\n  c: 'it''s'\n  list: [a, b]\n  empty: []\n  seq:\n    # above item\n    - x\n    - y # right y\n    - name: n\n      value: v\n  block: |\n    line one\n\n    line three\n  nested: # right nested\n    d: e\n# tail\n";
        assert_eq!(roundtrip(src), want);
    }

    #[test]
    fn normalizes_indentation_and_block_chomping() {
        let src = "a:\n- x\n- k: v\n  l: w\nb: no newline\nc: |+\n  two\n\nd: >\n  folded\n  text\n";
        assert_eq!(
            roundtrip(src),
            "a:\n  - x\n  - k: v\n    l: w\nb: no newline\nc: |+\n  two\n\nd: |\n  folded text\n"
        );
    }

    #[test]
    fn quoting_keeps_strings_strings() {
        for s in [
            "true", "123", "1.5", "null", "", "yes", "a: b", "#x", "- x", " lead", "x #y",
        ] {
            assert!(!plain_safe(s, false), "{s}");
            let q = scalar_inline(s, Style::Auto, false);
            let back: String = serde_saphyr::from_str(&format!("v: {q}\n"))
                .map(|v: std::collections::BTreeMap<String, String>| v["v"].clone())
                .unwrap();
            assert_eq!(back, s);
        }
        for s in [
            "capmox-system",
            "proxmox://'{{ ds.meta_data.instance_id }}'",
            "a:b",
            "x#y",
            "__capmox_var_1__",
        ] {
            assert!(plain_safe(s, false), "{s}");
        }
        assert!(!plain_safe("a,b", true));
    }
}
