//! The YAML of a web config file: saphyr-parser's events into a small
//! tree (scalars keep whether they were plain, for go-yaml v2's YAML 1.1
//! booleans), bounded in depth, in nodes and in the bytes of its strings
//! (aliases counted at their expanded size, before they are copied), so an
//! alias bomb or a deeply nested file is refused before it costs memory or
//! stack. A key set twice in any mapping is refused, naming it, as go-yaml's
//! strict mode (exporter-toolkit's `UnmarshalStrict`) refuses it. Only the
//! first document is read; a second is an error.

use super::{Error, MAX_FILE_BYTES, err};
use saphyr_parser::{Event, Parser, ScalarStyle};

/// Refuses a key of `m` not in `known` (a key set twice is refused by
/// [`tree`]); `at` is the mapping's own dotted path.
pub(super) fn check_keys(at: &str, m: &[(String, Node)], known: &[&str]) -> Result<(), Error> {
    for (k, _) in m {
        let path = if at.is_empty() {
            k.clone()
        } else {
            format!("{at}.{k}")
        };
        if !known.contains(&k.as_str()) {
            return Err(err(
                &path,
                format!("unknown key (expected one of: {})", known.join(", ")),
            ));
        }
    }
    Ok(())
}

/// The value of `key` in `m`, unless absent or null.
pub(super) fn get<'a>(m: &'a [(String, Node)], key: &str) -> Option<&'a Node> {
    m.iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
        .filter(|v| !v.is_null())
}

/// The YAML tree, just what the schema needs.
#[derive(Clone, Debug)]
pub(super) enum Node {
    Scalar { value: String, plain: bool },
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
}

impl Node {
    pub(super) fn is_null(&self) -> bool {
        matches!(self, Node::Scalar { value, plain: true } if matches!(value.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }

    pub(super) fn kind(&self) -> &'static str {
        match self {
            Node::Scalar { .. } => "a scalar",
            Node::Seq(_) => "a list",
            Node::Map(_) => "a mapping",
        }
    }

    pub(super) fn map(&self, key: &str) -> Result<&[(String, Node)], Error> {
        match self {
            Node::Map(m) => Ok(m),
            other => Err(err(
                key,
                format!("expected a mapping, found {}", other.kind()),
            )),
        }
    }

    pub(super) fn seq(&self, key: &str) -> Result<&[Node], Error> {
        match self {
            Node::Seq(s) => Ok(s),
            other => Err(err(key, format!("expected a list, found {}", other.kind()))),
        }
    }

    pub(super) fn string(&self, key: &str) -> Result<String, Error> {
        match self {
            Node::Scalar { value, .. } => Ok(value.clone()),
            other => Err(err(
                key,
                format!("expected a string, found {}", other.kind()),
            )),
        }
    }

    pub(super) fn string_or_empty(&self, key: &str) -> Result<String, Error> {
        if self.is_null() {
            Ok(String::new())
        } else {
            self.string(key)
        }
    }

    /// go-yaml v2's booleans (YAML 1.1), plain scalars only.
    pub(super) fn boolean(&self, key: &str) -> Result<bool, Error> {
        if let Node::Scalar { value, plain: true } = self {
            match value.as_str() {
                "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "y" | "Y" | "on" | "On"
                | "ON" => {
                    return Ok(true);
                }
                "false" | "False" | "FALSE" | "no" | "No" | "NO" | "n" | "N" | "off" | "Off"
                | "OFF" => return Ok(false),
                _ => {}
            }
        }
        Err(err(key, "expected true or false"))
    }

    pub(super) fn int(&self, key: &str) -> Result<i64, Error> {
        if let Node::Scalar { value, plain: true } = self
            && let Ok(v) = value.replace('_', "").parse::<i64>()
        {
            return Ok(v);
        }
        Err(err(key, "expected an integer"))
    }
}

/// Most nesting the schema needs is 4; anything far deeper is not a web
/// config and is refused before it costs stack or memory.
const MAX_DEPTH: usize = 32;
/// Most nodes (including aliased copies) a web config may expand to.
const MAX_NODES: usize = 100_000;
/// Most bytes of keys and strings it may expand to, aliased copies
/// included: no more than the largest file holds, so only aliases can
/// reach it (a 300 KB string aliased 1,000 times would be 300 MB).
const MAX_BYTES: usize = MAX_FILE_BYTES as usize;

/// A collection being read, with its anchor; a mapping with the key that
/// waits for its value.
enum Frame {
    Seq(Vec<Node>, usize),
    Map(Vec<(String, Node)>, Option<String>, usize),
}

/// What a tree holds, counted as it is read: the caps are checked before
/// an alias is copied, so a copy past them is never made.
#[derive(Clone, Copy, Default)]
struct Size {
    nodes: usize,
    bytes: usize,
}

impl Size {
    fn of(n: &Node) -> Size {
        match n {
            Node::Scalar { value, .. } => Size {
                nodes: 1,
                bytes: value.len(),
            },
            Node::Seq(v) => v.iter().map(Size::of).fold(Size::one(0), Size::plus),
            Node::Map(m) => m
                .iter()
                .map(|(k, v)| Size::one(k.len()).plus(Size::of(v)))
                .fold(Size::one(0), Size::plus),
        }
    }

    fn one(bytes: usize) -> Size {
        Size { nodes: 1, bytes }
    }

    fn plus(self, o: Size) -> Size {
        Size {
            nodes: self.nodes.saturating_add(o.nodes),
            bytes: self.bytes.saturating_add(o.bytes),
        }
    }

    /// Adds `more`, or refuses what would pass a cap.
    fn charge(&mut self, more: Size, line: usize) -> Result<(), Error> {
        let total = self.plus(more);
        if total.nodes > MAX_NODES {
            return Err(err("", "invalid YAML: too many nodes (aliases expanding?)"));
        }
        if total.bytes > MAX_BYTES {
            return Err(err(
                "",
                format!(
                    "invalid YAML: expands past {MAX_BYTES} bytes of strings at line {line} \
                     (aliases expanding?)"
                ),
            ));
        }
        *self = total;
        Ok(())
    }
}

/// Parses the first YAML document into a tree; `None` for an empty stream.
pub(super) fn tree(text: &str) -> Result<Option<Node>, Error> {
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: Vec<(usize, Node, Size)> = Vec::new();
    let mut docs = 0;
    let mut size = Size::default();
    let mut root: Option<Node> = None;
    for ev in Parser::new_from_str(text) {
        let (ev, span) = ev.map_err(|e| err("", format!("invalid YAML: {e}")))?;
        let line = span.start.line();
        let done: Option<(Node, usize)> = match ev {
            Event::DocumentStart(_) => {
                docs += 1;
                if docs > 1 {
                    return Err(err(
                        "",
                        format!(
                            "invalid YAML: a second document at line {line} (the file holds one)"
                        ),
                    ));
                }
                None
            }
            Event::Scalar(v, style, anchor, _tag) => {
                size.charge(Size::one(v.len()), line)?;
                let plain = style == ScalarStyle::Plain;
                let value = v.into_owned();
                Some((Node::Scalar { value, plain }, anchor))
            }
            Event::SequenceStart(anchor, _) => {
                size.charge(Size::one(0), line)?;
                stack.push(Frame::Seq(Vec::new(), anchor));
                None
            }
            Event::MappingStart(anchor, _) => {
                size.charge(Size::one(0), line)?;
                stack.push(Frame::Map(Vec::new(), None, anchor));
                None
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq(v, a)) => Some((Node::Seq(v), a)),
                _ => return Err(err("", "invalid YAML: unbalanced sequence")),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map(v, None, a)) => {
                    if let Some(k) = set_twice(&v) {
                        return Err(err(&path(&stack, k), "set twice"));
                    }
                    Some((Node::Map(v), a))
                }
                _ => return Err(err("", "invalid YAML: unbalanced mapping")),
            },
            Event::Alias(id) => match anchors.iter().rev().find(|(a, _, _)| *a == id) {
                Some((_, n, s)) => {
                    size.charge(*s, line)?;
                    Some((n.clone(), 0))
                }
                None => {
                    return Err(err(
                        "",
                        format!("invalid YAML: unknown alias at line {line}"),
                    ));
                }
            },
            _ => None,
        };
        if stack.len() > MAX_DEPTH {
            return Err(err(
                "",
                format!("invalid YAML: nested deeper than {MAX_DEPTH} at line {line}"),
            ));
        }
        let Some((node, anchor)) = done else { continue };
        if anchor != 0 {
            anchors.push((anchor, node.clone(), Size::of(&node)));
        }
        place(&mut stack, &mut root, node, line)?;
    }
    Ok(root.filter(|n| !n.is_null()))
}

/// The first key of `m` (by where it repeats) that is set more than once.
/// Sorted, not compared pairwise: a mapping of 50,000 keys costs
/// milliseconds, not a billion comparisons.
fn set_twice(m: &[(String, Node)]) -> Option<&str> {
    let mut order: Vec<usize> = (0..m.len()).collect();
    order.sort_by(|&a, &b| m[a].0.cmp(&m[b].0).then(a.cmp(&b)));
    let again = order.windows(2).filter(|w| m[w[0]].0 == m[w[1]].0);
    again.map(|w| w[1]).min().map(|i| m[i].0.as_str())
}

/// The dotted path of `key` in the innermost mapping being read, as the
/// schema's errors name keys: `http_server_config.headers.X-Frame-Options`,
/// `tls_server_config.cipher_suites[0]`.
fn path(stack: &[Frame], key: &str) -> String {
    let mut p = String::new();
    for f in stack {
        match f {
            Frame::Map(_, Some(k), _) => {
                if !p.is_empty() {
                    p.push('.');
                }
                p.push_str(k);
            }
            Frame::Seq(v, _) => p.push_str(&format!("[{}]", v.len())),
            Frame::Map(_, None, _) => {}
        }
    }
    if !p.is_empty() {
        p.push('.');
    }
    p.push_str(key);
    p
}

/// Puts a finished node where it belongs: the root, the next item of a
/// sequence, a mapping's key or its value.
fn place(
    stack: &mut [Frame],
    root: &mut Option<Node>,
    node: Node,
    line: usize,
) -> Result<(), Error> {
    match stack.last_mut() {
        None => *root = Some(node),
        Some(Frame::Seq(v, _)) => v.push(node),
        Some(Frame::Map(m, pending, _)) => match pending.take() {
            Some(k) => m.push((k, node)),
            None => match node {
                Node::Scalar { value, .. } => *pending = Some(value),
                other => {
                    return Err(err(
                        "",
                        format!(
                            "invalid YAML: {} as a mapping key at line {line}",
                            other.kind()
                        ),
                    ));
                }
            },
        },
    }
    Ok(())
}
