//! Validation of the YAML tree into a [`PipelineSpec`].

use std::collections::BTreeMap;
use std::path::Path;

use super::trigger::{check_real_time_interval, TriggerKind};
use super::yaml::{self, Node, ScalarKind, Value};
use super::{
    join_key, ExpectationSpec, FlowSpec, LibrarySpec, PipelineSpec, SinkSpec, SpecError,
    SpecErrorKind, TableSpec, Trigger, TRIGGER_CONF_KEY, TRIGGER_INTERVAL_CONF_KEY,
};
use crate::duration::parse_interval;
use crate::error::PlanError;
use crate::expectations::ExpectationAction;

const TOP_FIELDS: &[&str] = &[
    "name",
    "storage",
    "configuration",
    "tables",
    "sinks",
    "flows",
    "libraries",
    "catalog",
    "database",
    "schema",
];
const TABLE_FIELDS: &[&str] = &[
    "format",
    "path",
    "options",
    "partition_cols",
    "comment",
    "schema",
    "expectations",
    "quarantine",
];
const EXPECTATION_FIELDS: &[&str] = &["name", "condition", "action"];
const SINK_FIELDS: &[&str] = &["format", "options", "merge_keys", "comment"];
const FLOW_FIELDS: &[&str] = &["trigger", "options"];
const TRIGGER_KINDS: &[&str] = &[
    "default",
    "available_now",
    "once",
    "processing_time",
    "real_time",
];
const TRIGGER_HELP: &str = "write one of `trigger: default`, `trigger: available_now`, \
    `trigger: once`, `trigger: { processing_time: 1 minute }` or \
    `trigger: { real_time: { checkpoint_interval: 5 minutes } }`";

/// One map entry: the key as text, the key node and the value node.
type Entry<'n> = (String, &'n Node, &'n Node);

type R<T> = Result<T, SpecError>;

struct Ctx<'a> {
    file: &'a Path,
    lines: BTreeMap<String, usize>,
}

/// The closest of `candidates` to `word`, when close enough to suggest
/// ([`crate::suggest::closest`]).
pub(crate) fn did_you_mean<'c>(word: &str, candidates: &[&'c str]) -> Option<&'c str> {
    crate::suggest::closest(word, candidates.iter().copied())
}

fn backticked(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Ctx<'_> {
    fn err(&self, kind: SpecErrorKind, line: usize, message: impl Into<String>) -> SpecError {
        SpecError::new(kind, message).at(self.file, Some(line))
    }

    fn invalid(&self, line: usize, message: impl Into<String>) -> SpecError {
        self.err(SpecErrorKind::Invalid, line, message)
    }

    fn wrong_type(&self, node: &Node, path: &str, expected: &str) -> SpecError {
        self.invalid(
            node.line,
            format!("`{path}` must be {expected}, found {}", node.describe()),
        )
    }

    /// The entries of a map (empty for null), recording each key's line.
    fn entries<'n>(
        &mut self,
        node: &'n Node,
        path: &str,
        expected: &str,
        help: &str,
    ) -> R<Vec<Entry<'n>>> {
        let map = match &node.value {
            Value::Map(map) => map,
            _ if node.is_null() => return Ok(Vec::new()),
            _ => return Err(self.wrong_type(node, path, expected).with_help(help)),
        };
        let mut out: Vec<Entry<'n>> = Vec::with_capacity(map.len());
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for (k, v) in map {
            let key = match &k.value {
                Value::Scalar { text, kind } if *kind != ScalarKind::Null => text.clone(),
                _ => {
                    let within = if path.is_empty() {
                        String::new()
                    } else {
                        format!(" in `{path}`")
                    };
                    return Err(self.invalid(
                        k.line,
                        format!("keys{within} must be names, found {}", k.describe()),
                    ));
                }
            };
            if let Some(first) = seen.get(&key) {
                return Err(self
                    .invalid(
                        k.line,
                        format!(
                            "duplicate key `{}` (first written at line {first})",
                            join_key(path, &key)
                        ),
                    )
                    .with_help("remove or rename one of them"));
            }
            seen.insert(key.clone(), k.line);
            self.lines.insert(join_key(path, &key), k.line);
            out.push((key, k, v));
        }
        Ok(out)
    }

    /// Rejects keys outside `allowed`, suggesting the closest one.
    fn check_fields(&self, entries: &[Entry<'_>], allowed: &[&str], within: &str) -> R<()> {
        for (key, k, _) in entries {
            if allowed.contains(&key.as_str()) {
                continue;
            }
            let err = self.invalid(
                k.line,
                format!(
                    "unknown field `{key}`{within}, expected {}{}",
                    if allowed.len() == 1 { "" } else { "one of " },
                    backticked(allowed)
                ),
            );
            let help = if key == "trigger" && !allowed.contains(&"trigger") {
                Some("triggers are set per flow: `flows: { <flow>: { trigger: ... } }`".to_string())
            } else {
                did_you_mean(key, allowed).map(|s| format!("did you mean `{s}`?"))
            };
            return Err(match help {
                Some(h) => err.with_help(h),
                None => err,
            });
        }
        Ok(())
    }

    /// A scalar written as text (strings, numbers, booleans).
    fn string(&self, node: &Node, path: &str) -> R<String> {
        match &node.value {
            Value::Scalar { kind, .. } if *kind == ScalarKind::Null => {
                Err(self.invalid(node.line, format!("`{path}` has no value")))
            }
            Value::Scalar { text, .. } => Ok(text.clone()),
            _ => Err(self.wrong_type(node, path, "a string")),
        }
    }

    /// An optional string: null means absent.
    fn opt_string(&self, node: &Node, path: &str) -> R<Option<String>> {
        if node.is_null() {
            Ok(None)
        } else {
            self.string(node, path).map(Some)
        }
    }

    /// An option or configuration value: a string, number or boolean, as text.
    fn option_value(&self, node: &Node, path: &str) -> R<String> {
        match &node.value {
            Value::Scalar { kind, .. } if *kind == ScalarKind::Null => Err(self
                .invalid(node.line, format!("`{path}` has no value"))
                .with_help("write a value (quoted if it is empty or starts with a special character), or remove the key")),
            Value::Scalar { text, kind } if *kind == ScalarKind::Bool => {
                Ok(text.to_ascii_lowercase())
            }
            Value::Scalar { text, .. } => Ok(text.clone()),
            _ => Err(self
                .wrong_type(node, path, "a string, number or boolean")
                .with_help("option values are single strings; write a list as one string, e.g. \"a,b\"")),
        }
    }

    /// A map of option names to values.
    fn options(&mut self, node: &Node, path: &str) -> R<BTreeMap<String, String>> {
        let entries = self.entries(
            node,
            path,
            "a map of names to values",
            "write one `key: value` per line below it, or `{ key: value, ... }`",
        )?;
        let mut out = BTreeMap::new();
        for (key, _, value) in entries {
            let v = self.option_value(value, &join_key(path, &key))?;
            out.insert(key, v);
        }
        Ok(out)
    }

    /// A list of names (columns).
    fn string_list(&self, node: &Node, path: &str, what: &str) -> R<Vec<String>> {
        match &node.value {
            Value::Seq(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| match &item.value {
                    Value::Scalar { text, kind } if *kind != ScalarKind::Null => Ok(text.clone()),
                    _ => Err(self.wrong_type(item, &format!("{path}[{i}]"), what)),
                })
                .collect(),
            _ if node.is_null() => Ok(Vec::new()),
            _ => {
                let example = match &node.value {
                    Value::Scalar { text, .. } => text.clone(),
                    _ => "a, b".to_string(),
                };
                let leaf = path.rsplit('.').next().unwrap_or(path);
                Err(self
                    .wrong_type(node, path, &format!("a list of {what}s"))
                    .with_help(format!("write `{leaf}: [{example}]`")))
            }
        }
    }

    fn table(&mut self, name: &str, line: usize, node: &Node) -> R<TableSpec> {
        let path = join_key("tables", name);
        let entries = self.entries(
            node,
            &path,
            "a map of table settings",
            "write e.g. `my_table: { format: delta }`",
        )?;
        self.check_fields(&entries, TABLE_FIELDS, &format!(" in table `{name}`"))?;
        let mut t = TableSpec {
            line: Some(line),
            ..TableSpec::default()
        };
        for (key, _, value) in &entries {
            let p = join_key(&path, key);
            match key.as_str() {
                "format" => t.format = self.opt_string(value, &p)?,
                "path" => t.path = self.opt_string(value, &p)?,
                "options" => t.options = self.options(value, &p)?,
                "partition_cols" => {
                    t.partition_cols = self.string_list(value, &p, "column name")?
                }
                "comment" => t.comment = self.opt_string(value, &p)?,
                "schema" => t.schema = self.opt_string(value, &p)?,
                "expectations" => t.expectations = self.expectations(value, &p)?,
                "quarantine" => t.quarantine = self.opt_string(value, &p)?,
                _ => {}
            }
        }
        Ok(t)
    }

    /// A table's `expectations:`: a list of `{ name, condition, action }`.
    fn expectations(&mut self, node: &Node, path: &str) -> R<Vec<ExpectationSpec>> {
        const EXAMPLE: &str =
            "write `expectations: [{ name: positive, condition: \"amount > 0\", action: drop }]`";
        let items = match &node.value {
            Value::Seq(items) => items,
            _ if node.is_null() => return Ok(Vec::new()),
            _ => {
                return Err(self
                    .wrong_type(node, path, "a list of expectations")
                    .with_help(EXAMPLE))
            }
        };
        let mut out: Vec<ExpectationSpec> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let p = format!("{path}[{i}]");
            let entries = self.entries(item, &p, "a map with `name` and `condition`", EXAMPLE)?;
            self.check_fields(&entries, EXPECTATION_FIELDS, &format!(" in `{p}`"))?;
            let (mut name, mut condition, mut action) = (None, None, None);
            for (key, _, value) in &entries {
                let vp = join_key(&p, key);
                match key.as_str() {
                    "name" => name = Some(self.string(value, &vp)?),
                    "condition" => condition = Some(self.string(value, &vp)?),
                    "action" => {
                        let text = self.string(value, &vp)?;
                        let parsed = ExpectationAction::parse(&text).ok_or_else(|| {
                            let names: Vec<&str> =
                                ExpectationAction::ALL.iter().map(|a| a.name()).collect();
                            let err = self.invalid(
                                value.line,
                                format!(
                                    "`{vp}` is `{text}`, expected one of {}",
                                    backticked(&names)
                                ),
                            );
                            match did_you_mean(&text, &names) {
                                Some(s) => err.with_help(format!("did you mean `{s}`?")),
                                None => err.with_help(
                                    "warn keeps failing rows, drop removes them, fail stops the flow",
                                ),
                            }
                        })?;
                        action = Some(parsed);
                    }
                    _ => {}
                }
            }
            let missing = |field: &str| {
                self.invalid(item.line, format!("missing field `{field}` in `{p}`"))
                    .with_help(EXAMPLE)
            };
            let name = name.ok_or_else(|| missing("name"))?;
            let condition = condition.ok_or_else(|| missing("condition"))?;
            if let Some(first) = out.iter().find(|e| e.name == name) {
                return Err(self
                    .invalid(
                        item.line,
                        format!(
                            "expectation `{name}` is listed twice in `{path}` (first at line {})",
                            first.line
                        ),
                    )
                    .with_help("give each expectation of a table its own name"));
            }
            out.push(ExpectationSpec {
                name,
                condition,
                action: action.unwrap_or(ExpectationAction::Warn),
                line: item.line,
            });
        }
        Ok(out)
    }

    fn sink(&mut self, name: &str, line: usize, node: &Node) -> R<SinkSpec> {
        let path = join_key("sinks", name);
        let entries = self.entries(
            node,
            &path,
            "a map of sink settings",
            "write e.g. `my_sink: { format: kafka, options: { topic: events } }`",
        )?;
        self.check_fields(&entries, SINK_FIELDS, &format!(" in sink `{name}`"))?;
        let mut s = SinkSpec {
            line: Some(line),
            ..SinkSpec::default()
        };
        let mut format = None;
        for (key, _, value) in &entries {
            let p = join_key(&path, key);
            match key.as_str() {
                "format" => {
                    format = Some(self.string(value, &p).map_err(|e| {
                        e.with_help("write the sink's format, e.g. `format: kafka`")
                    })?)
                }
                "options" => s.options = self.options(value, &p)?,
                "merge_keys" => s.merge_keys = self.string_list(value, &p, "column name")?,
                "comment" => s.comment = self.opt_string(value, &p)?,
                _ => {}
            }
        }
        s.format = format.ok_or_else(|| {
            self.invalid(line, format!("missing field `format` in sink `{name}`"))
                .with_help("add the sink's format, e.g. `format: kafka`")
        })?;
        if s.format.trim().is_empty() {
            return Err(self
                .invalid(line, format!("`{path}.format` must not be empty"))
                .with_help("write the sink's format, e.g. `format: kafka`"));
        }
        Ok(s)
    }

    fn interval(&self, node: &Node, path: &str, flow: &str) -> R<(std::time::Duration, String)> {
        let text = self.string(node, path)?;
        let d = parse_interval(&text).map_err(|e| self.plan_error(node.line, flow, e))?;
        Ok((d, text))
    }

    fn plan_error(&self, line: usize, flow: &str, e: PlanError) -> SpecError {
        let err = self.invalid(line, format!("flow `{flow}`: {}", e.message));
        match e.help {
            Some(h) => err.with_help(h),
            None => err,
        }
    }

    fn trigger(&mut self, flow: &str, node: &Node) -> R<Option<Trigger>> {
        let path = join_key(&join_key("flows", flow), "trigger");
        let bad = |ctx: &Self, line: usize, what: &str| {
            let err = ctx.invalid(line, format!("flow `{flow}`: invalid trigger `{what}`"));
            let help = match did_you_mean(what, TRIGGER_KINDS) {
                Some(s) => format!("did you mean `{s}`? {TRIGGER_HELP}"),
                None => TRIGGER_HELP.to_string(),
            };
            err.with_help(help)
        };
        let needs_interval = |ctx: &Self, line: usize, kind: TriggerKind| {
            let example = match kind {
                TriggerKind::RealTime => "{ real_time: { checkpoint_interval: 5 minutes } }",
                _ => "{ processing_time: 1 minute }",
            };
            ctx.invalid(
                line,
                format!(
                    "flow `{flow}`: the `{}` trigger needs an interval",
                    snake(kind)
                ),
            )
            .with_help(format!("write `trigger: {example}`"))
        };
        match &node.value {
            _ if node.is_null() => Ok(None),
            Value::Scalar { text, .. } => match TriggerKind::parse(text) {
                Some(TriggerKind::Default) => Ok(Some(Trigger::Default)),
                Some(TriggerKind::AvailableNow) => Ok(Some(Trigger::AvailableNow)),
                Some(TriggerKind::Once) => Ok(Some(Trigger::Once)),
                Some(kind) => Err(needs_interval(self, node.line, kind)),
                None if parse_interval(text).is_ok() => Err(bad(self, node.line, text).with_help(
                    format!("for micro-batches on an interval write `trigger: {{ processing_time: {text} }}`"),
                )),
                None => Err(bad(self, node.line, text)),
            },
            Value::Seq(_) => Err(self
                .wrong_type(node, &path, "a trigger name or a one-entry map")
                .with_help(TRIGGER_HELP)),
            Value::Map(_) => {
                let entries = self.entries(node, &path, "a trigger", TRIGGER_HELP)?;
                let [(key, k, value)] = entries.as_slice() else {
                    let found = if entries.is_empty() {
                        "none".to_string()
                    } else {
                        backticked(&entries.iter().map(|e| e.0.as_str()).collect::<Vec<_>>())
                    };
                    return Err(self
                        .invalid(
                            node.line,
                            format!("flow `{flow}`: a trigger must have exactly one kind, found {found}"),
                        )
                        .with_help(TRIGGER_HELP));
                };
                let kind = TriggerKind::parse(key).ok_or_else(|| bad(self, k.line, key))?;
                let vpath = join_key(&path, key);
                match kind {
                    TriggerKind::Default | TriggerKind::AvailableNow | TriggerKind::Once => {
                        let empty = value.is_null()
                            || matches!(&value.value, Value::Map(m) if m.is_empty())
                            || matches!(&value.value, Value::Scalar { text, kind: ScalarKind::Bool } if text.eq_ignore_ascii_case("true"));
                        if !empty {
                            return Err(self
                                .invalid(
                                    value.line,
                                    format!("flow `{flow}`: the `{}` trigger takes no settings", snake(kind)),
                                )
                                .with_help(format!("write `trigger: {}`", snake(kind))));
                        }
                        Ok(Some(match kind {
                            TriggerKind::AvailableNow => Trigger::AvailableNow,
                            TriggerKind::Once => Trigger::Once,
                            _ => Trigger::Default,
                        }))
                    }
                    TriggerKind::ProcessingTime => {
                        let interval_node = match &value.value {
                            Value::Map(_) => {
                                let inner = self.entries(value, &vpath, "an interval", TRIGGER_HELP)?;
                                self.check_fields(&inner, &["interval"], &format!(" in the trigger of flow `{flow}`"))?;
                                match inner.first() {
                                    Some((_, _, v)) => *v,
                                    None => return Err(needs_interval(self, k.line, kind)),
                                }
                            }
                            _ if value.is_null() => return Err(needs_interval(self, k.line, kind)),
                            _ => value,
                        };
                        let (d, _) = self.interval(interval_node, &vpath, flow)?;
                        Ok(Some(Trigger::ProcessingTime(d)))
                    }
                    TriggerKind::RealTime => {
                        let interval_node = match &value.value {
                            Value::Map(_) => {
                                let inner = self.entries(value, &vpath, "real-time settings", TRIGGER_HELP)?;
                                self.check_fields(&inner, &["checkpoint_interval"], &format!(" in the trigger of flow `{flow}`"))?;
                                match inner.first() {
                                    Some((_, _, v)) => *v,
                                    None => return Err(needs_interval(self, k.line, kind)),
                                }
                            }
                            _ if value.is_null() => return Err(needs_interval(self, k.line, kind)),
                            _ => value,
                        };
                        let (d, text) = self.interval(interval_node, &vpath, flow)?;
                        check_real_time_interval(d, &text)
                            .map_err(|e| self.plan_error(interval_node.line, flow, e))?;
                        Ok(Some(Trigger::RealTime {
                            checkpoint_interval: d,
                        }))
                    }
                }
            }
        }
    }

    fn flow(&mut self, name: &str, line: usize, node: &Node) -> R<FlowSpec> {
        let path = join_key("flows", name);
        let entries = self.entries(
            node,
            &path,
            "a map of flow settings",
            "write e.g. `my_flow: { trigger: available_now }`",
        )?;
        self.check_fields(&entries, FLOW_FIELDS, &format!(" in flow `{name}`"))?;
        let mut f = FlowSpec {
            line: Some(line),
            ..FlowSpec::default()
        };
        let mut trigger_line = None;
        for (key, k, value) in &entries {
            match key.as_str() {
                "trigger" => {
                    trigger_line = Some(k.line);
                    f.trigger = self.trigger(name, value)?;
                }
                "options" => f.options = self.options(value, &join_key(&path, key))?,
                _ => {}
            }
        }
        let conf_line = |key: &str| {
            self.lines
                .get(&join_key(&join_key(&path, "options"), key))
                .copied()
        };
        let line_of_conf = conf_line(TRIGGER_CONF_KEY)
            .or_else(|| conf_line(TRIGGER_INTERVAL_CONF_KEY))
            .or_else(|| {
                f.options
                    .keys()
                    .find(|k| k.starts_with("pipelines.trigger."))
                    .and_then(|k| conf_line(k))
            })
            .unwrap_or(line);
        match Trigger::from_conf(&f.options) {
            Err(e) => return Err(self.plan_error(line_of_conf, name, e)),
            Ok(Some(t)) => {
                if f.trigger.is_some() {
                    return Err(self
                        .invalid(
                            trigger_line.unwrap_or(line),
                            format!(
                                "flow `{name}`: the trigger is set twice, by `trigger` and by the `{TRIGGER_CONF_KEY}` options"
                            ),
                        )
                        .with_help("keep one of them"));
                }
                f.trigger = Some(t);
            }
            Ok(None) => {}
        }
        Ok(f)
    }

    fn libraries(&mut self, node: &Node) -> R<Vec<LibrarySpec>> {
        const HELP: &str = "write `libraries: [{ glob: { include: \"transformations/**\" } }]`";
        let items = match &node.value {
            Value::Seq(items) => items,
            _ if node.is_null() => return Ok(Vec::new()),
            _ => {
                return Err(self
                    .wrong_type(node, "libraries", "a list of `glob` entries")
                    .with_help(HELP))
            }
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let path = format!("libraries[{i}]");
            let entries = self.entries(item, &path, "a `glob` entry", HELP)?;
            let within = format!(" in library entry {}", i + 1);
            self.check_fields(&entries, &["glob"], &within)?;
            let Some((_, _, glob)) = entries.first() else {
                return Err(self
                    .invalid(item.line, format!("missing field `glob`{within}"))
                    .with_help(HELP));
            };
            let gpath = join_key(&path, "glob");
            let inner = self.entries(glob, &gpath, "a map with `include`", HELP)?;
            self.check_fields(&inner, &["include"], &within)?;
            let Some((_, _, include)) = inner.first() else {
                return Err(self
                    .invalid(glob.line, format!("missing field `include`{within}"))
                    .with_help(HELP));
            };
            let include_at = include.line;
            let include = self.string(include, &join_key(&gpath, "include"))?;
            if let Err(why) = super::check_library_glob(&include) {
                return Err(self
                    .invalid(include_at, format!("library glob `{include}` {why}"))
                    .with_help("write a file path (`transformations/flows.sql`) or a folder followed by `/**` (`transformations/**`), as Spark does"));
            }
            out.push(LibrarySpec::Glob {
                include,
                line: Some(item.line),
            });
        }
        Ok(out)
    }
}

fn snake(kind: TriggerKind) -> &'static str {
    match kind {
        TriggerKind::Default => "default",
        TriggerKind::ProcessingTime => "processing_time",
        TriggerKind::AvailableNow => "available_now",
        TriggerKind::Once => "once",
        TriggerKind::RealTime => "real_time",
    }
}

pub(crate) fn parse_document(text: &str, file: &Path) -> R<PipelineSpec> {
    let mut ctx = Ctx {
        file,
        lines: BTreeMap::new(),
    };
    let root = yaml::parse(text).map_err(|e| {
        let message = match e.col {
            Some(col) => format!("invalid YAML: {} (column {col})", e.message),
            None => e.message,
        };
        ctx.err(SpecErrorKind::Syntax, e.line, message)
    })?;
    let Some(root) = root else {
        return Err(SpecError::new(SpecErrorKind::Invalid, "the spec file is empty")
            .at(file, None)
            .with_help("write at least `name: <pipeline>` and `storage: <directory>`, or create a spec with `init --name <name>`"));
    };
    if !matches!(root.value, Value::Map(_)) {
        return Err(ctx
            .invalid(
                root.line,
                format!(
                    "the spec must be a map of fields such as `name` and `storage`, found {}",
                    root.describe()
                ),
            )
            .with_help("start the file with `name: <pipeline>` and `storage: <directory>`"));
    }
    let entries = ctx.entries(&root, "", "a map", "")?;
    ctx.check_fields(&entries, TOP_FIELDS, "")?;

    let mut spec = PipelineSpec {
        path: file.to_path_buf(),
        ..PipelineSpec::default()
    };
    let mut name = None;
    let mut storage = None;
    for (key, k, value) in &entries {
        match key.as_str() {
            "name" => {
                let n = ctx
                    .string(value, "name")
                    .map_err(|e| e.with_help("write e.g. `name: my_pipeline`"))?;
                if n.trim().is_empty() {
                    return Err(ctx
                        .invalid(k.line, "`name` must not be empty")
                        .with_help("write e.g. `name: my_pipeline`"));
                }
                name = Some(n);
            }
            "storage" => {
                let s = ctx
                    .string(value, "storage")
                    .map_err(|e| e.with_help("write e.g. `storage: ./pipeline-storage`"))?;
                if s.trim().is_empty() {
                    return Err(ctx
                        .invalid(k.line, "`storage` must not be empty")
                        .with_help("write e.g. `storage: ./pipeline-storage`"));
                }
                if let Err(why) = crate::engine::storage::Location::parse(&s, Path::new("")) {
                    return Err(ctx.invalid(k.line, format!("`storage`: {why}")).with_help(
                        "write a local path (`./pipeline-storage`, `/data/p`), a `file:///` URI or `s3://bucket/prefix`",
                    ));
                }
                storage = Some(s);
            }
            "configuration" => spec.configuration = ctx.options(value, "configuration")?,
            "tables" => {
                let tables = ctx.entries(
                    value,
                    "tables",
                    "a map from table name to its settings",
                    "write one `<table>: { format: delta }` entry per line below `tables:`",
                )?;
                for (t, tk, tv) in tables {
                    let table = ctx.table(&t, tk.line, tv)?;
                    spec.tables.insert(t, table);
                }
            }
            "sinks" => {
                let sinks = ctx.entries(
                    value,
                    "sinks",
                    "a map from sink name to its settings",
                    "write one `<sink>: { format: kafka, options: { ... } }` entry per line below `sinks:`",
                )?;
                for (s, sk, sv) in sinks {
                    let sink = ctx.sink(&s, sk.line, sv)?;
                    spec.sinks.insert(s, sink);
                }
            }
            "flows" => {
                let flows = ctx.entries(
                    value,
                    "flows",
                    "a map from flow name to its settings",
                    "write one `<flow>: { trigger: available_now }` entry per line below `flows:`",
                )?;
                for (f, fk, fv) in flows {
                    let flow = ctx.flow(&f, fk.line, fv)?;
                    spec.flows.insert(f, flow);
                }
            }
            "libraries" => spec.libraries = ctx.libraries(value)?,
            "catalog" => spec.catalog = Some(ctx.string(value, "catalog")?),
            "database" | "schema" => {
                if spec.database.is_some() {
                    return Err(ctx
                        .invalid(k.line, "both `database` and `schema` are set")
                        .with_help("they are the same setting; keep one"));
                }
                spec.database = Some(ctx.string(value, key.as_str())?)
            }
            _ => {}
        }
    }
    // Tables and sinks share one namespace: flows write to them by name.
    for (s, sink) in &spec.sinks {
        if let Some(table) = spec.tables.get(s) {
            let (sink_line, table_line) = (sink.line.unwrap_or(0), table.line.unwrap_or(0));
            let (first, second, line) = if table_line < sink_line {
                (format!("a table (line {table_line})"), "a sink", sink_line)
            } else {
                (format!("a sink (line {sink_line})"), "a table", table_line)
            };
            return Err(ctx
                .invalid(
                    line,
                    format!("`{s}` is declared both as {first} and as {second}"),
                )
                .with_help("tables and sinks share one namespace; rename one of them"));
        }
    }
    spec.name = name.ok_or_else(|| {
        ctx.invalid(root.line, "missing field `name`")
            .with_help("add `name: my_pipeline` at the top of the spec")
    })?;
    spec.storage = storage.ok_or_else(|| {
        ctx.invalid(root.line, "missing field `storage`").with_help(
            "add e.g. `storage: ./pipeline-storage` (checkpoints, the event log and tables without a path go there)",
        )
    })?;
    spec.key_lines = ctx.lines;
    Ok(spec)
}
