//! Options declared once: every connector option and every engine setting
//! is an [`OptionDecl`] (name, type, default, one-line doc, allowed values)
//! in an [`OptionSet`]; values are read through [`Options`], whose keys are
//! case-insensitive as in Spark.
//!
//! The graph builder checks every option of every source, sink, table and
//! flow against its set at `dry-run` ([`OptionSet::unknown`] with a
//! did-you-mean, then the connector's own typed parse), so a typo such as
//! `maxFilesPerTriger` fails before any data moves. The option tables in
//! `docs/connectors.md` are rendered from the sets ([`OptionSet::markdown`]).
//!
//! ```
//! use pipelines_core::options::{OptionDecl, OptionKind, OptionSet, Options};
//! static SET: OptionSet = OptionSet::new(&[
//!     OptionDecl::new("numRows", OptionKind::Count, "rows printed per batch").default_value("20"),
//! ]);
//! let given = [("NUMROWS".to_string(), "5".to_string())].into_iter().collect();
//! let opts = Options::for_sink(&given, "console_out");
//! assert_eq!(opts.count("numRows").unwrap(), Some(5));
//! let unknown = SET.unknown(["numRowz"]);
//! assert_eq!(unknown[0].suggestion, Some("numRows"));
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::error::{Error, Result};

/// The type of an option's value, which decides how it is parsed and how
/// its documentation reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionKind {
    /// `true` or `false` (any case).
    Bool,
    /// A whole number, 0 or more.
    Count,
    /// A whole number, 1 or more.
    Positive,
    /// A size in bytes, with an optional `k`/`m`/`g`/`t` suffix (`10m`).
    Bytes,
    /// One ASCII character; `\t` is a tab.
    Char,
    /// A duration such as `5 seconds` or `5s`.
    Duration,
    /// Free text (a path, a name, a list written as one string).
    Text,
    /// One of the listed values (any case).
    Choice(&'static [&'static str]),
}

impl OptionKind {
    /// The kind as the docs name it.
    pub fn describe(&self) -> String {
        match self {
            OptionKind::Bool => "boolean".into(),
            OptionKind::Count => "whole number ≥ 0".into(),
            OptionKind::Positive => "whole number ≥ 1".into(),
            OptionKind::Bytes => "size (`10m`)".into(),
            OptionKind::Char => "one character".into(),
            OptionKind::Duration => "duration".into(),
            OptionKind::Text => "string".into(),
            OptionKind::Choice(values) => values
                .iter()
                .map(|v| format!("`{v}`"))
                .collect::<Vec<_>>()
                .join(" \\| "),
        }
    }
}

/// One declared option.
#[derive(Clone, Copy, Debug)]
pub struct OptionDecl {
    /// The option's name as Spark spells it (`maxFilesPerTrigger`).
    pub name: &'static str,
    /// Other accepted names (`delimiter` for `sep`).
    pub aliases: &'static [&'static str],
    /// How the value is parsed.
    pub kind: OptionKind,
    /// The value used when the option is not set, as text.
    pub default: Option<&'static str>,
    /// True when the option must be set.
    pub required: bool,
    /// One line saying what the option does.
    pub doc: &'static str,
}

impl OptionDecl {
    /// An optional option without a default.
    pub const fn new(name: &'static str, kind: OptionKind, doc: &'static str) -> Self {
        OptionDecl {
            name,
            aliases: &[],
            kind,
            default: None,
            required: false,
            doc,
        }
    }

    /// Sets the default (shown in the docs).
    pub const fn default_value(mut self, default: &'static str) -> Self {
        self.default = Some(default);
        self
    }

    /// Marks the option as required.
    pub const fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// Sets other accepted names.
    pub const fn aliases(mut self, aliases: &'static [&'static str]) -> Self {
        self.aliases = aliases;
        self
    }

    /// True when `key` is this option's name or an alias (any case).
    pub fn matches(&self, key: &str) -> bool {
        self.name.eq_ignore_ascii_case(key)
            || self.aliases.iter().any(|a| a.eq_ignore_ascii_case(key))
    }
}

/// A family of options passed through without being declared one by one,
/// such as `kafka.*` (handed to librdkafka).
#[derive(Clone, Copy, Debug)]
pub struct PassThrough {
    /// The key prefix, e.g. `kafka.`.
    pub prefix: &'static str,
    /// What happens to such options.
    pub doc: &'static str,
}

/// Every option one connector (or one part of the engine) reads.
#[derive(Clone, Copy, Debug)]
pub struct OptionSet {
    /// The declared options, in documentation order.
    pub options: &'static [OptionDecl],
    /// Prefixes whose keys are accepted without a declaration.
    pub pass_through: &'static [PassThrough],
}

/// An option key that no declaration matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownOption<'k> {
    /// The key as written.
    pub key: &'k str,
    /// The closest declared name, when the key looks like a typo of it.
    pub suggestion: Option<&'static str>,
}

impl OptionSet {
    /// A set of declared options without pass-through families.
    pub const fn new(options: &'static [OptionDecl]) -> Self {
        OptionSet {
            options,
            pass_through: &[],
        }
    }

    /// Adds pass-through families.
    pub const fn with_pass_through(mut self, pass_through: &'static [PassThrough]) -> Self {
        self.pass_through = pass_through;
        self
    }

    /// The declaration of `key` (by name or alias, any case).
    pub fn find(&self, key: &str) -> Option<&'static OptionDecl> {
        self.options.iter().find(|d| d.matches(key))
    }

    /// True when `key` is declared or belongs to a pass-through family.
    pub fn knows(&self, key: &str) -> bool {
        self.find(key).is_some()
            || self.pass_through.iter().any(|p| {
                key.len() >= p.prefix.len() && key[..p.prefix.len()].eq_ignore_ascii_case(p.prefix)
            })
    }

    /// The declared names, in documentation order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.options.iter().map(|d| d.name)
    }

    /// The keys among `keys` that no declaration of any of `sets` matches,
    /// each with the closest declared name as a suggestion.
    pub fn unknown_in<'k>(
        sets: &[&OptionSet],
        keys: impl IntoIterator<Item = &'k str>,
    ) -> Vec<UnknownOption<'k>> {
        keys.into_iter()
            .filter(|k| !sets.iter().any(|s| s.knows(k)))
            .map(|key| UnknownOption {
                key,
                suggestion: crate::suggest::closest(
                    key,
                    sets.iter().flat_map(|s| s.names()).collect::<Vec<_>>(),
                ),
            })
            .collect()
    }

    /// The keys among `keys` that this set does not know.
    pub fn unknown<'k>(&self, keys: impl IntoIterator<Item = &'k str>) -> Vec<UnknownOption<'k>> {
        OptionSet::unknown_in(&[self], keys)
    }

    /// The required options missing from `options` (keys compared in any case).
    pub fn missing(&self, options: &BTreeMap<String, String>) -> Vec<&'static str> {
        self.options
            .iter()
            .filter(|d| d.required && !options.keys().any(|k| d.matches(k)))
            .map(|d| d.name)
            .collect()
    }

    /// The set as a Markdown table: option, type, default, description;
    /// pass-through families after it.
    pub fn markdown(&self) -> String {
        let mut out =
            String::from("| option | type | default | description |\n|---|---|---|---|\n");
        for d in self.options {
            let mut name = format!("`{}`", d.name);
            for a in d.aliases {
                let _ = write!(name, " (or `{a}`)");
            }
            let default = match (d.default, d.required) {
                (_, true) => "required".to_string(),
                (Some(v), _) => format!("`{v}`"),
                (None, _) => String::new(),
            };
            let _ = writeln!(
                out,
                "| {name} | {} | {default} | {} |",
                d.kind.describe(),
                d.doc.replace('|', "\\|")
            );
        }
        for p in self.pass_through {
            let _ = writeln!(out, "| `{}*` | string | | {} |", p.prefix, p.doc);
        }
        out
    }
}

/// Who reads a set of options: decides how a bad value is reported, as a
/// flow's source option (`.option("key", "example")`) or as a sink's or
/// table's (`set `key` to ...`).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Reader {
    /// A source of the named flow.
    Flow(String),
    /// The named sink or table.
    Sink(String),
}

/// Option values with case-insensitive keys (Spark's option names), the
/// spec's overrides already applied. The typed getters parse a value by its
/// kind and report a bad value with the option's name, what it must be, and
/// how to write it.
#[derive(Clone, Debug)]
pub struct Options {
    map: BTreeMap<String, String>,
    reader: Reader,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            map: BTreeMap::new(),
            reader: Reader::Flow(String::new()),
        }
    }
}

impl Options {
    /// A flow's source options: `base` overridden by `overrides`, keys
    /// compared case-insensitively.
    pub fn merged(
        base: &BTreeMap<String, String>,
        overrides: &BTreeMap<String, String>,
        flow: &str,
    ) -> Self {
        let mut map = BTreeMap::new();
        for (k, v) in base.iter().chain(overrides.iter()) {
            map.insert(k.to_ascii_lowercase(), v.clone());
        }
        Options {
            map,
            reader: Reader::Flow(flow.to_string()),
        }
    }

    /// A sink's or table's options.
    pub fn for_sink(options: &BTreeMap<String, String>, sink: &str) -> Self {
        Options {
            map: options
                .iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
                .collect(),
            reader: Reader::Sink(sink.to_string()),
        }
    }

    /// The flow (source options) or sink (sink options) these options belong to.
    pub fn reader_name(&self) -> &str {
        match &self.reader {
            Reader::Flow(n) | Reader::Sink(n) => n,
        }
    }

    /// Every option, keys lower-cased.
    pub fn entries(&self) -> &BTreeMap<String, String> {
        &self.map
    }

    /// An option by key (case-insensitive).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.map.get(&key.to_ascii_lowercase()).map(String::as_str)
    }

    /// The first of `keys` that is set (an option and its aliases).
    pub fn get_any(&self, keys: &[&str]) -> Option<&str> {
        keys.iter().find_map(|k| self.get(k))
    }

    /// The error for a bad value of `key`: `expected` is what it must be
    /// (`a positive whole number`), `example` a valid value.
    pub fn invalid(&self, key: &str, value: &str, expected: &str, example: &str) -> Error {
        match &self.reader {
            Reader::Flow(flow) => Error::runtime_with_help(
                format!("flow `{flow}`: option `{key}` must be {expected}, got `{value}`"),
                format!(".option(\"{key}\", \"{example}\")"),
            ),
            Reader::Sink(sink) => Error::runtime_with_help(
                format!("sink `{sink}`: option `{key}` is `{value}`, not {expected}"),
                format!("set `{key}` to {expected}, e.g. `{example}`"),
            ),
        }
    }

    /// A boolean option (`true`/`false`, case-insensitive).
    pub fn bool(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(match &self.reader {
                    Reader::Flow(_) => self.invalid(key, v, "true or false", "true"),
                    Reader::Sink(sink) => Error::runtime_with_help(
                        format!("sink `{sink}`: option `{key}` is `{v}`, not `true` or `false`"),
                        format!("set `{key}` to `true` or `false`"),
                    ),
                }),
            },
        }
    }

    /// A positive whole-number option.
    pub fn positive(&self, key: &str) -> Result<Option<u64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.trim().parse::<u64>() {
                Ok(n) if n > 0 => Ok(Some(n)),
                _ => Err(self.invalid(key, v, "a positive whole number", "10")),
            },
        }
    }

    /// A whole-number option, 0 or more.
    pub fn count(&self, key: &str) -> Result<Option<u64>> {
        self.count_with_help(key, None)
    }

    /// [`count`](Self::count) with a help text for a bad value of a sink's
    /// option (`set `numRows` to ...`).
    pub fn count_with_help(&self, key: &str, fix: Option<&str>) -> Result<Option<u64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.trim().parse::<u64>() {
                Ok(n) => Ok(Some(n)),
                Err(_) => Err(match (&self.reader, fix) {
                    (Reader::Sink(sink), Some(fix)) => Error::runtime_with_help(
                        format!("sink `{sink}`: option `{key}` is `{v}`, not a whole number"),
                        fix.to_string(),
                    ),
                    _ => self.invalid(key, v, "a whole number", "10"),
                }),
            },
        }
    }

    /// A byte-size option: a number of bytes, or with a suffix `k`, `m`, `g`
    /// (`kb`, `mb`, `gb`).
    pub fn bytes(&self, key: &str) -> Result<Option<u64>> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let t = v.trim().to_ascii_lowercase();
        let t = t.strip_suffix('b').unwrap_or(&t);
        let (num, mult) = match t.chars().last() {
            Some('k') => (&t[..t.len() - 1], 1u64 << 10),
            Some('m') => (&t[..t.len() - 1], 1 << 20),
            Some('g') => (&t[..t.len() - 1], 1 << 30),
            Some('t') => (&t[..t.len() - 1], 1 << 40),
            _ => (t, 1),
        };
        match num.trim().parse::<u64>() {
            Ok(n) if n > 0 => Ok(Some(n.saturating_mul(mult))),
            _ => Err(self.invalid(key, v, "a positive size in bytes (e.g. 10m)", "10m")),
        }
    }

    /// A single-character option (`sep`, `quote`, `escape`); `\t` is a tab
    /// and `\\` a backslash.
    pub fn byte_char(&self, key: &str) -> Result<Option<u8>> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        parse_char(v)
            .map(Some)
            .ok_or_else(|| self.invalid(key, v, "a single ASCII character", ","))
    }

    /// A value that must be one of `allowed` (any case); returns it lower-cased.
    pub fn choice(&self, key: &str, allowed: &[&str]) -> Result<Option<String>> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let lower = v.trim().to_ascii_lowercase();
        if allowed.iter().any(|a| a.eq_ignore_ascii_case(&lower)) {
            Ok(Some(lower))
        } else {
            let list = allowed
                .iter()
                .map(|a| format!("`{a}`"))
                .collect::<Vec<_>>()
                .join(", ");
            Err(self.invalid(key, v, &format!("one of {list}"), allowed[0]))
        }
    }
}

/// A one-character option value: one ASCII character, `\t` (tab) or `\\`
/// (backslash). `None` for anything else.
pub fn parse_char(value: &str) -> Option<u8> {
    let c = match value {
        "\\t" => "\t",
        "\\\\" => "\\",
        other => other,
    };
    (c.len() == 1 && c.is_ascii()).then(|| c.as_bytes()[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    static SET: OptionSet = OptionSet::new(&[
        OptionDecl::new(
            "maxFilesPerTrigger",
            OptionKind::Positive,
            "files per batch",
        ),
        OptionDecl::new("sep", OptionKind::Char, "separator")
            .aliases(&["delimiter"])
            .default_value(","),
        OptionDecl::new("path", OptionKind::Text, "where").required(),
    ])
    .with_pass_through(&[PassThrough {
        prefix: "kafka.",
        doc: "passed on",
    }]);

    #[test]
    fn unknown_keys_get_a_suggestion() {
        let u = SET.unknown([
            "maxFilesPerTriger",
            "MAXFILESPERTRIGGER",
            "delimiter",
            "kafka.acks",
            "zzz",
        ]);
        assert_eq!(
            u,
            vec![
                UnknownOption {
                    key: "maxFilesPerTriger",
                    suggestion: Some("maxFilesPerTrigger")
                },
                UnknownOption {
                    key: "zzz",
                    suggestion: None
                },
            ]
        );
    }

    #[test]
    fn required_options_are_found_in_any_case() {
        let given: BTreeMap<String, String> = [("PATH".to_string(), "x".to_string())].into();
        assert!(SET.missing(&given).is_empty());
        assert_eq!(SET.missing(&BTreeMap::new()), vec!["path"]);
    }

    #[test]
    fn separators_parse_whole_values() {
        assert_eq!(parse_char("\\t"), Some(b'\t'));
        assert_eq!(parse_char(";"), Some(b';'));
        assert_eq!(parse_char("\\\\"), Some(b'\\'));
        assert_eq!(parse_char("ab"), None);
        assert_eq!(parse_char("é"), None);
    }

    #[test]
    fn bad_values_are_reported_per_reader() {
        let given: BTreeMap<String, String> = [("header".to_string(), "yes".to_string())].into();
        let e = Options::for_sink(&given, "out")
            .bool("header", true)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "sink `out`: option `header` is `yes`, not `true` or `false`\n  help: set `header` to `true` or `false`"
        );
        let e = Options::merged(&given, &BTreeMap::new(), "f")
            .bool("header", true)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "flow `f`: option `header` must be true or false, got `yes`\n  help: .option(\"header\", \"true\")"
        );
    }

    #[test]
    fn markdown_lists_every_option() {
        let md = SET.markdown();
        assert!(
            md.contains("| `sep` (or `delimiter`) | one character | `,` | separator |"),
            "{md}"
        );
        assert!(
            md.contains("| `path` | string | required | where |"),
            "{md}"
        );
        assert!(md.contains("| `kafka.*` | string | | passed on |"), "{md}");
    }
}
