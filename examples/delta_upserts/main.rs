//! Running counts per user upserted into Delta tables, two ways:
//!
//! - `customer_counts`: a Delta sink with `merge_keys: [userId]` in the
//!   spec, which takes update mode and runs one idempotent MERGE per batch;
//! - `merge_counts`: a foreach_batch sink whose closure runs the MERGE
//!   itself with delta-rs' merge builder, made idempotent with a Delta
//!   application transaction (`txnAppId`/`txnVersion` in Spark).
//!
//! Both tables end with the same rows. A pipeline that runs its own MERGE
//! depends on the `deltalake` crate (the version the engine uses, 1.1,
//! with its `datafusion` feature) and runs its futures with
//! `pipelines::delta::block_on`.
//!
//! ```text
//! cargo run --example delta_upserts -- run
//! ```
use std::path::{Path, PathBuf};

use deltalake::datafusion::common::Column;
use deltalake::datafusion::logical_expr::Expr;
use deltalake::datafusion::prelude::SessionContext;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::kernel::Transaction;
use deltalake::protocol::SaveMode;
use dp::delta;
use dp::prelude::*;
use pipelines as dp;

use arrow::record_batch::RecordBatch;

fn events(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("timestamp TIMESTAMP, userId STRING, action STRING")
        .option("maxFilesPerTrigger", "1")
        .load("../windowed_counts/data/events")
}

/// Running events per user, upserted by the merge-keyed Delta sink.
#[dp::update_flow(target = "customer_counts")]
fn customer_counts_flow(s: &Session) -> Result<DataFrame> {
    events(s)?.group_by([col("userId")]).count()
}

/// The same counts, handed to the foreach_batch closure below.
#[dp::update_flow(target = "merge_counts")]
fn merge_counts_flow(s: &Session) -> Result<DataFrame> {
    events(s)?.group_by([col("userId")]).count()
}

fn merge_counts_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/delta_upserts/pipeline-storage/merge_counts")
}

/// The app id of the closure's Delta transactions; change it when the
/// flow's checkpoint is reset (its batch ids start again from 0).
const APP_ID: &str = "delta_upserts.merge_counts";

/// The foreach_batch closure: MERGE the batch into the table on `userId`,
/// update matched rows, insert the others; skip a batch already merged.
fn merge_counts(batches: &[RecordBatch], batch_id: u64) -> Result<()> {
    if batches.iter().all(|b| b.num_rows() == 0) {
        return Ok(());
    }
    let path = merge_counts_path();
    let table = delta::open_table(&path)?;
    let txn = CommitProperties::default()
        .with_application_transaction(Transaction::new(APP_ID, batch_id as i64));
    if table.version().is_none() {
        // First batch: create the table with it.
        let write = table
            .write(batches.to_vec())
            .with_save_mode(SaveMode::Append)
            .with_commit_properties(txn);
        delta::block_on(async move { write.await }).map_err(|e| {
            Error::runtime(format!("merge_counts: creating {}: {e}", path.display()))
        })?;
        return Ok(());
    }
    if delta::transaction_version(&table, APP_ID)?.is_some_and(|v| v >= batch_id as i64) {
        return Ok(()); // a replayed batch: already merged
    }
    let ctx = SessionContext::new();
    let source = ctx.read_batches(batches.to_vec())?;
    let c = |side: &str, name: &str| Expr::Column(Column::new(Some(side), name));
    let merge = table
        .merge(source, c("t", "userId").eq(c("s", "userId")))
        .with_source_alias("s")
        .with_target_alias("t")
        .with_commit_properties(txn)
        .when_matched_update(|u| u.update("count", c("s", "count")))
        .and_then(|m| {
            m.when_not_matched_insert(|i| {
                i.set("userId", c("s", "userId"))
                    .set("count", c("s", "count"))
            })
        })
        .map_err(|e| Error::runtime(format!("merge_counts: {e}")))?;
    delta::block_on(async move { merge.await })
        .map_err(|e| Error::runtime(format!("merge_counts: MERGE into {}: {e}", path.display())))?;
    Ok(())
}

fn main() -> std::process::ExitCode {
    dp::engine::sinks::register_foreach_batch("merge_counts", merge_counts);
    dp::Pipeline::from_registry()
        .spec_dir(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/delta_upserts"
        ))
        .main()
}
