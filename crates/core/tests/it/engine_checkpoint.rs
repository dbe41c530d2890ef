//! The checkpoint directory: Spark's offset/commit log format, write-once
//! logs, damaged files, retention, query shapes and import.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use pipelines_core::engine::checkpoint::{
    import_from, shape_diff, Checkpoint, CommitEntry, OffsetEntry, QueryShape, SourceShape,
};
use serde_json::json;

fn entry() -> OffsetEntry {
    OffsetEntry {
        batch_watermark_ms: 0,
        batch_timestamp_ms: 1_700_000_000_000,
        conf: BTreeMap::from([
            (
                "spark.sql.shuffle.partitions".to_string(),
                "200".to_string(),
            ),
            (
                "spark.sql.streaming.multipleWatermarkPolicy".to_string(),
                "min".to_string(),
            ),
        ]),
        sources: vec![Some(json!({"logOffset": 0})), None],
    }
}

fn read(p: impl AsRef<Path>) -> String {
    fs::read_to_string(p).unwrap()
}

#[test]
fn open_creates_layout_and_keeps_the_query_id() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ckpt");
    let c = Checkpoint::open(&dir).unwrap();
    for d in ["offsets", "commits", "sources"] {
        assert!(dir.join(d).is_dir(), "{d}");
    }
    let id = c.query_id().to_string();
    assert_eq!(id.len(), 36);
    assert_eq!(read(dir.join("metadata")), format!("{{\"id\":\"{id}\"}}"));
    let again = Checkpoint::open(&dir).unwrap();
    assert_eq!(again.query_id(), id);
    assert_eq!(again.dir().as_local(), Some(dir.as_path()));
    let s = again.source_dir(1);
    assert_eq!(s.as_local(), Some(dir.join("sources").join("1").as_path()));
    assert!(dir.join("sources").join("1").is_dir());
    assert_eq!(again.latest_offsets().unwrap(), None);
    assert_eq!(again.latest_commit().unwrap(), None);
}

#[test]
fn offsets_and_commits_are_written_in_sparks_format() {
    let tmp = tempfile::tempdir().unwrap();
    let c = Checkpoint::open(tmp.path()).unwrap();
    c.write_offsets(0, &entry()).unwrap();
    assert_eq!(
        read(tmp.path().join("offsets/0")),
        "v1\n{\"batchWatermarkMs\":0,\"batchTimestampMs\":1700000000000,\"conf\":{\"spark.sql.shuffle.partitions\":\"200\",\"spark.sql.streaming.multipleWatermarkPolicy\":\"min\"}}\n{\"logOffset\":0}\n-"
    );
    c.write_commit(
        0,
        &CommitEntry {
            next_batch_watermark_ms: 5000,
            sink_rows: None,
        },
    )
    .unwrap();
    assert_eq!(
        read(tmp.path().join("commits/0")),
        "v1\n{\"nextBatchWatermarkMs\":5000}"
    );
    // No temp files left behind.
    let names: Vec<String> = fs::read_dir(tmp.path().join("offsets"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["0".to_string()]);

    // Round trip.
    let mut e1 = entry();
    e1.batch_watermark_ms = 42;
    e1.sources = vec![Some(json!({"logOffset": 1})), Some(json!(17))];
    c.write_offsets(1, &e1).unwrap();
    assert_eq!(c.offsets(0).unwrap(), entry());
    assert_eq!(c.latest_offsets().unwrap(), Some((1, e1)));
    assert_eq!(
        c.latest_commit().unwrap(),
        Some((
            0,
            CommitEntry {
                next_batch_watermark_ms: 5000,
                sink_rows: None,
            }
        ))
    );
    assert_eq!(c.try_offsets(7).unwrap(), None);
    assert_eq!(c.commit(1).unwrap(), None);
}

#[test]
fn reads_logs_written_by_spark() {
    let tmp = tempfile::tempdir().unwrap();
    let c = Checkpoint::open(tmp.path()).unwrap();
    fs::write(
        tmp.path().join("offsets/3"),
        "v1\n{\"batchWatermarkMs\":1699999990000,\"batchTimestampMs\":1700000000123,\"conf\":{\"spark.sql.streaming.stateStore.providerClass\":\"org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider\",\"spark.sql.shuffle.partitions\":\"200\"}}\n{\"logOffset\":3}\n{\"my-topic\":{\"0\":23,\"1\":5}}\n",
    )
    .unwrap();
    fs::write(
        tmp.path().join("commits/3"),
        "v1\n{\"nextBatchWatermarkMs\":1699999995000}",
    )
    .unwrap();
    // Hidden temp and checksum files are not batches.
    fs::write(tmp.path().join("offsets/.4.abc.tmp"), "partial").unwrap();
    fs::write(tmp.path().join("offsets/.3.crc"), "crc").unwrap();
    let (n, e) = c.latest_offsets().unwrap().unwrap();
    assert_eq!(n, 3);
    assert_eq!(e.batch_watermark_ms, 1_699_999_990_000);
    assert_eq!(e.batch_timestamp_ms, 1_700_000_000_123);
    assert_eq!(e.conf["spark.sql.shuffle.partitions"], "200");
    assert_eq!(
        e.sources,
        vec![
            Some(json!({"logOffset": 3})),
            Some(json!({"my-topic": {"0": 23, "1": 5}}))
        ]
    );
    assert_eq!(
        c.latest_commit().unwrap().unwrap(),
        (
            3,
            CommitEntry {
                next_batch_watermark_ms: 1_699_999_995_000,
                sink_rows: None,
            }
        )
    );
}

const HINT: &str = "the checkpoint is damaged: restore this file from a backup, or rerun the flow with `--full-refresh <flow>` to start over from a new checkpoint";

fn offsets_error(content: &str) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let c = Checkpoint::open(tmp.path()).unwrap();
    fs::write(tmp.path().join("offsets/0"), content).unwrap();
    let err = c.latest_offsets().unwrap_err().to_string();
    let prefix = format!(
        "checkpoint file {}: ",
        tmp.path().join("offsets/0").display()
    );
    err.strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{err}"))
        .to_string()
}

#[test]
fn damaged_offset_files_are_errors_naming_the_file() {
    assert_eq!(
        offsets_error(""),
        format!("is empty (truncated by a crash or a full disk?); {HINT}")
    );
    assert_eq!(
        offsets_error("garbage\n{}"),
        format!("line 1 should be the log version `v1` but is `garbage`; {HINT}")
    );
    assert_eq!(
        offsets_error("v2\n{}"),
        "was written in log version v2 by a newer version of Spark or of this framework; this build reads v1. Run the flow with the version that wrote it"
    );
    assert_eq!(
        offsets_error("v1\n{\"batchWatermarkMs\":0,\"batchTi"),
        format!("line 2 is not valid batch metadata (expected {{\"batchWatermarkMs\":..,\"batchTimestampMs\":..,\"conf\":{{..}}}}): EOF while parsing a string at line 1 column 30; {HINT}")
    );
    assert_eq!(
        offsets_error("v1\n{\"batchWatermarkMs\":0}\n{\"logOffset\":0}\n{\"logOff"),
        format!("line 4 (the offset of source 1) is not valid JSON: EOF while parsing a string at line 1 column 8; {HINT}")
    );
}

#[test]
fn damaged_commit_files_and_gaps_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let c = Checkpoint::open(tmp.path()).unwrap();
    c.write_offsets(0, &entry()).unwrap();
    fs::write(tmp.path().join("commits/0"), "v1\n").unwrap();
    assert_eq!(
        c.latest_commit().unwrap_err().to_string(),
        format!(
            "checkpoint file {}: has no commit metadata on line 2 (truncated by a crash or a full disk?); {HINT}",
            tmp.path().join("commits/0").display()
        )
    );
    fs::write(
        tmp.path().join("commits/0"),
        "v1\n{\"nextBatchWatermarkMs\":\"x\"}",
    )
    .unwrap();
    let err = c.latest_commit().unwrap_err().to_string();
    assert!(
        err.contains("line 2 is not valid commit metadata (expected {\"nextBatchWatermarkMs\":..}): invalid type: string \"x\", expected i64"),
        "{err}"
    );

    // A commit without offsets.
    fs::write(
        tmp.path().join("commits/0"),
        "v1\n{\"nextBatchWatermarkMs\":0}",
    )
    .unwrap();
    fs::write(
        tmp.path().join("commits/5"),
        "v1\n{\"nextBatchWatermarkMs\":0}",
    )
    .unwrap();
    assert_eq!(
        c.latest_commit().unwrap_err().to_string(),
        format!(
            "checkpoint file {}: is missing, but commits/5 exists: batch 5 was committed without offsets; {HINT}",
            tmp.path().join("offsets/5").display()
        )
    );
    // Committing a batch that has no offsets is refused.
    let err = c
        .write_commit(
            7,
            &CommitEntry {
                next_batch_watermark_ms: 0,
                sink_rows: None,
            },
        )
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!(
            "checkpoint file {}: cannot commit batch 7: offsets/7 does not exist",
            tmp.path().join("commits/7").display()
        )
    );

    // A hole in the offset log.
    c.write_offsets(1, &entry()).unwrap();
    c.write_offsets(3, &entry()).unwrap();
    assert_eq!(
        c.latest_offsets().unwrap_err().to_string(),
        format!(
            "checkpoint file {}: is missing: the log has batch 1 and batch 3 but nothing in between; {HINT}",
            tmp.path().join("offsets/2").display()
        )
    );
    // A missing offsets file asked for by number.
    assert_eq!(
        c.offsets(2).unwrap_err().to_string(),
        format!(
            "checkpoint file {}: is missing: batch 2 has no offsets; {HINT}",
            tmp.path().join("offsets/2").display()
        )
    );
}

#[test]
fn logs_are_write_once() {
    let tmp = tempfile::tempdir().unwrap();
    let c = Checkpoint::open(tmp.path()).unwrap();
    c.write_offsets(0, &entry()).unwrap();
    // The same content again is fine (a replay re-planning the same batch).
    c.write_offsets(0, &entry()).unwrap();
    let mut other = entry();
    other.sources[0] = Some(json!({"logOffset": 9}));
    assert_eq!(
        c.write_offsets(0, &other).unwrap_err().to_string(),
        format!(
            "checkpoint file {}: batch 0 already has offsets that differ from the ones being written; the offset log is write-once (is another run of this flow using the same checkpoint?)",
            tmp.path().join("offsets/0").display()
        )
    );
    assert_eq!(c.offsets(0).unwrap(), entry());
    let commit = CommitEntry {
        next_batch_watermark_ms: 10,
        sink_rows: None,
    };
    c.write_commit(0, &commit).unwrap();
    c.write_commit(0, &commit).unwrap();
    let err = c
        .write_commit(
            0,
            &CommitEntry {
                next_batch_watermark_ms: 11,
                sink_rows: None,
            },
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.ends_with("batch 0 is already committed with a different watermark; the commit log is write-once (is another run of this flow using the same checkpoint?)"),
        "{err}"
    );
}

#[test]
fn purge_keeps_the_latest_batches() {
    let tmp = tempfile::tempdir().unwrap();
    let c = Checkpoint::open(tmp.path()).unwrap();
    for n in 0..10 {
        c.write_offsets(n, &entry()).unwrap();
        if n < 9 {
            c.write_commit(n, &CommitEntry::default()).unwrap();
        }
    }
    assert_eq!(c.purge(3).unwrap(), 7 + 7);
    let list = |d: &str| {
        let mut v: Vec<u64> = fs::read_dir(tmp.path().join(d))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().parse().unwrap())
            .collect();
        v.sort();
        v
    };
    assert_eq!(list("offsets"), vec![7, 8, 9]);
    assert_eq!(list("commits"), vec![7, 8]);
    assert_eq!(c.latest_offsets().unwrap().unwrap().0, 9);
    assert_eq!(c.latest_commit().unwrap().unwrap().0, 8);
    assert_eq!(c.purge(100).unwrap(), 0);
}

fn source(desc: &str, opts: &[(&str, &str)]) -> SourceShape {
    SourceShape {
        description: desc.to_string(),
        format: "json".to_string(),
        options: opts
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

#[test]
fn shape_round_trip_and_diff() {
    let tmp = tempfile::tempdir().unwrap();
    let c = Checkpoint::open(tmp.path()).unwrap();
    assert_eq!(c.read_shape().unwrap(), None);
    let old = QueryShape {
        sources: vec![
            source(
                "json source `data/logs`",
                &[("maxFilesPerTrigger", "1"), ("multiLine", "false")],
            ),
            source("json source `data/a`", &[]),
            source("json source `data/b`", &[]),
        ],
        stateful_operators: vec!["aggregate [window, service_name]".to_string()],
        output_schema: vec![
            (
                "window".to_string(),
                "STRUCT<start: TIMESTAMP, end: TIMESTAMP>".to_string(),
            ),
            ("service_name".to_string(), "STRING".to_string()),
            ("count".to_string(), "BIGINT".to_string()),
        ],
    };
    c.write_shape(&old).unwrap();
    assert_eq!(c.read_shape().unwrap(), Some(old.clone()));
    assert_eq!(shape_diff(&old, &old), Vec::<String>::new());

    let new = QueryShape {
        sources: vec![
            source(
                "json source `data/logs`",
                &[
                    ("maxFilesPerTrigger", "10"),
                    ("multiLine", "true"),
                    ("mode", "FAILFAST"),
                ],
            ),
            source("json source `data/a2`", &[]),
        ],
        stateful_operators: vec!["dedup [id]".to_string()],
        output_schema: vec![
            (
                "window".to_string(),
                "STRUCT<start: TIMESTAMP, end: TIMESTAMP>".to_string(),
            ),
            ("count".to_string(), "STRING".to_string()),
            ("level".to_string(), "STRING".to_string()),
        ],
    };
    assert_eq!(
        shape_diff(&old, &new),
        vec![
            "option `mode` of source 1 added: FAILFAST",
            "option `multiLine` of source 1 changed: false → true",
            "source 2 changed: json source `data/a` → json source `data/a2`",
            "source removed: json source `data/b`",
            "stateful operator added: dedup [id]",
            "stateful operator removed: aggregate [window, service_name]",
            "output column `count` changed type: BIGINT → STRING",
            "output column `level` added (STRING)",
            "output column `service_name` removed (was STRING)",
        ]
    );
    let mut added = old.clone();
    added
        .sources
        .push(source("rate source", &[("rowsPerSecond", "5")]));
    assert_eq!(shape_diff(&old, &added), vec!["source added: rate source"]);

    // Only admission limits changed: allowed, nothing listed.
    let mut limits = old.clone();
    limits.sources[0]
        .options
        .insert("maxFilesPerTrigger".into(), "100".into());
    limits.sources[0]
        .options
        .insert("maxBytesPerTrigger".into(), "1g".into());
    assert_eq!(shape_diff(&old, &limits), Vec::<String>::new());

    fs::write(tmp.path().join("shape.json"), "{\"sources\": [").unwrap();
    let err = c.read_shape().unwrap_err().to_string();
    assert!(
        err.contains("shape.json: is not a valid query shape"),
        "{err}"
    );
}

#[test]
fn import_copies_an_external_checkpoint_once() {
    let tmp = tempfile::tempdir().unwrap();
    let ext = tmp.path().join("spark-ckpt");
    fs::create_dir_all(ext.join("offsets")).unwrap();
    fs::create_dir_all(ext.join("sources/0")).unwrap();
    fs::write(
        ext.join("metadata"),
        "{\"id\":\"6a5b2f9e-0000-4000-8000-000000000001\"}",
    )
    .unwrap();
    fs::write(
        ext.join("offsets/0"),
        "v1\n{\"batchWatermarkMs\":0,\"batchTimestampMs\":1,\"conf\":{}}\n{\"logOffset\":0}",
    )
    .unwrap();
    fs::write(
        ext.join("sources/0/0"),
        "v1\n{\"path\":\"file:///x\",\"timestamp\":1,\"batchId\":0}",
    )
    .unwrap();

    let into = tmp.path().join("storage/checkpoints/flow");
    assert!(import_from(&ext, &into).unwrap());
    assert_eq!(
        read(into.join("sources/0/0")),
        read(ext.join("sources/0/0"))
    );
    let c = Checkpoint::open(&into).unwrap();
    assert_eq!(c.query_id(), "6a5b2f9e-0000-4000-8000-000000000001");
    assert_eq!(
        c.latest_offsets().unwrap().unwrap().1.sources,
        vec![Some(json!({"logOffset": 0}))]
    );
    // Not again once the target has content.
    assert!(!import_from(&ext, &into).unwrap());
    // An existing empty directory is filled.
    let empty = tmp.path().join("empty");
    fs::create_dir_all(&empty).unwrap();
    assert!(import_from(&ext, &empty).unwrap());
    assert!(empty.join("metadata").is_file());

    let not = tmp.path().join("not-a-checkpoint");
    fs::create_dir_all(&not).unwrap();
    fs::write(not.join("x.txt"), "x").unwrap();
    let err = import_from(&not, tmp.path().join("t"))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!(
            "cannot import checkpoint {}: it has neither `offsets/` nor `metadata`, so it is not a streaming checkpoint\n  help: point the import at a Spark checkpoint directory (it contains `offsets/` and `metadata`)",
            not.display()
        )
    );
    let missing = tmp.path().join("missing");
    let err = import_from(&missing, tmp.path().join("t"))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(&format!(
            "cannot import checkpoint {}: it is not a directory",
            missing.display()
        )),
        "{err}"
    );
    assert!(!tmp.path().join("t").exists());
}

#[test]
fn damaged_metadata_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("metadata"), "{\"id\":").unwrap();
    let err = Checkpoint::open(tmp.path()).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "checkpoint file {}: is not valid metadata (expected {{\"id\":\"<uuid>\"}}): EOF while parsing a value at line 1 column 6; {HINT}",
            tmp.path().join("metadata").display()
        )
    );
}

#[test]
fn fsync_setting_is_validated() {
    use pipelines_core::engine::storage::local::{configure_fsync, fsync_enabled, FSYNC_CONF_KEY};
    let conf = |v: &str| BTreeMap::from([(FSYNC_CONF_KEY.to_string(), v.to_string())]);
    let err = configure_fsync(&conf("yes")).unwrap_err().to_string();
    assert!(err.contains(FSYNC_CONF_KEY) && err.contains("yes"), "{err}");
    // The default (like Spark) is off.
    configure_fsync(&BTreeMap::new()).unwrap();
    assert!(!fsync_enabled());
    configure_fsync(&conf(" FALSE ")).unwrap();
    assert!(!fsync_enabled());
}

/// Checkpoint files damaged at random — bytes replaced, cut short — read as
/// a restart reads them: an entry or an error naming the file, never a
/// panic. 300 seeded cases per file (offsets, commits, metadata, shape).
#[test]
fn damaged_checkpoint_files_are_errors_never_a_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let c = Checkpoint::open(tmp.path()).unwrap();
    c.write_offsets(0, &entry()).unwrap();
    c.write_commit(
        0,
        &CommitEntry {
            next_batch_watermark_ms: 5,
            sink_rows: None,
        },
    )
    .unwrap();
    c.write_shape(&QueryShape {
        sources: vec![source(
            "json source `data/logs`",
            &[("maxFilesPerTrigger", "1")],
        )],
        stateful_operators: vec!["aggregate [window, service_name]".to_string()],
        output_schema: vec![("count".to_string(), "BIGINT".to_string())],
    })
    .unwrap();
    let files = ["offsets/0", "commits/0", "metadata", "shape.json"];
    let valid: Vec<Vec<u8>> = files
        .iter()
        .map(|f| fs::read(tmp.path().join(f)).unwrap())
        .collect();
    let mut damage = crate::damage::Damage::new(0x2545_F491_4F6C_DD1D);
    let mut errors = [0usize; 4];
    for case in 0..300 {
        for (i, f) in files.iter().enumerate() {
            let mut bytes = valid[i].clone();
            damage.scribble(&mut bytes, b"{}[]\":,0123456789-.eE v\n\xff");
            if case % 3 == 0 {
                damage.cut(&mut bytes);
            }
            let path = tmp.path().join(f);
            fs::write(&path, &bytes).unwrap();
            let outcome = match *f {
                "offsets/0" => c.latest_offsets().map(|_| ()),
                "commits/0" => c.latest_commit().map(|_| ()),
                "shape.json" => c.read_shape().map(|_| ()),
                _ => Checkpoint::open(tmp.path()).map(|_| ()),
            };
            if let Err(e) = outcome {
                errors[i] += 1;
                let text = e.to_string();
                assert!(text.contains(f), "case {case}: `{text}` names {f}");
            }
            fs::write(&path, &valid[i]).unwrap();
        }
    }
    eprintln!(
        "damaged checkpoint files, 300 each: errors offsets {}, commits {}, metadata {}, shape {}; 0 panics",
        errors[0], errors[1], errors[2], errors[3]
    );
    assert!(errors.iter().all(|&n| n > 100), "{errors:?}");
}
