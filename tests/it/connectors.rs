//! The connector registry with every connector of the default build
//! linked in (the Delta and Kafka crates register themselves), and the
//! generated option tables of `docs/connectors.md`.

use dp::connector::*;
use pipelines as dp;

const BEGIN: &str = "<!-- BEGIN GENERATED OPTIONS";
const END: &str = "<!-- END GENERATED OPTIONS -->";

/// `docs/connectors.md` holds [`options_reference`] between its markers.
/// Run with `PIPELINES_BLESS=1` to rewrite the file after changing a
/// declaration.
#[test]
fn connector_docs_are_generated_from_the_declarations() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/connectors.md");
    let text = std::fs::read_to_string(&path).expect("docs/connectors.md");
    let begin = text.find(BEGIN).expect("begin marker");
    let body_start = begin + text[begin..].find("-->").expect("end of begin marker") + 3;
    let end = text.find(END).expect("end marker");
    let want = format!("\n\n{}\n", options_reference());
    if text[body_start..end] != want {
        if std::env::var_os("PIPELINES_BLESS").is_some() {
            let new = format!("{}{want}{}", &text[..body_start], &text[end..]);
            std::fs::write(&path, new).expect("write docs/connectors.md");
        } else {
            panic!(
                "docs/connectors.md is stale: run `PIPELINES_BLESS=1 cargo test --test it connector_docs` and commit it"
            );
        }
    }
}

#[test]
fn sink_capabilities_follow_spark() {
    use dp::engine::connectors::{ALL_MODES as ALL, APPEND_COMPLETE, APPEND_ONLY as APPEND};
    assert_eq!(accepted_modes("parquet", false), Some(APPEND));
    assert_eq!(accepted_modes("Delta", false), Some(APPEND_COMPLETE));
    assert_eq!(accepted_modes("delta", true), Some(ALL));
    assert_eq!(accepted_modes("foreachBatch", false), Some(ALL));
    assert_eq!(accepted_modes("kafka", false), Some(ALL));
    assert_eq!(accepted_modes("postgres", false), Some(ALL));
    assert_eq!(accepted_modes("orc2", false), None);
    assert_eq!(real_time_problem("kafka"), None);
    assert!(real_time_problem("delta").is_some());
}

#[test]
fn every_format_has_one_connector() {
    let mut names: Vec<&str> = all().map(|c| c.name()).collect();
    names.sort();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "two connectors share a name");
    assert_eq!(
        source_names(),
        ["json", "csv", "parquet", "text", "rate", "socket", "memory", "kafka", "delta"]
    );
    assert_eq!(canonical_name("FOREACH-BATCH"), Some("foreach_batch"));
    assert_eq!(
        sink_names(),
        [
            "parquet",
            "json",
            "csv",
            "delta",
            "kafka",
            "console",
            "postgres",
            "memory",
            "foreach_batch"
        ]
    );
    assert_eq!(canonical_name("PostgreSQL"), Some("postgres"));
    assert_eq!(table_names(), ["delta", "parquet", "json", "csv"]);
    assert_eq!(real_time_sink_names(), ["kafka", "memory", "console"]);
    assert_eq!(
        complete_mode_sink_names(),
        [
            "kafka",
            "console",
            "postgres",
            "memory",
            "foreach_batch",
            "delta"
        ]
    );
    assert_eq!(dp::suggest::closest("kafak", sink_names()), Some("kafka"));
    assert!(find("orc").is_none());
}

#[test]
fn delta_is_the_default_table_format() {
    assert_eq!(default_table_format(), "delta");
    let delta = sink("Delta").unwrap();
    assert!(delta.options().find("mergeSchema").is_some());
    assert!(source_names().contains(&"kafka"));
}
