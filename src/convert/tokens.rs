//! clusterctl variables in manifests being converted: every `${…}` expression is swapped for a
//! plain, YAML-safe token before parsing (so `[${VM_SSH_KEYS}]` stays a one-item flow list and
//! `replicas: ${COUNT}` a plain scalar) and swapped back in the converted text.

/// The `${…}` expressions of one document and their tokens.
#[derive(Debug, Default, Clone)]
pub struct Tokens {
    /// `(token, expression)` in order of first appearance.
    pairs: Vec<(String, String)>,
}

const PREFIX: &str = "__capmox_var_";
const SUFFIX: &str = "__";

impl Tokens {
    /// Replaces every `${…}` (nested defaults included, `$${` escapes left alone) by a token.
    pub fn tokenize(text: &str) -> (String, Tokens) {
        let mut tokens = Tokens::default();
        let mut out = String::with_capacity(text.len());
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'$' && bytes.get(i + 1) == Some(&b'$') {
                out.push_str("$$");
                i += 2;
                continue;
            }
            if bytes[i] == b'$'
                && bytes.get(i + 1) == Some(&b'{')
                && let Some(end) = expression_end(bytes, i)
            {
                let expr = &text[i..end];
                out.push_str(&tokens.token_for(expr, text));
                i = end;
                continue;
            }
            let ch_len = text[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&text[i..i + ch_len]);
            i += ch_len;
        }
        (out, tokens)
    }

    fn token_for(&mut self, expr: &str, text: &str) -> String {
        if let Some((t, _)) = self.pairs.iter().find(|(_, e)| e == expr) {
            return t.clone();
        }
        let mut n = self.pairs.len();
        let token = loop {
            let candidate = format!("{PREFIX}{n}{SUFFIX}");
            if !text.contains(&candidate) {
                break candidate;
            }
            n += 1;
        };
        self.pairs.push((token.clone(), expr.to_owned()));
        token
    }

    /// The expression a text that is exactly one token stands for.
    pub fn expression(&self, text: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(t, _)| t == text)
            .map(|(_, e)| e.as_str())
    }

    /// Whether `text` contains any token.
    pub fn contains_token(&self, text: &str) -> bool {
        self.pairs.iter().any(|(t, _)| text.contains(t.as_str()))
    }

    /// Puts the expressions back.
    pub fn restore(&self, text: &str) -> String {
        let mut out = text.to_owned();
        // Longest tokens first, so `…_1__` never matches inside `…_11__`.
        let mut pairs: Vec<&(String, String)> = self.pairs.iter().collect();
        pairs.sort_by_key(|(t, _)| std::cmp::Reverse(t.len()));
        for (t, e) in pairs {
            out = out.replace(t.as_str(), e);
        }
        out
    }
}

/// End (exclusive) of the `${…}` starting at `start`, counting nested `${`; `None` if unclosed.
fn expression_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = start;
    while i < bytes.len() {
        if bytes[i] == b'$' && bytes.get(i + 1) == Some(&b'{') {
            depth += 1;
            i += 2;
            continue;
        }
        if bytes[i] == b'}' {
            depth -= 1;
            if depth == 0 {
                return Some(i + 1);
            }
        }
        if bytes[i] == b'\n' {
            return None;
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_escapes_and_nesting() {
        let text = "a: ${A}\nb: [${KEYS}]\nc: $${ESC} ${D:=${E}x} ${A}\nd: ${unclosed\n";
        let (tokenized, tokens) = Tokens::tokenize(text);
        assert!(!tokenized.contains("${A}"));
        assert!(tokenized.contains("$${ESC}"));
        assert!(tokenized.contains("${unclosed"));
        assert_eq!(tokens.pairs.len(), 3);
        assert_eq!(tokens.restore(&tokenized), text);
        assert_eq!(tokens.expression("__capmox_var_1__"), Some("${KEYS}"));
    }

    #[test]
    fn tokens_avoid_existing_text() {
        let text = "x: __capmox_var_0__ ${A}";
        let (tokenized, tokens) = Tokens::tokenize(text);
        assert_eq!(tokenized, "x: __capmox_var_0__ __capmox_var_1__");
        assert_eq!(tokens.restore(&tokenized), text);
    }
}
