//! `${ENV_VAR}` substitution in spec values.

use super::{join_key, PipelineSpec, SpecError, SpecErrorKind};

/// A problem with one reference in a value.
#[derive(Debug, PartialEq, Eq)]
pub enum Problem {
    /// `${NAME}` with `NAME` unset.
    Unset(String),
    /// A malformed reference, e.g. an unclosed `${`.
    Malformed(String),
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Substitutes `${NAME}` and `${NAME:-default}` in `value`; `$${` is a
/// literal `${`. Returns every problem found.
pub fn substitute(
    value: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, Vec<Problem>> {
    if !value.contains("${") {
        return Ok(value.to_string());
    }
    let mut out = String::with_capacity(value.len());
    let mut problems = Vec::new();
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i..];
        if let Some(escaped) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = escaped;
        } else if let Some(body) = after.strip_prefix("${") {
            let Some(end) = body.find('}') else {
                problems.push(Problem::Malformed(format!(
                    "unclosed `${{` in `{}`",
                    shorten(after)
                )));
                rest = "";
                break;
            };
            let inner = &body[..end];
            let (name, default) = match inner.split_once(":-") {
                Some((n, d)) => (n, Some(d)),
                None => (inner, None),
            };
            if !valid_name(name) {
                problems.push(Problem::Malformed(format!(
                    "`${{{inner}}}` is not a valid variable reference"
                )));
            } else {
                match (lookup(name), default) {
                    (Some(v), Some(d)) if v.is_empty() => out.push_str(d),
                    (Some(v), _) => out.push_str(&v),
                    (None, Some(d)) => out.push_str(d),
                    (None, None) => problems.push(Problem::Unset(name.to_string())),
                }
            }
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = &after[1..];
        }
    }
    out.push_str(rest);
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

fn shorten(text: &str) -> String {
    if text.chars().count() > 40 {
        let cut: String = text.chars().take(40).collect();
        format!("{cut}...")
    } else {
        text.to_string()
    }
}

/// Resolves every substitutable value of `spec`; all-or-nothing.
pub(crate) fn resolve(
    spec: &mut PipelineSpec,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), Vec<SpecError>> {
    let mut resolved = spec.clone();
    let mut errors = Vec::new();
    let file = spec.path.clone();
    let lines = &spec.key_lines;
    let mut apply = |value: &mut String, path: String| match substitute(value, lookup) {
        Ok(v) => *value = v,
        Err(problems) => {
            let line = lines.get(&path).copied();
            for p in problems {
                let err = match p {
                    Problem::Unset(name) => SpecError::new(
                        SpecErrorKind::Env,
                        format!("environment variable `{name}` is not set (used by {path})"),
                    )
                    .with_help(format!("export {name}=... before running")),
                    Problem::Malformed(why) => SpecError::new(
                        SpecErrorKind::Env,
                        format!("bad variable reference in {path}: {why}"),
                    )
                    .with_help(
                        "write `${NAME}` or `${NAME:-default}`, or `$${` for a literal `${`",
                    ),
                };
                errors.push(err.at(file.clone(), line));
            }
        }
    };
    apply(&mut resolved.storage, "storage".to_string());
    for (key, value) in resolved.configuration.iter_mut() {
        apply(value, join_key("configuration", key));
    }
    for (name, table) in resolved.tables.iter_mut() {
        let base = join_key("tables", name);
        if let Some(path) = table.path.as_mut() {
            apply(path, join_key(&base, "path"));
        }
        for (key, value) in table.options.iter_mut() {
            apply(value, join_key(&join_key(&base, "options"), key));
        }
    }
    for (name, sink) in resolved.sinks.iter_mut() {
        let base = join_key(&join_key("sinks", name), "options");
        for (key, value) in sink.options.iter_mut() {
            apply(value, join_key(&base, key));
        }
    }
    for (name, flow) in resolved.flows.iter_mut() {
        let base = join_key(&join_key("flows", name), "options");
        for (key, value) in flow.options.iter_mut() {
            apply(value, join_key(&base, key));
        }
    }
    if errors.is_empty() {
        *spec = resolved;
        Ok(())
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Option<String> {
        match name {
            "HOST" => Some("kafka:9092".to_string()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn substitutes_and_escapes() {
        assert_eq!(substitute("${HOST}", &lookup).unwrap(), "kafka:9092");
        assert_eq!(
            substitute("a-${HOST}-b", &lookup).unwrap(),
            "a-kafka:9092-b"
        );
        assert_eq!(substitute("$${HOST}", &lookup).unwrap(), "${HOST}");
        assert_eq!(substitute("cost $5", &lookup).unwrap(), "cost $5");
        assert_eq!(substitute("${NOPE:-x}", &lookup).unwrap(), "x");
        assert_eq!(substitute("${EMPTY:-x}", &lookup).unwrap(), "x");
        assert_eq!(substitute("${EMPTY}", &lookup).unwrap(), "");
        assert_eq!(
            substitute("${A}${B}", &lookup).unwrap_err(),
            vec![Problem::Unset("A".into()), Problem::Unset("B".into())]
        );
        assert!(matches!(
            substitute("${HOST", &lookup).unwrap_err()[0],
            Problem::Malformed(_)
        ));
        assert!(matches!(
            substitute("${1X}", &lookup).unwrap_err()[0],
            Problem::Malformed(_)
        ));
    }
}
