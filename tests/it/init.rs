//! `init --name X` writes a starter project whose spec parses and whose
//! flows (compiled as `examples/starter.rs`) validate against it.

use std::ffi::OsString;

use pipelines as dp;

fn cli(args: &[&str]) -> (u8, String, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let argv: Vec<OsString> = std::iter::once("pipeline")
        .chain(args.iter().copied())
        .map(OsString::from)
        .collect();
    let code = dp::cli::execute(dp::Pipeline::new(), argv, &mut out, &mut err);
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

#[test]
fn init_writes_a_project_that_parses() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("click_stream");
    let (code, out, err) = cli(&[
        "init",
        "--name",
        "click_stream",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("Created pipeline `click_stream` in "),
        "{out}"
    );
    for f in [
        "Cargo.toml",
        "pipeline.yml",
        "src/main.rs",
        "data/events/part-0000.json",
        ".gitignore",
    ] {
        assert!(dir.join(f).exists(), "{f} missing");
    }
    let spec = dp::spec::load(&dir.join("pipeline.yml")).unwrap();
    assert_eq!(spec.name, "click_stream");
    let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let root = cargo
        .lines()
        .find_map(|l| l.strip_prefix("pipelines = { path = \""))
        .and_then(|l| l.strip_suffix("\" }"))
        .expect("a path dependency on pipelines");
    let manifest = std::fs::read_to_string(std::path::Path::new(root).join("Cargo.toml")).unwrap();
    assert!(manifest.contains("name = \"pipelines\""));
    // The template's flows are those of examples/starter.rs.
    let main_rs = std::fs::read_to_string(dir.join("src/main.rs")).unwrap();
    assert_eq!(main_rs, include_str!("../../crates/core/src/init/main.rs"));
}

#[test]
fn init_refuses_bad_names_and_non_empty_dirs() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, _, err) = cli(&[
        "init",
        "--name",
        "9lives",
        "--dir",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "error: invalid pipeline name `9lives`: use letters, digits, `-` and `_`, starting with a letter (e.g. `click_stream`)\n"
    );
    std::fs::write(tmp.path().join("x"), "").unwrap();
    let (code, _, err) = cli(&[
        "init",
        "--name",
        "ok",
        "--dir",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(
        err.ends_with("already exists and is not empty; choose another --name or --dir\n"),
        "{err}"
    );
}

#[test]
fn conflicting_refresh_flags_are_refused() {
    let (code, _, err) = cli(&["run", "--full-refresh-all", "--refresh", "a"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot be used with"), "{err}");
}
