//! A small YAML document tree with 1-based line numbers, built from the
//! events of `yaml-rust2`. serde_yaml does not expose the positions of values
//! it parsed successfully, and every spec error must name its line.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// Deepest nesting accepted; far beyond any real spec, and keeps recursion
/// (validation, cloning, dropping) bounded on hostile input.
const MAX_DEPTH: usize = 64;
/// Most nodes an expanded document may hold (guards against alias bombs).
const MAX_NODES: usize = 200_000;

/// A YAML node with the 1-based line where it starts.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub value: Value,
    pub line: usize,
}

/// The content of a [`Node`].
#[derive(Clone, Debug)]
pub(crate) enum Value {
    /// A scalar as written, with its resolved type.
    Scalar { text: String, kind: ScalarKind },
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, in document order (duplicates kept for the validator).
    Map(Vec<(Node, Node)>),
}

/// The YAML 1.2 core-schema type of a scalar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScalarKind {
    Null,
    Bool,
    Int,
    Float,
    Str,
}

impl Node {
    /// True for a null scalar (`~`, `null`, or nothing at all).
    pub fn is_null(&self) -> bool {
        matches!(
            self.value,
            Value::Scalar {
                kind: ScalarKind::Null,
                ..
            }
        )
    }

    /// True for a null scalar written as nothing at all.
    fn is_empty_scalar(&self) -> bool {
        matches!(
            &self.value,
            Value::Scalar { text, kind: ScalarKind::Null } if text.is_empty()
        )
    }

    /// "an integer `5`", "a list", "a map", ... for error messages.
    pub fn describe(&self) -> String {
        match &self.value {
            Value::Scalar { text, kind } => {
                let shown = shorten(text);
                match kind {
                    ScalarKind::Null => "nothing (null)".to_string(),
                    ScalarKind::Bool => format!("a boolean `{shown}`"),
                    ScalarKind::Int => format!("an integer `{shown}`"),
                    ScalarKind::Float => format!("a number `{shown}`"),
                    ScalarKind::Str => format!("a string `{shown}`"),
                }
            }
            Value::Seq(_) => "a list".to_string(),
            Value::Map(_) => "a map".to_string(),
        }
    }

    /// Number of nodes in this subtree.
    fn size(&self) -> usize {
        match &self.value {
            Value::Scalar { .. } => 1,
            Value::Seq(items) => 1 + items.iter().map(Node::size).sum::<usize>(),
            Value::Map(entries) => {
                1 + entries
                    .iter()
                    .map(|(k, v)| k.size() + v.size())
                    .sum::<usize>()
            }
        }
    }
}

fn shorten(text: &str) -> String {
    const MAX: usize = 40;
    let one_line = text.lines().next().unwrap_or("");
    if one_line.chars().count() > MAX || one_line.len() != text.len() {
        let cut: String = one_line.chars().take(MAX).collect();
        format!("{cut}...")
    } else {
        text.to_string()
    }
}

/// A YAML syntax problem, with its 1-based line.
#[derive(Debug)]
pub(crate) struct SyntaxError {
    pub line: usize,
    /// 1-based column, for errors of the YAML scanner; `None` for limits of
    /// this reader (several documents, nesting, alias expansion).
    pub col: Option<usize>,
    pub message: String,
}

/// Resolves the core-schema type of a plain scalar.
fn plain_kind(text: &str) -> ScalarKind {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return ScalarKind::Null,
        "true" | "True" | "TRUE" | "false" | "False" | "FALSE" => return ScalarKind::Bool,
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF"
        | ".nan" | ".NaN" | ".NAN" => return ScalarKind::Float,
        _ => {}
    }
    let digits = |s: &str, radix: u32| !s.is_empty() && s.chars().all(|c| c.is_digit(radix));
    if let Some(hex) = text.strip_prefix("0x") {
        if digits(hex, 16) {
            return ScalarKind::Int;
        }
    }
    if let Some(oct) = text.strip_prefix("0o") {
        if digits(oct, 8) {
            return ScalarKind::Int;
        }
    }
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    if digits(unsigned, 10) {
        return ScalarKind::Int;
    }
    // [0-9]+(\.[0-9]*)? | \.[0-9]+ , then an optional exponent
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(i) => (&unsigned[..i], Some(&unsigned[i + 1..])),
        None => (unsigned, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((int, frac)) => {
            (digits(int, 10) && (frac.is_empty() || digits(frac, 10)))
                || (int.is_empty() && digits(frac, 10))
        }
        None => digits(mantissa, 10),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e), 10));
    if mantissa_ok && exponent_ok {
        ScalarKind::Float
    } else {
        ScalarKind::Str
    }
}

fn scalar_kind(text: &str, style: TScalarStyle, tag: Option<&Tag>) -> ScalarKind {
    if let Some(tag) = tag {
        if tag.handle == "tag:yaml.org,2002:" || tag.handle == "!!" {
            match tag.suffix.as_str() {
                "str" => return ScalarKind::Str,
                "null" => return ScalarKind::Null,
                "bool" => return ScalarKind::Bool,
                "int" => return ScalarKind::Int,
                "float" => return ScalarKind::Float,
                _ => {}
            }
        }
    }
    match style {
        TScalarStyle::Plain => plain_kind(text),
        _ => ScalarKind::Str,
    }
}

enum Frame {
    Seq {
        anchor: usize,
        mark: Marker,
        items: Vec<Node>,
    },
    Map {
        anchor: usize,
        mark: Marker,
        items: Vec<Node>,
    },
}

fn node_at(value: Value, mark: Marker) -> Node {
    Node {
        value,
        line: mark.line().max(1),
    }
}

/// Parses `text` into its single document's root node; `Ok(None)` when the
/// text holds no document (empty, or only comments).
pub(crate) fn parse(text: &str) -> Result<Option<Node>, SyntaxError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: HashMap<usize, Node> = HashMap::new();
    let mut root: Option<Node> = None;
    let mut documents = 0usize;
    let mut total_nodes = 0usize;
    let syntax = |mark: Marker, message: String| SyntaxError {
        line: mark.line().max(1),
        col: None,
        message,
    };

    loop {
        let (event, mark) = parser.next_token().map_err(|e| SyntaxError {
            line: e.marker().line().max(1),
            col: Some(e.marker().col() + 1),
            message: e.info().to_string(),
        })?;
        let finished: Option<(Node, usize)> = match event {
            Event::StreamEnd => break,
            Event::Nothing | Event::StreamStart | Event::DocumentEnd => None,
            Event::DocumentStart => {
                documents += 1;
                if documents > 1 {
                    return Err(syntax(
                        mark,
                        "the spec must hold a single YAML document, found a second one (`---`)"
                            .to_string(),
                    ));
                }
                None
            }
            Event::Alias(id) => {
                let node = anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| syntax(mark, "alias refers to an unknown anchor".to_string()))?;
                total_nodes += node.size();
                // An alias is reported at the line where it is used.
                Some((
                    Node {
                        line: mark.line().max(1),
                        ..node
                    },
                    0,
                ))
            }
            Event::Scalar(text, style, anchor, tag) => {
                total_nodes += 1;
                let kind = scalar_kind(&text, style, tag.as_ref());
                Some((node_at(Value::Scalar { text, kind }, mark), anchor))
            }
            Event::SequenceStart(..) | Event::MappingStart(..) if stack.len() >= MAX_DEPTH => {
                return Err(syntax(
                    mark,
                    format!("the spec is nested more than {MAX_DEPTH} levels deep"),
                ));
            }
            Event::SequenceStart(anchor, _) => {
                stack.push(Frame::Seq {
                    anchor,
                    mark,
                    items: Vec::new(),
                });
                None
            }
            Event::MappingStart(anchor, _) => {
                stack.push(Frame::Map {
                    anchor,
                    mark,
                    items: Vec::new(),
                });
                None
            }
            Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                Some(Frame::Seq {
                    anchor,
                    mark,
                    items,
                }) => {
                    total_nodes += 1;
                    Some((node_at(Value::Seq(items), mark), anchor))
                }
                Some(Frame::Map {
                    anchor,
                    mark,
                    items,
                }) => {
                    total_nodes += 1;
                    let mut entries = Vec::with_capacity(items.len() / 2);
                    let mut it = items.into_iter();
                    while let Some(key) = it.next() {
                        let value = match it.next() {
                            Some(v) => v,
                            None => node_at(
                                Value::Scalar {
                                    text: String::new(),
                                    kind: ScalarKind::Null,
                                },
                                mark,
                            ),
                        };
                        entries.push((key, value));
                    }
                    Some((node_at(Value::Map(entries), mark), anchor))
                }
                None => {
                    return Err(syntax(mark, "unbalanced YAML collection".to_string()));
                }
            },
        };
        if total_nodes > MAX_NODES {
            return Err(syntax(
                mark,
                format!("the spec expands to more than {MAX_NODES} values (aliases?)"),
            ));
        }
        if let Some((node, anchor)) = finished {
            if anchor > 0 {
                anchors.insert(anchor, node.clone());
            }
            match stack.last_mut() {
                Some(Frame::Map { items, .. }) => {
                    let mut node = node;
                    // An empty value (`key:` with nothing after it) is placed
                    // by the parser at the next token; report it at its key.
                    if items.len() % 2 == 1 && node.is_empty_scalar() {
                        if let Some(key) = items.last() {
                            node.line = key.line;
                        }
                    }
                    items.push(node)
                }
                Some(Frame::Seq { items, .. }) => items.push(node),
                None => root = Some(node),
            }
        }
    }
    // A document holding only `~` or nothing is as good as empty.
    Ok(root.filter(|r| !r.is_null()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_scalar_kinds() {
        assert_eq!(plain_kind("4"), ScalarKind::Int);
        assert_eq!(plain_kind("-4"), ScalarKind::Int);
        assert_eq!(plain_kind("0x1F"), ScalarKind::Int);
        assert_eq!(plain_kind("1.5"), ScalarKind::Float);
        assert_eq!(plain_kind("1e3"), ScalarKind::Float);
        assert_eq!(plain_kind(".5"), ScalarKind::Float);
        assert_eq!(plain_kind("5 minutes"), ScalarKind::Str);
        assert_eq!(plain_kind("1.2.3"), ScalarKind::Str);
        assert_eq!(plain_kind("e3"), ScalarKind::Str);
        assert_eq!(plain_kind("True"), ScalarKind::Bool);
        assert_eq!(plain_kind("yes"), ScalarKind::Str);
        assert_eq!(plain_kind("~"), ScalarKind::Null);
    }

    #[test]
    fn lines_are_one_based() {
        let root = parse("a: 1\nb:\n  c: x\n").unwrap().unwrap();
        let Value::Map(entries) = &root.value else {
            panic!("not a map")
        };
        assert_eq!(entries[0].0.line, 1);
        assert_eq!(entries[1].0.line, 2);
        let Value::Map(inner) = &entries[1].1.value else {
            panic!("not a map")
        };
        assert_eq!(inner[0].0.line, 3);
    }

    #[test]
    fn empty_and_comment_only_documents() {
        assert!(parse("").unwrap().is_none());
        assert!(parse("# nothing\n\n").unwrap().is_none());
        assert!(parse("---\n").unwrap().is_none());
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let text = "[".repeat(10_000);
        assert!(parse(&text).is_err());
    }

    #[test]
    fn alias_bombs_are_bounded() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        assert!(parse(&text).is_err());
    }
}
