//! The file sink: parquet/json/csv files, Spark's `_spark_metadata`
//! manifest, replays, compaction, partitioning and concurrent writers.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use pipelines_core::engine::sink::{Sink, SinkContext, SinkWrite};
use pipelines_core::engine::sinks::{committed_files, open_sink, CommittedFile, FileSink};
use pipelines_core::OutputMode;
use serde_json::Value;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ]))
}

fn batch(ids: &[i64], names: &[Option<&str>]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(StringArray::from(names.to_vec())),
        ],
    )
    .unwrap()
}

fn ids_batch(from: i64, n: i64) -> RecordBatch {
    let ids: Vec<i64> = (from..from + n).collect();
    let names: Vec<Option<&str>> = ids.iter().map(|_| Some("x")).collect();
    batch(&ids, &names)
}

fn ctx(format: &str, path: &Path, options: &[(&str, &str)], query_id: &str) -> SinkContext {
    SinkContext {
        name: "out".into(),
        format: format.into(),
        options: options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        path: Some(path.into()),
        partition_cols: vec![],
        merge_keys: vec![],
        schema: schema(),
        flow: "f".into(),
        query_id: query_id.into(),
    }
}

const QID: &str = "11111111-2222-4333-8444-555555555555";

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("part-"))
        .collect();
    v.sort();
    v
}

fn read_parquet(path: &Path) -> Vec<RecordBatch> {
    let f = fs::File::open(path).unwrap();
    ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap()
        .build()
        .unwrap()
        .map(|b| b.unwrap())
        .collect()
}

fn all_ids(files: &[CommittedFile]) -> Vec<i64> {
    let mut out = Vec::new();
    for f in files {
        for b in read_parquet(f.path.as_local().unwrap()) {
            out.extend(b.column(0).as_primitive::<Int64Type>().values().iter());
        }
    }
    out
}

#[test]
fn parquet_files_and_manifest_in_sparks_format() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let mut sink = open_sink(ctx("parquet", &dir, &[], QID), None).unwrap();
    let dir = fs::canonicalize(&dir).unwrap();
    assert_eq!(
        sink.describe(),
        format!("parquet sink `out` at {}", dir.display())
    );
    let w = sink
        .add_batch(
            0,
            vec![
                batch(&[1, 2], &[Some("a"), None]),
                batch(&[3], &[Some("c")]),
            ],
            OutputMode::Append,
        )
        .unwrap();
    // One file per batch, not one per input RecordBatch.
    let names = files_in(&dir);
    assert_eq!(names.len(), 1);
    let name = &names[0];
    assert!(name.starts_with("part-00000-"), "{name}");
    assert!(name.ends_with("-c000.snappy.parquet"), "{name}");
    assert_eq!(
        name.len(),
        "part-00000-".len() + 36 + "-c000.snappy.parquet".len()
    );
    let file = dir.join(name);
    let size = fs::metadata(&file).unwrap().len();
    assert_eq!(
        w,
        SinkWrite {
            rows: 3,
            files: 1,
            bytes: size,
            skipped_replay: false
        }
    );

    // Readable back, snappy-compressed, rows in order.
    let rows = read_parquet(&file);
    let b = arrow::compute::concat_batches(&rows[0].schema(), &rows).unwrap();
    assert_eq!(b.num_rows(), 3);
    assert_eq!(
        b.column(0).as_primitive::<Int64Type>().values().to_vec(),
        vec![1, 2, 3]
    );
    let names_col = b.column(1).as_string::<i32>();
    assert_eq!(names_col.value(0), "a");
    assert!(names_col.is_null(1));
    let meta = ParquetRecordBatchReaderBuilder::try_new(fs::File::open(&file).unwrap())
        .unwrap()
        .metadata()
        .clone();
    assert_eq!(meta.num_row_groups(), 1);
    assert_eq!(
        meta.row_group(0).column(0).compression(),
        Compression::SNAPPY
    );

    // The manifest entry, in Spark's SinkFileStatus format plus our tag.
    let log = fs::read_to_string(dir.join("_spark_metadata/0")).unwrap();
    let mut lines = log.split('\n');
    assert_eq!(lines.next(), Some("v1"));
    let status: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(lines.next(), None, "no trailing newline: {log:?}");
    let mtime = fs::metadata(&file)
        .unwrap()
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert_eq!(
        status,
        serde_json::json!({
            "path": format!("file://{}", file.display()),
            "size": size,
            "isDir": false,
            "modificationTime": mtime,
            "blockReplication": 1,
            "blockSize": 33554432,
            "action": "add",
            "pipelines": {"queryId": QID, "batchId": 0}
        })
    );
    let keys: Vec<&str> = log.lines().nth(1).unwrap().split("\":").collect();
    assert!(
        keys[0].starts_with("{\"path"),
        "field order as Spark: {log}"
    );

    assert_eq!(
        committed_files(&dir).unwrap(),
        Some(vec![CommittedFile {
            path: file.clone().into(),
            size,
            modification_time_ms: mtime,
            batch: Some((QID.to_string(), 0)),
        }])
    );
}

#[test]
fn json_and_csv_files() {
    let tmp = tempfile::tempdir().unwrap();
    let rows = || {
        vec![
            batch(&[1, 2], &[Some("a"), None]),
            batch(&[3], &[Some("c,d")]),
        ]
    };

    let jdir = tmp.path().join("j");
    let mut sink = open_sink(ctx("json", &jdir, &[], QID), None).unwrap();
    sink.add_batch(0, rows(), OutputMode::Append).unwrap();
    let names = files_in(&jdir);
    assert!(names[0].ends_with("-c000.json"), "{names:?}");
    assert_eq!(
        fs::read_to_string(jdir.join(&names[0])).unwrap(),
        "{\"id\":1,\"name\":\"a\"}\n{\"id\":2}\n{\"id\":3,\"name\":\"c,d\"}\n"
    );

    let cdir = tmp.path().join("c");
    let mut sink = open_sink(ctx("csv", &cdir, &[], QID), None).unwrap();
    sink.add_batch(0, rows(), OutputMode::Append).unwrap();
    let names = files_in(&cdir);
    assert!(names[0].ends_with("-c000.csv"), "{names:?}");
    assert_eq!(
        fs::read_to_string(cdir.join(&names[0])).unwrap(),
        "id,name\n1,a\n2,\n3,\"c,d\"\n"
    );

    let c2 = tmp.path().join("c2");
    let mut sink = open_sink(
        ctx("csv", &c2, &[("header", "false"), ("sep", ";")], QID),
        None,
    )
    .unwrap();
    sink.add_batch(0, rows(), OutputMode::Append).unwrap();
    let names = files_in(&c2);
    assert_eq!(
        fs::read_to_string(c2.join(&names[0])).unwrap(),
        "1;a\n2;\n3;c,d\n"
    );

    // The csv file reads back with arrow.
    let f = fs::File::open(cdir.join(&files_in(&cdir)[0])).unwrap();
    let reader = arrow::csv::ReaderBuilder::new(schema())
        .with_header(true)
        .build(f)
        .unwrap();
    let back: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
    assert_eq!(back[0].num_rows(), 3);
    assert_eq!(back[0].column(1).as_string::<i32>().value(2), "c,d");
}

#[test]
fn parquet_compression_option() {
    let tmp = tempfile::tempdir().unwrap();
    for (opt, ext, codec) in [
        ("zstd", ".zstd.parquet", "ZSTD"),
        ("none", ".parquet", "UNCOMPRESSED"),
    ] {
        let dir = tmp.path().join(opt);
        let mut sink = open_sink(ctx("parquet", &dir, &[("compression", opt)], QID), None).unwrap();
        sink.add_batch(0, vec![ids_batch(0, 3)], OutputMode::Append)
            .unwrap();
        let names = files_in(&dir);
        assert!(names[0].ends_with(&format!("-c000{ext}")), "{names:?}");
        assert!(!names[0].ends_with(".snappy.parquet"));
        let meta =
            ParquetRecordBatchReaderBuilder::try_new(fs::File::open(dir.join(&names[0])).unwrap())
                .unwrap()
                .metadata()
                .clone();
        assert!(format!("{:?}", meta.row_group(0).column(0).compression()).starts_with(codec));
    }
    let err = open_sink(
        ctx(
            "parquet",
            &tmp.path().join("x"),
            &[("compression", "lz4")],
            QID,
        ),
        None,
    )
    .err()
    .unwrap();
    assert_eq!(
        err.to_string(),
        "sink `out`: parquet compression `lz4` is not supported\n  help: use `snappy` (the default), `zstd` or `none`"
    );
}

#[test]
fn replayed_batches_are_skipped_and_empty_batches_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let mut sink = open_sink(ctx("parquet", &dir, &[], QID), None).unwrap();
    sink.add_batch(0, vec![ids_batch(0, 2)], OutputMode::Append)
        .unwrap();
    let again = sink
        .add_batch(0, vec![ids_batch(0, 2)], OutputMode::Append)
        .unwrap();
    assert_eq!(
        again,
        SinkWrite {
            skipped_replay: true,
            ..SinkWrite::default()
        }
    );
    // Empty: no file, no manifest entry.
    assert_eq!(
        sink.add_batch(1, vec![], OutputMode::Append).unwrap(),
        SinkWrite::default()
    );
    assert_eq!(
        sink.add_batch(2, vec![ids_batch(0, 0)], OutputMode::Append)
            .unwrap(),
        SinkWrite::default()
    );
    assert_eq!(files_in(&dir).len(), 1);
    assert!(!dir.join("_spark_metadata/1").exists());

    // After a restart the manifest tells which batches were written.
    drop(sink);
    let mut sink = FileSink::open(&ctx("parquet", &dir, &[], QID)).unwrap();
    assert!(
        sink.add_batch(0, vec![ids_batch(0, 2)], OutputMode::Append)
            .unwrap()
            .skipped_replay
    );
    let w = sink
        .add_batch(3, vec![ids_batch(2, 2)], OutputMode::Append)
        .unwrap();
    assert_eq!((w.rows, w.files, w.skipped_replay), (2, 1, false));
    // Another query's batch 0 is its own.
    let mut other = FileSink::open(&ctx("parquet", &dir, &[], "other-query")).unwrap();
    assert!(
        !other
            .add_batch(0, vec![ids_batch(4, 1)], OutputMode::Append)
            .unwrap()
            .skipped_replay
    );
    let files = committed_files(&dir).unwrap().unwrap();
    assert_eq!(all_ids(&files), vec![0, 1, 2, 3, 4]);
    assert_eq!(
        files
            .iter()
            .map(|f| f.batch.clone().unwrap())
            .collect::<Vec<_>>(),
        vec![
            (QID.to_string(), 0),
            (QID.to_string(), 3),
            ("other-query".to_string(), 0)
        ]
    );
}

#[test]
fn only_append_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let mut sink = open_sink(ctx("json", &tmp.path().join("o"), &[], QID), None).unwrap();
    let err = sink
        .add_batch(0, vec![ids_batch(0, 1)], OutputMode::Complete)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "sink `out`: json sinks only support the `append` output mode, not `complete`\n  help: use `append` output mode, or write to a memory, console or foreach_batch sink"
    );
}

#[test]
fn max_records_per_file_splits() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let mut sink = open_sink(
        ctx("parquet", &dir, &[("maxRecordsPerFile", "2")], QID),
        None,
    )
    .unwrap();
    let w = sink
        .add_batch(
            0,
            vec![ids_batch(0, 3), ids_batch(3, 2)],
            OutputMode::Append,
        )
        .unwrap();
    assert_eq!((w.rows, w.files), (5, 3));
    let names = files_in(&dir);
    let suffixes: Vec<&str> = names.iter().map(|n| &n[n.len() - 20..]).collect();
    assert_eq!(
        suffixes,
        vec![
            "-c000.snappy.parquet",
            "-c001.snappy.parquet",
            "-c002.snappy.parquet"
        ]
    );
    let files = committed_files(&dir).unwrap().unwrap();
    let counts: Vec<usize> = files
        .iter()
        .map(|f| {
            read_parquet(f.path.as_local().unwrap())
                .iter()
                .map(|b| b.num_rows())
                .sum()
        })
        .collect();
    assert_eq!(counts, vec![2, 2, 1]);
    assert_eq!(all_ids(&files), vec![0, 1, 2, 3, 4]);
    let err = open_sink(
        ctx("parquet", &dir, &[("maxRecordsPerFile", "many")], QID),
        None,
    )
    .err()
    .unwrap();
    assert_eq!(err.to_string(), "sink `out`: option `maxRecordsPerFile` is `many`, not a whole number\n  help: set `maxRecordsPerFile` to a number of rows (0: no limit)");
}

#[test]
fn partition_by_writes_hive_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let schema: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("day", DataType::Utf8, false),
        Field::new("level", DataType::Utf8, true),
        Field::new("v", DataType::Int64, false),
    ]));
    let mk = |day: Vec<&str>, level: Vec<Option<&str>>, v: Vec<i64>| {
        RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(day)),
                Arc::new(StringArray::from(level)),
                Arc::new(Int64Array::from(v)),
            ],
        )
        .unwrap()
    };
    let mut c = ctx("parquet", &dir, &[], QID);
    c.schema = schema.clone();
    c.partition_cols = vec!["day".into(), "level".into()];
    let mut sink = open_sink(c.clone(), None).unwrap();
    let w = sink
        .add_batch(
            0,
            vec![
                mk(
                    vec!["2024-01-01", "2024-01-01", "2024-01-02"],
                    vec![Some("ERROR"), None, Some("a/b")],
                    vec![1, 2, 3],
                ),
                mk(vec!["2024-01-01"], vec![Some("ERROR")], vec![4]),
            ],
            OutputMode::Append,
        )
        .unwrap();
    assert_eq!((w.rows, w.files), (4, 3));
    let dir = fs::canonicalize(&dir).unwrap();
    let files = committed_files(&dir).unwrap().unwrap();
    let rel: Vec<String> = files
        .iter()
        .map(|f| {
            let r = f.path.as_local().unwrap().strip_prefix(&dir).unwrap();
            r.parent().unwrap().to_string_lossy().into_owned()
        })
        .collect();
    assert_eq!(
        rel,
        vec![
            "day=2024-01-01/level=ERROR",
            "day=2024-01-01/level=__HIVE_DEFAULT_PARTITION__",
            "day=2024-01-02/level=a%2Fb",
        ]
    );
    // One file per partition; partition columns are not in the files.
    let first = read_parquet(files[0].path.as_local().unwrap());
    assert_eq!(first[0].schema().fields().len(), 1);
    assert_eq!(first[0].schema().field(0).name(), "v");
    assert_eq!(
        first[0]
            .column(0)
            .as_primitive::<Int64Type>()
            .values()
            .to_vec(),
        vec![1, 4]
    );
    assert_eq!(files_in(&dir.join("day=2024-01-01/level=ERROR")).len(), 1);
    // The manifest stores percent-encoded URIs (Hadoop quotes `%`).
    let log = fs::read_to_string(dir.join("_spark_metadata/0")).unwrap();
    assert!(
        log.contains("/day=2024-01-02/level=a%252Fb/part-00000-"),
        "{log}"
    );

    c.partition_cols = vec!["levl".into()];
    let err = open_sink(c.clone(), None).err().unwrap();
    assert_eq!(
        err.to_string(),
        "sink `out`: partition column `levl` is not a column of the output\n  help: did you mean `level`?"
    );
}

#[test]
fn uncommitted_files_are_invisible() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    assert_eq!(committed_files(&dir).unwrap(), None);
    fs::create_dir_all(&dir).unwrap();
    assert_eq!(committed_files(&dir).unwrap(), None, "plain directory");
    let mut sink = open_sink(ctx("parquet", &dir, &[], QID), None).unwrap();
    sink.add_batch(0, vec![ids_batch(0, 2)], OutputMode::Append)
        .unwrap();
    // A crash after writing a data file but before its manifest entry: the
    // file and a half-written temp entry are left behind.
    fs::write(
        dir.join("part-00000-00000000-0000-4000-8000-000000000000-c000.snappy.parquet"),
        b"PAR1 half written",
    )
    .unwrap();
    fs::write(
        dir.join("_spark_metadata/.1.5d2b.tmp"),
        "v1\n{\"path\":\"file:///x",
    )
    .unwrap();
    let files = committed_files(&dir).unwrap().unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(all_ids(&files), vec![0, 1]);
    // The next batch still gets entry 1.
    sink.add_batch(1, vec![ids_batch(2, 1)], OutputMode::Append)
        .unwrap();
    assert!(dir.join("_spark_metadata/1").is_file());
    assert_eq!(
        all_ids(&committed_files(&dir).unwrap().unwrap()),
        vec![0, 1, 2]
    );
}

#[test]
fn compaction_every_ten_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let mut sink = open_sink(ctx("parquet", &dir, &[], QID), None).unwrap();
    for b in 0..25u64 {
        sink.add_batch(b, vec![ids_batch(b as i64 * 10, 10)], OutputMode::Append)
            .unwrap();
    }
    let mut log: Vec<String> = fs::read_dir(dir.join("_spark_metadata"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    log.sort_by_key(|n| n.split('.').next().unwrap().parse::<u64>().unwrap());
    // Entries before the previous compaction (9) were cleaned up when 19 was written.
    let expected: Vec<String> = (9..25)
        .map(|n| {
            if n % 10 == 9 {
                format!("{n}.compact")
            } else {
                n.to_string()
            }
        })
        .collect();
    assert_eq!(log, expected);
    let compact = fs::read_to_string(dir.join("_spark_metadata/19.compact")).unwrap();
    assert_eq!(compact.lines().count(), 1 + 20);
    assert_eq!(compact.lines().next(), Some("v1"));
    let files = committed_files(&dir).unwrap().unwrap();
    assert_eq!(files.len(), 25);
    let ids = all_ids(&files);
    assert_eq!(ids, (0..250).collect::<Vec<i64>>());
    assert_eq!(
        files
            .iter()
            .map(|f| f.batch.clone().unwrap().1)
            .collect::<Vec<_>>(),
        (0..25).collect::<Vec<u64>>()
    );
    // Replays are still recognised from the compaction after a restart.
    let mut sink = FileSink::open(&ctx("parquet", &dir, &[], QID)).unwrap();
    assert!(
        sink.add_batch(3, vec![ids_batch(30, 10)], OutputMode::Append)
            .unwrap()
            .skipped_replay
    );
}

#[test]
fn concurrent_writers_lose_no_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("shared");
    let writers: Vec<_> = (0..3i64)
        .map(|w| {
            let dir = dir.clone();
            std::thread::spawn(move || {
                let qid = format!("query-{w}");
                let mut sink = FileSink::open(&ctx("parquet", &dir, &[], &qid)).unwrap();
                for b in 0..25i64 {
                    let w = sink
                        .add_batch(
                            b as u64,
                            vec![ids_batch(w * 100_000 + b * 10, 10)],
                            OutputMode::Append,
                        )
                        .unwrap();
                    assert_eq!(w.rows, 10);
                }
            })
        })
        .collect();
    // A reader listing concurrently never fails.
    let reader = {
        let dir = dir.clone();
        std::thread::spawn(move || {
            for _ in 0..200 {
                if dir.join("_spark_metadata").is_dir() {
                    committed_files(&dir).unwrap();
                }
            }
        })
    };
    for w in writers {
        w.join().unwrap();
    }
    reader.join().unwrap();
    let files = committed_files(&dir).unwrap().unwrap();
    assert_eq!(files.len(), 75);
    let ids = all_ids(&files);
    assert_eq!(ids.len(), 750);
    let distinct: BTreeSet<i64> = ids.iter().copied().collect();
    assert_eq!(distinct.len(), 750);
    let expected: BTreeSet<i64> = (0..3)
        .flat_map(|w| (0..250).map(move |i| w * 100_000 + i))
        .collect();
    assert_eq!(distinct, expected);
    let per_query: BTreeMap<String, usize> = files.iter().fold(BTreeMap::new(), |mut m, f| {
        *m.entry(f.batch.clone().unwrap().0).or_default() += 1;
        m
    });
    assert_eq!(
        per_query.values().copied().collect::<Vec<_>>(),
        vec![25, 25, 25]
    );
}

#[test]
fn reads_manifests_written_by_spark() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("spark out");
    let meta = dir.join("_spark_metadata");
    fs::create_dir_all(&meta).unwrap();
    let abs = dir.display().to_string().replace(' ', "%20");
    let line = |name: &str, size: u64| {
        format!("{{\"path\":\"file://{abs}/{name}\",\"size\":{size},\"isDir\":false,\"modificationTime\":1700000000000,\"blockReplication\":1,\"blockSize\":33554432,\"action\":\"add\"}}")
    };
    fs::write(
        meta.join("0"),
        format!(
            "v1\n{}\n{}",
            line("part-00000-a-c000.snappy.parquet", 10),
            line("part-00001-a-c000.snappy.parquet", 11)
        ),
    )
    .unwrap();
    // Spark's `file:/` form, a trailing newline, and a `.crc` file.
    fs::write(
        meta.join("1"),
        format!(
            "v1\n{{\"path\":\"file:{}/p=x%253Ay/part-00000-b-c000.snappy.parquet\",\"size\":12,\"isDir\":false,\"modificationTime\":1700000000001,\"blockReplication\":1,\"blockSize\":33554432,\"action\":\"add\"}}\n",
            abs
        ),
    )
    .unwrap();
    fs::write(meta.join(".1.crc"), "crc").unwrap();
    let files = committed_files(&dir).unwrap().unwrap();
    assert_eq!(
        files,
        vec![
            CommittedFile {
                path: dir.join("part-00000-a-c000.snappy.parquet").into(),
                size: 10,
                modification_time_ms: 1_700_000_000_000,
                batch: None
            },
            CommittedFile {
                path: dir.join("part-00001-a-c000.snappy.parquet").into(),
                size: 11,
                modification_time_ms: 1_700_000_000_000,
                batch: None
            },
            CommittedFile {
                path: dir.join("p=x%3Ay/part-00000-b-c000.snappy.parquet").into(),
                size: 12,
                modification_time_ms: 1_700_000_000_001,
                batch: None
            },
        ]
    );

    // A hole in the log is an error naming the missing entry.
    fs::write(meta.join("3"), "v1").unwrap();
    let err = committed_files(&dir).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "checkpoint file {}: is missing from the manifest (the log starts at 0 and runs to entry 3); the table's manifest is damaged: restore the file from a backup (readers only see data files listed in `_spark_metadata`)",
            meta.join("2").display()
        )
    );
    // A damaged entry is an error naming it.
    fs::write(meta.join("2"), "v1\n{\"path\":").unwrap();
    let err = committed_files(&dir).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "checkpoint file {}: line 2 is not a valid file status (",
            meta.join("2").display()
        )),
        "{err}"
    );
    fs::write(meta.join("2"), "").unwrap();
    let err = committed_files(&dir).unwrap_err().to_string();
    assert!(
        err.contains("2: is empty (truncated by a crash or a full disk?)"),
        "{err}"
    );
}

#[test]
fn open_sink_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let err = |c: SinkContext| open_sink(c, None).err().unwrap().to_string();
    assert_eq!(
        err(ctx("parquett", tmp.path(), &[], QID)),
        "sink `out`: format `parquett` is not a known sink format\n  help: did you mean `parquet`?"
    );
    let mut c = ctx("parquet", tmp.path(), &[], QID);
    c.path = None;
    assert_eq!(
        err(c),
        "sink `out`: a parquet sink needs a path\n  help: set `path:` on the sink (a directory; it is created when missing)"
    );
    assert_eq!(
        err(ctx("csv", tmp.path(), &[("header", "yes")], QID)),
        "sink `out`: option `header` is `yes`, not `true` or `false`\n  help: set `header` to `true` or `false`"
    );
    // Format names are normalised.
    assert!(open_sink(ctx("Parquet", &tmp.path().join("p"), &[], QID), None).is_ok());
    let _unused: Option<PathBuf> = None;
}

#[test]
fn batches_differing_in_nullability_share_one_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let strict: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
    ]));
    let first = RecordBatch::try_new(
        strict,
        vec![
            Arc::new(Int64Array::from(vec![1])),
            Arc::new(StringArray::from(vec!["a"])),
        ],
    )
    .unwrap();
    let mut sink = open_sink(ctx("parquet", &dir, &[], QID), None).unwrap();
    let w = sink
        .add_batch(0, vec![first, batch(&[2], &[None])], OutputMode::Append)
        .unwrap();
    assert_eq!((w.rows, w.files), (2, 1));
    let files = committed_files(&dir).unwrap().unwrap();
    assert_eq!(all_ids(&files), vec![1, 2]);
}

#[test]
fn the_manifest_exists_from_open_so_readers_never_see_uncommitted_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let _sink = FileSink::open(&ctx("parquet", &dir, &[], QID)).unwrap();
    assert!(dir.join("_spark_metadata").is_dir());
    // A file in the directory before any commit (a writer mid-batch) is
    // not part of the table.
    fs::write(dir.join("part-00000-uncommitted.parquet"), b"PAR1").unwrap();
    assert_eq!(committed_files(&dir).unwrap().map(|f| f.len()), Some(0));
}

#[test]
fn two_runs_writing_the_same_batch_list_it_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    // Two runs of one flow (same query id) both opened before either wrote.
    let mut first = FileSink::open(&ctx("parquet", &dir, &[], QID)).unwrap();
    let mut second = FileSink::open(&ctx("parquet", &dir, &[], QID)).unwrap();
    // Another flow writes into the same table meanwhile: not a race.
    let mut other = FileSink::open(&ctx("parquet", &dir, &[], "other-query")).unwrap();
    first
        .add_batch(5, vec![ids_batch(0, 2)], OutputMode::Append)
        .unwrap();
    other
        .add_batch(5, vec![ids_batch(10, 1)], OutputMode::Append)
        .unwrap();
    let err = second
        .add_batch(5, vec![ids_batch(0, 2)], OutputMode::Append)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!(
            "race while writing batch 5 of query {QID}: manifest entry {} already lists it, written by another run of the same flow\n  help: run each flow once at a time; this run's files of the batch were not committed",
            dir.canonicalize().unwrap().join("_spark_metadata/0").display()
        )
    );
    let files = committed_files(&dir).unwrap().unwrap();
    assert_eq!(all_ids(&files), vec![0, 1, 10]);
    // The refused run's data files were removed.
    assert_eq!(files_in(&dir).len(), 2);
    // The first run goes on with its next batch.
    first
        .add_batch(6, vec![ids_batch(2, 1)], OutputMode::Append)
        .unwrap();
    assert_eq!(
        all_ids(&committed_files(&dir).unwrap().unwrap()),
        vec![0, 1, 10, 2]
    );
}

/// A `_spark_metadata` log damaged at random (bytes replaced, cut short),
/// read as a reader of the table and a restarting sink read it: the
/// committed files or an error naming the log, never a panic; 300 seeded
/// cases.
#[test]
fn a_damaged_manifest_is_an_error_never_a_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("table");
    let mut sink = open_sink(ctx("parquet", &dir, &[], QID), None).unwrap();
    for id in 0..2u64 {
        sink.add_batch(id, vec![ids_batch(id as i64 * 10, 3)], OutputMode::Append)
            .unwrap();
    }
    drop(sink);
    let log = dir.join("_spark_metadata/1");
    let valid = fs::read(&log).unwrap();
    let mut damage = crate::damage::Damage::new(0xA076_1D64_78BD_642F);
    let (mut errors, mut read) = (0, 0);
    for case in 0..300 {
        let mut bytes = valid.clone();
        damage.scribble(&mut bytes, b"{}[]\":,0123456789-.v\nfile:/%\xff");
        if case % 3 == 0 {
            damage.cut(&mut bytes);
        }
        fs::write(&log, &bytes).unwrap();
        match committed_files(&dir) {
            Ok(_) => read += 1,
            Err(e) => {
                errors += 1;
                let text = e.to_string();
                assert!(
                    text.contains("_spark_metadata"),
                    "case {case}: `{text}` names the log"
                );
            }
        }
        // A restarting sink reads the same log: a sink or an error.
        let _ = open_sink(ctx("parquet", &dir, &[], QID), None);
    }
    fs::write(&log, &valid).unwrap();
    eprintln!("damaged manifest, 300 cases: {errors} errors, {read} read; 0 panics");
    assert!(errors > 100, "{errors}");
}
