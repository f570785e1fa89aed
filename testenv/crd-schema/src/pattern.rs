//! `pattern` keywords: the apiserver compiles them with Go's RE2 `regexp`; this translates the few
//! spots where Rust's `regex` reads the same text differently (ASCII-only `\d \w \s`, a literal `-`
//! after a range inside a class) and matches unanchored, like `MatchString`.

/// A compiled `pattern`.
#[derive(Debug, Clone)]
pub struct Pattern {
    source: String,
    re: regex::Regex,
}

impl Pattern {
    /// Compiles a schema `pattern`. Returns the regex error text on failure.
    pub fn new(source: &str) -> Result<Pattern, String> {
        let translated = translate(source);
        let re = regex::Regex::new(&translated).map_err(|e| e.to_string())?;
        Ok(Pattern {
            source: source.to_string(),
            re,
        })
    }

    /// The pattern as written in the schema.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether `s` contains a match (Go `regexp.MatchString`).
    pub fn is_match(&self, s: &str) -> bool {
        self.re.is_match(s)
    }
}

/// Rewrites Go RE2 syntax into the equivalent Rust `regex` syntax.
pub(crate) fn translate(src: &str) -> String {
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len() + 8);
    let mut in_class = false;
    // Inside a class: whether the previous item completed a range (so a following `-` is literal),
    // and whether we are at the first position of the class.
    let mut after_range = false;
    let mut class_start = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && i + 1 < chars.len() {
            let e = chars[i + 1];
            let repl = match (e, in_class) {
                ('d', false) => Some("[0-9]"),
                ('d', true) => Some("0-9"),
                ('D', false) => Some("[^0-9]"),
                ('w', false) => Some("[0-9A-Za-z_]"),
                ('w', true) => Some("0-9A-Za-z_"),
                ('W', false) => Some("[^0-9A-Za-z_]"),
                ('s', false) => Some("[\\t\\n\\f\\r ]"),
                ('s', true) => Some("\\t\\n\\f\\r "),
                ('S', false) => Some("[^\\t\\n\\f\\r ]"),
                _ => None,
            };
            match repl {
                Some(r) => out.push_str(r),
                None => {
                    out.push('\\');
                    out.push(e);
                }
            }
            i += 2;
            after_range = false;
            class_start = false;
            continue;
        }
        if in_class {
            if c == ']' && !class_start {
                in_class = false;
                out.push(c);
            } else if c == '-' {
                let next = chars.get(i + 1).copied();
                let literal = class_start || after_range || next == Some(']') || next.is_none();
                if literal {
                    out.push_str("\\-");
                    after_range = false;
                } else {
                    out.push('-');
                    // The range's upper bound follows; once it is consumed the range is complete.
                    if let Some(hi) = next {
                        if hi == '\\' && i + 2 < chars.len() {
                            out.push('\\');
                            out.push(chars[i + 2]);
                            i += 3;
                        } else {
                            out.push(hi);
                            i += 2;
                        }
                        after_range = true;
                        class_start = false;
                        continue;
                    }
                }
            } else if c == '[' && chars.get(i + 1) == Some(&':') {
                // POSIX class like [:alpha:]: copy through the closing ":]".
                let rest: String = chars[i..].iter().collect();
                if let Some(end) = rest.find(":]") {
                    out.push_str(&rest[..end + 2]);
                    i += rest[..end + 2].chars().count();
                    after_range = false;
                    class_start = false;
                    continue;
                }
                out.push_str("\\[");
            } else if c == '[' {
                out.push_str("\\[");
                after_range = false;
            } else if c == '^' && class_start && out.ends_with('[') {
                out.push('^');
                i += 1;
                continue;
            } else {
                out.push(c);
                after_range = false;
            }
            class_start = false;
            i += 1;
            continue;
        }
        if c == '[' {
            in_class = true;
            class_start = true;
            after_range = false;
        }
        out.push(c);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capmox_patterns_compile_and_match() {
        let p = Pattern::new("^[a-z0-9A-Z](?:[a-z0-9A-Z-_.]{0,61}[a-z0-9A-Z])?$").unwrap();
        assert!(p.is_match("a-b_c.d"));
        assert!(!p.is_match("-ab"));
        let p = Pattern::new(r"^(?i)[a-z0-9_][a-z0-9_\-\+\.]*$").unwrap();
        assert!(p.is_match("Local-LVM"));
        assert!(!p.is_match("a b"));
        let p = Pattern::new(r"^\[[0-9]+-[0-9]+\]$").unwrap();
        assert!(p.is_match("[1-2]"));
        let p = Pattern::new(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$").unwrap();
        assert!(p.is_match("example.com/foo"));
        assert!(!p.is_match("example.com/"));
        let p = Pattern::new(r"^\d+$").unwrap();
        assert!(p.is_match("123"));
        assert!(!p.is_match("١٢٣"));
        let p = Pattern::new(r"net[0-9]+").unwrap();
        assert!(p.is_match("xnet1y"), "unanchored like Go MatchString");
        assert_eq!(p.source(), "net[0-9]+");
    }

    #[test]
    fn invalid_pattern_is_reported() {
        assert!(Pattern::new("a(b").is_err());
    }
}
