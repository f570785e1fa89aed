//! clusterctl's variable substitution: the `drone/envsubst` dialect as clusterctl's simple YAML
//! processor applies it to components and cluster templates.
//!
//! What clusterctl does, and so what this module does:
//!
//! * legacy spellings with blanks inside the braces (`${ VAR }`, `${ VAR}`, `${VAR }`) are first
//!   rewritten to `${VAR}`;
//! * `${VAR}` is replaced by the variable's value; `$${` and `$$` are escapes for `${` and `$`, and
//!   `\\` and `\/` for `\` and `/`; a `$` not followed by `{` is literal text (`$HOME` stays);
//! * `${VAR=default}`, `${VAR:=default}`, `${VAR:-default}`, `${VAR:?default}`, `${VAR:+default}`
//!   all mean "the value, or `default` when the value is unset **or empty**" (not bash's
//!   semantics); the default may contain `${OTHER}`;
//! * `${#VAR}` (length), `${VAR^}`/`${VAR^^}`/`${VAR,}`/`${VAR,,}` (case), `${VAR:pos[:len]}`
//!   (substring), `${VAR/pat/rep}`, `${VAR//pat/rep}`, `${VAR/#pat/rep}`, `${VAR/%pat/rep}`
//!   (replace) and `${VAR#glob}`, `${VAR##glob}`, `${VAR%glob}`, `${VAR%%glob}` (trim) work like
//!   drone/envsubst's;
//! * a variable is *required* when its first occurrence has no default argument; processing fails
//!   listing every required variable without a value, with clusterctl's message. Variables used
//!   only inside another variable's default are not listed (clusterctl does not see them either).
//! * Variable names consist of letters, digits, `_` and `-`; anything else inside `${…}` is a
//!   "bad substitution" error.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

/// Errors of parsing or processing a template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvsubstError {
    /// Malformed `${…}` expression (drone/envsubst's "bad substitution").
    #[error("bad substitution at line {line}, column {column}: {context}")]
    BadSubstitution {
        /// 1-based line of the offending character.
        line: usize,
        /// 1-based column (in characters) of the offending character.
        column: usize,
        /// The text around it.
        context: String,
    },
    /// Required variables without a value (clusterctl's message).
    #[error(
        "value for variables [{}] is not set. Please set the value using os environment variables or the clusterctl config file",
        .0.join(", ")
    )]
    MissingVariables(Vec<String>),
}

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Text(String),
    Func(Func),
}

/// A `${…}` expression.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Func {
    /// The variable name.
    param: String,
    /// The operator (`""`, `"="`, `":="`, `"#"`, `"^^"`, `"//"`, …).
    op: String,
    /// Arguments, each a text or a nested expression.
    args: Vec<Node>,
}

/// A variable a template uses, as clusterctl lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    /// Name.
    pub name: String,
    /// The default written at the first occurrence (nested expressions shown as `${NAME}`), or
    /// `None` when the first occurrence has no default argument.
    pub default: Option<String>,
}

impl Variable {
    /// Whether processing fails without a value for it.
    pub fn required(&self) -> bool {
        self.default.is_none()
    }
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    nodes: Vec<Node>,
}

#[allow(clippy::expect_used)] // a constant pattern
static LEGACY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\$\{(\s+[A-Za-z0-9_$]+\s*|[A-Za-z0-9_$]+\s+)\}").expect("valid regex"));

/// Rewrites `${ VAR }`, `${ VAR}` and `${VAR }` to `${VAR}`, as clusterctl does first.
pub fn normalize_legacy(text: &str) -> String {
    LEGACY
        .replace_all(text, |c: &regex::Captures<'_>| {
            let inner: String = c[1].chars().filter(|ch| !ch.is_whitespace()).collect();
            format!("${{{inner}}}")
        })
        .into_owned()
}

impl Template {
    /// Parses `text` (after the legacy rewrite).
    pub fn parse(text: &str) -> Result<Self, EnvsubstError> {
        let text = normalize_legacy(text);
        let chars: Vec<char> = text.chars().collect();
        let mut p = Parser {
            chars: &chars,
            pos: 0,
        };
        let nodes = p.parse_any()?;
        Ok(Self { nodes })
    }

    /// The variables in order of first appearance, with clusterctl's notion of a default.
    pub fn variables(&self) -> Vec<Variable> {
        let mut seen: Vec<Variable> = Vec::new();
        for node in &self.nodes {
            if let Node::Func(f) = node
                && !seen.iter().any(|v| v.name == f.param)
            {
                let default = (!f.args.is_empty()).then(|| f.args.iter().map(describe).collect());
                seen.push(Variable {
                    name: f.param.clone(),
                    default,
                });
            }
        }
        seen
    }

    /// Substitutes every expression; `lookup` answers `None` for unset variables (treated as
    /// empty, like clusterctl's variable client does).
    pub fn render(&self, lookup: &dyn Fn(&str) -> Option<String>) -> String {
        let mut out = String::new();
        for node in &self.nodes {
            eval(node, lookup, &mut out);
        }
        out
    }
}

/// clusterctl's `Process`: fails listing the required variables without a value (sorted), else
/// substitutes.
pub fn process(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, EnvsubstError> {
    let template = Template::parse(text)?;
    let mut missing: Vec<String> = template
        .variables()
        .into_iter()
        .filter(|v| v.required() && lookup(&v.name).is_none())
        .map(|v| v.name)
        .collect();
    if !missing.is_empty() {
        missing.sort();
        return Err(EnvsubstError::MissingVariables(missing));
    }
    Ok(template.render(lookup))
}

/// [`process`] with the values from a map.
pub fn process_with(text: &str, values: &BTreeMap<String, String>) -> Result<String, EnvsubstError> {
    process(text, &|name| values.get(name).cloned())
}

fn describe(node: &Node) -> String {
    match node {
        Node::Text(t) => t.clone(),
        Node::Func(f) => format!("${{{}}}", f.param),
    }
}

fn eval(node: &Node, lookup: &dyn Fn(&str) -> Option<String>, out: &mut String) {
    match node {
        Node::Text(t) => out.push_str(t),
        Node::Func(f) => {
            let args: Vec<String> = f
                .args
                .iter()
                .map(|a| {
                    let mut s = String::new();
                    eval(a, lookup, &mut s);
                    s
                })
                .collect();
            let value = lookup(&f.param).unwrap_or_default();
            out.push_str(&apply(&f.op, &value, &args));
        }
    }
}

/// drone/envsubst's substitution functions, selected by operator.
fn apply(op: &str, s: &str, args: &[String]) -> String {
    let arg = |i: usize| args.get(i).map(String::as_str);
    match op {
        "," => map_first(s, |c| c.to_lowercase().collect()),
        ",," => s.to_lowercase(),
        "^" => map_first(s, |c| c.to_uppercase().collect()),
        "^^" => s.to_uppercase(),
        "#" if args.is_empty() => s.len().to_string(),
        "#" => arg(0).map_or_else(|| s.to_owned(), |p| trim_prefix(s, p, false)),
        "##" => arg(0).map_or_else(|| s.to_owned(), |p| trim_prefix(s, p, true)),
        "%" => arg(0).map_or_else(|| s.to_owned(), |p| trim_suffix(s, p, false)),
        "%%" => arg(0).map_or_else(|| s.to_owned(), |p| trim_suffix(s, p, true)),
        ":" => substring(s, args),
        "/" => match (arg(0), arg(1)) {
            (Some(p), r) => s.replacen(p, r.unwrap_or(""), 1),
            _ => s.to_owned(),
        },
        "//" => match (arg(0), arg(1)) {
            (Some(p), r) => s.replace(p, r.unwrap_or("")),
            _ => s.to_owned(),
        },
        "/#" => match (arg(0), arg(1)) {
            (Some(p), Some(r)) if s.starts_with(p) => s.replacen(p, r, 1),
            _ => s.to_owned(),
        },
        "/%" => match (arg(0), arg(1)) {
            (Some(p), Some(r)) if s.ends_with(p) => format!("{}{r}", &s[..s.len() - p.len()]),
            _ => s.to_owned(),
        },
        // "", "=", ":=", ":-", ":?", ":+" and anything else: the value, or the joined default.
        _ if s.is_empty() && !args.is_empty() => args.concat(),
        _ => s.to_owned(),
    }
}

fn map_first(s: &str, f: impl Fn(char) -> String) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => f(c) + chars.as_str(),
        None => String::new(),
    }
}

/// Char-boundary prefixes of `s` from the longest (excluding the empty one), as drone tries them.
fn prefixes(s: &str) -> impl Iterator<Item = &str> {
    let mut ends: Vec<usize> = s.char_indices().map(|(i, _)| i).skip(1).collect();
    ends.push(s.len());
    ends.into_iter().rev().map(move |e| &s[..e])
}

fn trim_prefix(s: &str, pattern: &str, longest: bool) -> String {
    let pat: Vec<char> = pattern.chars().collect();
    let mut found: Option<&str> = None;
    for p in prefixes(s) {
        if glob(&pat, &p.chars().collect::<Vec<_>>()) {
            found = Some(p);
            if longest {
                break;
            }
        }
    }
    match found {
        Some(p) => s[p.len()..].to_owned(),
        None => s.to_owned(),
    }
}

/// drone trims suffixes by reversing both the value and the pattern.
fn trim_suffix(s: &str, pattern: &str, longest: bool) -> String {
    let rs: String = s.chars().rev().collect();
    let rp: String = pattern.chars().rev().collect();
    trim_prefix(&rs, &rp, longest).chars().rev().collect()
}

fn substring(s: &str, args: &[String]) -> String {
    let Some(Ok(mut pos)) = args.first().map(|a| a.parse::<i64>()) else {
        return s.to_owned();
    };
    let len = s.len() as i64;
    if pos < 0 {
        pos = (len + pos).max(0);
    }
    let slice = |from: i64, to: i64| s.get(from as usize..to as usize).unwrap_or("").to_owned();
    match args.get(1) {
        None if pos < len => slice(pos, len),
        None => String::new(),
        Some(l) => match l.parse::<i64>() {
            Ok(l) if pos + l >= len => slice(pos.min(len), len),
            Ok(l) => slice(pos, pos + l.max(0)),
            Err(_) => s.to_owned(),
        },
    }
}

/// Shell-style glob: `*` (any run, `/` included), `?`, `[abc]`, `[a-z]`, `[^…]`/`[!…]`, `\x`.
fn glob(pat: &[char], s: &[char]) -> bool {
    match pat.first() {
        None => s.is_empty(),
        Some('*') => (0..=s.len()).any(|i| glob(&pat[1..], &s[i..])),
        Some('?') => !s.is_empty() && glob(&pat[1..], &s[1..]),
        Some('[') => match (class(&pat[1..]), s.first()) {
            (Some((matches, used)), Some(&c)) => matches(c) && glob(&pat[1 + used..], &s[1..]),
            _ => false,
        },
        Some('\\') if pat.len() > 1 => s.first() == Some(&pat[1]) && glob(&pat[2..], &s[1..]),
        Some(&c) => s.first() == Some(&c) && glob(&pat[1..], &s[1..]),
    }
}

type ClassMatch = Box<dyn Fn(char) -> bool>;

/// Parses a character class after `[`; returns the matcher and the characters consumed incl. `]`.
fn class(p: &[char]) -> Option<(ClassMatch, usize)> {
    let mut i = 0;
    let negate = matches!(p.first(), Some('^' | '!'));
    if negate {
        i += 1;
    }
    let mut ranges: Vec<(char, char)> = Vec::new();
    let mut first = true;
    loop {
        let c = *p.get(i)?;
        if c == ']' && !first {
            i += 1;
            break;
        }
        first = false;
        let lo = if c == '\\' {
            i += 1;
            *p.get(i)?
        } else {
            c
        };
        i += 1;
        if p.get(i) == Some(&'-') && p.get(i + 1).is_some_and(|&n| n != ']') {
            let hi = *p.get(i + 1)?;
            ranges.push((lo, hi));
            i += 2;
        } else {
            ranges.push((lo, lo));
        }
    }
    Some((
        Box::new(move |c| ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != negate),
        i,
    ))
}

/// What the scanner accepts inside an argument.
#[derive(Clone, Copy)]
enum ArgEnd {
    /// Up to `}` (defaults, trim patterns, replacement strings).
    Close,
    /// Up to `:` or `}` (substring offset).
    ColonOrClose,
    /// Up to `/` (replace pattern).
    Slash,
}

struct Parser<'a> {
    chars: &'a [char],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    fn starts_expr(&self) -> bool {
        self.peek() == Some('$') && self.at(1) == Some('{')
    }

    fn bad(&self) -> EnvsubstError {
        let pos = self.pos.min(self.chars.len());
        let before = &self.chars[..pos];
        let line = before.iter().filter(|&&c| c == '\n').count() + 1;
        let column = pos - before.iter().rposition(|&c| c == '\n').map_or(0, |i| i + 1) + 1;
        let start = pos.saturating_sub(20);
        let end = (pos + 20).min(self.chars.len());
        EnvsubstError::BadSubstitution {
            line,
            column,
            context: self.chars[start..end].iter().collect(),
        }
    }

    /// Top level: text with escapes, and expressions.
    fn parse_any(&mut self) -> Result<Vec<Node>, EnvsubstError> {
        let mut nodes = Vec::new();
        let mut text = String::new();
        while let Some(c) = self.peek() {
            if self.starts_expr() {
                if !text.is_empty() {
                    nodes.push(Node::Text(std::mem::take(&mut text)));
                }
                self.pos += 2;
                nodes.push(Node::Func(self.parse_func()?));
                continue;
            }
            match (c, self.at(1)) {
                ('$', Some('$')) | ('\\', Some('\\' | '/')) => {
                    text.push(self.chars[self.pos + 1]);
                    self.pos += 2;
                }
                _ => {
                    text.push(c);
                    self.pos += 1;
                }
            }
        }
        if !text.is_empty() {
            nodes.push(Node::Text(text));
        }
        Ok(nodes)
    }

    fn ident(&mut self) -> Result<String, EnvsubstError> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-')
        {
            self.pos += 1;
        }
        if self.pos == start {
            return Err(self.bad());
        }
        Ok(self.chars[start..self.pos].iter().collect())
    }

    fn close(&mut self) -> Result<(), EnvsubstError> {
        if self.peek() == Some('}') {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.bad())
        }
    }

    /// After `${`.
    fn parse_func(&mut self) -> Result<Func, EnvsubstError> {
        if self.peek() == Some('#') {
            self.pos += 1;
            let param = self.ident()?;
            self.close()?;
            return Ok(Func {
                param,
                op: "#".into(),
                args: Vec::new(),
            });
        }
        let param = self.ident()?;
        match self.peek() {
            Some(':') if matches!(self.at(1), Some('=' | '-' | '?' | '+')) => {
                let op = format!(":{}", self.chars[self.pos + 1]);
                self.pos += 2;
                self.default_args(param, op)
            }
            Some(':') => {
                self.pos += 1;
                let mut args = vec![self.arg(ArgEnd::ColonOrClose, false)?];
                if self.peek() == Some(':') {
                    self.pos += 1;
                    args.push(self.arg(ArgEnd::Close, false)?);
                }
                self.close()?;
                Ok(Func {
                    param,
                    op: ":".into(),
                    args,
                })
            }
            Some('=') => {
                self.pos += 1;
                self.default_args(param, "=".into())
            }
            Some(c @ (',' | '^')) => {
                let mut op = String::from(c);
                self.pos += 1;
                if let Some(c2 @ (',' | '^')) = self.peek() {
                    op.push(c2);
                    self.pos += 1;
                }
                self.close()?;
                Ok(Func {
                    param,
                    op,
                    args: Vec::new(),
                })
            }
            Some('/') => {
                let mut op = String::from("/");
                self.pos += 1;
                if let Some(c2 @ ('/' | '#' | '%')) = self.peek() {
                    op.push(c2);
                    self.pos += 1;
                }
                let mut args = vec![self.arg(ArgEnd::Slash, true)?];
                if self.peek() != Some('/') {
                    return Err(self.bad());
                }
                self.pos += 1;
                if self.peek() != Some('}') {
                    args.push(self.arg(ArgEnd::Close, true)?);
                }
                self.close()?;
                Ok(Func { param, op, args })
            }
            Some(c @ ('#' | '%')) => {
                let mut op = String::from(c);
                self.pos += 1;
                if self.peek() == Some(c) {
                    op.push(c);
                    self.pos += 1;
                }
                let args = vec![self.arg(ArgEnd::Close, false)?];
                self.close()?;
                Ok(Func { param, op, args })
            }
            _ => {
                self.close()?;
                Ok(Func {
                    param,
                    op: String::new(),
                    args: Vec::new(),
                })
            }
        }
    }

    /// The arguments of a default function: texts and nested expressions up to `}`.
    fn default_args(&mut self, param: String, op: String) -> Result<Func, EnvsubstError> {
        let mut args = Vec::new();
        while self.peek() != Some('}') {
            args.push(self.arg(ArgEnd::Close, false)?);
        }
        self.close()?;
        Ok(Func { param, op, args })
    }

    /// One argument: a nested expression, or text up to the end marker (or a nested `${`).
    fn arg(&mut self, end: ArgEnd, escapes: bool) -> Result<Node, EnvsubstError> {
        if self.starts_expr() {
            self.pos += 2;
            return Ok(Node::Func(self.parse_func()?));
        }
        let mut text = String::new();
        while let Some(c) = self.peek() {
            if self.starts_expr() {
                break;
            }
            let stop = match end {
                ArgEnd::Close => c == '}',
                ArgEnd::ColonOrClose => c == ':' || c == '}',
                ArgEnd::Slash => c == '/',
            };
            if stop {
                break;
            }
            if escapes && matches!((c, self.at(1)), ('$', Some('$')) | ('\\', Some('\\' | '/'))) {
                text.push(self.chars[self.pos + 1]);
                self.pos += 2;
                continue;
            }
            text.push(c);
            self.pos += 1;
        }
        if text.is_empty() || self.peek().is_none() {
            return Err(self.bad());
        }
        Ok(Node::Text(text))
    }
}

#[cfg(test)]
#[path = "envsubst_tests.rs"]
mod tests;
