//! `${ENV_VAR}` substitution, with a fake environment.

use std::path::{Path, PathBuf};

use pipelines_core::spec::{self, PipelineSpec, SpecErrorKind};

fn fixture_spec() -> PipelineSpec {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/spec/full.yml");
    spec::load(&path).unwrap()
}

fn fake_env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    }
}

#[test]
fn unset_variable_names_the_key_and_line() {
    let mut spec = fixture_spec();
    let before = spec.clone();
    let errors = spec.resolve_env(fake_env(&[])).unwrap_err();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].kind, SpecErrorKind::Env);
    assert_eq!(
        errors[0].to_string(),
        format!(
            "{}:12: environment variable `KAFKA_BROKERS` is not set (used by \
             sinks.event_counts_sink.options.\"kafka.bootstrap.servers\")\n  \
             help: export KAFKA_BROKERS=... before running",
            spec.path.display()
        )
    );
    // Nothing was changed.
    assert_eq!(spec, before);
}

#[test]
fn set_variables_are_substituted() {
    let mut spec = fixture_spec();
    spec.resolve_env(fake_env(&[("KAFKA_BROKERS", "kafka:9092")]))
        .unwrap();
    assert_eq!(
        spec.sinks["event_counts_sink"].options["kafka.bootstrap.servers"],
        "kafka:9092"
    );
    assert_eq!(
        spec.sinks["event_counts_sink"].options["topic"],
        "event-counts"
    );
}

#[test]
fn every_unset_variable_is_reported_at_once() {
    let text = "name: p\n\
                storage: ${ROOT}/storage\n\
                configuration:\n  a: ${A}\n\
                tables:\n  t: { path: \"${DATA}/t\", options: { x: \"${X:-fallback}\" } }\n\
                sinks:\n  s:\n    format: kafka\n    options:\n      topic: $${LITERAL}\n\
                flows:\n  f:\n    options: { maxOffsetsPerTrigger: \"${MAX}\" }\n";
    let mut spec = spec::parse_str(text, Path::new("pipeline.yml")).unwrap();
    let errors = spec.resolve_env(fake_env(&[("A", "1")])).unwrap_err();
    let messages: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        messages,
        vec![
            "pipeline.yml:2: environment variable `ROOT` is not set (used by storage)\n  \
             help: export ROOT=... before running",
            "pipeline.yml:6: environment variable `DATA` is not set (used by tables.t.path)\n  \
             help: export DATA=... before running",
            "pipeline.yml:14: environment variable `MAX` is not set (used by \
             flows.f.options.maxOffsetsPerTrigger)\n  help: export MAX=... before running",
        ]
    );

    spec.resolve_env(fake_env(&[
        ("A", "1"),
        ("ROOT", "/srv"),
        ("DATA", "/data"),
        ("MAX", "500"),
    ]))
    .unwrap();
    assert_eq!(spec.storage, "/srv/storage");
    assert_eq!(spec.storage_dir(), PathBuf::from("/srv/storage"));
    assert_eq!(spec.configuration["a"], "1");
    assert_eq!(spec.tables["t"].path.as_deref(), Some("/data/t"));
    assert_eq!(spec.tables["t"].options["x"], "fallback");
    assert_eq!(spec.sinks["s"].options["topic"], "${LITERAL}");
    assert_eq!(spec.flows["f"].options["maxOffsetsPerTrigger"], "500");
}

#[test]
fn malformed_reference_is_an_error() {
    let mut spec = spec::parse_str(
        "name: p\nstorage: s\nconfiguration:\n  a: \"${UNCLOSED\"\n",
        Path::new("pipeline.yml"),
    )
    .unwrap();
    let errors = spec.resolve_env(fake_env(&[])).unwrap_err();
    assert_eq!(
        errors[0].to_string(),
        "pipeline.yml:4: bad variable reference in configuration.a: unclosed `${` in \
         `${UNCLOSED`\n  help: write `${NAME}` or `${NAME:-default}`, or `$${` for a \
         literal `${`"
    );
}

#[test]
fn process_environment_convenience() {
    // Only a variable this test owns; the spec has no other reference.
    let mut spec = spec::parse_str(
        "name: p\nstorage: s\nconfiguration:\n  home: \"${PIPELINES_SPEC_TEST_SURELY_UNSET_VAR:-none}\"\n",
        Path::new("pipeline.yml"),
    )
    .unwrap();
    spec.resolve_env_from_process().unwrap();
    assert_eq!(spec.configuration["home"], "none");
}
