//! Arrow batch utilities of the executor: schemas with or without
//! metadata, batches rebuilt in a schema, splitting and slicing rows across
//! partitions, per-batch work on every core, and the max event time.

use super::*;

/// Inputs with fewer rows than this stay in one partition (splitting a tiny
/// batch only adds work); larger ones are split across every partition.
pub(super) const MIN_ROWS_TO_SPLIT: usize = 16 * 1024;

/// Input batches are sliced (without copying) to at most this many rows, so
/// operators work on cache-sized pieces.
pub(super) const MAX_SLICE_ROWS: usize = 64 * 1024;

/// `schema` without field or schema metadata (the watermark marks).
pub(crate) fn strip_metadata(schema: &SchemaRef) -> SchemaRef {
    Arc::new(arrow::datatypes::Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_metadata(Default::default()))
            .collect::<Vec<_>>(),
    ))
}

/// Rows in `schema` (same columns, other metadata).
pub(crate) fn with_schema(
    rows: &RecordBatch,
    schema: &SchemaRef,
) -> std::result::Result<RecordBatch, OpFailure> {
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        rows.columns().to_vec(),
        &RecordBatchOptions::new().with_row_count(Some(rows.num_rows())),
    )?)
}

/// `schema` with the fields at the indices of `changes` given their new
/// types, nullable (a value converted to another type may be NULL where the
/// original was not): a column read converted, see
/// [`CompiledPlan::leaf_timestamp_columns`].
pub(crate) fn retyped(
    schema: &arrow::datatypes::Schema,
    changes: impl IntoIterator<Item = (usize, DataType)>,
) -> SchemaRef {
    with_types(schema, changes, true)
}

/// `schema` with the fields at the given positions of other types (and
/// nullable when `nullable`, else as they were); names and metadata kept.
pub(crate) fn with_types(
    schema: &arrow::datatypes::Schema,
    changes: impl IntoIterator<Item = (usize, DataType)>,
    nullable: bool,
) -> SchemaRef {
    let mut fields: Vec<arrow::datatypes::FieldRef> = schema.fields().to_vec();
    for (i, t) in changes {
        if let Some(f) = fields.get_mut(i) {
            let keep = f.is_nullable();
            *f = Arc::new(
                f.as_ref()
                    .clone()
                    .with_data_type(t)
                    .with_nullable(nullable || keep),
            );
        }
    }
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// The first `columns.len()` fields of `schema` (names, nullability,
/// metadata) with the columns' own types: `schema` itself when it already
/// matches them (a key may arrive dictionary-encoded, see
/// [`CompiledPlan::leaf_dictionary_columns`]).
pub(crate) fn schema_with_types(schema: &SchemaRef, columns: &[ArrayRef]) -> SchemaRef {
    let fields = &schema.fields()[..columns.len().min(schema.fields().len())];
    let same = fields.len() == schema.fields().len()
        && fields
            .iter()
            .zip(columns)
            .all(|(f, c)| f.data_type() == c.data_type());
    if same {
        return schema.clone();
    }
    let fields: Vec<Field> = fields
        .iter()
        .zip(columns)
        .map(|(f, c)| f.as_ref().clone().with_data_type(c.data_type().clone()))
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// `columns` as a batch of `n` rows in `schema`, each column cast to its
/// field's type where it differs (e.g. a dictionary or timezone variant).
pub(crate) fn batch_in_schema(
    schema: &SchemaRef,
    columns: Vec<ArrayRef>,
    n: usize,
) -> std::result::Result<RecordBatch, OpFailure> {
    let columns = columns
        .into_iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() {
                Ok(c)
            } else {
                arrow::compute::cast(&c, f.data_type())
            }
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(n)),
    )?)
}

/// Below this many rows [`map_batches`] stays on the calling thread:
/// starting threads costs more than it saves on one file's rows.
pub(crate) const MIN_ROWS_FOR_THREADS: usize = 256 * 1024;

/// `f` applied to every batch, in order: on up to `threads` threads, each
/// taking a contiguous run of about the same number of rows, when there are
/// at least [`MIN_ROWS_FOR_THREADS`] rows; else on the calling thread.
pub(crate) fn map_batches<T: Send>(
    batches: &[RecordBatch],
    threads: usize,
    f: impl Fn(&RecordBatch) -> T + Sync,
) -> Vec<T> {
    let total: usize = batches.iter().map(|b| b.num_rows()).sum();
    if threads <= 1 || batches.len() < 2 || total < MIN_ROWS_FOR_THREADS {
        return batches.iter().map(f).collect();
    }
    let per = total.div_ceil(threads);
    let mut runs: Vec<&[RecordBatch]> = Vec::with_capacity(threads);
    let (mut start, mut rows) = (0, 0);
    for (i, b) in batches.iter().enumerate() {
        rows += b.num_rows();
        if rows >= per && runs.len() + 1 < threads {
            runs.push(&batches[start..=i]);
            (start, rows) = (i + 1, 0);
        }
    }
    if start < batches.len() {
        runs.push(&batches[start..]);
    }
    on_threads(&runs, |run| run.iter().map(&f).collect::<Vec<T>>())
        .into_iter()
        .flat_map(|r| r.unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
        .collect()
}

/// `f` applied to every item, each on its own scoped thread; the results
/// in order (`Err` for an item whose thread panicked).
pub(crate) fn on_threads<I: Sync, T: Send>(
    items: &[I],
    f: impl Fn(&I) -> T + Sync,
) -> Vec<std::thread::Result<T>> {
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = items.iter().map(|i| s.spawn(move || f(i))).collect();
        handles.into_iter().map(|h| h.join()).collect()
    })
}

/// Splits rows into `n` contiguous partitions (slices, no copies).
pub(super) fn split_rows(batches: Vec<RecordBatch>, n: usize) -> Vec<Vec<RecordBatch>> {
    let total: usize = batches.iter().map(|b| b.num_rows()).sum();
    let n = n.max(1);
    let mut parts: Vec<Vec<RecordBatch>> = vec![Vec::new(); n];
    if n == 1 || total < MIN_ROWS_TO_SPLIT {
        for b in batches {
            if b.num_rows() > 0 {
                push_sliced(&mut parts[0], b, MAX_SLICE_ROWS);
            }
        }
        return parts;
    }
    let per = total.div_ceil(n);
    let mut p = 0usize;
    let mut room = per;
    for b in batches {
        let mut offset = 0;
        while offset < b.num_rows() {
            if room == 0 && p + 1 < n {
                p += 1;
                room = per;
            }
            let take = (b.num_rows() - offset).min(room.max(1)).min(MAX_SLICE_ROWS);
            parts[p].push(b.slice(offset, take));
            offset += take;
            room = room.saturating_sub(take);
        }
    }
    parts
}

pub(super) fn push_sliced(out: &mut Vec<RecordBatch>, b: RecordBatch, max: usize) {
    if b.num_rows() <= max {
        out.push(b);
        return;
    }
    let mut offset = 0;
    while offset < b.num_rows() {
        let take = (b.num_rows() - offset).min(max);
        out.push(b.slice(offset, take));
        offset += take;
    }
}

/// The maximum of a timestamp column over `batches`, in milliseconds since
/// the epoch (microseconds and nanoseconds are floored); None when the
/// column is missing everywhere, not a timestamp, or only null. The column
/// is matched by name, then case-insensitively.
pub fn max_event_time_ms(batches: &[RecordBatch], column: &str) -> Option<i64> {
    let mut best: Option<i64> = None;
    for b in batches {
        let schema = b.schema_ref();
        let idx = schema.index_of(column).ok().or_else(|| {
            schema
                .fields()
                .iter()
                .position(|f| f.name().eq_ignore_ascii_case(column))
        });
        let Some(idx) = idx else { continue };
        if let Some(ms) = watermark::max_millis(b.column(idx)) {
            best = Some(best.map_or(ms, |b| b.max(ms)));
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};

    fn batches(sizes: &[usize]) -> Vec<RecordBatch> {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let mut next = 0i64;
        sizes
            .iter()
            .map(|&n| {
                let values = Int64Array::from_iter_values(next..next + n as i64);
                next += n as i64;
                RecordBatch::try_new(schema.clone(), vec![Arc::new(values)]).unwrap()
            })
            .collect()
    }

    #[test]
    fn map_batches_keeps_the_order_on_threads_and_on_the_caller() {
        let first = |b: &RecordBatch| {
            (
                b.column(0).as_primitive::<Int64Type>().value(0),
                std::thread::current().id(),
            )
        };
        let me = std::thread::current().id();
        // Big enough for threads: 8 batches of 64 k rows, on 3 threads.
        let big = batches(&[65_536; 8]);
        let out = map_batches(&big, 3, first);
        let starts: Vec<i64> = out.iter().map(|(v, _)| *v).collect();
        assert_eq!(starts, (0..8).map(|i| i * 65_536).collect::<Vec<i64>>());
        let mut threads: Vec<_> = out.iter().map(|(_, t)| *t).collect();
        threads.dedup();
        assert_eq!(threads.len(), 3, "three contiguous runs");
        assert!(!threads.contains(&me));
        // Too few rows: the calling thread.
        let small = batches(&[1000, 2000, 3000]);
        let out = map_batches(&small, 2, first);
        assert_eq!(
            out.iter().map(|(v, _)| *v).collect::<Vec<_>>(),
            vec![0, 1000, 3000]
        );
        assert!(out.iter().all(|(_, t)| *t == me));
        assert!(map_batches(&[], 2, first).is_empty());
    }
}
