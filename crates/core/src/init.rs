//! `init --name X`: writes a starter project (Cargo.toml, pipeline.yml, a
//! flow file and sample data) that passes `dry-run` as written; with
//! `--sql`, a project of YAML and SQL only, for the `pipelines` binary.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

const MAIN_RS: &str = include_str!("init/main.rs");
const SPEC: &str = include_str!("init/pipeline.yml");
const EVENTS: &str = include_str!("init/events.json");
const SQL_SPEC: &str = include_str!("init/sql/pipeline.yml");
const SQL_FLOWS: &str = include_str!("init/sql/events.sql");

/// What kind of starter project [`write_project`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProjectKind {
    /// A Cargo project: flows in `src/main.rs`.
    Rust,
    /// YAML and SQL only (`transformations/events.sql`), run by the
    /// `pipelines` binary.
    Sql,
}

/// The framework's own directory (the workspace root, two levels above
/// this crate's `crates/core`), for the starter project's path dependency.
fn framework_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| here.to_path_buf())
}

/// Checks that `name` can be both a pipeline and a Cargo package name.
pub fn check_name(name: &str) -> Result<()> {
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "invalid pipeline name `{name}`: use letters, digits, `-` and `_`, starting with a letter (e.g. `click_stream`)"
        )))
    }
}

/// Writes the starter project into `dir`; returns the files written.
/// Refuses a directory that exists and is not empty.
pub fn write_project(name: &str, dir: &Path, kind: ProjectKind) -> Result<Vec<PathBuf>> {
    check_name(name)?;
    if dir.exists() {
        let mut entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
        if entries.next().is_some() {
            return Err(Error::Usage(format!(
                "{} already exists and is not empty; choose another --name or --dir",
                dir.display()
            )));
        }
    }
    let cargo_toml = format!(
        "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\npipelines = {{ path = \"{}\" }}\n",
        framework_root().display()
    );
    let data = (dir.join("data/events/part-0000.json"), EVENTS.to_string());
    let files: Vec<(PathBuf, String)> = match kind {
        ProjectKind::Rust => vec![
            (dir.join("Cargo.toml"), cargo_toml),
            (dir.join("pipeline.yml"), SPEC.replace("{{name}}", name)),
            (dir.join("src/main.rs"), MAIN_RS.to_string()),
            data,
            (
                dir.join(".gitignore"),
                "/target\npipeline-storage/\n".to_string(),
            ),
        ],
        ProjectKind::Sql => vec![
            (dir.join("pipeline.yml"), SQL_SPEC.replace("{{name}}", name)),
            (
                dir.join("transformations/events.sql"),
                SQL_FLOWS.to_string(),
            ),
            data,
            (dir.join(".gitignore"), "pipeline-storage/\n".to_string()),
        ],
    };
    let mut written = Vec::new();
    for (path, text) in files {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
        written.push(path);
    }
    Ok(written)
}
