//! "Did you mean …?": the one suggestion helper behind every message that
//! names an unknown format, option, dataset, column, flow or spec key.

/// The candidate closest to `word` (case-insensitive) when it is a likely
/// typo, else `None`.
///
/// A candidate qualifies when its restricted edit distance (a transposition
/// counts as one edit) is at most 1 for words under 5 characters, 2 from 5
/// and 3 from 10, or when its Jaro-Winkler similarity is at least 0.85
/// (which catches long names with a shared prefix). Among qualifying
/// candidates the fewest edits win, then the highest similarity, then the
/// first given.
///
/// ```
/// use pipelines_core::suggest::closest;
/// assert_eq!(closest("maxFilesPerTriger", ["maxFilesPerTrigger", "latestFirst"]), Some("maxFilesPerTrigger"));
/// assert_eq!(closest("kafak", ["kafka", "delta"]), Some("kafka"));
/// assert_eq!(closest("zzz", ["kafka", "delta"]), None);
/// ```
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = word.trim().to_lowercase();
    let len = lower.chars().count();
    let allowed = if len >= 10 {
        3
    } else if len >= 5 {
        2
    } else {
        1
    };
    let mut best: Option<(&str, usize, f64)> = None;
    for c in candidates {
        let cl = c.to_lowercase();
        if cl == lower {
            return Some(c);
        }
        let edits = strsim::osa_distance(&lower, &cl);
        let similarity = strsim::jaro_winkler(&lower, &cl);
        if edits > allowed && similarity < 0.85 {
            continue;
        }
        let better = match best {
            None => true,
            Some((_, e, s)) => edits < e || (edits == e && similarity > s),
        };
        if better {
            best = Some((c, edits, similarity));
        }
    }
    best.map(|(c, _, _)| c)
}

/// `did you mean `x`? ` (with a trailing space) when [`closest`] finds a
/// suggestion, else the empty string: the prefix of a help text.
pub fn did_you_mean_prefix<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> String {
    match closest(word, candidates) {
        Some(s) => format!("did you mean `{s}`? "),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_are_found_and_strangers_are_not() {
        let opts = ["numRows", "truncate", "path"];
        assert_eq!(closest("numRowz", opts), Some("numRows"));
        assert_eq!(closest("NUMROWS", opts), Some("numRows"));
        assert_eq!(closest("truncat", opts), Some("truncate"));
        assert_eq!(closest("colour", opts), None);
        assert_eq!(closest("", opts), None);
        // Fewest edits win over a higher similarity.
        assert_eq!(closest("json", ["jsonl", "json"]), Some("json"));
        assert_eq!(closest("parket", ["parquet", "packet"]), Some("packet"));
    }
}
