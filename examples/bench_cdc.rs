//! What AUTO CDC costs: a change feed applied to a Delta table as SCD type
//! 1 and as SCD type 2, events per second, seconds per batch, where the
//! time goes (the CDC computation vs. the Delta write) and the state per key.
//!
//! ```text
//! cargo run --release --example bench_cdc            # 1 M events over 100 k keys in 10 batches
//! cargo run --release --example bench_cdc -- --quick # 100 k events over 10 k keys (the test script)
//! ```
//!
//! The feed: Parquet files, one per micro-batch (`maxFilesPerTrigger` 1),
//! with `id BIGINT, name STRING, city STRING, op STRING, seq BIGINT`;
//! keys uniform over the key space, 10% deletes, 5% of events late (their
//! sequence from two batches back). The first batch only inserts (an
//! append); later ones are MERGEs.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use pipelines as dp;
use pipelines::cdc::AutoCdc;
use pipelines::engine::runtime::{run, RunOptions};
use pipelines::prelude::*;
use pipelines_test_support::bench_data;

const NAMES: [&str; 8] = ["ana", "bo", "chen", "dara", "eli", "fatma", "gus", "hana"];
const CITIES: [&str; 6] = ["Oaxaca", "Lyon", "Pune", "Osaka", "Quito", "Turku"];

fn mix(i: u64) -> u64 {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 31;
    x.wrapping_mul(0xBF58_476D_1CE4_E5B9) ^ (x >> 29)
}

/// Writes the feed: `files` Parquet files of `events / files` events.
fn generate(dir: &Path, events: u64, keys: u64, files: u64) -> Result<()> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("city", DataType::Utf8, true),
        Field::new("op", DataType::Utf8, true),
        Field::new("seq", DataType::Int64, true),
    ]));
    let per = events / files;
    bench_data::generate_parquet_files(dir, files, |f| {
        let (mut id, mut name, mut city, mut op, mut seq) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for i in f * per..(f + 1) * per {
            let h = mix(i);
            id.push((h % keys) as i64);
            name.push(NAMES[(h >> 20) as usize % NAMES.len()]);
            city.push(CITIES[(h >> 28) as usize % CITIES.len()]);
            op.push(if (h >> 36).is_multiple_of(10) {
                "DELETE"
            } else {
                "UPSERT"
            });
            let late = (h >> 44).is_multiple_of(20) && i >= 2 * per;
            seq.push(if late { i - 2 * per } else { i } as i64);
        }
        Ok(RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(id)),
                Arc::new(StringArray::from(name)),
                Arc::new(StringArray::from(city)),
                Arc::new(StringArray::from(op)),
                Arc::new(Int64Array::from(seq)),
            ],
        )?)
    })
}

/// One run into a fresh table; prints its figures.
fn run_once(work: &Path, input: &Path, scd: u8, events: u64, keys: u64) -> Result<f64> {
    let storage = work.join(format!("storage-scd{scd}"));
    let _ = std::fs::remove_dir_all(&storage);
    let feed = input.to_string_lossy().to_string();
    let p = dp::Pipeline::new()
        .temporary_view("feed", move |s: &Session| {
            s.read_stream()
                .format("parquet")
                .schema("id BIGINT, name STRING, city STRING, op STRING, seq BIGINT")
                .option("maxFilesPerTrigger", "1")
                .load(feed.clone())
        })
        .create_streaming_table("customers", dp::TableOptions::default())
        .create_auto_cdc_flow(
            AutoCdc::new("customers", "feed")
                .name("apply")
                .keys(["id"])
                .sequence_by("seq")
                .apply_as_deletes("op = 'DELETE'")
                .except_column_list(["op"])
                .stored_as_scd_type(scd),
        );
    let spec = dp::spec::parse_str(
        &format!("name: bench_cdc\nstorage: {}\n", storage.display()),
        &work.join("pipeline.yml"),
    )?;
    let graph = p.build(&spec).map_err(dp::Error::Invalid)?;
    let t = std::time::Instant::now();
    let summary = run(&graph, &RunOptions::new(work, &storage))?;
    let secs = t.elapsed().as_secs_f64();
    let f = &summary.flows[0];
    // Per phase and the state, from the event log.
    let batches = dp::engine::event_log::read_batch_progress(&storage)?;
    let (mut execute, mut write, mut read, mut state_bytes, mut state_rows) =
        (0.0, 0.0, 0.0, 0u64, 0u64);
    for v in batches {
        let d = &v["durationMs"];
        execute += d["execute"].as_f64().unwrap_or(0.0);
        write += d["addBatch"].as_f64().unwrap_or(0.0);
        read += d["getBatch"].as_f64().unwrap_or(0.0);
        if let Some(op) = v["stateOperators"].as_array().and_then(|o| o.first()) {
            state_bytes = op["memoryUsedBytes"].as_u64().unwrap_or(0);
            state_rows = op["numRowsTotal"].as_u64().unwrap_or(0);
        }
    }
    let snapshot: u64 = std::fs::read_dir(storage.join("checkpoints/apply/state/cdc"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".snapshot"))
                .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0);
    let rows: usize = dp::delta::read_table(storage.join("tables/customers"))?
        .unwrap_or_default()
        .iter()
        .map(|b| b.num_rows())
        .sum();
    println!(
        "SCD type {scd}: {events} events, {keys} keys, {} batches: {secs:.2} s, {:.0} events/s, {:.2} s per batch; \
         read {:.2} s, CDC {:.2} s, Delta write {:.2} s; state {state_rows} rows, {:.0} bytes per key in memory, \
         {:.0} bytes per key on disk (snapshot); table {rows} rows, {} changes",
        f.batches,
        events as f64 / secs,
        secs / f.batches.max(1) as f64,
        read / 1000.0,
        execute / 1000.0,
        write / 1000.0,
        state_bytes as f64 / keys as f64,
        snapshot as f64 / keys as f64,
        f.output_rows,
    );
    Ok(secs)
}

fn main() -> Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let (events, keys, files) = if quick {
        (100_000, 10_000, 10)
    } else {
        (1_000_000, 100_000, 10)
    };
    let root = bench_data::bench_root();
    let input = root.join(format!("cdc-{events}-{keys}"));
    generate(&input, events, keys, files)?;
    let work = root.join("work-cdc");
    std::fs::create_dir_all(&work).map_err(|e| dp::Error::io(&work, e))?;
    for scd in [1, 2] {
        run_once(&work, &input, scd, events, keys)?;
    }
    Ok(())
}
