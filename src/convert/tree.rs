//! A small YAML document tree that keeps what a converted manifest should keep — key order,
//! comments, scalar styles, flow collections — built from granit-parser's events, turned into
//! JSON values for typed conversion, and emitted again with two-space indentation.

use granit_parser::{Event, Parser, Placement, ScalarStyle};
use serde_json::Value;

/// How a scalar is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Unquoted.
    Plain,
    /// `'…'`.
    Single,
    /// `"…"`.
    Double,
    /// `|` block.
    Literal,
    /// `>` block (emitted as a literal block: same value).
    Folded,
    /// Not from the source: plain when that reads back as the same string, else quoted.
    Auto,
}

/// Comments attached to a mapping entry or sequence item.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comments {
    /// Own-line comments before it (text after `#`).
    pub head: Vec<String>,
    /// A comment at the end of its first line.
    pub line: Option<String>,
}

impl Comments {
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.head.is_empty() && self.line.is_none()
    }
}

/// A node.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// A mapping.
    Map(Map),
    /// A sequence.
    Seq(Seq),
    /// A scalar.
    Scalar(Scalar),
}

/// A mapping (string keys only).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Map {
    /// Entries in order.
    pub entries: Vec<Entry>,
    /// Written `{…}`.
    pub flow: bool,
}

/// A mapping entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Key.
    pub key: String,
    /// Value.
    pub value: Node,
    /// Comments.
    pub comments: Comments,
    id: usize,
}

/// A sequence.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seq {
    /// Items in order.
    pub items: Vec<Item>,
    /// Written `[…]`.
    pub flow: bool,
}

/// A sequence item.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// Value.
    pub value: Node,
    /// Comments.
    pub comments: Comments,
    id: usize,
}

/// A scalar as written.
#[derive(Debug, Clone, PartialEq)]
pub struct Scalar {
    /// The value (after unescaping).
    pub text: String,
    /// How it was written.
    pub style: Style,
}

/// One YAML document.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// The root node.
    pub root: Node,
    /// Comments after the last node.
    pub tail: Vec<String>,
}

impl Entry {
    /// An entry without comments.
    pub fn new(key: impl Into<String>, value: Node) -> Self {
        Self {
            key: key.into(),
            value,
            comments: Comments::default(),
            id: usize::MAX,
        }
    }
}

impl Item {
    /// An item without comments.
    pub fn new(value: Node) -> Self {
        Self {
            value,
            comments: Comments::default(),
            id: usize::MAX,
        }
    }
}

impl Node {
    /// A scalar whose style is decided on output.
    pub fn text(text: impl Into<String>) -> Self {
        Node::Scalar(Scalar {
            text: text.into(),
            style: Style::Auto,
        })
    }

    /// A plain scalar (numbers, booleans, tokens standing for them).
    pub fn plain(text: impl Into<String>) -> Self {
        Node::Scalar(Scalar {
            text: text.into(),
            style: Style::Plain,
        })
    }

    /// A block mapping.
    pub fn map(entries: Vec<Entry>) -> Self {
        Node::Map(Map { entries, flow: false })
    }

    /// The mapping, if this is one.
    pub fn as_map(&self) -> Option<&Map> {
        match self {
            Node::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The mapping, if this is one.
    pub fn as_map_mut(&mut self) -> Option<&mut Map> {
        match self {
            Node::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The scalar text, if this is a scalar.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::Scalar(s) => Some(&s.text),
            _ => None,
        }
    }

    /// The node at a path of mapping keys.
    pub fn get_path(&self, path: &[&str]) -> Option<&Node> {
        let mut node = self;
        for key in path {
            node = node.as_map()?.get(key)?;
        }
        Some(node)
    }

    /// The node at a path of mapping keys.
    pub fn get_path_mut(&mut self, path: &[&str]) -> Option<&mut Node> {
        let mut node = self;
        for key in path {
            node = node.as_map_mut()?.get_mut(key)?;
        }
        Some(node)
    }
}

impl Map {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entries.iter().find(|e| e.key == key).map(|e| &e.value)
    }

    /// The value of `key`.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Node> {
        self.entries
            .iter_mut()
            .find(|e| e.key == key)
            .map(|e| &mut e.value)
    }

    /// Removes and returns the entry for `key`.
    pub fn remove(&mut self, key: &str) -> Option<Entry> {
        let i = self.entries.iter().position(|e| e.key == key)?;
        Some(self.entries.remove(i))
    }

    /// Sets `key` (in place when present, appended otherwise).
    pub fn insert(&mut self, entry: Entry) {
        match self.entries.iter_mut().find(|e| e.key == entry.key) {
            Some(e) => e.value = entry.value,
            None => self.entries.push(entry),
        }
    }

    /// The mapping under `key`, created (empty) when absent.
    pub fn child_map(&mut self, key: &str) -> Option<&mut Map> {
        if self.get(key).is_none() {
            self.entries.push(Entry::new(key, Node::map(Vec::new())));
        }
        self.get_mut(key)?.as_map_mut()
    }
}

/// A YAML syntax problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct SyntaxError {
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

enum Slot {
    Root,
    Entry { key: String, id: usize },
    Item { id: usize },
}

enum Frame {
    Map {
        map: Map,
        key: Option<(String, usize)>,
        slot: Slot,
    },
    Seq {
        seq: Seq,
        slot: Slot,
    },
}

struct Builder {
    stack: Vec<Frame>,
    root: Option<Node>,
    /// `(line, col)` of every entry key and item, by id.
    positions: Vec<(usize, usize)>,
}

impl Builder {
    fn next_id(&mut self, line: usize, col: usize) -> usize {
        self.positions.push((line, col));
        self.positions.len() - 1
    }

    /// The slot a new node goes to (and its id, registered now).
    fn slot_for(&mut self, line: usize, col: usize, is_scalar: bool) -> Result<Option<Slot>, String> {
        let id = self.next_id(line, col);
        match self.stack.last_mut() {
            None => {
                self.positions.pop();
                Ok(Some(Slot::Root))
            }
            Some(Frame::Seq { .. }) => Ok(Some(Slot::Item { id })),
            Some(Frame::Map { key, .. }) => match key.take() {
                Some((k, kid)) => {
                    self.positions.pop();
                    Ok(Some(Slot::Entry { key: k, id: kid }))
                }
                None if is_scalar => Ok(None),
                None => Err("complex mapping keys are not supported".into()),
            },
        }
    }

    fn place(&mut self, slot: Slot, node: Node) {
        match (slot, self.stack.last_mut()) {
            (Slot::Root, _) | (_, None) => self.root = Some(node),
            (Slot::Entry { key, id }, Some(Frame::Map { map, .. })) => map.entries.push(Entry {
                key,
                value: node,
                comments: Comments::default(),
                id,
            }),
            (Slot::Item { id }, Some(Frame::Seq { seq, .. })) => seq.items.push(Item {
                value: node,
                comments: Comments::default(),
                id,
            }),
            (_, Some(_)) => {}
        }
    }
}

fn style_of(s: ScalarStyle) -> Style {
    match s {
        ScalarStyle::Plain => Style::Plain,
        ScalarStyle::SingleQuoted => Style::Single,
        ScalarStyle::DoubleQuoted => Style::Double,
        ScalarStyle::Literal => Style::Literal,
        ScalarStyle::Folded => Style::Folded,
    }
}

/// Parses one YAML document (the text between `---` separators). `Ok(None)` for a document
/// without content (only comments or blank).
pub fn parse_document(text: &str) -> Result<Option<Document>, SyntaxError> {
    let mut b = Builder {
        stack: Vec::new(),
        root: None,
        positions: Vec::new(),
    };
    let mut comments: Vec<(usize, usize, String, Placement)> = Vec::new();
    let mut documents = 0;
    for ev in Parser::new_from_str(text) {
        let (event, span) = ev.map_err(|e| SyntaxError {
            line: e.marker().line(),
            message: e.info().to_string(),
        })?;
        let (line, col) = (span.start.line(), span.start.col());
        let err = |message: String| SyntaxError { line, message };
        match event {
            Event::DocumentStart(..) => {
                documents += 1;
                if documents > 1 {
                    return Err(err("more than one document".into()));
                }
            }
            Event::Comment(c, placement) => comments.push((line, col, c.into_owned(), placement)),
            Event::Scalar(value, style, _, _) => {
                let is_key = matches!(b.stack.last(), Some(Frame::Map { key: None, .. }));
                if is_key {
                    let id = b.next_id(line, col);
                    if let Some(Frame::Map { key, .. }) = b.stack.last_mut() {
                        *key = Some((value.into_owned(), id));
                    }
                    continue;
                }
                let slot = b.slot_for(line, col, true).map_err(err)?;
                if let Some(slot) = slot {
                    b.place(
                        slot,
                        Node::Scalar(Scalar {
                            text: value.into_owned(),
                            style: style_of(style),
                        }),
                    );
                }
            }
            Event::MappingStart(style, _, _) | Event::SequenceStart(style, _, _) => {
                let flow = style == granit_parser::StructureStyle::Flow;
                let slot = b.slot_for(line, col, false).map_err(err)?.unwrap_or(Slot::Root);
                let frame = if matches!(event, Event::MappingStart(..)) {
                    Frame::Map {
                        map: Map {
                            entries: Vec::new(),
                            flow,
                        },
                        key: None,
                        slot,
                    }
                } else {
                    Frame::Seq {
                        seq: Seq {
                            items: Vec::new(),
                            flow,
                        },
                        slot,
                    }
                };
                b.stack.push(frame);
            }
            Event::MappingEnd | Event::SequenceEnd => {
                let (node, slot) = match b.stack.pop() {
                    Some(Frame::Map { map, slot, .. }) => (Node::Map(map), slot),
                    Some(Frame::Seq { seq, slot }) => (Node::Seq(seq), slot),
                    None => return Err(err("unbalanced collection end".into())),
                };
                b.place(slot, node);
            }
            Event::Alias(_) | Event::UnresolvedAlias(_) | Event::Anchor(..) => {
                return Err(err("anchors and aliases are not supported".into()));
            }
            _ => {}
        }
    }
    let Some(mut root) = b.root else {
        return Ok(None);
    };
    let tail = attach_comments(&mut root, &b.positions, comments);
    Ok(Some(Document { root, tail }))
}

/// Attaches comments to the entries and items by position: a same-line comment to the last
/// node starting on that line before it, an own-line comment to the next node. Returns the
/// comments after the last node.
fn attach_comments(
    root: &mut Node,
    positions: &[(usize, usize)],
    comments: Vec<(usize, usize, String, Placement)>,
) -> Vec<String> {
    let mut head: Vec<Vec<String>> = vec![Vec::new(); positions.len()];
    let mut line: Vec<Option<String>> = vec![None; positions.len()];
    let mut tail = Vec::new();
    for (l, c, text, placement) in comments {
        let same_line = positions
            .iter()
            .enumerate()
            .filter(|(_, (pl, pc))| *pl == l && *pc < c)
            .max_by_key(|(_, (_, pc))| *pc)
            .map(|(i, _)| i);
        if placement == Placement::Right
            && let Some(i) = same_line
            && line[i].is_none()
        {
            line[i] = Some(text);
            continue;
        }
        match positions.iter().position(|&(pl, pc)| (pl, pc) > (l, c)) {
            Some(i) => head[i].push(text),
            None => tail.push(text),
        }
    }
    fn walk(node: &mut Node, head: &mut [Vec<String>], line: &mut [Option<String>]) {
        match node {
            Node::Map(m) => {
                for e in &mut m.entries {
                    if let Some(h) = head.get_mut(e.id) {
                        e.comments.head = std::mem::take(h);
                        e.comments.line = line[e.id].take();
                    }
                    walk(&mut e.value, head, line);
                }
            }
            Node::Seq(s) => {
                for it in &mut s.items {
                    if let Some(h) = head.get_mut(it.id) {
                        it.comments.head = std::mem::take(h);
                        it.comments.line = line[it.id].take();
                    }
                    walk(&mut it.value, head, line);
                }
            }
            Node::Scalar(_) => {}
        }
    }
    walk(root, &mut head, &mut line);
    tail
}

/// Resolves a plain scalar the way YAML 1.2's core schema does.
pub fn resolve_plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(i) = text.parse::<i64>() {
            return Value::from(i);
        }
        if let Ok(u) = text.parse::<u64>() {
            return Value::from(u);
        }
    }
    if looks_like_float(text)
        && let Ok(f) = text.parse::<f64>()
        && let Some(n) = serde_json::Number::from_f64(f)
    {
        return Value::Number(n);
    }
    Value::String(text.to_owned())
}

fn looks_like_float(text: &str) -> bool {
    let t = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exp) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], Some(&t[i + 1..])),
        None => (t, None),
    };
    let mantissa_ok = {
        let (a, b) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        (mantissa.contains('.') || exp.is_some())
            && (a.bytes().all(|c| c.is_ascii_digit()) && b.bytes().all(|c| c.is_ascii_digit()))
            && !(a.is_empty() && b.is_empty())
    };
    let exp_ok = exp.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && e.bytes().all(|c| c.is_ascii_digit())
    });
    mantissa_ok && exp_ok
}

/// The JSON value of a node.
pub fn to_value(node: &Node) -> Value {
    match node {
        Node::Map(m) => Value::Object(
            m.entries
                .iter()
                .map(|e| (e.key.clone(), to_value(&e.value)))
                .collect(),
        ),
        Node::Seq(s) => Value::Array(s.items.iter().map(|i| to_value(&i.value)).collect()),
        Node::Scalar(s) if s.style == Style::Plain => resolve_plain(&s.text),
        Node::Scalar(s) => Value::String(s.text.clone()),
    }
}

/// Builds a node from a JSON value, taking order, comments, flow styles and scalar styles
/// from `source` (the node at the same place in the input) where it has them.
pub fn from_value(value: &Value, source: Option<&Node>) -> Node {
    match value {
        Value::Object(obj) => {
            let src = source.and_then(Node::as_map);
            let mut entries: Vec<Entry> = Vec::new();
            if let Some(src) = src {
                for e in &src.entries {
                    if let Some(v) = obj.get(&e.key) {
                        entries.push(Entry {
                            key: e.key.clone(),
                            value: from_value(v, Some(&e.value)),
                            comments: e.comments.clone(),
                            id: usize::MAX,
                        });
                    }
                }
            }
            for (k, v) in obj {
                if !entries.iter().any(|e| &e.key == k) {
                    entries.push(Entry::new(k.clone(), from_value(v, None)));
                }
            }
            Node::Map(Map {
                entries,
                flow: src.is_some_and(|m| m.flow) && !obj.is_empty(),
            })
        }
        Value::Array(items) => {
            let src = match source {
                Some(Node::Seq(s)) => Some(s),
                _ => None,
            };
            Node::Seq(Seq {
                items: items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let s = src.and_then(|s| s.items.get(i));
                        Item {
                            value: from_value(v, s.map(|s| &s.value)),
                            comments: s.map(|s| s.comments.clone()).unwrap_or_default(),
                            id: usize::MAX,
                        }
                    })
                    .collect(),
                flow: src.is_some_and(|s| s.flow),
            })
        }
        Value::String(s) => {
            let style = match source {
                Some(Node::Scalar(src)) if &src.text == s => src.style,
                _ => Style::Auto,
            };
            Node::Scalar(Scalar {
                text: s.clone(),
                style,
            })
        }
        Value::Null => Node::plain("null"),
        other => Node::plain(other.to_string()),
    }
}

/// Every comment in a node (with the key path) — to report what a conversion dropped.
pub fn comments_of(node: &Node, path: &str, out: &mut Vec<(String, String)>) {
    fn push(out: &mut Vec<(String, String)>, p: &str, c: &Comments) {
        for h in &c.head {
            out.push((p.to_owned(), h.clone()));
        }
        if let Some(l) = &c.line {
            out.push((p.to_owned(), l.clone()));
        }
    }
    match node {
        Node::Map(m) => {
            for e in &m.entries {
                let p = format!("{path}.{}", e.key);
                push(out, &p, &e.comments);
                comments_of(&e.value, &p, out);
            }
        }
        Node::Seq(s) => {
            for (i, it) in s.items.iter().enumerate() {
                let p = format!("{path}[{i}]");
                push(out, &p, &it.comments);
                comments_of(&it.value, &p, out);
            }
        }
        Node::Scalar(_) => {}
    }
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
