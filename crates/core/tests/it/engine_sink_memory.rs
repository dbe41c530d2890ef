//! The memory sink (modes, replays) and the foreach-batch sink.

use std::sync::{Arc, Mutex};

use arrow::array::{AsArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use pipelines_core::engine::sink::SinkContext;
use pipelines_core::engine::sinks::{
    drop_memory_table, foreach_batch_fn, memory_table, open_sink, register_foreach_batch,
    ForeachBatchFn,
};
use pipelines_core::{Error, OutputMode};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]))
}

fn rows(v: &[i64]) -> RecordBatch {
    RecordBatch::try_new(schema(), vec![Arc::new(Int64Array::from(v.to_vec()))]).unwrap()
}

fn values(batches: &[RecordBatch]) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect()
}

fn ctx(name: &str, format: &str, options: &[(&str, &str)], query_id: &str) -> SinkContext {
    SinkContext {
        name: name.into(),
        format: format.into(),
        options: options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        path: None,
        partition_cols: vec![],
        merge_keys: vec![],
        schema: schema(),
        flow: "f".into(),
        query_id: query_id.into(),
    }
}

#[test]
fn memory_append_and_replay() {
    let mut s = open_sink(ctx("mem_append", "memory", &[], "q1"), None).unwrap();
    assert_eq!(
        s.describe(),
        "memory sink `mem_append` (table `mem_append`)"
    );
    let t = memory_table("mem_append").unwrap();
    assert_eq!(t.name(), "mem_append");
    assert_eq!(t.schema(), schema());
    s.add_batch(0, vec![rows(&[1, 2])], OutputMode::Append)
        .unwrap();
    s.add_batch(1, vec![rows(&[3])], OutputMode::Append)
        .unwrap();
    // A replay of batch 0 replaces its rows instead of duplicating them.
    let w = s
        .add_batch(0, vec![rows(&[1, 2])], OutputMode::Append)
        .unwrap();
    assert_eq!(w.rows, 2);
    assert_eq!(values(&t.rows()), vec![1, 2, 3]);
    assert_eq!(t.num_rows(), 3);
    let by_id: Vec<(u64, Vec<i64>)> = t
        .batches_by_id()
        .into_iter()
        .map(|(id, b)| (id, values(&b)))
        .collect();
    assert_eq!(by_id, vec![(0, vec![1, 2]), (1, vec![3])]);
    // Reopening (a restart) keeps the table; dropping it starts afresh.
    let _again = open_sink(ctx("mem_append", "memory", &[], "q1"), None).unwrap();
    assert_eq!(memory_table("mem_append").unwrap().num_rows(), 3);
    assert!(drop_memory_table("mem_append"));
    assert!(memory_table("mem_append").is_none());
    assert!(!drop_memory_table("mem_append"));
}

#[test]
fn memory_complete_and_update_modes() {
    let mut s = open_sink(
        ctx("mem_sink", "memory", &[("queryName", "totals_table")], "q"),
        None,
    )
    .unwrap();
    assert!(memory_table("mem_sink").is_none());
    let t = memory_table("totals_table").unwrap();
    s.add_batch(0, vec![rows(&[1, 2])], OutputMode::Complete)
        .unwrap();
    s.add_batch(1, vec![rows(&[3, 4]), rows(&[5])], OutputMode::Complete)
        .unwrap();
    assert_eq!(values(&t.rows()), vec![3, 4, 5]);
    assert_eq!(t.batches_by_id().len(), 1);
    assert_eq!(t.batches_by_id()[0].0, 1);

    let mut u = open_sink(ctx("mem_update", "memory", &[], "q"), None).unwrap();
    let t = memory_table("mem_update").unwrap();
    u.add_batch(0, vec![rows(&[1])], OutputMode::Update)
        .unwrap();
    u.add_batch(1, vec![rows(&[1, 2])], OutputMode::Update)
        .unwrap();
    u.add_batch(1, vec![rows(&[1, 2])], OutputMode::Update)
        .unwrap();
    assert_eq!(values(&t.rows()), vec![1, 1, 2]);

    // Two flows writing one table keep their own batches.
    let mut a = open_sink(ctx("mem_shared", "memory", &[], "qa"), None).unwrap();
    let mut b = open_sink(ctx("mem_shared", "memory", &[], "qb"), None).unwrap();
    a.add_batch(0, vec![rows(&[1])], OutputMode::Append)
        .unwrap();
    b.add_batch(0, vec![rows(&[2])], OutputMode::Append)
        .unwrap();
    assert_eq!(
        values(&memory_table("mem_shared").unwrap().rows()),
        vec![1, 2]
    );
}

#[test]
fn foreach_batch_calls_the_function_and_propagates_errors() {
    type Seen = Arc<Mutex<Vec<(u64, Vec<i64>)>>>;
    let seen: Seen = Arc::default();
    let seen2 = seen.clone();
    let f: ForeachBatchFn = Arc::new(move |batches: &[RecordBatch], id: u64| {
        if id == 2 {
            return Err(Error::runtime("downstream unavailable"));
        }
        seen2.lock().unwrap().push((id, values(batches)));
        Ok(())
    });
    let mut s = open_sink(ctx("fb", "foreachBatch", &[], "q"), Some(f)).unwrap();
    assert_eq!(s.describe(), "foreach_batch sink `fb`");
    let w = s
        .add_batch(0, vec![rows(&[1, 2])], OutputMode::Update)
        .unwrap();
    assert_eq!(w.rows, 2);
    s.add_batch(1, vec![], OutputMode::Update).unwrap();
    let err = s
        .add_batch(2, vec![rows(&[3])], OutputMode::Update)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "sink `fb`: the foreach_batch function failed on batch 2: downstream unavailable\n  help: the batch will be retried with the same rows; fix the function's error"
    );
    assert_eq!(*seen.lock().unwrap(), vec![(0, vec![1, 2]), (1, vec![])]);
}

#[test]
fn foreach_batch_registry() {
    let err = open_sink(ctx("alerts_unregistered", "foreach_batch", &[], "q"), None)
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "sink `alerts_unregistered` has format `foreach_batch` but no function is registered for it\n  help: in main, before running the pipeline, call `pipelines_core::engine::sinks::register_foreach_batch(\"alerts_unregistered\", |rows, batch_id| { ...; Ok(()) })`"
    );
    let count = Arc::new(Mutex::new(0usize));
    let c2 = count.clone();
    register_foreach_batch("alerts", move |batches, _id| {
        *c2.lock().unwrap() += batches.iter().map(|b| b.num_rows()).sum::<usize>();
        Ok(())
    });
    assert!(foreach_batch_fn("alerts").is_some());
    let mut s = open_sink(ctx("alerts", "foreach_batch", &[], "q"), None).unwrap();
    s.add_batch(0, vec![rows(&[1, 2, 3])], OutputMode::Append)
        .unwrap();
    assert_eq!(*count.lock().unwrap(), 3);
}
