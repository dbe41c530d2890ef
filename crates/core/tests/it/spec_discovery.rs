//! Finding the spec file from a directory and its parents.

use std::fs;

use pipelines_core::spec::{self, SpecErrorKind};

const SPEC: &str = "name: p\nstorage: s\n";

#[test]
fn finds_the_spec_in_the_start_directory() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("pipeline.yml"), SPEC).unwrap();
    assert_eq!(
        spec::find_spec(dir.path()).unwrap(),
        dir.path().join("pipeline.yml")
    );
}

#[test]
fn finds_the_spec_in_a_parent() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("pipeline.yaml"), SPEC).unwrap();
    let deep = dir.path().join("src/flows");
    fs::create_dir_all(&deep).unwrap();
    let found = spec::find_spec(&deep).unwrap();
    assert_eq!(found, dir.path().join("pipeline.yaml"));
    assert_eq!(spec::load(&found).unwrap().name, "p");
}

#[test]
fn the_nearest_directory_wins() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("pipeline.yml"), SPEC).unwrap();
    let sub = dir.path().join("sub");
    fs::create_dir_all(&sub).unwrap();
    fs::write(sub.join("spark-pipeline.yml"), SPEC).unwrap();
    assert_eq!(
        spec::find_spec(&sub).unwrap(),
        sub.join("spark-pipeline.yml")
    );
}

#[test]
fn spark_pipeline_yaml_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("spark-pipeline.yaml"), SPEC).unwrap();
    assert_eq!(
        spec::find_spec(dir.path()).unwrap(),
        dir.path().join("spark-pipeline.yaml")
    );
}

#[test]
fn two_candidates_are_an_error() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("pipeline.yml"), SPEC).unwrap();
    fs::write(dir.path().join("spark-pipeline.yml"), SPEC).unwrap();
    let e = spec::find_spec(dir.path()).unwrap_err();
    assert_eq!(e.kind, SpecErrorKind::Ambiguous);
    assert_eq!(
        e.to_string(),
        format!(
            "found 2 pipeline specs in {}: pipeline.yml, spark-pipeline.yml\n  \
             help: keep only one of them, or pass `--spec PATH` to choose",
            dir.path().display()
        )
    );
}

#[test]
fn none_found_says_where_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let start = dir.path().join("a/b");
    fs::create_dir_all(&start).unwrap();
    // A directory named like a spec is not a spec.
    fs::create_dir_all(start.join("pipeline.yml")).unwrap();
    match spec::find_spec(&start) {
        Ok(found) => {
            // Only possible if some ancestor of the temp dir holds a spec.
            assert!(!found.starts_with(dir.path()), "{}", found.display());
        }
        Err(e) => {
            assert_eq!(e.kind, SpecErrorKind::NotFound);
            assert_eq!(
                e.to_string(),
                format!(
                    "no pipeline spec found in {} or any parent directory (looked for \
                     pipeline.yml, pipeline.yaml, spark-pipeline.yml, spark-pipeline.yaml)\n  \
                     help: create one with `init --name <name>`, or pass `--spec PATH`",
                    start.display()
                )
            );
        }
    }
}
