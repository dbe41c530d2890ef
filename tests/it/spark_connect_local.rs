//! The Rust twin of the Spark Connect reference project
//! (`examples/spark_connect_ads`, dataset for dataset
//! `tests/spark/connect/python_project/transformations/ads.py`) run here, on
//! this engine: every table holds exactly the rows Spark 4.3 wrote for the
//! Python project (`tests/spark/connect/expected/python_project/*.tsv`).
//!
//! The helpers (`Tsv`: Arrow batches or a fixture file as the fixtures'
//! rows; `diff`) serve a remote run too: read Spark's tables back as Arrow
//! batches and compare them the same way.
//!
//! How the pipeline runs: the example binary itself, built by cargo and run
//! as a user runs it (`spark_connect_ads --spec <copy>/pipeline.yml run`,
//! data from `$CONNECT_TEST_DATA`). Its datasets are declared with the
//! attribute macros, which register them in the binary they are linked
//! into; linking the example's file into this test binary would add them to
//! this binary's registry, which `macros_registry::exact_registry` checks
//! holds only its own declarations. So the test asks cargo for the example
//! (the same profile, target directory and features as this test binary;
//! `cargo test` has built it already, then this is a freshness check).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Schema, TimeUnit};
use arrow::record_batch::RecordBatch;
use pipelines as dp;

/// The datasets of the Python project, every one a table with a fixture.
pub(crate) const ADS_TABLES: [&str; 9] = [
    "impressions_raw",
    "clicks_raw",
    "impressions_us",
    "impressions_tagged",
    "impressions_per_minute",
    "impressions_dedup",
    "attributed_clicks",
    "activity",
    "clicks_per_ad",
];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A table as the fixtures hold it: the column names, and the rows as lists
/// of cells (NULL `\N`; timestamps UTC `YYYY-MM-DD HH:MM:SS[.ffffff]`;
/// backslash, tab and newline escaped), sorted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tsv {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Tsv {
    /// The rows of `batches` (in `schema`, which names the columns even
    /// when there are no batches), rendered like `projects.render` renders
    /// what PySpark collects, then sorted.
    pub(crate) fn from_batches(schema: &Schema, batches: &[RecordBatch]) -> Tsv {
        let columns: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        let mut rows = Vec::new();
        for b in batches {
            assert_eq!(
                b.num_columns(),
                columns.len(),
                "a batch of {} columns in a table of {columns:?}",
                b.num_columns()
            );
            let cells: Vec<Vec<String>> = b
                .columns()
                .iter()
                .zip(b.schema().fields())
                .map(|(c, f)| render_column(f.name(), c))
                .collect();
            for r in 0..b.num_rows() {
                rows.push(cells.iter().map(|c| c[r].clone()).collect());
            }
        }
        rows.sort();
        Tsv { columns, rows }
    }

    /// A fixture file: the header line, then tab-separated rows (kept as
    /// written, escapes included).
    pub(crate) fn read(path: &Path) -> Tsv {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        Tsv::parse(&text)
    }

    /// The text of a fixture file.
    pub(crate) fn parse(text: &str) -> Tsv {
        let mut lines = text.lines();
        let split = |l: &str| l.split('\t').map(str::to_string).collect::<Vec<_>>();
        let columns = lines.next().map(split).unwrap_or_default();
        let mut rows: Vec<Vec<String>> = lines.map(split).collect();
        rows.sort();
        Tsv { columns, rows }
    }

    /// The fixture's text: header, then the rows, a line each.
    pub(crate) fn text(&self) -> String {
        std::iter::once(&self.columns)
            .chain(&self.rows)
            .map(|r| r.join("\t") + "\n")
            .collect()
    }
}

/// `tests/spark/connect/expected/<project>/<table>.tsv`.
pub(crate) fn fixture(project: &str, table: &str) -> Tsv {
    Tsv::read(
        &repo()
            .join("tests/spark/connect/expected")
            .join(project)
            .join(format!("{table}.tsv")),
    )
}

/// What differs between Spark's rows and ours, readably (empty when equal):
/// the headers, then each row Spark has more often than we do (`-`) and each
/// we have more often (`+`).
pub(crate) fn diff(table: &str, spark: &Tsv, ours: &Tsv) -> String {
    if spark == ours {
        return String::new();
    }
    let mut out = format!("table `{table}` differs (- Spark's, + ours):\n");
    if spark.columns != ours.columns {
        let _ = writeln!(out, "  columns - {}", spark.columns.join("\t"));
        let _ = writeln!(out, "  columns + {}", ours.columns.join("\t"));
    }
    // Both sorted: a merge walk finds the rows of each multiset not in the other.
    let (mut i, mut j) = (0, 0);
    while i < spark.rows.len() || j < ours.rows.len() {
        let (a, b) = (spark.rows.get(i), ours.rows.get(j));
        if a.is_some() && a == b {
            i += 1;
            j += 1;
        } else if let Some(a) = a.filter(|a| b.is_none_or(|b| *a < b)) {
            let _ = writeln!(out, "  - {}", a.join("\t"));
            i += 1;
        } else if let Some(b) = b {
            let _ = writeln!(out, "  + {}", b.join("\t"));
            j += 1;
        }
    }
    let _ = writeln!(
        out,
        "  ({} rows in Spark's, {} in ours)",
        spark.rows.len(),
        ours.rows.len()
    );
    out
}

/// Every cell of one column, as `projects.render` writes Python's value.
fn render_column(name: &str, col: &ArrayRef) -> Vec<String> {
    use arrow::datatypes::{Date32Type, Float32Type, Float64Type, TimestampMicrosecondType};
    let dt = col.data_type().clone();
    let texts: Vec<Option<String>> = match &dt {
        DataType::Timestamp(..) => {
            let us = arrow::compute::cast(col, &DataType::Timestamp(TimeUnit::Microsecond, None))
                .unwrap();
            let us = us.as_primitive::<TimestampMicrosecondType>();
            (0..us.len())
                .map(|i| us.is_valid(i).then(|| timestamp_text(us.value(i))))
                .collect()
        }
        DataType::Date32 => {
            let d = col.as_primitive::<Date32Type>();
            (0..d.len())
                .map(|i| {
                    d.is_valid(i).then(|| {
                        chrono::DateTime::from_timestamp(i64::from(d.value(i)) * 86_400, 0)
                            .expect("a date in chrono's range")
                            .format("%Y-%m-%d")
                            .to_string()
                    })
                })
                .collect()
        }
        DataType::Float64 => {
            let f = col.as_primitive::<Float64Type>();
            (0..f.len())
                .map(|i| f.is_valid(i).then(|| python_float(f.value(i))))
                .collect()
        }
        DataType::Float32 => {
            let f = col.as_primitive::<Float32Type>();
            (0..f.len())
                .map(|i| f.is_valid(i).then(|| python_float(f64::from(f.value(i)))))
                .collect()
        }
        DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Decimal128(..)
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Dictionary(..) => {
            let s = arrow::compute::cast(col, &DataType::Utf8)
                .unwrap_or_else(|e| panic!("column `{name}` ({dt}) as text: {e}"));
            let s = s.as_string::<i32>();
            (0..s.len())
                .map(|i| s.is_valid(i).then(|| escape(s.value(i))))
                .collect()
        }
        other => panic!("column `{name}`: no TSV rendering for {other}"),
    };
    texts
        .into_iter()
        .map(|t| t.unwrap_or_else(|| "\\N".to_string()))
        .collect()
}

/// Microseconds since the epoch as UTC `YYYY-MM-DD HH:MM:SS[.ffffff]`.
fn timestamp_text(us: i64) -> String {
    let t = chrono::DateTime::from_timestamp_micros(us)
        .expect("a timestamp in chrono's range")
        .naive_utc();
    if us.rem_euclid(1_000_000) == 0 {
        t.format("%Y-%m-%d %H:%M:%S").to_string()
    } else {
        t.format("%Y-%m-%d %H:%M:%S%.6f").to_string()
    }
}

/// A float as Python's `str` writes it (`1.0`, `0.1`, `1e+16`, `1.5e-05`).
fn python_float(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    let a = v.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        // Rust: `1.5e-5`; Python: `1.5e-05`.
        let s = format!("{v:e}");
        let (mantissa, exp) = s.split_once('e').unwrap();
        let (sign, digits) = match exp.strip_prefix('-') {
            Some(d) => ('-', d),
            None => ('+', exp),
        };
        return format!("{mantissa}e{sign}{digits:0>2}");
    }
    if v.fract() == 0.0 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('\t', "\\t")
        .replace('\n', "\\n")
}

/// A copy of `tests/spark/connect/data` in `dst`, each directory's files
/// modified 10 s apart in name order (the file source reads the oldest
/// first; git keeps no modification times), as `projects.copy_data` does.
pub(crate) fn copy_connect_data(dst: &Path) {
    let src = repo().join("tests/spark/connect/data");
    let base = SystemTime::now() - Duration::from_secs(3600);
    for sub in ["impressions", "clicks"] {
        let to = dst.join(sub);
        std::fs::create_dir_all(&to).unwrap();
        let mut names: Vec<OsString> = std::fs::read_dir(src.join(sub))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        for (i, name) in names.iter().enumerate() {
            std::fs::copy(src.join(sub).join(name), to.join(name)).unwrap();
            std::fs::File::options()
                .write(true)
                .open(to.join(name))
                .unwrap()
                .set_modified(base + Duration::from_secs(10 * i as u64))
                .unwrap();
        }
    }
}

/// The example binary `name`, built by cargo with this test binary's
/// profile, target directory and package features.
pub(crate) fn example_binary(name: &str) -> PathBuf {
    // This binary is <target>/<profile dir>/deps/it-<hash>.
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap();
    let target_dir = profile_dir.parent().unwrap();
    let profile = match profile_dir.file_name().unwrap().to_str().unwrap() {
        "debug" => "dev",
        other => other,
    };
    let features: Vec<&str> = [
        ("delta", cfg!(feature = "delta")),
        ("kafka", cfg!(feature = "kafka")),
        ("postgres", cfg!(feature = "postgres")),
        ("sql", cfg!(feature = "sql")),
        ("spark-connect", cfg!(feature = "spark-connect")),
    ]
    .into_iter()
    .filter_map(|(f, on)| on.then_some(f))
    .collect();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    // Cargo gives this test process the variables of a running package
    // (CARGO_PKG_NAME, CARGO_MANIFEST_DIR, ...). A dependency's build script
    // (ring's) asks to rerun when they change, so a nested build that saw
    // them would rebuild ring and every crate above it, and the next build
    // from a shell (`cargo test --doc`) all of it once more.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        let package_var = key.starts_with("CARGO_PKG_")
            || key.starts_with("CARGO_MANIFEST_")
            || key.starts_with("CARGO_BIN_")
            || [
                "CARGO_CRATE_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "CARGO_RUSTC_CURRENT_DIR",
                "OUT_DIR",
            ]
            .contains(&key.as_ref());
        if package_var {
            command.env_remove(key.as_ref());
        }
    }
    let out = command
        .current_dir(repo())
        .args(["build", "--quiet", "--example", name, "--profile", profile])
        .arg("--target-dir")
        .arg(target_dir)
        .args(["--no-default-features", "--features", &features.join(",")])
        .output()
        .expect("running cargo");
    assert!(
        out.status.success(),
        "cargo build --example {name} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bin = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(bin.is_file(), "cargo built no {}", bin.display());
    bin
}

#[test]
fn the_ads_pipeline_gives_the_tables_spark_gives() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    copy_connect_data(&dir.join("data"));
    std::fs::copy(
        repo().join("examples/spark_connect_ads/pipeline.yml"),
        dir.join("pipeline.yml"),
    )
    .unwrap();
    let out = Command::new(example_binary("spark_connect_ads"))
        .current_dir(dir)
        .env("CONNECT_TEST_DATA", dir.join("data"))
        .arg("--spec")
        .arg(dir.join("pipeline.yml"))
        .arg("run")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the run failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut problems = String::new();
    for table in ADS_TABLES {
        let path = dir.join("pipeline-storage/tables").join(table);
        let schema = dp::delta::table_schema(path.as_path())
            .unwrap_or_else(|e| panic!("table `{table}`: {e}\n{stdout}"));
        let batches = dp::delta::read_table(path.as_path())
            .unwrap()
            .unwrap_or_else(|| panic!("table `{table}` was not written\n{stdout}"));
        let ours = Tsv::from_batches(&schema, &batches);
        problems += &diff(table, &fixture("python_project", table), &ours);
    }
    assert!(problems.is_empty(), "{problems}\nthe run:\n{stdout}");
}

/// The renderings PySpark's values get, and the diff's shape.
#[test]
fn tsv_cells_and_diffs_are_spark_s() {
    assert_eq!(python_float(1.0), "1.0");
    assert_eq!(python_float(0.1), "0.1");
    assert_eq!(python_float(-2.5), "-2.5");
    assert_eq!(python_float(1e16), "1e+16");
    assert_eq!(python_float(1.5e-5), "1.5e-05");
    assert_eq!(python_float(123456.789), "123456.789");
    assert_eq!(timestamp_text(0), "1970-01-01 00:00:00");
    assert_eq!(timestamp_text(1_500), "1970-01-01 00:00:00.001500");
    assert_eq!(escape("a\tb\\c\nd"), "a\\tb\\\\c\\nd");
    let spark = Tsv::parse("k\tn\na\t1\nb\t2\nb\t2\n");
    assert_eq!(spark.text(), "k\tn\na\t1\nb\t2\nb\t2\n");
    let ours = Tsv::parse("k\tn\nb\t2\nc\t\\N\n");
    assert_eq!(
        diff("t", &spark, &ours),
        "table `t` differs (- Spark's, + ours):\n  - a\t1\n  - b\t2\n  + c\t\\N\n  (3 rows in Spark's, 2 in ours)\n"
    );
    assert_eq!(diff("t", &spark, &spark), "");
}
