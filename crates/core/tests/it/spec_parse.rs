//! Parsing valid specs: the full example, value conversions, line numbers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pipelines_core::spec::{self, key_path, FlowSpec, PipelineSpec, SinkSpec, TableSpec, Trigger};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/spec")
        .join(name)
}

fn parse(text: &str) -> PipelineSpec {
    spec::parse_str(text, Path::new("pipeline.yml")).unwrap_or_else(|e| panic!("{e}"))
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn full_example_parses_with_lines() {
    let path = fixture("full.yml");
    let spec = spec::load(&path).unwrap();
    assert_eq!(spec.name, "monitoring");
    assert_eq!(spec.storage, "./pipeline-storage");
    assert_eq!(spec.path, path);
    assert_eq!(
        spec.storage_dir(),
        path.parent().unwrap().join("./pipeline-storage")
    );
    assert_eq!(
        spec.configuration,
        map(&[("spark.sql.shuffle.partitions", "4")])
    );

    assert_eq!(
        spec.tables["error_counts"],
        TableSpec {
            format: Some("delta".into()),
            line: Some(6),
            ..TableSpec::default()
        }
    );
    assert_eq!(
        spec.tables["raw"],
        TableSpec {
            format: Some("parquet".into()),
            path: Some("/data/raw".into()),
            options: map(&[("mergeSchema", "true")]),
            partition_cols: vec!["day".into()],
            comment: Some("raw logs".into()),
            schema: None,
            line: Some(7),
            ..TableSpec::default()
        }
    );

    assert_eq!(
        spec.sinks["event_counts_sink"],
        SinkSpec {
            format: "kafka".into(),
            options: map(&[
                ("kafka.bootstrap.servers", "${KAFKA_BROKERS}"),
                ("topic", "event-counts"),
            ]),
            merge_keys: vec![],
            comment: None,
            line: Some(9),
        }
    );

    assert_eq!(
        spec.flows["event_counts"],
        FlowSpec {
            trigger: Some(Trigger::RealTime {
                checkpoint_interval: Duration::from_secs(300)
            }),
            options: map(&[("maxOffsetsPerTrigger", "1000")]),
            line: Some(15),
        }
    );
    assert_eq!(
        spec.flows["error_monitor"],
        FlowSpec {
            trigger: Some(Trigger::ProcessingTime(Duration::from_secs(60))),
            options: BTreeMap::new(),
            line: Some(18),
        }
    );
    assert_eq!(spec.flows["backfill"].trigger, Some(Trigger::AvailableNow));
    assert_eq!(spec.flows["backfill"].line, Some(20));
    assert!(spec.libraries.is_empty());

    // Lines of keys, in block and flow style.
    assert_eq!(spec.line_of(&["name"]), Some(1));
    assert_eq!(spec.line_of(&["storage"]), Some(2));
    assert_eq!(
        spec.line_of(&["configuration", "spark.sql.shuffle.partitions"]),
        Some(4)
    );
    assert_eq!(spec.line_of(&["tables", "raw", "path"]), Some(7));
    assert_eq!(
        spec.line_of(&[
            "sinks",
            "event_counts_sink",
            "options",
            "kafka.bootstrap.servers"
        ]),
        Some(12)
    );
    assert_eq!(
        spec.line_of(&["sinks", "event_counts_sink", "options", "topic"]),
        Some(13)
    );
    assert_eq!(
        spec.line_of(&["flows", "event_counts", "trigger"]),
        Some(16)
    );
    assert_eq!(spec.line_of(&["libraries"]), Some(22));
    assert_eq!(spec.line_of(&["nope"]), None);
    assert_eq!(
        spec.origin_of(&["flows", "backfill"]).to_string(),
        format!("{}:20", path.display())
    );
}

#[test]
fn key_paths_quote_dotted_segments() {
    assert_eq!(
        key_path(&["sinks", "out", "options", "kafka.bootstrap.servers"]),
        "sinks.out.options.\"kafka.bootstrap.servers\""
    );
    assert_eq!(key_path(&["flows", "my-flow"]), "flows.my-flow");
}

#[test]
fn option_values_may_be_numbers_and_booleans() {
    let spec = parse(
        "name: p\n\
         storage: s\n\
         configuration:\n\
         \x20 spark.sql.shuffle.partitions: 4\n\
         \x20 ratio: 0.25\n\
         \x20 flag: True\n\
         \x20 off: false\n\
         \x20 quoted: \"007\"\n\
         \x20 plain: hello world\n\
         \x20 tilde_string: \"~\"\n\
         sinks:\n\
         \x20 out:\n\
         \x20   format: kafka\n\
         \x20   options: { retries: 3, idempotent: true, big: 1e3 }\n",
    );
    assert_eq!(
        spec.configuration,
        map(&[
            ("spark.sql.shuffle.partitions", "4"),
            ("ratio", "0.25"),
            ("flag", "true"),
            ("off", "false"),
            ("quoted", "007"),
            ("plain", "hello world"),
            ("tilde_string", "~"),
        ])
    );
    assert_eq!(
        spec.sinks["out"].options,
        map(&[("retries", "3"), ("idempotent", "true"), ("big", "1e3")])
    );
}

#[test]
fn flow_style_entries_get_their_lines() {
    let spec = parse(
        "name: p\nstorage: s\nsinks: { a: { format: console },\n  b: { format: kafka,\n    options: { topic: t } } }\nflows: {f: {trigger: once}}\n",
    );
    assert_eq!(spec.sinks["a"].line, Some(3));
    assert_eq!(spec.sinks["b"].line, Some(4));
    assert_eq!(spec.line_of(&["sinks", "b", "options", "topic"]), Some(5));
    assert_eq!(spec.flows["f"].line, Some(6));
    assert_eq!(spec.flows["f"].trigger, Some(Trigger::Once));
}

#[test]
fn optional_sections_may_be_empty_or_null() {
    let spec = parse(
        "# a comment first\nname: p\nstorage: /abs/storage\nconfiguration:\ntables:\n  t:\nsinks: {}\nflows:\n  f: {}\nlibraries:\n",
    );
    assert!(spec.configuration.is_empty());
    assert_eq!(
        spec.tables["t"],
        TableSpec {
            line: Some(6),
            ..TableSpec::default()
        }
    );
    assert!(spec.sinks.is_empty());
    assert_eq!(spec.flows["f"].trigger, None);
    assert_eq!(spec.storage_dir(), PathBuf::from("/abs/storage"));
}

#[test]
fn sinks_accept_merge_keys_and_comment_and_tables_accept_schema() {
    let spec = parse(
        "name: p\nstorage: s\n\
         sinks:\n  upserts: { format: delta, merge_keys: [id, day], comment: keyed }\n\
         tables:\n  t: { schema: \"id BIGINT, name STRING\", partition_cols: [] }\n",
    );
    assert_eq!(spec.sinks["upserts"].merge_keys, vec!["id", "day"]);
    assert_eq!(spec.sinks["upserts"].comment.as_deref(), Some("keyed"));
    assert_eq!(
        spec.tables["t"].schema.as_deref(),
        Some("id BIGINT, name STRING")
    );
}

#[test]
fn trigger_spellings() {
    let spec = parse(
        "name: p\nstorage: s\nflows:\n\
         \x20 a: { trigger: once }\n\
         \x20 b: { trigger: default }\n\
         \x20 c: { trigger: AvailableNow }\n\
         \x20 d: { trigger: { real_time: 10 seconds } }\n\
         \x20 e: { trigger: { processing_time: { interval: 30s } } }\n\
         \x20 f: { options: { pipelines.trigger: realtime, pipelines.trigger.interval: 1 minute } }\n\
         \x20 g: { options: { pipelines.trigger.interval: 2 minutes } }\n",
    );
    let t = |f: &str| spec.flows[f].trigger.clone();
    assert_eq!(t("a"), Some(Trigger::Once));
    assert_eq!(t("b"), Some(Trigger::Default));
    assert_eq!(t("c"), Some(Trigger::AvailableNow));
    assert_eq!(
        t("d"),
        Some(Trigger::RealTime {
            checkpoint_interval: Duration::from_secs(10)
        })
    );
    assert_eq!(
        t("e"),
        Some(Trigger::ProcessingTime(Duration::from_secs(30)))
    );
    assert_eq!(
        t("f"),
        Some(Trigger::RealTime {
            checkpoint_interval: Duration::from_secs(60)
        })
    );
    assert_eq!(
        t("g"),
        Some(Trigger::ProcessingTime(Duration::from_secs(120)))
    );
    // The conf keys stay in the options, as written.
    assert_eq!(spec.flows["g"].options.len(), 1);
}

#[test]
fn anchors_and_aliases_are_expanded() {
    let spec = parse(
        "name: p\nstorage: s\nsinks:\n  a: &k { format: kafka, options: { topic: t } }\n  b: *k\n",
    );
    assert_eq!(spec.sinks["b"].format, "kafka");
    assert_eq!(spec.sinks["b"].line, Some(5));
}

#[test]
fn init_template_parses() {
    let text = spec::init_template("my \"odd\" pipeline");
    let spec = parse(&text);
    assert_eq!(spec.name, "my \"odd\" pipeline");
    assert_eq!(spec.storage, "./pipeline-storage");
}

#[test]
fn storage_may_be_a_file_uri_as_spark_writes_it() {
    for (storage, dir) in [
        ("file:///data/my%20pipe", "/data/my pipe"),
        ("file:/data/p", "/data/p"),
        ("file://localhost/data/p", "/data/p"),
        ("./p", "/proj/./p"),
    ] {
        let spec = spec::parse_str(
            &format!("name: p\nstorage: {storage}\n"),
            Path::new("/proj/pipeline.yml"),
        )
        .unwrap();
        assert_eq!(spec.storage_dir(), PathBuf::from(dir), "{storage}");
    }
    for (storage, why) in [
        (
            "gs://bucket/p",
            "`gs://` storage is not supported: keep it on the local file system or in S3 (`s3://bucket/prefix`)",
        ),
        ("s3:///p", "`s3:///p` names no bucket; write `s3://<bucket>/<prefix>`"),
        (
            "file://host/p",
            "`file://host/p` names a host; a `file:` URI must be local (`file:///path`)",
        ),
    ] {
        let e = spec::parse_str(
            &format!("name: p\nstorage: {storage}\n"),
            Path::new("pipeline.yml"),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("pipeline.yml:2: `storage`: {why}\n  help: write a local path (`./pipeline-storage`, `/data/p`), a `file:///` URI or `s3://bucket/prefix`")
        );
    }
}

#[test]
fn storage_dir_is_relative_to_the_spec_file() {
    let spec = spec::parse_str(
        "name: p\nstorage: data\n",
        Path::new("/proj/sub/pipeline.yml"),
    )
    .unwrap();
    assert_eq!(spec.storage_dir(), PathBuf::from("/proj/sub/data"));
    let bare = parse("name: p\nstorage: data\n");
    assert_eq!(bare.storage_dir(), PathBuf::from("data"));
}
