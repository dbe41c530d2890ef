//! File source: listing order, admission limits, globs, the source log
//! (restart, replay), bad-record modes, csv/parquet/text, manifests.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, TimestampMicrosecondType};
use arrow::util::pretty::pretty_format_batches;
use pipelines_core::engine::source::{Source, SourceContext};
use pipelines_core::engine::sources::{open_source, open_table_source};
use pipelines_core::plan::reader::SourceSpec;
use pipelines_core::{Error, Session};
use serde_json::json;

struct Env {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    state: PathBuf,
}

fn env() -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("project");
    let state = tmp.path().join("checkpoint/sources/0");
    fs::create_dir_all(base.join("data/logs")).unwrap();
    fs::create_dir_all(&state).unwrap();
    Env {
        base: base.canonicalize().unwrap(),
        state,
        _tmp: tmp,
    }
}

impl Env {
    fn ctx(&self) -> SourceContext {
        SourceContext {
            flow: "f".into(),
            state_dir: self.state.clone().into(),
            base_dir: self.base.clone(),
            option_overrides: BTreeMap::new(),
        }
    }

    /// Writes a file with a given modification time (seconds after an epoch).
    fn write(&self, rel: &str, text: &str, mtime_s: u64) -> PathBuf {
        let p = self.base.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, text).unwrap();
        set_mtime(&p, mtime_s);
        p
    }

    fn open(&self, spec: &SourceSpec) -> Box<dyn Source> {
        let schema = spec.schema.clone().unwrap();
        open_source(spec, schema, self.ctx()).unwrap()
    }
}

fn set_mtime(p: &Path, s: u64) {
    let f = fs::File::options().write(true).open(p).unwrap();
    f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + s))
        .unwrap();
}

fn spec(format: &str, path: &str, schema: Option<&str>, opts: &[(&str, &str)]) -> SourceSpec {
    let mut r = Session::new().read_stream().format(format);
    if let Some(s) = schema {
        r = r.schema(s);
    }
    for (k, v) in opts {
        r = r.option(*k, *v);
    }
    r.load(path).unwrap().sources()[0].clone()
}

fn json_spec(opts: &[(&str, &str)]) -> SourceSpec {
    spec("json", "data/logs", Some("id BIGINT, msg STRING"), opts)
}

fn ids(batches: &[RecordBatch]) -> Vec<Option<i64>> {
    batches
        .iter()
        .flat_map(|b| {
            let a = b.column(0).as_primitive::<Int64Type>();
            (0..a.len())
                .map(|i| a.is_valid(i).then(|| a.value(i)))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn lines(ids: &[i64]) -> String {
    ids.iter()
        .map(|i| format!("{{\"id\":{i},\"msg\":\"m{i}\"}}\n"))
        .collect()
}

/// Plans and reads the next batch; returns its offset and ids.
fn next(
    src: &mut Box<dyn Source>,
    start: Option<&serde_json::Value>,
) -> Option<(serde_json::Value, Vec<Option<i64>>)> {
    let end = src.latest_offset(start).unwrap()?;
    let r = src.read(start, &end).unwrap();
    Some((end, ids(&r.batches)))
}

fn table(batches: &[RecordBatch]) -> String {
    pretty_format_batches(batches).unwrap().to_string()
}

#[test]
fn max_files_per_trigger_in_modification_time_order() {
    let e = env();
    // Names disagree with modification times: mtime order wins, ties by name.
    e.write("data/logs/c.json", &lines(&[1, 2]), 10);
    e.write("data/logs/a.json", &lines(&[3]), 20);
    e.write("data/logs/b.json", &lines(&[4]), 20);
    e.write("data/logs/d.json", &lines(&[5]), 30);
    let mut src = e.open(&json_spec(&[("maxFilesPerTrigger", "2")]));
    let (o0, r0) = next(&mut src, None).unwrap();
    assert_eq!(o0, json!({"logOffset": 0}));
    assert_eq!(r0, vec![Some(1), Some(2), Some(3)]);
    let (o1, r1) = next(&mut src, Some(&o0)).unwrap();
    assert_eq!(o1, json!({"logOffset": 1}));
    assert_eq!(r1, vec![Some(4), Some(5)]);
    assert!(src.latest_offset(Some(&o1)).unwrap().is_none());

    // The source log is in Spark's format.
    let log = fs::read_to_string(e.state.join("0")).unwrap();
    let mut it = log.lines();
    assert_eq!(it.next(), Some("v1"));
    let first: serde_json::Value = serde_json::from_str(it.next().unwrap()).unwrap();
    assert_eq!(
        first["path"],
        json!(format!(
            "file://{}",
            e.base.join("data/logs/c.json").display()
        ))
    );
    assert_eq!(first["batchId"], json!(0));
    assert_eq!(first["timestamp"], json!(1_700_000_010_000i64));

    // A new file is picked up by the next trigger; reading a range of
    // several batches reads all their files.
    e.write("data/logs/e.json", &lines(&[6]), 5);
    let (o2, r2) = next(&mut src, Some(&o1)).unwrap();
    assert_eq!(r2, vec![Some(6)]);
    let all = src.read(None, &o2).unwrap();
    assert_eq!(ids(&all.batches), (1..=6).map(Some).collect::<Vec<_>>());
}

#[test]
fn latest_first_and_max_bytes() {
    let e = env();
    e.write("data/logs/a.json", &lines(&[1]), 10);
    e.write("data/logs/b.json", &lines(&[2]), 20);
    e.write("data/logs/c.json", &lines(&[3]), 30);
    let mut src = e.open(&json_spec(&[
        ("maxFilesPerTrigger", "1"),
        ("latestFirst", "true"),
    ]));
    let (o, r) = next(&mut src, None).unwrap();
    assert_eq!(r, vec![Some(3)]);
    let (o, r) = next(&mut src, Some(&o)).unwrap();
    assert_eq!(r, vec![Some(2)]);
    let (_, r) = next(&mut src, Some(&o)).unwrap();
    assert_eq!(r, vec![Some(1)]);

    let e = env();
    let one = lines(&[1]).len(); // every file has one line of this size
    for (i, t) in [(1, 10), (2, 20), (3, 30)] {
        e.write(&format!("data/logs/{i}.json"), &lines(&[i]), t);
    }
    e.write("data/logs/4.json", &lines(&[4, 40, 400]), 40);
    let max = (2 * one + 1).to_string();
    let mut src = e.open(&json_spec(&[("maxBytesPerTrigger", &max)]));
    let (o, r) = next(&mut src, None).unwrap();
    assert_eq!(r, vec![Some(1), Some(2)]);
    let b = src.read(None, &o).unwrap();
    assert_eq!(b.bytes, 2 * one as u64);
    let (o, r) = next(&mut src, Some(&o)).unwrap();
    assert_eq!(r, vec![Some(3)]);
    // A file bigger than the limit still makes a batch of its own.
    let (_, r) = next(&mut src, Some(&o)).unwrap();
    assert_eq!(r, vec![Some(4), Some(40), Some(400)]);
}

#[test]
fn glob_and_hidden_files() {
    let e = env();
    e.write("data/logs/2026/01/part-0.json", &lines(&[1]), 1);
    e.write("data/logs/2026/02/part-1.json", &lines(&[2]), 2);
    e.write("data/logs/2026/02/other.json", &lines(&[99]), 3);
    e.write("data/logs/part-2.json", &lines(&[3]), 4);
    e.write("data/logs/_tmp/part-9.json", &lines(&[98]), 5);
    let s = spec(
        "json",
        "data/logs/**/part-*.json",
        Some("id BIGINT, msg STRING"),
        &[],
    );
    let mut src = e.open(&s);
    let (_, r) = next(&mut src, None).unwrap();
    assert_eq!(r, vec![Some(1), Some(2), Some(3)]);

    let s = spec(
        "json",
        "data/logs/*/*/part-*.json",
        Some("id BIGINT, msg STRING"),
        &[],
    );
    let e2 = Env {
        _tmp: tempfile::tempdir().unwrap(),
        base: e.base.clone(),
        state: e.state.join("other"),
    };
    let mut src = e2.open(&s);
    let (_, r) = next(&mut src, None).unwrap();
    assert_eq!(r, vec![Some(1), Some(2)]);

    // Directory listing: recursive, hidden files and directories skipped.
    let e = env();
    e.write("data/logs/a.json", &lines(&[1]), 1);
    e.write("data/logs/.a.json.crc", "garbage", 2);
    e.write("data/logs/_SUCCESS", "", 3);
    e.write("data/logs/.staging/b.json", &lines(&[97]), 4);
    e.write("data/logs/date=2026-01-01/c.json", &lines(&[2]), 5);
    e.write("data/logs/d.json._COPYING_", "{", 6);
    let mut src = e.open(&json_spec(&[]));
    let (_, r) = next(&mut src, None).unwrap();
    assert_eq!(r, vec![Some(1), Some(2)]);
}

#[test]
fn restart_neither_rereads_nor_skips() {
    let e = env();
    e.write("data/logs/a.json", &lines(&[1]), 1);
    e.write("data/logs/b.json", &lines(&[2]), 2);
    let s = json_spec(&[("maxFilesPerTrigger", "1")]);
    let o0 = {
        let mut src = e.open(&s);
        next(&mut src, None).unwrap().0
    };
    // Restart after batch 0 was committed.
    e.write("data/logs/c.json", &lines(&[3]), 0); // older mtime, still new
    let mut src = e.open(&s);
    let (o1, r) = next(&mut src, Some(&o0)).unwrap();
    assert_eq!(r, vec![Some(3)]);
    let (o2, r) = next(&mut src, Some(&o1)).unwrap();
    assert_eq!(r, vec![Some(2)]);
    assert!(src.latest_offset(Some(&o2)).unwrap().is_none());
    drop(src);
    let mut src = e.open(&s);
    assert!(src.latest_offset(Some(&o2)).unwrap().is_none());
}

#[test]
fn planned_but_uncommitted_batch_is_replayed_with_the_same_files() {
    let e = env();
    e.write("data/logs/a.json", &lines(&[1]), 1);
    e.write("data/logs/b.json", &lines(&[2]), 2);
    let s = json_spec(&[]);
    let o0 = {
        let mut src = e.open(&s);
        let o0 = src.latest_offset(None).unwrap().unwrap();
        // Crash: the source log has batch 0, the runtime's offsets don't.
        o0
    };
    e.write("data/logs/c.json", &lines(&[3]), 0);
    let mut src = e.open(&s);
    let again = src.latest_offset(None).unwrap().unwrap();
    assert_eq!(again, o0);
    assert_eq!(
        ids(&src.read(None, &again).unwrap().batches),
        vec![Some(1), Some(2)]
    );
    // The replay of (None, 0] after the offsets were written is the same too.
    assert_eq!(
        ids(&src.read(None, &o0).unwrap().batches),
        vec![Some(1), Some(2)]
    );
    let (_, r) = next(&mut src, Some(&o0)).unwrap();
    assert_eq!(r, vec![Some(3)]);
}

#[test]
fn timestamps_iso_and_space_separated() {
    let e = env();
    e.write(
        "data/logs/a.json",
        "{\"ts\":\"2026-11-01T10:00:05Z\",\"n\":1}\n{\"ts\":\"2026-11-01 10:00:06\",\"n\":2}\n{\"ts\":\"2026-11-01T12:00:07+02:00\",\"n\":3}\n",
        1,
    );
    let s = spec("json", "data/logs", Some("ts TIMESTAMP, n INT"), &[]);
    let mut src = e.open(&s);
    let end = src.latest_offset(None).unwrap().unwrap();
    let r = src.read(None, &end).unwrap();
    let ts = r.batches[0]
        .column(0)
        .as_primitive::<TimestampMicrosecondType>();
    let base = 1_793_527_205_000_000i64; // 2026-11-01T10:00:05Z
    assert_eq!(
        ts.values().to_vec(),
        vec![base, base + 1_000_000, base + 2_000_000]
    );
}

const BAD: &str = "{\"id\":1,\"msg\":\"a\"}\n\n{\"id\":2,\"msg\":\"b\"}\n{\"id\": 3, \"msg\": \n{\"id\":\"four\",\"msg\":\"d\"}\n{\"id\":5,\"msg\":\"e\"}\n";

#[test]
fn permissive_keeps_bad_records_as_nulls() {
    let e = env();
    e.write("data/logs/part-3.json", BAD, 1);
    let mut src = e.open(&json_spec(&[]));
    let end = src.latest_offset(None).unwrap().unwrap();
    let r = src.read(None, &end).unwrap();
    assert_eq!(r.malformed_dropped, 0);
    assert_eq!(
        table(&r.batches),
        "+----+-----+\n\
         | id | msg |\n\
         +----+-----+\n\
         | 1  | a   |\n\
         | 2  | b   |\n\
         |    |     |\n\
         |    | d   |\n\
         | 5  | e   |\n\
         +----+-----+"
    );
}

#[test]
fn permissive_fills_the_corrupt_record_column() {
    let e = env();
    e.write("data/logs/part-3.json", BAD, 1);
    let s = spec(
        "json",
        "data/logs",
        Some("id BIGINT, msg STRING, _corrupt_record STRING"),
        &[],
    );
    let mut src = e.open(&s);
    let end = src.latest_offset(None).unwrap().unwrap();
    let r = src.read(None, &end).unwrap();
    assert_eq!(
        table(&r.batches),
        "+----+-----+-------------------------+\n\
         | id | msg | _corrupt_record         |\n\
         +----+-----+-------------------------+\n\
         | 1  | a   |                         |\n\
         | 2  | b   |                         |\n\
         |    |     | {\"id\": 3, \"msg\":        |\n\
         |    | d   | {\"id\":\"four\",\"msg\":\"d\"} |\n\
         | 5  | e   |                         |\n\
         +----+-----+-------------------------+"
    );
}

#[test]
fn drop_malformed_counts_dropped_records() {
    let e = env();
    e.write("data/logs/part-3.json", BAD, 1);
    let mut src = e.open(&json_spec(&[("mode", "dropMalformed")]));
    let end = src.latest_offset(None).unwrap().unwrap();
    let r = src.read(None, &end).unwrap();
    assert_eq!(ids(&r.batches), vec![Some(1), Some(2), Some(5)]);
    assert_eq!(r.malformed_dropped, 2);
}

#[test]
fn failfast_names_file_and_line() {
    let e = env();
    e.write("data/logs/part-3.json", BAD, 1);
    let mut src = e.open(&json_spec(&[("mode", "FAILFAST")]));
    let end = src.latest_offset(None).unwrap().unwrap();
    let err = src.read(None, &end).unwrap_err();
    let Error::Runtime { message, help } = err else {
        panic!("not a runtime error: {err}")
    };
    assert!(
        message.starts_with("flow `f`: malformed record in data/logs/part-3.json line 4: "),
        "{message}"
    );
    assert_eq!(
        help.as_deref(),
        Some("fix the record, or set mode to PERMISSIVE or DROPMALFORMED")
    );
}

#[test]
fn failfast_line_numbers_in_a_big_file_read_in_chunks() {
    let e = env();
    let mut text = String::with_capacity(10 << 20);
    for i in 0..110_000 {
        if i == 104_321 {
            text.push_str("{\"id\": oops}\n");
        } else {
            text.push_str(&format!(
                "{{\"id\":{i},\"msg\":\"a fairly long message to make the line about ninety bytes\"}}\n"
            ));
        }
    }
    e.write("data/logs/big.json", &text, 1);
    let mut src = e.open(&json_spec(&[("mode", "FAILFAST")]));
    let end = src.latest_offset(None).unwrap().unwrap();
    let err = src.read(None, &end).unwrap_err().to_string();
    assert!(
        err.starts_with("flow `f`: malformed record in data/logs/big.json line 104322: "),
        "{err}"
    );
    // PERMISSIVE over the same chunks keeps every row in order.
    let e2 = env();
    e2.write("data/logs/big.json", &text, 1);
    let mut src = e2.open(&json_spec(&[]));
    let end = src.latest_offset(None).unwrap().unwrap();
    let r = src.read(None, &end).unwrap();
    let got = ids(&r.batches);
    assert_eq!(got.len(), 110_000);
    assert_eq!(got[104_320], Some(104_320));
    assert_eq!(got[104_321], None);
    assert_eq!(got[109_999], Some(109_999));
    assert!(r.batches.iter().all(|b| b.num_rows() <= 64 * 1024));
}

#[test]
fn csv_header_sep_and_modes() {
    let e = env();
    e.write(
        "data/logs/a.csv",
        "id;name;score\n1;\"x;y\";1.5\n2;;2.5\n3;z;NA\nbad;w;3\n",
        1,
    );
    let s = spec(
        "csv",
        "data/logs",
        Some("id BIGINT, name STRING, score DOUBLE"),
        &[("header", "true"), ("sep", ";"), ("nullValue", "NA")],
    );
    let mut src = e.open(&s);
    let end = src.latest_offset(None).unwrap().unwrap();
    let r = src.read(None, &end).unwrap();
    assert_eq!(
        table(&r.batches),
        "+----+------+-------+\n\
         | id | name | score |\n\
         +----+------+-------+\n\
         | 1  | x;y  | 1.5   |\n\
         | 2  |      | 2.5   |\n\
         | 3  | z    |       |\n\
         |    | w    | 3.0   |\n\
         +----+------+-------+"
    );

    // Without a header (Spark's default) the first line is data; FAILFAST
    // names the line.
    let e = env();
    e.write("data/logs/b.csv", "1,a\n2,b\nx,c\n", 1);
    let s = spec(
        "csv",
        "data/logs",
        Some("id INT, v STRING"),
        &[("mode", "FAILFAST")],
    );
    let mut src = e.open(&s);
    let end = src.latest_offset(None).unwrap().unwrap();
    let err = src.read(None, &end).unwrap_err().to_string();
    assert!(
        err.starts_with("flow `f`: malformed record in data/logs/b.csv line 3: "),
        "{err}"
    );
    let s = spec(
        "csv",
        "data/logs",
        Some("id INT, v STRING"),
        &[("mode", "DROPMALFORMED")],
    );
    let e2 = Env {
        _tmp: tempfile::tempdir().unwrap(),
        base: e.base.clone(),
        state: e.state.join("2"),
    };
    let mut src = e2.open(&s);
    let end = src.latest_offset(None).unwrap().unwrap();
    let r = src.read(None, &end).unwrap();
    assert_eq!(r.num_rows(), 2);
    assert_eq!(r.malformed_dropped, 1);
}

#[test]
fn text_files_one_row_per_line() {
    let e = env();
    e.write("data/logs/a.txt", "hello\r\nworld\n\nlast", 1);
    let s = spec("text", "data/logs", None, &[]);
    let mut src = e.open(&s);
    let end = src.latest_offset(None).unwrap().unwrap();
    let r = src.read(None, &end).unwrap();
    let v: Vec<&str> = r.batches[0]
        .column(0)
        .as_string::<i32>()
        .iter()
        .map(|s| s.unwrap())
        .collect();
    assert_eq!(v, vec!["hello", "world", "", "last"]);
    assert_eq!(src.describe(), "text source `data/logs`");
}

fn write_parquet(path: &Path, batch: &RecordBatch) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let f = fs::File::create(path).unwrap();
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(2))
        .build();
    let mut w = parquet::arrow::ArrowWriter::try_new(f, batch.schema(), Some(props)).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
}

fn file_batch(ids: &[i32]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int32, false),
        Field::new("b", DataType::Utf8, true),
        Field::new("C", DataType::Utf8, true),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(arrow::array::Int32Array::from(ids.to_vec())),
            Arc::new(arrow::array::StringArray::from(
                ids.iter().map(|i| format!("b{i}")).collect::<Vec<_>>(),
            )),
            Arc::new(arrow::array::StringArray::from(
                ids.iter().map(|i| format!("c{i}")).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap()
}

#[test]
fn parquet_projects_by_name_and_casts() {
    let e = env();
    write_parquet(
        &e.base.join("data/logs/p1.parquet"),
        &file_batch(&[1, 2, 3, 4, 5]),
    );
    let s = spec(
        "parquet",
        "data/logs",
        Some("c STRING, a BIGINT, missing INT"),
        &[],
    );
    let mut src = e.open(&s);
    let end = src.latest_offset(None).unwrap().unwrap();
    let r = src.read(None, &end).unwrap();
    assert_eq!(
        table(&r.batches),
        "+----+---+---------+\n\
         | c  | a | missing |\n\
         +----+---+---------+\n\
         | c1 | 1 |         |\n\
         | c2 | 2 |         |\n\
         | c3 | 3 |         |\n\
         | c4 | 4 |         |\n\
         | c5 | 5 |         |\n\
         +----+---+---------+"
    );
    assert_eq!(r.batches[0].schema().field(1).data_type(), &DataType::Int64);
    assert!(r.bytes > 0);
}

#[test]
fn parquet_skips_columns_the_query_does_not_read() {
    let e = env();
    write_parquet(
        &e.base.join("data/logs/p1.parquet"),
        &file_batch(&[1, 2, 3]),
    );
    let s = spec(
        "parquet",
        "data/logs",
        Some("a BIGINT, b STRING, c STRING"),
        &[],
    );
    let mut src = e.open(&s);
    src.read_only_columns(&[true, false, true]);
    let end = src.latest_offset(None).unwrap().unwrap();
    let r = src.read(None, &end).unwrap();
    assert_eq!(
        table(&r.batches),
        "+---+---+----+\n\
         | a | b | c  |\n\
         +---+---+----+\n\
         | 1 |   | c1 |\n\
         | 2 |   | c2 |\n\
         | 3 |   | c3 |\n\
         +---+---+----+"
    );
    assert_eq!(r.batches[0].column(1).null_count(), 3);
    // A flag list of the wrong length is ignored: every column is read.
    let mut src = open_source(
        &s,
        s.schema.clone().unwrap(),
        SourceContext {
            state_dir: e.base.join("other-state").into(),
            ..e.ctx()
        },
    )
    .unwrap();
    src.read_only_columns(&[true]);
    let end = src.latest_offset(None).unwrap().unwrap();
    let r = src.read(None, &end).unwrap();
    assert_eq!(r.batches[0].column(1).null_count(), 0);
}

/// A STRING column the query converts with `CAST(... AS TIMESTAMP)` only is
/// read converted by the JSON decoder (NULL for what is not a timestamp);
/// a chunk the fast decoder leaves (an escape) keeps the strings, which the
/// plan's leaf converts.
#[test]
fn json_reads_a_converted_string_column_as_timestamps() {
    let e = env();
    e.write(
        "data/logs/a.json",
        "{\"ts\":\"2024-01-01T00:00:07\",\"n\":1}\n{\"ts\":\"2024-01-01T00:00:07\",\"n\":2}\n{\"ts\":\"nope\",\"n\":3}\n{\"ts\":null,\"n\":4}\n{\"n\":5}\n{\"ts\":\"2024-02-29 23:59:59.5Z\",\"n\":6}\n",
        1,
    );
    e.write(
        "data/logs/b.json",
        "{\"ts\":\"2024-01-01T00:00:0\\u0037\",\"n\":7}\n",
        2,
    );
    let s = spec("json", "data/logs", Some("ts STRING, n BIGINT"), &[]);
    let mut src = e.open(&s);
    src.read_timestamp_columns(&[true, false]);
    let end = src.latest_offset(None).unwrap().unwrap();
    let r = src.read(None, &end).unwrap();
    // The fast decoder's batch holds timestamps, the other the string.
    assert_eq!(
        r.batches
            .iter()
            .map(|b| b.schema().field(0).data_type().to_string())
            .collect::<Vec<_>>(),
        ["Timestamp(µs, \"UTC\")", "Utf8"]
    );
    assert_eq!(
        table(&r.batches),
        "+--------------------------+---+\n\
         | ts                       | n |\n\
         +--------------------------+---+\n\
         | 2024-01-01T00:00:07Z     | 1 |\n\
         | 2024-01-01T00:00:07Z     | 2 |\n\
         |                          | 3 |\n\
         |                          | 4 |\n\
         |                          | 5 |\n\
         | 2024-02-29T23:59:59.500Z | 6 |\n\
         | 2024-01-01T00:00:07      | 7 |\n\
         +--------------------------+---+"
    );
}

fn manifest_line(path: &Path) -> String {
    let md = fs::metadata(path).unwrap();
    json!({
        "path": format!("file://{}", path.display()),
        "size": md.len(),
        "isDir": false,
        "modificationTime": 1_700_000_000_000i64,
        "blockReplication": 1,
        "blockSize": 33554432,
        "action": "add"
    })
    .to_string()
}

#[test]
fn manifest_directories_read_only_committed_files_in_log_order() {
    let e = env();
    let dir = e.base.join("data/out");
    let f1 = dir.join("part-00000-b.snappy.parquet");
    let f2 = dir.join("part-00001-a.snappy.parquet");
    let f3 = dir.join("part-00002-uncommitted.snappy.parquet");
    write_parquet(&f1, &file_batch(&[1]));
    write_parquet(&f2, &file_batch(&[2]));
    write_parquet(&f3, &file_batch(&[3]));
    set_mtime(&f1, 50); // mtimes are not the order: the log is
    set_mtime(&f2, 10);
    fs::create_dir_all(dir.join("_spark_metadata")).unwrap();
    fs::write(
        dir.join("_spark_metadata/0"),
        format!("v1\n{}\n{}", manifest_line(&f1), manifest_line(&f2)),
    )
    .unwrap();
    let s = spec("parquet", "data/out", Some("a BIGINT"), &[]);
    let mut src = e.open(&s);
    let (o, r) = next(&mut src, None).unwrap();
    assert_eq!(r, vec![Some(1), Some(2)]);
    assert!(src.latest_offset(Some(&o)).unwrap().is_none());
    fs::write(
        dir.join("_spark_metadata/1"),
        format!("v1\n{}", manifest_line(&f3)),
    )
    .unwrap();
    let (_, r) = next(&mut src, Some(&o)).unwrap();
    assert_eq!(r, vec![Some(3)]);

    // A table source: no manifest yet means no data, even with files present.
    let e = env();
    let tdir = e.base.join("tables/t");
    write_parquet(&tdir.join("part-0.parquet"), &file_batch(&[7]));
    let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, true)]));
    let mut src =
        open_table_source(&tdir, "parquet", schema.clone(), &BTreeMap::new(), e.ctx()).unwrap();
    assert!(src.latest_offset(None).unwrap().is_none());
    let missing = e.base.join("tables/not_yet");
    let mut src =
        open_table_source(&missing, "parquet", schema, &BTreeMap::new(), e.ctx()).unwrap();
    assert!(src.latest_offset(None).unwrap().is_none());
}

#[test]
fn options_are_case_insensitive_and_overridable() {
    let e = env();
    e.write("data/logs/a.json", &lines(&[1]), 1);
    e.write("data/logs/b.json", &lines(&[2]), 2);
    let s = json_spec(&[("MAXFILESPERTRIGGER", "2")]);
    let mut ctx = e.ctx();
    ctx.option_overrides
        .insert("maxFilesPerTrigger".into(), "1".into());
    let mut src = open_source(&s, s.schema.clone().unwrap(), ctx).unwrap();
    let end = src.latest_offset(None).unwrap().unwrap();
    assert_eq!(ids(&src.read(None, &end).unwrap().batches), vec![Some(1)]);

    let bad = json_spec(&[("maxFilesPerTrigger", "zero")]);
    let err = open_source(&bad, bad.schema.clone().unwrap(), e.ctx())
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "flow `f`: option `maxFilesPerTrigger` must be a positive whole number, got `zero`\n  help: .option(\"maxFilesPerTrigger\", \"10\")"
    );
    let nowhere = spec("json", "data/nowhere", Some("id BIGINT"), &[]);
    let err = open_source(&nowhere, nowhere.schema.clone().unwrap(), e.ctx())
        .err()
        .unwrap();
    assert!(err.to_string().contains("does not exist"), "{err}");
}

#[test]
fn available_now_ignores_files_arriving_later() {
    let e = env();
    e.write("data/logs/a.json", &lines(&[1]), 1);
    e.write("data/logs/b.json", &lines(&[2]), 2);
    let mut src = e.open(&json_spec(&[("maxFilesPerTrigger", "1")]));
    src.prepare_available_now().unwrap();
    e.write("data/logs/c.json", &lines(&[3]), 0);
    let (o, r) = next(&mut src, None).unwrap();
    assert_eq!(r, vec![Some(1)]);
    let (o, r) = next(&mut src, Some(&o)).unwrap();
    assert_eq!(r, vec![Some(2)]);
    assert!(src.latest_offset(Some(&o)).unwrap().is_none());
}

/// Read speed: `cargo test --release -p pipelines-core --test engine_source_file -- --ignored --nocapture`
/// (`BENCH_LINES`, `BENCH_FILES` change the generated file set).
#[test]
#[ignore]
fn bench_json_read_speed() {
    let n: usize = std::env::var("BENCH_LINES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let files: usize = std::env::var("BENCH_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let e = env();
    let services = ["api", "auth", "billing", "search"];
    let levels = ["INFO", "WARN", "ERROR", "DEBUG"];
    let per = n / files;
    let mut total_bytes = 0;
    for f in 0..files {
        let mut text = String::with_capacity(per * 96);
        for i in 0..per {
            let k = f * per + i;
            text.push_str(&format!(
                "{{\"ts\":\"2026-11-01T10:{:02}:{:02}Z\",\"service_name\":\"{}\",\"level\":\"{}\",\"msg\":\"request {k} done\"}}\n",
                (k / 60) % 60,
                k % 60,
                services[k % 4],
                levels[(k / 4) % 4]
            ));
        }
        total_bytes += text.len();
        e.write(&format!("data/logs/part-{f:04}.json"), &text, f as u64);
    }
    let s = spec(
        "json",
        "data/logs",
        Some("ts TIMESTAMP, service_name STRING, level STRING, msg STRING"),
        &[],
    );
    let mut src = e.open(&s);
    let end = src.latest_offset(None).unwrap().unwrap();
    let _warm = src.read(None, &end).unwrap();
    let cpu0 = cpu_seconds();
    let t = std::time::Instant::now();
    let r = src.read(None, &end).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    assert_eq!(r.num_rows(), per * files);
    eprintln!(
        "json: {:.2} M rows per CPU-second ({cpu:.2} CPU s; on 2 idle cores about {:.2} M rows/s)",
        r.num_rows() as f64 / cpu / 1e6,
        2.0 * r.num_rows() as f64 / cpu / 1e6
    );
    eprintln!(
        "json: {} rows, {} files, {:.1} MB in {:.3}s: {:.2} M rows/s, {:.0} MB/s ({} threads available)",
        r.num_rows(),
        files,
        total_bytes as f64 / 1e6,
        secs,
        r.num_rows() as f64 / secs / 1e6,
        total_bytes as f64 / 1e6 / secs,
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    );
    // One file per batch (maxFilesPerTrigger=1): the file is split into chunks.
    let e2 = Env {
        _tmp: tempfile::tempdir().unwrap(),
        base: e.base.clone(),
        state: e.state.join("one"),
    };
    let mut src = e2.open(&spec(
        "json",
        "data/logs",
        Some("ts TIMESTAMP, service_name STRING, level STRING, msg STRING"),
        &[("maxFilesPerTrigger", "1")],
    ));
    let end = src.latest_offset(None).unwrap().unwrap();
    let t = std::time::Instant::now();
    let r = src.read(None, &end).unwrap();
    let secs = t.elapsed().as_secs_f64();
    eprintln!(
        "json, one file of {} rows: {:.2} M rows/s",
        r.num_rows(),
        r.num_rows() as f64 / secs / 1e6
    );
}

/// User + system CPU time of this process (Linux), in seconds.
fn cpu_seconds() -> f64 {
    let stat = fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<f64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    // Fields 14 and 15 of the file (utime, stime) in clock ticks (100/s).
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / 100.0
}

#[test]
fn a_timestamp_pattern_option_is_refused_not_misread() {
    let e = env();
    e.write("data/logs/a.json", "{\"id\":1}\n", 1);
    let s = json_spec(&[("timestampFormat", "dd/MM/yyyy HH:mm")]);
    let err = match open_source(&s, s.schema.clone().unwrap(), e.ctx()) {
        Ok(_) => panic!("the option was accepted"),
        Err(err) => err,
    };
    match err {
        pipelines_core::Error::Runtime { message, help } => {
            assert_eq!(
                message,
                "flow `f`: option `timestampFormat` (`dd/MM/yyyy HH:mm`) is not supported: this source reads timestamps and dates in ISO-8601 only (`2026-11-01T10:00:05Z`, `2026-11-01 10:00:05`, `2026-11-01`)"
            );
            assert_eq!(
                help.as_deref(),
                Some("remove `timestampFormat`, declare the column as STRING and convert it with the same Spark pattern: .with_column(\"ts\", \"to_timestamp(ts, 'dd/MM/yyyy HH:mm')\")")
            );
        }
        other => panic!("unexpected error {other}"),
    }
}

/// Rewrites the footer of the Parquet file at `path` so that column `leaf`
/// of every row group claims to start at byte -7 (the data pages stay).
fn damage_footer(path: &Path, leaf: usize) {
    use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader, ParquetMetaDataWriter};
    let bytes = fs::read(path).unwrap();
    let meta = ParquetMetaDataReader::new()
        .parse_and_finish(&fs::File::open(path).unwrap())
        .unwrap();
    let n = bytes.len();
    let footer = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
    let mut out = bytes[..n - 8 - footer].to_vec();
    let row_groups = meta
        .row_groups()
        .iter()
        .map(|rg| {
            let mut columns = rg.columns().to_vec();
            columns[leaf] = columns[leaf]
                .clone()
                .into_builder()
                .set_dictionary_page_offset(None)
                .set_data_page_offset(-7)
                .build()
                .unwrap();
            rg.clone()
                .into_builder()
                .set_column_metadata(columns)
                .build()
                .unwrap()
        })
        .collect();
    let damaged = ParquetMetaData::new(meta.file_metadata().clone(), row_groups);
    ParquetMetaDataWriter::new(&mut out, &damaged)
        .finish()
        .unwrap();
    fs::write(path, out).unwrap();
}

#[test]
fn a_damaged_parquet_footer_is_an_error_naming_the_file_or_skipped() {
    let e = env();
    let path = e.base.join("data/logs/p1.parquet");
    write_parquet(&path, &file_batch(&[1, 2, 3, 4]));
    damage_footer(&path, 0);
    let s = spec("parquet", "data/logs", Some("a INT, b STRING"), &[]);
    let mut src = e.open(&s);
    let end = src.latest_offset(None).unwrap().unwrap();
    let err = src.read(None, &end).unwrap_err();
    let text = err.to_string();
    assert_eq!(
        text,
        "flow `f`: cannot read parquet file data/logs/p1.parquet: Parquet error: the footer is damaged: column chunk 0 of row group 0 has offset -7 and size 42; neither may be negative\n  help: replace or remove the file, or set ignoreCorruptFiles to true"
    );
    assert!(
        std::error::Error::source(&err).is_some(),
        "the Parquet error is kept as the cause"
    );
    // The same read again (a restart replays the batch): the same error, no crash.
    let mut again = e.open(&s);
    assert_eq!(again.read(None, &end).unwrap_err().to_string(), text);
    // Skipped with ignoreCorruptFiles.
    let e2 = env();
    let path = e2.base.join("data/logs/p1.parquet");
    write_parquet(&path, &file_batch(&[1, 2, 3, 4]));
    damage_footer(&path, 0);
    let s = spec(
        "parquet",
        "data/logs",
        Some("a INT, b STRING"),
        &[("ignoreCorruptFiles", "true")],
    );
    let mut src = e2.open(&s);
    let end = src.latest_offset(None).unwrap().unwrap();
    let read = src.read(None, &end).unwrap();
    assert_eq!(read.num_rows(), 0);
    assert_eq!(read.corrupt_files_skipped, 1);
}

/// Spark's `spark.sql.files.ignoreCorruptFiles` in the pipeline's
/// configuration skips the damaged file of a run, and the batch's progress
/// counts it; a source's own `ignoreCorruptFiles = false` wins.
#[test]
fn the_session_setting_skips_corrupt_files_and_the_progress_counts_them() {
    use pipelines_core::engine::runtime::{run, RunOptions};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_parquet(&dir.join("in/p0.parquet"), &file_batch(&[1, 2]));
    write_parquet(&dir.join("in/p1.parquet"), &file_batch(&[3, 4]));
    damage_footer(&dir.join("in/p1.parquet"), 0);
    let input = dir.join("in").to_string_lossy().to_string();
    let pipeline = |own: Option<&'static str>| {
        let input = input.clone();
        pipelines_core::Pipeline::new()
            .append_flow("copy", "copied", move |s| {
                let mut r = s.read_stream().format("parquet");
                if let Some(v) = own {
                    r = r.option("ignoreCorruptFiles", v);
                }
                r.load(input.clone())
            })
            .create_sink("copied", "memory", [("queryName", "corrupt_skipped")])
    };
    let text = "name: p\nstorage: ./storage\nconfiguration:\n  spark.sql.files.ignoreCorruptFiles: \"true\"\n";
    let spec = pipelines_core::spec::parse_str(text, &dir.join("pipeline.yml")).unwrap();
    let graph = pipeline(None)
        .build(&spec)
        .map_err(|d| d.to_string())
        .unwrap();
    run(&graph, &RunOptions::new(dir, dir.join("storage"))).unwrap();
    let table = pipelines_core::engine::sinks::memory_table("corrupt_skipped").unwrap();
    assert_eq!(table.num_rows(), 2);
    let skipped: Vec<u64> =
        pipelines_core::engine::event_log::read_batch_progress(dir.join("storage"))
            .unwrap()
            .into_iter()
            .map(|v| {
                v["sources"][0]["numCorruptFilesSkipped"]
                    .as_u64()
                    .unwrap_or(0)
            })
            .collect();
    assert_eq!(skipped, [1]);

    // The source's own option wins over the session's.
    let storage = dir.join("storage2");
    let graph = pipeline(Some("false"))
        .build(&spec)
        .map_err(|d| d.to_string())
        .unwrap();
    let err = run(&graph, &RunOptions::new(dir, &storage))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("flow `copy`: cannot read parquet file ")
            && err.contains("in/p1.parquet: Parquet error: the footer is damaged"),
        "{err}"
    );
}

#[test]
fn integers_of_19_and_more_digits_are_read_exactly_or_are_bad_records() {
    let e = env();
    e.write(
        "data/logs/big.json",
        "{\"id\":123456789012345678901,\"msg\":\"21 digits\"}\n{\"id\":1234567890123456789,\"msg\":\"19 digits\"}\n{\"id\":-9223372036854775808,\"msg\":\"min\"}\n{\"id\":7,\"msg\":\"small\"}\n",
        1,
    );
    let mut src = e.open(&json_spec(&[("mode", "DROPMALFORMED")]));
    let end = src.latest_offset(None).unwrap().unwrap();
    let r = src.read(None, &end).unwrap();
    assert_eq!(
        ids(&r.batches),
        vec![Some(1234567890123456789), Some(i64::MIN), Some(7)]
    );
    assert_eq!(r.malformed_dropped, 1);
}

/// Damaged copies of one valid Parquet file, read through the file source:
/// each read returns rows or a typed error;
/// none panics (a panic fails the test). Deterministic: a fixed seed.
/// `PIPELINES_FUZZ_CASES` runs more cases than the default 200.
#[test]
fn damaged_parquet_files_are_errors_or_rows_never_a_crash() {
    let cases: usize = std::env::var("PIPELINES_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    let e = env();
    let valid_path = e.base.join("valid.parquet");
    write_parquet(&valid_path, &file_batch(&(0..40).collect::<Vec<_>>()));
    let valid = fs::read(&valid_path).unwrap();
    let mut damage = crate::damage::Damage::new(0x9E37_79B9_7F4A_7C15);
    let mut next = || damage.next();
    let (mut read, mut errors) = (0usize, 0usize);
    for case in 0..cases {
        let mut bytes = valid.clone();
        let len = bytes.len();
        match case % 5 {
            // Bytes flipped in the footer (the last 300 bytes).
            0 => {
                for _ in 0..1 + next() % 4 {
                    let i = len - 1 - (next() as usize % 300.min(len));
                    bytes[i] ^= 1 << (next() % 8);
                }
            }
            // Bytes flipped anywhere (page headers, data).
            1 => {
                for _ in 0..1 + next() % 8 {
                    let i = next() as usize % len;
                    bytes[i] = next() as u8;
                }
            }
            // Truncated.
            2 => bytes.truncate(next() as usize % len),
            // The footer length (the 4 bytes before the final `PAR1`) past the file.
            3 => {
                let n = (len as u32).wrapping_add(next() as u32 % 1000);
                bytes[len - 8..len - 4].copy_from_slice(&n.to_le_bytes());
            }
            // Both ends kept, a run in the middle zeroed.
            _ => {
                let start = 4 + next() as usize % (len - 12);
                let end = (start + 1 + next() as usize % 64).min(len - 8);
                bytes[start..end].fill(0);
            }
        }
        let dir = format!("data/fuzz{case}");
        let path = e.base.join(&dir).join("p.parquet");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, &bytes).unwrap();
        let s = spec("parquet", &dir, Some("a INT, b STRING, C STRING"), &[]);
        let ctx = SourceContext {
            state_dir: e.state.join(format!("fuzz{case}")).into(),
            ..e.ctx()
        };
        ctx.state_dir.create_dir().unwrap();
        let outcome = open_source(&s, s.schema.clone().unwrap(), ctx).and_then(|mut src| match src
            .latest_offset(
            None,
        )? {
            Some(end) => src.read(None, &end).map(|r| r.num_rows()),
            None => Ok(0),
        });
        match outcome {
            Ok(_) => read += 1,
            Err(err) => {
                errors += 1;
                let text = err.to_string();
                assert!(
                    text.contains("p.parquet"),
                    "case {case}: the error names the file: {text}"
                );
            }
        }
    }
    eprintln!(
        "damaged parquet: {cases} files, {read} reads gave rows, {errors} gave errors, 0 panics"
    );
    assert_eq!(read + errors, cases);
}

/// The file source's log (`sources/0/N`) damaged at random, then the source
/// reopened and the batch replayed as after a crash: rows or an error naming
/// the log file, never a panic (300 seeded cases).
#[test]
fn a_damaged_source_log_is_an_error_never_a_crash() {
    let e = env();
    e.write("data/logs/a.json", "{\"id\":1,\"msg\":\"é %41\"}\n", 1);
    e.write("data/logs/b%20c.json", "{\"id\":2,\"msg\":\"x\"}\n", 2);
    let s = json_spec(&[]);
    let end = {
        let mut src = e.open(&s);
        src.latest_offset(None).unwrap().unwrap()
    };
    let log = e.state.join("0");
    let valid = fs::read(&log).unwrap();
    let mut damage = crate::damage::Damage::new(0xD1B5_4A32_D192_ED03);
    let (mut ok, mut errors) = (0, 0);
    for case in 0..300 {
        let mut bytes = valid.clone();
        damage.scribble(&mut bytes, "{}[]\":,%/0123456789é\n\u{ff}v".as_bytes());
        if case % 4 == 0 {
            damage.cut(&mut bytes);
        }
        fs::write(&log, &bytes).unwrap();
        let outcome = open_source(&s, s.schema.clone().unwrap(), e.ctx())
            .and_then(|mut src| src.read(None, &end).map(|r| r.num_rows()));
        match outcome {
            Ok(_) => ok += 1,
            Err(err) => {
                errors += 1;
                let text = err.to_string();
                // The log file, or the file a damaged entry now names.
                assert!(
                    text.contains(&log.display().to_string()) || text.contains("of source batch 0"),
                    "case {case}: {text}"
                );
            }
        }
    }
    fs::write(&log, &valid).unwrap();
    eprintln!("damaged source log: 300 cases, {ok} read, {errors} errors, 0 panics");
    assert!(errors > 150, "{errors}");
}

/// Every row of every batch `src` plans from the start, formatted by
/// arrow's display as tab-separated text (nulls `NULL`), sorted.
fn all_rows(src: &mut Box<dyn Source>) -> Vec<String> {
    let mut start = None;
    let mut rows = Vec::new();
    while let Some(end) = src.latest_offset(start.as_ref()).unwrap() {
        let read = src.read(start.as_ref(), &end).unwrap();
        for b in &read.batches {
            for i in 0..b.num_rows() {
                let cells: Vec<String> = b
                    .columns()
                    .iter()
                    .map(|c| {
                        if c.is_null(i) {
                            "NULL".to_string()
                        } else {
                            arrow::util::display::array_value_to_string(c, i).unwrap()
                        }
                    })
                    .collect();
                rows.push(cells.join("\t"));
            }
        }
        start = Some(end);
    }
    rows.sort();
    rows
}

/// `col=value/` directories fill the columns so named, with Spark's
/// answers (tests/spark/partition_discovery.py): values unescaped and cast
/// to the declared types, Hive's default partition a null, and the path's
/// value over the file's.
#[test]
fn partition_directories_fill_their_columns_like_spark() {
    let e = env();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/data/partitions");
    let input = data.join("input");
    let mut src = e.open(&spec(
        "json",
        input.to_str().unwrap(),
        Some("id BIGINT, k STRING, day DATE, hour INT"),
        &[],
    ));
    let expected: Vec<String> = fs::read_to_string(data.join("expected.tsv"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    assert_eq!(expected.len(), 6);
    assert_eq!(all_rows(&mut src), expected);
}

#[test]
fn a_partition_value_of_another_type_is_an_error_naming_the_file() {
    let e = env();
    e.write("data/logs/hour=late/part-0.json", "{\"id\":1}\n", 1);
    let mut src = e.open(&spec("json", "data/logs", Some("id BIGINT, hour INT"), &[]));
    let end = src.latest_offset(None).unwrap().unwrap();
    let err = src.read(None, &end).unwrap_err().to_string();
    assert_eq!(
        err,
        "flow `f`: the partition value `hour=late` of data/logs/hour=late/part-0.json cannot be read as INT, the type of `hour`\n  help: declare `hour` with a type its directories' values have, or rename the directory"
    );
}
