//! The Delta sink: writes a flow's micro-batches to a Delta table with
//! delta-rs, exactly once.
//!
//! - **append**: the batch's rows are added in one commit (written by
//!   delta-rs's record-batch writer when the table needs nothing only its
//!   write operation enforces, see `plain_appends`);
//! - **complete**: the table's contents are replaced in one commit per batch;
//! - **update**, only with `merge_keys`: one MERGE per batch (matched keys
//!   updated, new keys inserted). Without merge keys update mode is refused
//!   at dry-run;
//! - **keyed changes** (an AUTO CDC flow's batch, [`ChangeSet`]): one MERGE
//!   on the change set's match columns — deletes, updates and inserts — or
//!   an append when every change inserts a new row.
//!
//! Every commit carries a Delta application transaction (app id = the
//! writing flow's query id, version = the batch id), the mechanism behind
//! Spark's `txnAppId`/`txnVersion`. Before writing batch N the sink reads
//! the table's transaction version for its app id: when it is N or more the
//! batch was committed before a crash and is skipped. A commit that loses a
//! race with another writer (another flow appending to the same table) is
//! retried against the new version; blind appends never conflict.
//!
//! Options (case-insensitive): `path` (sinks; tables use their own path),
//! `mergeSchema` (`true`: columns new in the stream are added to the table;
//! a column whose type changed is always an error naming it).

use pipelines_core::engine::storage::Location;
use std::time::Duration;

use arrow::datatypes::{DataType, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::common::Column;
use datafusion::logical_expr::Expr;
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::kernel::{StructField, StructType, Transaction};
use deltalake::operations::write::SchemaMode;
use deltalake::protocol::SaveMode;
use deltalake::DeltaTable;

use crate::table::{self, block_on, delta_error, is_commit_conflict};
use pipelines_core::engine::sink::{
    last_row_per_key, ChangeSet, Sink, SinkContext, SinkWrite, CHANGE_DELETES,
};
use pipelines_core::error::{Error, Result};
use pipelines_core::formats::OutputMode;
use pipelines_core::options::Options;

/// The internal sink option that makes every batch replace the table
/// (materialized views, recomputed on each run).
pub const OVERWRITE_OPTION: &str = "pipelines.delta.overwrite";

/// How many times a write is retried after losing a commit race.
const MAX_ATTEMPTS: u32 = 20;

/// A sink writing to a Delta table.
pub struct DeltaSink {
    name: String,
    flow: String,
    path: Location,
    table: DeltaTable,
    query_id: String,
    partition_cols: Vec<String>,
    merge_keys: Vec<String>,
    merge_schema: bool,
    overwrite: bool,
    /// The rows' schema with every column nullable, as the table declares it.
    schema: SchemaRef,
}

impl DeltaSink {
    /// Opens (creating when missing) the Delta table at `ctx.path` and checks
    /// the stream's columns against it: a type change is an error naming the
    /// column; a new column needs `mergeSchema`.
    pub fn open(ctx: &SinkContext) -> Result<DeltaSink> {
        let Some(path) = &ctx.path else {
            return Err(Error::runtime_with_help(
                format!("sink `{}`: a delta sink needs a path", ctx.name),
                "set `path:` under the sink's `options:` (a directory; it is created when missing)",
            ));
        };
        let options = Options::for_sink(&ctx.options, &ctx.name);
        let merge_schema = options.bool("mergeSchema", false)?;
        let overwrite = options.bool(OVERWRITE_OPTION, false)?;
        let columns: Vec<&str> = ctx
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        let find = |what: &str, c: &String| -> Result<String> {
            if let Some(n) = columns.iter().find(|n| *n == c) {
                return Ok(n.to_string());
            }
            if let Some(n) = columns.iter().find(|n| n.eq_ignore_ascii_case(c)) {
                return Ok(n.to_string());
            }
            let help = match pipelines_core::suggest::closest(c, columns.iter().copied()) {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!("use columns of the output: {}", columns.join(", ")),
            };
            Err(Error::runtime_with_help(
                format!(
                    "sink `{}`: {what} `{c}` is not a column of flow `{}`'s output",
                    ctx.name, ctx.flow
                ),
                help,
            ))
        };
        let partition_cols = ctx
            .partition_cols
            .iter()
            .map(|c| find("partition column", c))
            .collect::<Result<Vec<_>>>()?;
        let merge_keys = ctx
            .merge_keys
            .iter()
            .map(|c| find("merge key", c))
            .collect::<Result<Vec<_>>>()?;
        let schema = table::nullable_schema(&ctx.schema);
        let mut table = table::open_table(path)?;
        if table.version().is_none() {
            table = create_table(path, table, &schema, &partition_cols, &ctx.name)?;
        }
        let sink = DeltaSink {
            name: ctx.name.clone(),
            flow: ctx.flow.clone(),
            path: path.clone(),
            table,
            query_id: ctx.query_id.clone(),
            partition_cols,
            merge_keys,
            merge_schema,
            overwrite,
            schema,
        };
        sink.check_schema()?;
        Ok(sink)
    }

    /// The stream's columns against the table's: same types; new columns
    /// only with `mergeSchema`.
    fn check_schema(&self) -> Result<()> {
        let state = self
            .table
            .snapshot()
            .map_err(|e| delta_error(&self.path, "could not read the Delta table's schema", e))?;
        let table_schema = state.snapshot().schema();
        let incoming: StructType = self.schema.as_ref().try_into_kernel().map_err(|e| {
            Error::runtime(format!(
                "sink `{}`: the output of flow `{}` has a type Delta cannot store: {e}",
                self.name, self.flow
            ))
        })?;
        let mut new_columns = Vec::new();
        for field in incoming.fields() {
            match table_schema
                .fields()
                .find(|f| f.name().eq_ignore_ascii_case(field.name()))
            {
                Some(existing) if !same_type(existing.data_type(), field.data_type()) => {
                    return Err(Error::runtime_with_help(
                        format!(
                            "sink `{}`: column `{}` is {} in the output of flow `{}` but {} in the Delta table at {}; Delta cannot change a column's type",
                            self.name,
                            field.name(),
                            field.data_type(),
                            self.flow,
                            existing.data_type(),
                            self.path.as_text()
                        ),
                        format!(
                            "cast `{}` to {} in the flow's query, or write to a new table (`--full-refresh {}` keeps the old type)",
                            field.name(),
                            existing.data_type(),
                            self.name
                        ),
                    ));
                }
                Some(_) => {}
                None => new_columns.push(field.name().to_string()),
            }
        }
        if !new_columns.is_empty() && !self.merge_schema {
            return Err(Error::runtime_with_help(
                format!(
                    "sink `{}`: column{} {} of flow `{}`'s output {} not in the Delta table at {}",
                    self.name,
                    if new_columns.len() == 1 { "" } else { "s" },
                    new_columns
                        .iter()
                        .map(|c| format!("`{c}`"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    self.flow,
                    if new_columns.len() == 1 { "is" } else { "are" },
                    self.path.as_text()
                ),
                format!(
                    "set the option `mergeSchema: \"true\"` on `{}` to add new columns to the table",
                    self.name
                ),
            ));
        }
        Ok(())
    }

    fn write_once(
        &self,
        batch_id: u64,
        batches: &[RecordBatch],
        mode: OutputMode,
    ) -> std::result::Result<DeltaTable, deltalake::DeltaTableError> {
        let props = CommitProperties::default()
            .with_application_transaction(Transaction::new(&self.query_id, batch_id as i64));
        let replace = mode == OutputMode::Complete || self.overwrite;
        let table = self.table.clone();
        if !self.merge_keys.is_empty() && !replace {
            let source_batches = match last_row_per_key(batches, &self.schema, &self.merge_keys) {
                Ok(b) => b,
                Err(e) => return Err(deltalake::DeltaTableError::Generic(e.to_string())),
            };
            let schema = self.schema.clone();
            let keys = self.merge_keys.clone();
            let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
            let merge_schema = self.merge_schema;
            return block_on(async move {
                merge(
                    table,
                    schema,
                    source_batches,
                    &keys,
                    &names,
                    None,
                    merge_schema,
                    props,
                )
                .await
            });
        }
        if !replace
            && !self.merge_schema
            && !batches.is_empty()
            && plain_appends(&table, &self.schema)
        {
            let batches = batches.to_vec();
            return block_on(async move { append(table, batches, props).await });
        }
        let mut input: Vec<RecordBatch> = batches.to_vec();
        if input.is_empty() {
            input.push(RecordBatch::new_empty(self.schema.clone()));
        }
        let mut write = table
            .write(input)
            .with_save_mode(if replace {
                SaveMode::Overwrite
            } else {
                SaveMode::Append
            })
            .with_commit_properties(props);
        if !self.partition_cols.is_empty() {
            write = write.with_partition_columns(self.partition_cols.clone());
        }
        if self.merge_schema {
            write = write.with_schema_mode(SchemaMode::Merge);
        }
        block_on(async move { write.await })
    }
}

/// True when an append of rows of `schema` to `table` needs none of what
/// only delta-rs's write operation does: filling columns the rows lack,
/// enforcing CHECK constraints, generated and identity columns, column
/// mapping (writer versions above 2) and invariants. Then [`append`] may
/// write it.
fn plain_appends(table: &DeltaTable, schema: &Schema) -> bool {
    let Ok(state) = table.snapshot() else {
        return false;
    };
    if state.protocol().min_writer_version() > 2 {
        return false;
    }
    let table_schema = state.schema();
    let same_columns = table_schema.fields().len() == schema.fields().len()
        && schema
            .fields()
            .iter()
            .all(|f| table_schema.field(f.name()).is_some());
    if !same_columns {
        return false;
    }
    !has_invariants(table_schema.fields())
}

/// True when a field among `fields`, or nested in one, declares invariants.
fn has_invariants<'a>(mut fields: impl Iterator<Item = &'a StructField>) -> bool {
    fields.any(|f| {
        f.metadata().contains_key("delta.invariants") || type_has_invariants(f.data_type())
    })
}

/// True when a field nested in `t` declares invariants.
fn type_has_invariants(t: &deltalake::kernel::DataType) -> bool {
    use deltalake::kernel::DataType as T;
    match t {
        T::Struct(s) => has_invariants(s.fields()),
        T::Array(a) => type_has_invariants(a.element_type()),
        T::Map(m) => type_has_invariants(m.key_type()) || type_has_invariants(m.value_type()),
        _ => false,
    }
}

/// Appends `batches` (not empty) to `table` in one commit carrying `props`:
/// delta-rs's record-batch writer writes the files (one per partition),
/// and the commit adds them — without the write operation's query plan,
/// which a small append (an event log's) would spend most of its time on.
async fn append(
    mut table: DeltaTable,
    batches: Vec<RecordBatch>,
    props: CommitProperties,
) -> std::result::Result<DeltaTable, deltalake::DeltaTableError> {
    use deltalake::kernel::transaction::CommitBuilder;
    use deltalake::kernel::Action;
    use deltalake::protocol::DeltaOperation;
    use deltalake::writer::{DeltaWriter, RecordBatchWriter};

    let mut writer = RecordBatchWriter::for_table(&table)?;
    for batch in batches {
        writer.write(batch).await?;
    }
    let adds: Vec<Action> = writer.flush().await?.into_iter().map(Action::Add).collect();
    let partition_by: Vec<String> = table.snapshot()?.metadata().partition_columns().to_vec();
    let operation = DeltaOperation::Write {
        mode: SaveMode::Append,
        partition_by: (!partition_by.is_empty()).then_some(partition_by),
        predicate: None,
    };
    let committed = CommitBuilder::from(props)
        .with_actions(adds)
        .build(Some(table.snapshot()?), table.log_store(), operation)
        .await?;
    table.state = Some(committed.snapshot());
    Ok(table)
}

/// Runs one MERGE of `batches` (rows of `schema`) into `table` on the
/// columns `on`: a matched row is updated with the source's `names`
/// columns, an unmatched one inserted — or, with `deletes` (the name of a
/// boolean source column, an AUTO CDC change set's), a matched row whose
/// flag is true is deleted and a flagged row is never inserted.
#[allow(clippy::too_many_arguments)]
async fn merge(
    table: DeltaTable,
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
    on: &[String],
    names: &[String],
    deletes: Option<&str>,
    merge_schema: bool,
    props: CommitProperties,
) -> std::result::Result<DeltaTable, deltalake::DeltaTableError> {
    let ctx = datafusion::prelude::SessionContext::new();
    let batches = if batches.is_empty() {
        vec![RecordBatch::new_empty(schema.clone())]
    } else {
        batches
    };
    let source = ctx.read_batches(batches)?;
    let column = |side: &str, name: &str| Expr::Column(Column::new(Some(side), name));
    let predicate = on
        .iter()
        .map(|k| {
            let t = schema.field_with_name(k).map(|f| f.data_type().clone());
            equal(column("t", k), column("s", k), &t.unwrap_or(DataType::Null))
        })
        .reduce(Expr::and)
        .ok_or_else(|| deltalake::DeltaTableError::Generic("no merge keys".into()))?;
    let deleted = deletes.map(|d| column("s", d));
    let mut builder = table
        .merge(source, predicate)
        .with_source_alias("s")
        .with_target_alias("t")
        .with_merge_schema(merge_schema)
        .with_commit_properties(props);
    if let Some(d) = &deleted {
        builder = builder.when_matched_delete(|b| b.predicate(d.clone()))?;
    }
    let kept = deleted.map(|d| Expr::Not(Box::new(d)));
    let (table, _metrics) = builder
        .when_matched_update(|mut u| {
            if let Some(k) = &kept {
                u = u.predicate(k.clone());
            }
            for n in names {
                u = u.update(Column::new_unqualified(n), column("s", n));
            }
            u
        })?
        .when_not_matched_insert(|mut i| {
            if let Some(k) = &kept {
                i = i.predicate(k.clone());
            }
            for n in names {
                i = i.set(Column::new_unqualified(n), column("s", n));
            }
            i
        })?
        .await?;
    Ok(table)
}

/// `t = s` for a match column of type `t`; a struct (a `sequence_by`
/// struct's `__START_AT`) field by field, which the MERGE predicate can
/// write into the Delta log.
fn equal(t: Expr, s: Expr, data_type: &DataType) -> Expr {
    use datafusion::functions::core::expr_fn::get_field;
    match data_type {
        DataType::Struct(fields) if !fields.is_empty() => fields
            .iter()
            .map(|f| {
                equal(
                    get_field(t.clone(), f.name().as_str()),
                    get_field(s.clone(), f.name().as_str()),
                    f.data_type(),
                )
            })
            .reduce(Expr::and)
            .unwrap_or_else(|| t.eq(s)),
        _ => t.eq(s),
    }
}

fn create_table(
    path: &Location,
    table: DeltaTable,
    schema: &Schema,
    partition_cols: &[String],
    name: &str,
) -> Result<DeltaTable> {
    let structure: StructType = schema.try_into_kernel().map_err(|e| {
        Error::runtime(format!(
            "sink `{name}`: the output has a type Delta cannot store: {e}"
        ))
    })?;
    let mut create = table
        .create()
        .with_table_name(name)
        .with_columns(structure.fields().cloned());
    if !partition_cols.is_empty() {
        create = create.with_partition_columns(partition_cols.to_vec());
    }
    match block_on(async move { create.await }) {
        Ok(t) => Ok(t),
        // Another flow created it first.
        Err(e) if is_commit_conflict(&e) || table::is_delta_table(path) => table::open_table(path),
        Err(e) => Err(delta_error(path, "could not create the Delta table", e)),
    }
}

/// Delta types equal, ignoring nullability of nested fields.
fn same_type(a: &deltalake::kernel::DataType, b: &deltalake::kernel::DataType) -> bool {
    use deltalake::kernel::DataType as T;
    match (a, b) {
        (T::Struct(x), T::Struct(y)) => {
            x.fields().len() == y.fields().len()
                && x.fields()
                    .zip(y.fields())
                    .all(|(f, g)| f.name() == g.name() && same_type(f.data_type(), g.data_type()))
        }
        (T::Array(x), T::Array(y)) => same_type(x.element_type(), y.element_type()),
        (T::Map(x), T::Map(y)) => {
            same_type(x.key_type(), y.key_type()) && same_type(x.value_type(), y.value_type())
        }
        _ => a == b,
    }
}

impl Sink for DeltaSink {
    fn describe(&self) -> String {
        format!("delta sink `{}` at {}", self.name, self.path.as_text())
    }

    fn has_batch(&self, batch_id: u64) -> Option<bool> {
        // The table's application transaction for this query records the
        // last batch it committed.
        table::transaction_version(&self.table, &self.query_id)
            .ok()
            .map(|v| v.is_some_and(|v| v >= batch_id as i64))
    }

    fn add_batch(
        &mut self,
        batch_id: u64,
        batches: Vec<RecordBatch>,
        mode: OutputMode,
    ) -> Result<SinkWrite> {
        let batches = batches
            .iter()
            .filter(|b| b.num_rows() > 0)
            .map(|b| table::to_nullable(b, &self.schema))
            .collect::<Result<Vec<_>>>()?;
        let rows = table::num_rows(&batches);
        let replace = mode == OutputMode::Complete || self.overwrite;
        self.commit_once(batch_id, rows, rows == 0 && !replace, |sink| {
            sink.write_once(batch_id, &batches, mode)
        })
    }

    fn apply_changes(&mut self, batch_id: u64, changes: ChangeSet) -> Result<SinkWrite> {
        let rows = changes.len() as u64;
        self.commit_once(batch_id, rows, changes.is_empty(), |sink| {
            sink.apply_once(batch_id, &changes)
        })
    }
}

impl DeltaSink {
    /// Commits batch `batch_id` with `write` exactly once: skipped when the
    /// table's application transaction already holds it (a replay), or
    /// when there is nothing to write (`nothing`); retried after losing a
    /// commit race.
    fn commit_once(
        &mut self,
        batch_id: u64,
        rows: u64,
        nothing: bool,
        write: impl Fn(&DeltaSink) -> std::result::Result<DeltaTable, deltalake::DeltaTableError>,
    ) -> Result<SinkWrite> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut table = self.table.clone();
            block_on(async { table.update_state().await })
                .map_err(|e| delta_error(&self.path, "could not read the Delta table", e))?;
            self.table = table;
            if let Some(v) = table::transaction_version(&self.table, &self.query_id)? {
                if v >= batch_id as i64 {
                    return Ok(SinkWrite {
                        skipped_replay: true,
                        ..SinkWrite::default()
                    });
                }
            }
            if nothing {
                // Nothing to add; a replay of this batch adds nothing either.
                return Ok(SinkWrite::default());
            }
            pipelines_core::engine::fault::fault_point(&self.flow, "delta_before_commit", batch_id);
            match write(self) {
                Ok(table) => {
                    self.table = table;
                    let (files, bytes) = match self.table.version() {
                        Some(v) => table::read_commit(&self.path, v)?
                            .map(|c| {
                                (
                                    c.adds.len() as u64,
                                    c.adds.iter().map(|a| a.size).sum::<u64>(),
                                )
                            })
                            .unwrap_or_default(),
                        None => (0, 0),
                    };
                    return Ok(SinkWrite {
                        rows,
                        files,
                        bytes,
                        skipped_replay: false,
                    });
                }
                Err(e) if is_commit_conflict(&e) && attempt < MAX_ATTEMPTS => {
                    tracing::debug!(sink = %self.name, batch_id, attempt, "Delta commit conflict, retrying: {e}");
                    std::thread::sleep(Duration::from_millis(10 * u64::from(attempt)));
                }
                Err(e) => {
                    return Err(Error::external_with_help(
                        format!(
                            "sink `{}`: writing batch {batch_id} of flow `{}` to the Delta table at {} failed",
                            self.name,
                            self.flow,
                            self.path.as_text()
                        ),
                        "check the table is not being rewritten by another job; the batch is retried on the next run",
                        e,
                    ))
                }
            }
        }
    }

    /// One attempt at applying keyed changes: an append when they only
    /// insert new rows, else one MERGE on their match columns (deletes,
    /// updates and inserts in one commit).
    fn apply_once(
        &self,
        batch_id: u64,
        changes: &ChangeSet,
    ) -> std::result::Result<DeltaTable, deltalake::DeltaTableError> {
        let props = CommitProperties::default()
            .with_application_transaction(Transaction::new(&self.query_id, batch_id as i64));
        let table = self.table.clone();
        let width = changes.rows.num_columns().saturating_sub(1);
        if changes.inserts_only {
            let rows = RecordBatch::try_new(
                self.schema.clone(),
                changes.rows.columns()[..width].to_vec(),
            )?;
            let mut write = table
                .write(vec![rows])
                .with_save_mode(SaveMode::Append)
                .with_commit_properties(props);
            if !self.partition_cols.is_empty() {
                write = write.with_partition_columns(self.partition_cols.clone());
            }
            return block_on(async move { write.await });
        }
        let rows = changes.rows.clone();
        let on = changes.match_on.clone();
        let names: Vec<String> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        block_on(async move {
            merge(
                table,
                rows.schema(),
                vec![rows],
                &on,
                &names,
                Some(CHANGE_DELETES),
                false,
                props,
            )
            .await
        })
    }
}
