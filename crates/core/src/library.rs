//! Library files: the spec's `libraries:` entries, found on disk and handed
//! to the loader registered for their language.
//!
//! A loader (the SQL one lives in the `pipelines-sql` crate) is registered
//! with one line, `inventory::submit! { LibraryRegistration(&MY_LOADER) }`,
//! and turns one file into datasets and flows, which join the ones declared
//! in Rust and in the spec as if written there. The entries follow Spark:
//! a file path, or a folder followed by `/**` for every file below it,
//! relative to the spec's directory; a Python file, or a file no loader
//! reads, is an error naming the file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::definition::{DatasetDef, FlowDef};
use crate::error::{Diagnostic, Origin};
use crate::spec::{display_path, LibrarySpec, PipelineSpec};

/// Reads library files of one language into declarations.
pub trait LibraryLoader: Sync {
    /// The file extensions it reads, lower-case, without the dot.
    fn extensions(&self) -> &'static [&'static str];

    /// The datasets and flows one file declares, or every problem in it.
    fn load(&self, file: &LibraryFile<'_>) -> Result<LibraryDeclarations, Vec<Diagnostic>>;
}

/// One registered loader; submit it with `inventory::submit!`.
pub struct LibraryRegistration(pub &'static dyn LibraryLoader);

inventory::collect!(LibraryRegistration);

/// A library file, read.
#[derive(Clone, Copy, Debug)]
pub struct LibraryFile<'a> {
    /// Where it is on disk.
    pub path: &'a Path,
    /// The path as messages show it (origins use it).
    pub display: &'a str,
    /// Its contents.
    pub text: &'a str,
}

/// What library files declare.
#[derive(Clone, Debug, Default)]
pub struct LibraryDeclarations {
    /// Datasets, in file order.
    pub datasets: Vec<DatasetDef>,
    /// Flows, in file order.
    pub flows: Vec<FlowDef>,
}

impl LibraryDeclarations {
    /// Appends another file's declarations.
    pub fn extend(&mut self, other: LibraryDeclarations) {
        self.datasets.extend(other.datasets);
        self.flows.extend(other.flows);
    }
}

/// The loader registered for a file extension (any case), if any.
pub fn loader_for(extension: &str) -> Option<&'static dyn LibraryLoader> {
    let ext = extension.to_ascii_lowercase();
    inventory::iter::<LibraryRegistration>
        .into_iter()
        .map(|r| r.0)
        .find(|l| l.extensions().contains(&ext.as_str()))
}

/// The extensions some loader in this binary reads, sorted.
pub fn extensions() -> Vec<&'static str> {
    let mut v: Vec<&str> = inventory::iter::<LibraryRegistration>
        .into_iter()
        .flat_map(|r| r.0.extensions().iter().copied())
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Loads every library file of the spec: all their declarations, or every
/// problem of every file (files are read in path order, each once).
pub fn load_libraries(spec: &PipelineSpec) -> Result<LibraryDeclarations, Vec<Diagnostic>> {
    let base = spec
        .path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let spec_file = display_path(&spec.path);
    let mut problems = Vec::new();
    let mut files: Vec<(PathBuf, Option<usize>)> = Vec::new();
    let mut seen = BTreeSet::new();
    for lib in &spec.libraries {
        let LibrarySpec::Glob { include, line } = lib;
        let origin = Some(Origin::Spec {
            file: spec_file.clone(),
            line: *line,
        });
        match matching_files(&base, include) {
            Ok(found) => {
                for f in found {
                    if seen.insert(f.clone()) {
                        files.push((f, *line));
                    }
                }
            }
            Err(message) => problems.push(Diagnostic::new(message).origin(origin).help(
                "point the entry at a file or a folder below the spec's directory, e.g. `transformations/**`",
            )),
        }
    }
    let mut out = LibraryDeclarations::default();
    for (path, line) in files {
        let display = display_path(&path);
        let origin = Some(Origin::Spec {
            file: spec_file.clone(),
            line,
        });
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or_default()
            .to_ascii_lowercase();
        let Some(loader) = loader_for(&ext) else {
            problems.push(unreadable_file(&display, &ext).origin(origin));
            continue;
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                problems.push(
                    Diagnostic::new(format!("cannot read library file `{display}`: {e}"))
                        .origin(origin),
                );
                continue;
            }
        };
        let file = LibraryFile {
            path: &path,
            display: &display,
            text: &text,
        };
        match loader.load(&file) {
            Ok(decls) => out.extend(decls),
            Err(errors) => problems.extend(errors),
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// The error for a file no loader of this binary reads.
fn unreadable_file(display: &str, ext: &str) -> Diagnostic {
    let known = extensions();
    let readable = if known.is_empty() {
        "this binary reads no library files (it was built without the `sql` feature)".to_string()
    } else {
        format!(
            "only {} files are read",
            known
                .iter()
                .map(|e| format!(".{e}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    match ext {
        "py" => Diagnostic::new(format!(
            "`{display}`: Python library files are not supported; port it to SQL or Rust"
        )),
        _ if known.is_empty() && ext == "sql" => Diagnostic::new(format!(
            "`{display}`: SQL library files need the `sql` feature of the `pipelines` crate"
        ))
        .help("build with the default features, or run the project with the `pipelines` binary"),
        _ => Diagnostic::new(format!("`{display}` is not a library file: {readable}"))
            .help("move it out of the library folder, or list the library files one by one"),
    }
}

/// The files an entry names: the file itself, or every file below the
/// folder of a `folder/**` entry (hidden files and `__pycache__` skipped),
/// sorted by path.
fn matching_files(base: &Path, include: &str) -> Result<Vec<PathBuf>, String> {
    if let Some(dir) = include.strip_suffix("/**") {
        let root = base.join(dir);
        if !root.is_dir() {
            return Err(format!(
                "library folder `{}` does not exist",
                display_path(&root)
            ));
        }
        let mut out = Vec::new();
        walk(&root, &mut out).map_err(|e| format!("cannot list `{}`: {e}", display_path(&root)))?;
        out.sort();
        return Ok(out);
    }
    let file = base.join(include);
    if file.is_file() {
        Ok(vec![file])
    } else if file.is_dir() {
        Err(format!(
            "library `{include}` is a folder; write `{}/**` for the files below it",
            include.trim_end_matches('/')
        ))
    } else {
        Err(format!(
            "library file `{}` does not exist",
            display_path(&file)
        ))
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "__pycache__" {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else if path.is_file() {
            out.push(path);
        }
    }
    Ok(())
}
