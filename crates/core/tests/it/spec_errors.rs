//! Every spec error names the file and line and says how to fix it.

use std::path::Path;

use pipelines_core::spec::{self, SpecErrorKind};

/// The full message of parsing `text` as `pipeline.yml`.
fn err(text: &str) -> String {
    match spec::parse_str(text, Path::new("pipeline.yml")) {
        Ok(spec) => panic!("expected an error, parsed {spec:?}"),
        Err(e) => e.to_string(),
    }
}

const HEAD: &str = "name: p\nstorage: s\n";

#[test]
fn unknown_top_level_field_suggests_the_closest() {
    assert_eq!(
        err("name: p\nstorage: s\nsinkz:\n  out: { format: kafka }\n"),
        "pipeline.yml:3: unknown field `sinkz`, expected one of `name`, `storage`, \
         `configuration`, `tables`, `sinks`, `flows`, `libraries`, `catalog`, `database`, `schema`\n  help: did you mean `sinks`?"
    );
    // No suggestion when nothing is close.
    assert_eq!(
        err("name: p\nstorage: s\nwhatever: 1\n"),
        "pipeline.yml:3: unknown field `whatever`, expected one of `name`, `storage`, \
         `configuration`, `tables`, `sinks`, `flows`, `libraries`, `catalog`, `database`, `schema`"
    );
}

#[test]
fn unknown_field_in_a_sink() {
    assert_eq!(
        err(&format!("{HEAD}sinks:\n  out:\n    formt: kafka\n")),
        "pipeline.yml:5: unknown field `formt` in sink `out`, expected one of `format`, \
         `options`, `merge_keys`, `comment`\n  help: did you mean `format`?"
    );
}

#[test]
fn unknown_field_in_a_table() {
    assert_eq!(
        err(&format!(
            "{HEAD}tables:\n  raw:\n    format: delta\n    partitionCols: [day]\n"
        )),
        "pipeline.yml:6: unknown field `partitionCols` in table `raw`, expected one of \
         `format`, `path`, `options`, `partition_cols`, `comment`, `schema`, `expectations`, `quarantine`\n  \
         help: did you mean `partition_cols`?"
    );
    assert_eq!(
        err(&format!(
            "{HEAD}tables:\n  t: {{ format: delta, trigger: once }}\n"
        )),
        "pipeline.yml:4: unknown field `trigger` in table `t`, expected one of `format`, \
         `path`, `options`, `partition_cols`, `comment`, `schema`, `expectations`, `quarantine`\n  \
         help: triggers are set per flow: `flows: { <flow>: { trigger: ... } }`"
    );
}

#[test]
fn unknown_field_in_a_flow_in_flow_style() {
    assert_eq!(
        err(&format!(
            "{HEAD}flows: {{ f: {{ trigger: once, optoins: {{}} }} }}\n"
        )),
        "pipeline.yml:3: unknown field `optoins` in flow `f`, expected one of `trigger`, \
         `options`\n  help: did you mean `options`?"
    );
}

#[test]
fn unknown_field_in_a_trigger() {
    assert_eq!(
        err(&format!(
            "{HEAD}flows:\n  f:\n    trigger:\n      real_time:\n        interval: 5 minutes\n"
        )),
        "pipeline.yml:7: unknown field `interval` in the trigger of flow `f`, expected \
         `checkpoint_interval`"
    );
}

#[test]
fn wrong_types() {
    assert_eq!(
        err(&format!("{HEAD}sinks: 5\n")),
        "pipeline.yml:3: `sinks` must be a map from sink name to its settings, found an \
         integer `5`\n  help: write one `<sink>: { format: kafka, options: { ... } }` \
         entry per line below `sinks:`"
    );
    assert_eq!(
        err(&format!("{HEAD}tables:\n  - raw\n")),
        "pipeline.yml:4: `tables` must be a map from table name to its settings, found a \
         list\n  help: write one `<table>: { format: delta }` entry per line below `tables:`"
    );
    assert_eq!(
        err("name: [a, b]\nstorage: s\n"),
        "pipeline.yml:1: `name` must be a string, found a list\n  \
         help: write e.g. `name: my_pipeline`"
    );
    assert_eq!(
        err(&format!("{HEAD}tables:\n  t: {{ partition_cols: day }}\n")),
        "pipeline.yml:4: `tables.t.partition_cols` must be a list of column names, found a \
         string `day`\n  help: write `partition_cols: [day]`"
    );
    assert_eq!(
        err("- name\n- storage\n"),
        "pipeline.yml:1: the spec must be a map of fields such as `name` and `storage`, \
         found a list\n  help: start the file with `name: <pipeline>` and `storage: <directory>`"
    );
}

#[test]
fn missing_required_fields() {
    assert_eq!(
        err("# my pipeline\nstorage: s\n"),
        "pipeline.yml:2: missing field `name`\n  \
         help: add `name: my_pipeline` at the top of the spec"
    );
    assert_eq!(
        err("name: p\n"),
        "pipeline.yml:1: missing field `storage`\n  help: add e.g. \
         `storage: ./pipeline-storage` (checkpoints, the event log and tables without a \
         path go there)"
    );
    assert_eq!(
        err(&format!(
            "{HEAD}sinks:\n  out:\n    options: {{ topic: t }}\n"
        )),
        "pipeline.yml:4: missing field `format` in sink `out`\n  \
         help: add the sink's format, e.g. `format: kafka`"
    );
    assert_eq!(
        err(&format!("{HEAD}sinks:\n  out:\n")),
        "pipeline.yml:4: missing field `format` in sink `out`\n  \
         help: add the sink's format, e.g. `format: kafka`"
    );
}

#[test]
fn empty_values() {
    assert_eq!(
        err("name: \"\"\nstorage: s\n"),
        "pipeline.yml:1: `name` must not be empty\n  help: write e.g. `name: my_pipeline`"
    );
    assert_eq!(
        err("name:\nstorage: s\n"),
        "pipeline.yml:1: `name` has no value\n  help: write e.g. `name: my_pipeline`"
    );
    assert_eq!(
        err(&format!(
            "{HEAD}configuration:\n  spark.sql.shuffle.partitions:\n"
        )),
        "pipeline.yml:4: `configuration.\"spark.sql.shuffle.partitions\"` has no value\n  \
         help: write a value (quoted if it is empty or starts with a special character), \
         or remove the key"
    );
}

#[test]
fn empty_file() {
    let expected = "pipeline.yml: the spec file is empty\n  help: write at least \
                    `name: <pipeline>` and `storage: <directory>`, or create a spec with \
                    `init --name <name>`";
    assert_eq!(err(""), expected);
    assert_eq!(err("# nothing yet\n\n"), expected);
}

#[test]
fn list_valued_option_is_an_error() {
    assert_eq!(
        err(&format!(
            "{HEAD}tables:\n  t:\n    options:\n      cols: [a, b]\n"
        )),
        "pipeline.yml:6: `tables.t.options.cols` must be a string, number or boolean, found \
         a list\n  help: option values are single strings; write a list as one string, \
         e.g. \"a,b\""
    );
    assert_eq!(
        err(&format!(
            "{HEAD}sinks:\n  out:\n    format: kafka\n    options:\n      kafka.opts: {{ a: 1 }}\n"
        )),
        "pipeline.yml:7: `sinks.out.options.\"kafka.opts\"` must be a string, number or \
         boolean, found a map\n  help: option values are single strings; write a list as \
         one string, e.g. \"a,b\""
    );
}

#[test]
fn bad_trigger_values() {
    let help = "write one of `trigger: default`, `trigger: available_now`, `trigger: once`, \
                `trigger: { processing_time: 1 minute }` or \
                `trigger: { real_time: { checkpoint_interval: 5 minutes } }`";
    assert_eq!(
        err(&format!("{HEAD}flows:\n  f:\n    trigger: sometimes\n")),
        format!("pipeline.yml:5: flow `f`: invalid trigger `sometimes`\n  help: {help}")
    );
    assert_eq!(
        err(&format!("{HEAD}flows:\n  f:\n    trigger: availble_now\n")),
        format!(
            "pipeline.yml:5: flow `f`: invalid trigger `availble_now`\n  \
             help: did you mean `available_now`? {help}"
        )
    );
    assert_eq!(
        err(&format!("{HEAD}flows:\n  f: {{ trigger: 1 minute }}\n")),
        "pipeline.yml:4: flow `f`: invalid trigger `1 minute`\n  help: for micro-batches \
         on an interval write `trigger: { processing_time: 1 minute }`"
    );
    assert_eq!(
        err(&format!(
            "{HEAD}flows:\n  f:\n    trigger: processing_time\n"
        )),
        "pipeline.yml:5: flow `f`: the `processing_time` trigger needs an interval\n  \
         help: write `trigger: { processing_time: 1 minute }`"
    );
    assert_eq!(
        err(&format!(
            "{HEAD}flows:\n  f:\n    trigger: {{ once: {{}}, processing_time: 1 minute }}\n"
        )),
        format!(
            "pipeline.yml:5: flow `f`: a trigger must have exactly one kind, found `once`, \
             `processing_time`\n  help: {help}"
        )
    );
    assert_eq!(
        err(&format!(
            "{HEAD}flows:\n  f:\n    trigger: available_now\n    options:\n      pipelines.trigger: Once\n"
        )),
        "pipeline.yml:5: flow `f`: the trigger is set twice, by `trigger` and by the \
         `pipelines.trigger` options\n  help: keep one of them"
    );
    assert_eq!(
        err(&format!(
            "{HEAD}flows:\n  f:\n    options:\n      pipelines.trigger: Sometimes\n"
        )),
        "pipeline.yml:6: flow `f`: invalid `pipelines.trigger` value `Sometimes`\n  \
         help: use one of `ProcessingTime`, `AvailableNow`, `Once` or `RealTime` \
         (ProcessingTime and RealTime also need `pipelines.trigger.interval`)"
    );
}

#[test]
fn bad_interval() {
    assert_eq!(
        err(&format!(
            "{HEAD}flows:\n  error_monitor:\n    trigger: {{ processing_time: 5 minuts }}\n"
        )),
        "pipeline.yml:5: flow `error_monitor`: invalid interval `5 minuts`: unknown unit \
         `minuts`\n  help: write an interval such as \"10 minutes\", \"5 seconds\" or \
         \"1 hour 30 minutes\""
    );
}

#[test]
fn real_time_interval_below_five_seconds() {
    assert_eq!(
        err(&format!(
            "{HEAD}flows:\n  event_counts:\n    trigger:\n      real_time:\n        checkpoint_interval: 2 seconds\n"
        )),
        "pipeline.yml:7: flow `event_counts`: real-time checkpoint interval `2 seconds` is \
         below Spark's minimum of 5 seconds\n  help: use a checkpoint interval of at least \
         5 seconds"
    );
}

#[test]
fn libraries_take_spark_s_two_glob_forms() {
    let spec = spec::parse_str(
        &format!("{HEAD}catalog: main\nschema: sales\nlibraries:\n  - glob:\n      include: transformations/**\n  - glob:\n      include: extra/one.sql\n"),
        Path::new("pipeline.yml"),
    )
    .unwrap();
    assert_eq!(spec.libraries.len(), 2);
    assert_eq!(spec.catalog.as_deref(), Some("main"));
    assert_eq!(spec.database.as_deref(), Some("sales"));
    // Other patterns are refused, as Spark refuses them.
    assert_eq!(
        err(&format!(
            "{HEAD}libraries:\n  - glob:\n      include: transformations/**/*.sql\n"
        )),
        "pipeline.yml:5: library glob `transformations/**/*.sql` is not a file path or a \
         `folder/**` pattern\n  help: write a file path (`transformations/flows.sql`) or a \
         folder followed by `/**` (`transformations/**`), as Spark does"
    );
    assert_eq!(
        err(&format!("{HEAD}database: a\nschema: b\n")),
        "pipeline.yml:4: both `database` and `schema` are set\n  help: they are the same setting; keep one"
    );
}

#[test]
fn malformed_libraries_are_reported_first() {
    assert_eq!(
        err(&format!(
            "{HEAD}libraries:\n  - glob:\n      includes: x/**\n"
        )),
        "pipeline.yml:5: unknown field `includes` in library entry 1, expected `include`\n  \
         help: did you mean `include`?"
    );
    assert_eq!(
        err(&format!("{HEAD}libraries:\n  - file: x.sql\n")),
        "pipeline.yml:4: unknown field `file` in library entry 1, expected `glob`"
    );
    assert_eq!(
        err(&format!("{HEAD}libraries: transformations/**\n")),
        "pipeline.yml:3: `libraries` must be a list of `glob` entries, found a string \
         `transformations/**`\n  help: write \
         `libraries: [{ glob: { include: \"transformations/**\" } }]`"
    );
}

#[test]
fn duplicate_keys() {
    assert_eq!(
        err(&format!(
            "{HEAD}sinks:\n  out: {{ format: kafka }}\n  out: {{ format: delta }}\n"
        )),
        "pipeline.yml:5: duplicate key `sinks.out` (first written at line 4)\n  \
         help: remove or rename one of them"
    );
}

#[test]
fn a_name_used_by_a_table_and_a_sink() {
    assert_eq!(
        err(&format!(
            "{HEAD}tables:\n  t: {{}}\nsinks:\n  t: {{ format: kafka }}\n"
        )),
        "pipeline.yml:6: `t` is declared both as a table (line 4) and as a sink\n  \
         help: tables and sinks share one namespace; rename one of them"
    );
}

#[test]
fn yaml_syntax_errors_name_the_line() {
    let e = spec::parse_str(
        "name: p\nstorage: s\nsinks:\n  out: { format: kafka\n",
        Path::new("pipeline.yml"),
    )
    .unwrap_err();
    assert_eq!(e.kind, SpecErrorKind::Syntax);
    assert!(
        e.to_string().starts_with("pipeline.yml:5: invalid YAML: "),
        "{e}"
    );
    assert_eq!(
        err("name: p\nstorage: s\n---\nname: q\n"),
        "pipeline.yml:3: the spec must hold a single YAML document, found a second one (`---`)"
    );
}

#[test]
fn hostile_input_is_an_error_not_a_crash() {
    let deep = format!(
        "name: p\nstorage: s\nconfiguration: {}",
        "[".repeat(100_000)
    );
    assert!(spec::parse_str(&deep, Path::new("pipeline.yml")).is_err());
    // Every truncation and every single-character edit of the full example
    // parses or fails cleanly.
    let full = include_str!("../fixtures/spec/full.yml");
    let cuts: Vec<usize> = full.char_indices().map(|(i, _)| i).collect();
    for &i in &cuts {
        let _ = spec::parse_str(&full[..i], Path::new("pipeline.yml"));
        for c in ['{', '[', ':', '-', '\t', '"', '&', '*', '\n', '#'] {
            let mut edited = full.to_string();
            edited.insert(i, c);
            if let Ok(mut s) = spec::parse_str(&edited, Path::new("pipeline.yml")) {
                let _ = s.resolve_env(|_| None);
            }
        }
    }
    for text in [
        "\u{feff}",
        "{",
        "}",
        "- [",
        "? a\n: b",
        ": :",
        "&a *a",
        "!!binary x",
        "\t",
    ] {
        let _ = spec::parse_str(text, Path::new("pipeline.yml"));
    }
}

#[test]
fn load_names_the_path_it_could_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("pipeline.yml");
    let e = spec::load(&missing).unwrap_err();
    assert_eq!(e.kind, SpecErrorKind::Read);
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "{}: cannot read the pipeline spec: ",
            missing.display()
        )),
        "{text}"
    );
    assert!(
        text.ends_with("\n  help: check the path, or create a spec with `init --name <name>`"),
        "{text}"
    );
    let e = spec::load(dir.path()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: cannot read the pipeline spec: this is a directory\n  help: pass the spec \
             file itself, e.g. {}",
            dir.path().display(),
            missing.display()
        )
    );
}

#[test]
fn spec_errors_convert_to_diagnostics_and_framework_errors() {
    let e = spec::parse_str("name: p\n", Path::new("pipeline.yml")).unwrap_err();
    let framework: pipelines_core::Error = e.clone().into();
    assert_eq!(framework.to_string(), e.to_string());
    let d = e.to_diagnostic();
    assert_eq!(
        d.to_string(),
        "error: pipeline.yml:1: missing field `storage`\n  help: add e.g. \
         `storage: ./pipeline-storage` (checkpoints, the event log and tables without a \
         path go there)"
    );
}

#[test]
fn table_expectations_parse_with_their_lines_and_bad_ones_are_named() {
    let spec = spec::parse_str(
        &format!(
            "{HEAD}tables:\n  orders:\n    quarantine: bad\n    expectations:\n      - {{ name: a, condition: x > 0 }}\n      - name: b\n        condition: y IS NOT NULL\n        action: Drop\n"
        ),
        Path::new("pipeline.yml"),
    )
    .unwrap();
    let t = &spec.tables["orders"];
    assert_eq!(t.quarantine.as_deref(), Some("bad"));
    let got: Vec<(String, String, &str, usize)> = t
        .expectations
        .iter()
        .map(|e| (e.name.clone(), e.condition.clone(), e.action.name(), e.line))
        .collect();
    assert_eq!(
        got,
        [
            ("a".to_string(), "x > 0".to_string(), "warn", 7),
            ("b".to_string(), "y IS NOT NULL".to_string(), "drop", 8),
        ]
    );
    assert_eq!(
        err(&format!(
            "{HEAD}tables:\n  t:\n    expectations:\n      - {{ name: a, condition: x > 0, action: dorp }}\n"
        )),
        "pipeline.yml:6: `tables.t.expectations[0].action` is `dorp`, expected one of `warn`, `drop`, `fail`\n  \
         help: did you mean `drop`?"
    );
    assert_eq!(
        err(&format!(
            "{HEAD}tables:\n  t:\n    expectations:\n      - {{ name: a }}\n"
        )),
        "pipeline.yml:6: missing field `condition` in `tables.t.expectations[0]`\n  \
         help: write `expectations: [{ name: positive, condition: \"amount > 0\", action: drop }]`"
    );
    assert_eq!(
        err(&format!(
            "{HEAD}tables:\n  t:\n    expectations:\n      - {{ name: a, condition: x > 0 }}\n      - {{ name: a, condition: y > 0 }}\n"
        )),
        "pipeline.yml:7: expectation `a` is listed twice in `tables.t.expectations` (first at line 6)\n  \
         help: give each expectation of a table its own name"
    );
    assert_eq!(
        err(&format!(
            "{HEAD}tables:\n  t:\n    expectations:\n      - {{ name: a, conditon: x > 0 }}\n"
        )),
        "pipeline.yml:6: unknown field `conditon` in `tables.t.expectations[0]`, expected one of `name`, `condition`, `action`\n  \
         help: did you mean `condition`?"
    );
}
