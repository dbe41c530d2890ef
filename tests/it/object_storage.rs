//! Checkpoints in object storage, against a real S3-compatible server
//! (moto's, a process on a loopback port; `scripts/test` installs it and
//! sets `PIPELINES_REQUIRE_S3=1`): the offset and commit logs, state files
//! and source logs as objects; write-once by conditional put, so of many
//! concurrent writers of one batch exactly one wins; the lease that stands
//! for `flock`; a pipeline whose checkpoints are on `s3://` stopped midway
//! and resumed, and its errors.

use std::path::Path;
use std::sync::{Arc, Barrier, OnceLock};

use pipelines as dp;
use pipelines::engine::checkpoint::{lock_checkpoint, Checkpoint, CommitEntry, OffsetEntry};
use pipelines::engine::runtime::{inject_failure, run, RunOptions};
use pipelines::engine::storage::{Location, WriteOnce};
use pipelines::prelude::*;
use pipelines_test_support::s3::S3Server;

/// The shared server with the process's AWS_* variables pointing at it;
/// `None` (the test is skipped) when moto is not installed, unless
/// `PIPELINES_REQUIRE_S3` says it must be.
fn s3() -> Option<&'static S3Server> {
    static ENV: OnceLock<()> = OnceLock::new();
    let Some(server) = S3Server::shared() else {
        assert!(
            std::env::var_os("PIPELINES_REQUIRE_S3").is_none(),
            "PIPELINES_REQUIRE_S3 is set but no Python with moto.server was found \
             (PIPELINES_PYTHON); scripts/test installs it"
        );
        eprintln!("skipped: no moto.server (set PIPELINES_PYTHON to a Python with moto[server])");
        return None;
    };
    ENV.get_or_init(|| {
        for (k, v) in server.env() {
            std::env::set_var(k, v);
        }
    });
    Some(server)
}

/// A bucket of the test's own.
fn bucket(server: &S3Server, name: &str) -> Location {
    server.create_bucket(name);
    Location::parse(&format!("s3://{name}"), Path::new("/")).unwrap()
}

fn offsets(ms: i64) -> OffsetEntry {
    OffsetEntry {
        batch_watermark_ms: 0,
        batch_timestamp_ms: ms,
        conf: Default::default(),
        sources: vec![Some(serde_json::json!({"logOffset": 0}))],
    }
}

#[test]
fn the_logs_are_objects_in_spark_s_format() {
    let Some(server) = s3() else { return };
    let root = bucket(server, "logs");
    let dir = root.join("ckpt").join("flow");
    let c = Checkpoint::open(&dir).unwrap();
    c.write_offsets(0, &offsets(1)).unwrap();
    c.write_commit(
        0,
        &CommitEntry {
            next_batch_watermark_ms: 5,
            sink_rows: Some(3),
        },
    )
    .unwrap();
    c.write_offsets(1, &offsets(2)).unwrap();
    assert_eq!(
        String::from_utf8(dir.join("offsets").join("0").read().unwrap().unwrap()).unwrap(),
        "v1\n{\"batchWatermarkMs\":0,\"batchTimestampMs\":1,\"conf\":{}}\n{\"logOffset\":0}"
    );
    assert_eq!(
        String::from_utf8(dir.join("commits").join("0").read().unwrap().unwrap()).unwrap(),
        "v1\n{\"nextBatchWatermarkMs\":5,\"pipelinesSinkRows\":3}"
    );
    // Reopened: the same query id, the same logs.
    let again = Checkpoint::open(&dir).unwrap();
    assert_eq!(again.query_id(), c.query_id());
    assert_eq!(again.latest_offsets().unwrap().unwrap().0, 1);
    assert_eq!(again.latest_commit().unwrap().unwrap().0, 0);
    assert_eq!(again.dir().to_string(), "s3://logs/ckpt/flow");
    assert_eq!(dir.join("offsets").list().unwrap(), ["0", "1"]);
    // Retention deletes the old objects.
    assert_eq!(again.purge(1).unwrap(), 2);
    assert_eq!(dir.join("offsets").list().unwrap(), ["1"]);
    assert!(dir.join("commits").list().unwrap().is_empty());
    // Writing a batch again with other offsets is refused, naming the object.
    let err = again.write_offsets(1, &offsets(3)).unwrap_err().to_string();
    assert_eq!(
        err,
        "checkpoint file s3://logs/ckpt/flow/offsets/1: batch 1 already has offsets that differ \
         from the ones being written; the offset log is write-once (is another run of this flow \
         using the same checkpoint?)"
    );
}

#[test]
fn of_concurrent_writers_of_one_batch_exactly_one_wins() {
    let Some(server) = s3() else { return };
    let key = bucket(server, "race").join("offsets").join("7");
    let writers = 8;
    let barrier = Arc::new(Barrier::new(writers));
    let outcomes: Vec<WriteOnce> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..writers)
            .map(|i| {
                let (key, barrier) = (key.clone(), barrier.clone());
                s.spawn(move || {
                    barrier.wait();
                    key.write_once(format!("writer {i}").as_bytes()).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let winners: Vec<usize> = (0..writers)
        .filter(|i| outcomes[*i] == WriteOnce::Written)
        .collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| **o == WriteOnce::Differs)
            .count(),
        writers - 1
    );
    assert_eq!(
        key.read().unwrap().unwrap(),
        format!("writer {}", winners[0]).into_bytes()
    );
    // The same bytes again are recognised as the same write (a replay).
    assert_eq!(
        key.write_once(format!("writer {}", winners[0]).as_bytes())
            .unwrap(),
        WriteOnce::Identical
    );
}

#[test]
fn the_lease_refuses_a_second_run_and_frees_a_dead_one_s() {
    let Some(server) = s3() else { return };
    let root = bucket(server, "lease");
    let dir = root.join("checkpoints").join("f");
    let held = lock_checkpoint(&dir).unwrap();
    let lease = root.join("checkpoints").join("f.lock");
    assert!(lease.exists().unwrap());
    let err = lock_checkpoint(&dir).unwrap_err().to_string();
    let holder = format!(
        "the checkpoint s3://lease/checkpoints/f is in use by another run (pid {} on ",
        std::process::id()
    );
    assert!(err.starts_with(&holder), "{err}");
    assert!(
        err.ends_with(
            "help: wait for that run to finish or stop it; two runs of one flow would write \
             the same batches twice (a lease nobody renews expires after 60 s)"
        ),
        "{err}"
    );
    drop(held);
    assert!(!lease.exists().unwrap(), "released on drop");
    // A lease left by a process of this machine that is gone (SIGKILL)
    // is taken at once.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let host = String::from_utf8(
        std::process::Command::new("hostname")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string();
    let stale = serde_json::json!({
        "pid": pid,
        "host": host,
        "since": "2026-01-01T00:00:00Z",
        "renewed_ms": chrono::Utc::now().timestamp_millis(),
    });
    lease.replace(stale.to_string().as_bytes()).unwrap();
    let taken = lock_checkpoint(&dir).unwrap();
    let now: serde_json::Value = serde_json::from_slice(&lease.read().unwrap().unwrap()).unwrap();
    assert_eq!(now["pid"], std::process::id());
    drop(taken);
}

fn events(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("ts TIMESTAMP, user STRING")
        .option("maxFilesPerTrigger", "1")
        .load("in")?
        .with_watermark("ts", "10 minutes")?
        .group_by([tumbling_window(col("ts"), "10 minutes"), col("user")])
        .count()
}

fn write_input(dir: &Path, name: &str, lines: &[&str]) {
    std::fs::create_dir_all(dir.join("in")).unwrap();
    std::fs::write(dir.join("in").join(name), lines.join("\n") + "\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(15));
}

/// `columns` of every row of the Delta table at `table`, as text joined
/// by `,`, sorted.
fn delta_rows(table: impl Into<Location>, columns: &[&str]) -> Vec<String> {
    let mut rows = Vec::new();
    for b in dp::delta::read_table(table).unwrap().unwrap_or_default() {
        let texts: Vec<arrow::array::ArrayRef> = columns
            .iter()
            .map(|c| {
                arrow::compute::cast(
                    b.column_by_name(c).unwrap(),
                    &arrow::datatypes::DataType::Utf8,
                )
                .unwrap()
            })
            .collect();
        for i in 0..b.num_rows() {
            let row: Vec<&str> = texts
                .iter()
                .map(|t| {
                    t.as_any()
                        .downcast_ref::<arrow::array::StringArray>()
                        .unwrap()
                        .value(i)
                })
                .collect();
            rows.push(row.join(","));
        }
    }
    rows.sort();
    rows
}

/// `user,count` of every row in the Delta table `counts`.
fn counts(dir: &Path) -> Vec<String> {
    delta_rows(dir.join("storage/tables/counts"), &["user", "count"])
}

#[test]
fn a_stateful_flow_with_its_checkpoint_on_s3_resumes_where_it_stopped() {
    let Some(server) = s3() else { return };
    server.create_bucket("resume");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let yml = "name: s3ckpt\nstorage: ./storage\nflows:\n  count_users:\n    options:\n      checkpointLocation: s3://resume/ckpt/count_users\n";
    std::fs::write(dir.join("pipeline.yml"), yml).unwrap();
    let spec = dp::spec::parse_str(yml, &dir.join("pipeline.yml")).unwrap();
    let p = dp::Pipeline::new()
        .create_streaming_table("counts", dp::TableOptions::default())
        .append_flow("count_users", "counts", events);
    write_input(
        dir,
        "0.json",
        &[
            r#"{"ts":"2024-01-01T00:01:00","user":"a"}"#,
            r#"{"ts":"2024-01-01T00:02:00","user":"b"}"#,
        ],
    );
    write_input(
        dir,
        "1.json",
        &[r#"{"ts":"2024-01-01T00:03:00","user":"a"}"#],
    );
    write_input(
        dir,
        "2.json",
        &[r#"{"ts":"2024-01-01T00:25:00","user":"c"}"#],
    );
    write_input(
        dir,
        "3.json",
        &[r#"{"ts":"2024-01-01T00:40:00","user":"c"}"#],
    );
    let graph = p.build(&spec).map_err(|d| d.to_string()).unwrap();
    let opts = RunOptions::new(dir, dir.join("storage"));
    // Batch 2 fails after its offsets are written: the next run replays it
    // from the offsets and state in the bucket.
    inject_failure("count_users", "before_commit", 2);
    let err = run(&graph, &opts).unwrap_err().to_string();
    assert_eq!(
        err,
        "flow `count_users`: injected failure at before_commit of batch 2"
    );
    let ckpt = Location::parse("s3://resume/ckpt/count_users", dir).unwrap();
    assert_eq!(ckpt.join("offsets").list().unwrap(), ["0", "1", "2"]);
    assert_eq!(ckpt.join("commits").list().unwrap(), ["0", "1"]);
    assert_eq!(
        ckpt.join("sources").join("0").list().unwrap(),
        ["0", "1", "2"]
    );
    assert!(!ckpt.join("state").is_empty_dir().unwrap());
    let summary = run(&graph, &opts).unwrap();
    assert_eq!(summary.flows[0].replayed, 1);
    // Append mode: a window is written once the watermark (max event time
    // seen - 10 min, in force from the next batch) passes its end. Batch 3
    // runs with 00:15 (from batch 2's 00:25) and writes [00:00, 00:10);
    // its 00:40 moves the watermark to 00:30, so a batch without new data
    // (batch 4) writes [00:20, 00:30). [00:40, 00:50) stays open.
    assert_eq!(counts(dir), ["a,2", "b,1", "c,1"]);
    assert_eq!(
        ckpt.join("commits").list().unwrap(),
        ["0", "1", "2", "3", "4"]
    );
    // Nothing of the checkpoint is on the local disk.
    assert!(!dir.join("storage/checkpoints").exists());
}

#[test]
fn a_bucket_that_does_not_exist_is_an_error_naming_the_object() {
    let Some(_server) = s3() else { return };
    let dir = Location::parse("s3://no-such-bucket/ckpt", Path::new("/")).unwrap();
    let err = Checkpoint::open(&dir).unwrap_err().to_string();
    assert_eq!(
        err,
        "cannot write s3://no-such-bucket/ckpt/metadata: the bucket `no-such-bucket` does not \
         exist\n  help: create the bucket, or point the location at one that exists (and check \
         AWS_ENDPOINT_URL: another endpoint has other buckets)"
    );
}

/// `id,name` rows of a Delta table read by the `deltalake` Python package
/// from the same endpoint (the AWS_* variables), sorted.
fn python_rows(table: &str) -> Vec<String> {
    let python = std::env::var("PIPELINES_PYTHON").expect("PIPELINES_PYTHON");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/delta/read_delta.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(table)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut rows: Vec<String> = v[table]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| format!("{},{}", r[0], r[1].as_str().unwrap()))
        .collect();
    rows.sort();
    rows
}

/// `id,name` rows of a Delta table read by our reader.
fn our_rows(table: &Location) -> Vec<String> {
    delta_rows(table, &["id", "name"])
}

#[test]
fn delta_tables_in_a_bucket_chain_exactly_once() {
    let Some(server) = s3() else { return };
    server.create_bucket("lake");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let yml = "name: lake\nstorage: ./storage\n";
    let spec = dp::spec::parse_str(yml, &dir.join("pipeline.yml")).unwrap();
    let table = |path: &str| dp::TableOptions {
        path: Some(path.into()),
        ..Default::default()
    };
    let p = dp::Pipeline::new()
        .create_streaming_table("raw", table("s3://lake/tables/raw"))
        .create_streaming_table("upper", table("s3://lake/tables/upper"))
        .append_flow("load_raw", "raw", |s: &Session| {
            s.read_stream()
                .format("json")
                .schema("id BIGINT, name STRING")
                .option("maxFilesPerTrigger", "1")
                .load("in")
        })
        .append_flow("to_upper", "upper", |s: &Session| {
            s.read_stream_table("raw")?
                .select_expr(["id", "upper(name) AS name"])
        });
    std::fs::create_dir_all(dir.join("in")).unwrap();
    for f in 0..3 {
        let lines: Vec<String> = (0..4)
            .map(|r| format!("{{\"id\":{},\"name\":\"n{}\"}}", f * 10 + r, f * 10 + r))
            .collect();
        write_input(
            dir,
            &format!("{f}.json"),
            &lines.iter().map(String::as_str).collect::<Vec<_>>(),
        );
    }
    let graph = p.build(&spec).map_err(|d| d.to_string()).unwrap();
    let opts = RunOptions::new(dir, dir.join("storage"));
    // The second flow fails once between its Delta commit and its
    // checkpoint's commit (it reads the three commits of `raw` in one
    // batch): the replay finds its transaction in the log.
    inject_failure("to_upper", "before_commit", 0);
    assert!(run(&graph, &opts).is_err());
    run(&graph, &opts).unwrap();
    let expected_raw: Vec<String> = {
        let mut v: Vec<String> = (0..3)
            .flat_map(|f| (0..4).map(move |r| format!("{},n{}", f * 10 + r, f * 10 + r)))
            .collect();
        v.sort();
        v
    };
    let expected_upper: Vec<String> = expected_raw.iter().map(|r| r.to_uppercase()).collect();
    let raw = Location::parse("s3://lake/tables/raw", dir).unwrap();
    let upper = Location::parse("s3://lake/tables/upper", dir).unwrap();
    assert_eq!(our_rows(&raw), expected_raw);
    assert_eq!(our_rows(&upper), expected_upper);
    assert!(raw
        .join("_delta_log")
        .list()
        .unwrap()
        .contains(&"00000000000000000002.json".to_string()));
    assert!(
        !dir.join("storage/tables").exists(),
        "nothing of the tables on the local disk"
    );
    // An independent reader from the same endpoint sees the same rows.
    if std::env::var_os("PIPELINES_PYTHON").is_some() {
        assert_eq!(python_rows("s3://lake/tables/raw"), expected_raw);
        assert_eq!(python_rows("s3://lake/tables/upper"), expected_upper);
    }
}

#[test]
fn dry_run_refuses_an_object_path_without_a_bucket_and_nothing_else() {
    // No server needed: the graph checks the locations before anything runs.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let spec = dp::spec::parse_str(
        "name: lake\nstorage: ./storage\n",
        &dir.join("pipeline.yml"),
    )
    .unwrap();
    let p = dp::Pipeline::new()
        .create_streaming_table(
            "files",
            dp::TableOptions {
                format: Some("parquet".into()),
                path: Some("s3://lake/tables/files".into()),
                ..Default::default()
            },
        )
        .create_streaming_table(
            "nowhere",
            dp::TableOptions {
                path: Some("s3:///tables".into()),
                ..Default::default()
            },
        )
        .append_flow("load_files", "files", |s: &Session| {
            s.read_stream()
                .format("json")
                .schema("id BIGINT")
                .load("s3://lake/in")
        })
        .append_flow("load_nowhere", "nowhere", |s: &Session| {
            s.read_stream().format("rate").load_default()
        });
    let diags = p.build(&spec).unwrap_err();
    let lines: Vec<(String, String)> = diags
        .iter()
        .map(|d| (d.message.clone(), d.help.clone().unwrap_or_default()))
        .collect();
    // A parquet table and a JSON source in a bucket are fine.
    assert_eq!(
        lines,
        [(
            "`path`: `s3:///tables` names no bucket; write `s3://<bucket>/<prefix>`".to_string(),
            "give a local path or an `s3://bucket/prefix` URL".to_string()
        )]
    );
}

/// The rows of the file table at `table` (read through its manifest, from
/// wherever it is) as `<batch id>:<columns joined by ,>`, sorted; a
/// partition column is taken from the file's path.
fn file_table_rows(table: &Location, columns: &[&str]) -> Vec<String> {
    let mut rows = Vec::new();
    for f in dp::engine::sinks::committed_files(table)
        .unwrap()
        .unwrap_or_default()
    {
        let batch = f.batch.as_ref().map(|(_, b)| *b).unwrap();
        let url = f.path.to_string();
        let bytes = bytes::Bytes::from(f.path.read().unwrap().unwrap());
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .build()
            .unwrap();
        for b in reader {
            let b = b.unwrap();
            for i in 0..b.num_rows() {
                let row: Vec<String> = columns
                    .iter()
                    .map(|c| match b.column_by_name(c) {
                        Some(col) => arrow::util::display::array_value_to_string(col, i).unwrap(),
                        None => url
                            .split('/')
                            .find_map(|s| s.strip_prefix(&format!("{c}=")))
                            .unwrap()
                            .to_string(),
                    })
                    .collect();
                rows.push(format!("{batch}:{}", row.join(",")));
            }
        }
    }
    rows.sort();
    rows
}

/// A Parquet file of `id BIGINT, name STRING` rows, as bytes.
fn parquet_bytes(rows: &[(i64, &str)]) -> Vec<u8> {
    use arrow::array::{Int64Array, StringArray};
    let schema = Arc::new(arrow::datatypes::Schema::new(vec![
        arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Int64, true),
        arrow::datatypes::Field::new("name", arrow::datatypes::DataType::Utf8, true),
    ]));
    let batch = arrow::record_batch::RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
        ],
    )
    .unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(Vec::new(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.into_inner().unwrap()
}

#[test]
fn files_in_a_bucket_flow_into_parquet_tables_there_exactly_once() {
    let Some(server) = s3() else { return };
    let root = bucket(server, "files");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let yml = "name: files\nstorage: s3://files/storage\n";
    std::fs::write(dir.join("pipeline.yml"), yml).unwrap();
    let spec = dp::spec::parse_str(yml, &dir.join("pipeline.yml")).unwrap();
    let put = |key: &str, bytes: &[u8]| {
        root.join(key).replace(bytes).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(15));
    };
    put(
        "in/0.json",
        b"{\"id\":1,\"user\":\"a\"}\n{\"id\":2,\"user\":\"b\"}\n",
    );
    put("in/1.json", b"{\"id\":3,\"user\":\"a\"}\n");
    put("in/sub/2.json", b"{\"id\":4,\"user\":\"c\"}\n");
    // Hidden like Spark's: never read.
    put("in/_tmp/x.json", b"{\"id\":99,\"user\":\"x\"}\n");
    put("in/.x.json", b"{\"id\":98,\"user\":\"x\"}\n");
    put(
        "raw/p.parquet",
        &parquet_bytes(&[(7, "seven"), (8, "eight")]),
    );
    let parquet = |partition: &[&str]| dp::TableOptions {
        format: Some("parquet".into()),
        partition_cols: partition.iter().map(|c| c.to_string()).collect(),
        ..Default::default()
    };
    let p = dp::Pipeline::new()
        .create_streaming_table("events", parquet(&["user"]))
        .create_streaming_table("globbed", parquet(&[]))
        .create_streaming_table("copy", parquet(&[]))
        .create_streaming_table("raw_copy", parquet(&[]))
        .create_streaming_table("events_copy", parquet(&[]))
        .append_flow("load_events", "events", |s: &Session| {
            s.read_stream()
                .format("json")
                .schema("id BIGINT, user STRING")
                .option("maxFilesPerTrigger", "1")
                .load("s3://files/in")
        })
        .append_flow("load_glob", "globbed", |s: &Session| {
            s.read_stream()
                .format("json")
                .schema("id BIGINT, user STRING")
                .load("s3a://files/in/*.json")
        })
        .append_flow("copy_glob", "copy", |s: &Session| {
            s.read_stream_table("globbed")?
                .select_expr(["id", "upper(user) AS user"])
        })
        // A partitioned table read back: the partition column from the keys.
        .append_flow("copy_events", "events_copy", |s: &Session| {
            s.read_stream_table("events")
        })
        // Schema inferred from the first Parquet object under the prefix.
        .append_flow("load_raw", "raw_copy", |s: &Session| {
            s.read_stream().format("parquet").load("s3://files/raw")
        });
    let graph = p.build(&spec).map_err(|d| d.to_string()).unwrap();
    let storage = spec.storage_location();
    let opts = RunOptions::new(dir, storage.clone());
    // The copy fails once after its manifest entry, before its checkpoint's
    // commit: the replay finds the batch in the manifest and skips it.
    inject_failure("copy_glob", "before_commit", 0);
    assert!(run(&graph, &opts).is_err());
    run(&graph, &opts).unwrap();
    let tables = storage.join("tables");
    assert_eq!(
        file_table_rows(&tables.join("events"), &["id", "user"]),
        ["0:1,a", "0:2,b", "1:3,a", "2:4,c"]
    );
    assert_eq!(
        file_table_rows(&tables.join("globbed"), &["id", "user"]),
        ["0:1,a", "0:2,b", "0:3,a"]
    );
    assert_eq!(
        file_table_rows(&tables.join("copy"), &["id", "user"]),
        ["0:1,A", "0:2,B", "0:3,A"]
    );
    let mut copied: Vec<String> = file_table_rows(&tables.join("events_copy"), &["id", "user"])
        .into_iter()
        .map(|r| r.split_once(':').unwrap().1.to_string())
        .collect();
    copied.sort();
    assert_eq!(copied, ["1,a", "2,b", "3,a", "4,c"]);
    assert_eq!(
        file_table_rows(&tables.join("raw_copy"), &["id", "name"]),
        ["0:7,seven", "0:8,eight"]
    );
    // The manifest and the source log name objects as Spark's S3 file
    // system does.
    let entry = tables
        .join("events/_spark_metadata/0")
        .read_text("")
        .unwrap()
        .unwrap();
    assert!(
        entry.contains("\"path\":\"s3a://files/storage/tables/events/user=a/part-00000-"),
        "{entry}"
    );
    let log = storage
        .join("checkpoints/load_events/sources/0/0")
        .read_text("")
        .unwrap()
        .unwrap();
    assert!(
        log.starts_with("v1\n{\"batchId\":0,\"path\":\"s3a://files/in/0.json\","),
        "{log}"
    );
    assert!(!dir.join("storage").exists(), "nothing on the local disk");
}

#[test]
fn a_storage_root_in_a_bucket_keeps_everything_there() {
    let Some(server) = s3() else { return };
    server.create_bucket("rooted");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let yml = "name: rooted\nstorage: s3://rooted/pipelines/rooted\n";
    std::fs::write(dir.join("pipeline.yml"), yml).unwrap();
    let spec = dp::spec::parse_str(yml, &dir.join("pipeline.yml")).unwrap();
    let root = spec.storage_location();
    assert_eq!(root.to_string(), "s3://rooted/pipelines/rooted");
    let p = dp::Pipeline::new()
        .create_streaming_table("counts", dp::TableOptions::default())
        .append_flow("count_users", "counts", events);
    write_input(
        dir,
        "0.json",
        &[r#"{"ts":"2024-01-01T00:01:00","user":"a"}"#],
    );
    write_input(
        dir,
        "1.json",
        &[r#"{"ts":"2024-01-01T00:30:00","user":"b"}"#],
    );
    let graph = p.build(&spec).map_err(|d| d.to_string()).unwrap();
    let summary = run(&graph, &RunOptions::new(dir, root.clone())).unwrap();
    // Batch 0 and 1 read a file each; batch 2 (no new data) runs with the
    // watermark 00:20 and writes [00:00, 00:10).
    assert_eq!(summary.flows[0].batches, 3);
    assert_eq!(
        root.join("checkpoints")
            .join("count_users")
            .join("commits")
            .list()
            .unwrap(),
        ["0", "1", "2"]
    );
    let table = root.join("tables").join("counts");
    assert_eq!(dp::delta::latest_version(&table).unwrap(), Some(1));
    // The event log: one object per event, numbered from 1, and its table.
    let log = dp::engine::event_log::log_location(&root);
    assert_eq!(
        log.to_string(),
        "s3://rooted/pipelines/rooted/event_log/events"
    );
    let logged = dp::engine::event_log::read_events(&log).unwrap();
    assert_eq!(logged.first().map(|e| e.sequence), Some(1));
    assert_eq!(log.list().unwrap().len(), logged.len());
    assert!(log.list().unwrap()[0] == "00000000000000000001.json");
    let progress = dp::engine::event_log::read_batch_progress(root.clone()).unwrap();
    assert_eq!(progress.len(), 3);
    let events_table =
        dp::engine::event_table::table_path(&root, dir, &Default::default()).unwrap();
    let counted = dp::engine::event_table::query(
        &events_table,
        "SELECT count(*) AS n, min(sequence) AS first FROM event_log",
    )
    .unwrap();
    let n = counted[0]
        .column(0)
        .as_any()
        .downcast_ref::<arrow::array::Int64Array>()
        .unwrap()
        .value(0);
    assert_eq!(n as usize, logged.len());
    // A second run numbers its events on from the first's.
    run(&graph, &RunOptions::new(dir, root.clone())).unwrap();
    let again = dp::engine::event_log::read_events(&log).unwrap();
    let sequences: Vec<u64> = again.iter().map(|e| e.sequence).collect();
    assert_eq!(sequences, (1..=again.len() as u64).collect::<Vec<_>>());
    assert!(again.len() > logged.len());
    assert!(!dir.join("storage").exists() && !dir.join("pipelines").exists());
}
