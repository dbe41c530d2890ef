//! The five dataset/flow attribute macros and the keys each one accepts.

/// Which attribute macro is being expanded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MacroKind {
    AppendFlow,
    UpdateFlow,
    Table,
    MaterializedView,
    TemporaryView,
}

impl MacroKind {
    /// The attribute name, e.g. `append_flow`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            MacroKind::AppendFlow => "append_flow",
            MacroKind::UpdateFlow => "update_flow",
            MacroKind::Table => "table",
            MacroKind::MaterializedView => "materialized_view",
            MacroKind::TemporaryView => "temporary_view",
        }
    }

    /// Keys the macro accepts, in the order they are documented.
    pub(crate) fn keys(self) -> &'static [&'static str] {
        match self {
            MacroKind::AppendFlow => &["target", "name", "once", "comment", "conf", "quarantine"],
            MacroKind::UpdateFlow => &[
                "target",
                "name",
                "comment",
                "conf",
                "import_checkpoint",
                "quarantine",
            ],
            MacroKind::Table | MacroKind::MaterializedView => &[
                "name",
                "comment",
                "format",
                "path",
                "partition_cols",
                "schema",
                "quarantine",
            ],
            MacroKind::TemporaryView => &["name", "comment", "schema"],
        }
    }

    /// Every dataset/flow macro, in the order messages list them.
    pub(crate) const ALL: [MacroKind; 5] = [
        MacroKind::Table,
        MacroKind::MaterializedView,
        MacroKind::TemporaryView,
        MacroKind::AppendFlow,
        MacroKind::UpdateFlow,
    ];

    /// Whether `name` (the last segment of an attribute's path) names one
    /// of the dataset/flow macros.
    pub(crate) fn is_macro_name(name: &str) -> bool {
        Self::ALL.iter().any(|kind| kind.name() == name)
    }

    /// Whether the macro declares a flow (as opposed to a dataset).
    pub(crate) fn is_flow(self) -> bool {
        matches!(self, MacroKind::AppendFlow | MacroKind::UpdateFlow)
    }

    /// Why a key that exists on another macro is rejected by this one, when
    /// there is a more useful explanation than "unknown key".
    pub(crate) fn rejection(self, key: &str) -> Option<String> {
        let at = self.name();
        match (self, key) {
            (MacroKind::UpdateFlow, "once") => Some(
                "#[update_flow] does not accept `once`: update flows are streaming; \
                 for a one-time batch flow use #[append_flow(once = true)]"
                    .to_string(),
            ),
            (MacroKind::TemporaryView, "format" | "path" | "partition_cols" | "quarantine") => {
                Some(format!("temporary views are not stored; remove `{key}`"))
            }
            (MacroKind::AppendFlow, "import_checkpoint") => Some(
                "`import_checkpoint` is only accepted by #[update_flow]; \
                 append flows start from their own checkpoint"
                    .to_string(),
            ),
            (_, "target") if !self.is_flow() => Some(format!(
                "#[{at}] declares a dataset written by its own flow, so it has no `target`; \
                 to write into another dataset use #[append_flow(target = \"...\")]"
            )),
            (_, "once" | "conf" | "import_checkpoint") if !self.is_flow() => Some(format!(
                "`{key}` is a flow setting and is not accepted by #[{at}]; expected one of: {}",
                self.keys().join(", ")
            )),
            (_, "format" | "path" | "partition_cols" | "schema") if self.is_flow() => {
                Some(format!(
                    "`{key}` describes a dataset and is not accepted by #[{at}]; \
                     set it where the target dataset is declared (e.g. #[table({key} = ...)])"
                ))
            }
            _ => None,
        }
    }
}

/// Common spellings (Python decorator arguments, synonyms) of accepted keys.
const ALIASES: &[(&str, &str)] = &[
    ("spark_conf", "conf"),
    ("config", "conf"),
    ("settings", "conf"),
    ("description", "comment"),
    ("doc", "comment"),
    ("sink", "target"),
    ("into", "target"),
    ("dest", "target"),
    ("destination", "target"),
    ("partition_by", "partition_cols"),
    ("partitions", "partition_cols"),
    ("partition_columns", "partition_cols"),
    ("partitioned_by", "partition_cols"),
    ("location", "path"),
    ("storage", "path"),
    ("checkpoint", "import_checkpoint"),
];

/// The accepted key closest to `key`, if any is close enough to be a typo.
pub(crate) fn suggest(key: &str, candidates: &[&'static str]) -> Option<&'static str> {
    let lower = key.to_ascii_lowercase();
    if let Some(&(_, to)) = ALIASES
        .iter()
        .find(|(from, to)| *from == lower && candidates.contains(to))
    {
        return Some(to);
    }
    let (best, distance) = candidates
        .iter()
        .map(|c| (*c, edit_distance(&lower, c)))
        .min_by_key(|&(_, d)| d)?;
    let limit = match lower.chars().count() {
        0..=2 => 0,
        3..=5 => 1,
        _ => 2,
    };
    if distance <= limit {
        return Some(best);
    }
    // `partition` for `partition_cols`, `import` for `import_checkpoint`.
    if lower.len() >= 4 {
        if let Some(c) = candidates.iter().find(|c| c.starts_with(lower.as_str())) {
            return Some(c);
        }
    }
    None
}

/// Optimal string alignment distance: insertions, deletions, substitutions
/// and transpositions of adjacent characters each cost 1.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance() {
        assert_eq!(edit_distance("targte", "target"), 1);
        assert_eq!(edit_distance("nme", "name"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn suggestions() {
        let flow = MacroKind::AppendFlow.keys();
        assert_eq!(suggest("targte", flow), Some("target"));
        assert_eq!(suggest("Target", flow), Some("target"));
        assert_eq!(suggest("trget", flow), Some("target"));
        assert_eq!(suggest("spark_conf", flow), Some("conf"));
        assert_eq!(suggest("onse", flow), Some("once"));
        assert_eq!(suggest("xyz", flow), None);
        assert_eq!(suggest("trigger", flow), None);
        let table = MacroKind::Table.keys();
        assert_eq!(suggest("partition", table), Some("partition_cols"));
        assert_eq!(suggest("partition_by", table), Some("partition_cols"));
        assert_eq!(suggest("shema", table), Some("schema"));
        assert_eq!(suggest("formats", table), Some("format"));
    }

    #[test]
    fn rejections() {
        assert!(MacroKind::UpdateFlow.rejection("once").is_some());
        assert_eq!(
            MacroKind::TemporaryView.rejection("path").as_deref(),
            Some("temporary views are not stored; remove `path`")
        );
        assert_eq!(
            MacroKind::TemporaryView.rejection("quarantine").as_deref(),
            Some("temporary views are not stored; remove `quarantine`")
        );
        assert!(MacroKind::Table.rejection("target").is_some());
        assert!(MacroKind::AppendFlow.rejection("name").is_none());
        for kind in MacroKind::ALL {
            for key in kind.keys() {
                assert!(kind.rejection(key).is_none(), "{key} on {}", kind.name());
            }
        }
    }
}
