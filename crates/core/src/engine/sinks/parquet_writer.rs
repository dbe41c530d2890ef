//! A parquet file writer that encodes the columns of each row group on
//! several threads (parquet's `ArrowColumnWriter` API), so one output file
//! uses every core. The file is the same as `ArrowWriter` writes (arrow
//! schema in the metadata, same properties and row-group limits), only the
//! column chunks of a row group are encoded concurrently, and each row group
//! is appended to the file while the next ones are still being encoded.
//!
//! A `Utf8` column may arrive as `Dictionary(Int32, Utf8)` (string columns
//! that stayed dictionary-encoded from a Parquet source): its chunks are
//! encoded from the dictionaries, each distinct string once (see
//! [`super::parquet_dictionary`]), or decoded and written as strings where
//! that path does not apply. `Int64` and timestamp chunks are dictionary
//! encoded there too (PLAIN pages once the dictionary page is full, as
//! parquet's writer falls back).

use std::fs::File;
use std::io::BufWriter;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use arrow::array::{Array, ArrayRef};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnChunk, ArrowColumnWriter, ArrowLeafColumn,
    ArrowRowGroupWriterFactory,
};
use parquet::arrow::ArrowWriter;
use parquet::column::writer::ColumnCloseResult;
use parquet::errors::{ParquetError, Result};
use parquet::file::properties::{WriterProperties, WriterPropertiesPtr};
use parquet::schema::types::ColumnDescPtr;

use super::parquet_dictionary;
use parquet::file::writer::SerializedFileWriter;

/// Row groups are collected up to this many bytes (in memory) and then
/// encoded together, every column of every row group being one task.
const ENCODE_AHEAD_BYTES: usize = 256 << 20;

/// Below this many (in-memory) bytes a file is encoded on one thread.
const PARALLEL_MIN_BYTES: usize = 1 << 20;

/// The file's write buffer: encoded bytes reach the file a MiB at a time.
const FILE_BUFFER_BYTES: usize = 1 << 20;

/// Writes one parquet file; see the module documentation.
pub(crate) struct ParallelParquetWriter {
    writer: SerializedFileWriter<BufWriter<File>>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    threads: usize,
    max_rows: usize,
    max_bytes: usize,
    /// The rows of the row group being collected.
    pending: Vec<RecordBatch>,
    pending_rows: usize,
    pending_bytes: usize,
    /// Complete row groups not encoded yet.
    ready: Vec<Vec<RecordBatch>>,
    ready_bytes: usize,
    row_groups: usize,
    /// Below this many bytes the chunks are encoded on the calling thread.
    parallel_min_bytes: usize,
}

/// One column chunk to encode.
struct Job {
    writer: Option<ArrowColumnWriter>,
    input: JobInput,
    cost: usize,
}

/// The rows of one column chunk.
enum JobInput {
    /// Parquet's leaf columns, for its column writer.
    Leaves(Vec<ArrowLeafColumn>),
    /// A `Utf8` column given as `Dictionary(Int32, Utf8)` arrays, or an
    /// `Int64` / timestamp column, for [`parquet_dictionary::encode`] (leaf
    /// column `descr`); parquet's column writer where that declines.
    Direct {
        arrays: Vec<ArrayRef>,
        field: arrow::datatypes::FieldRef,
        descr: ColumnDescPtr,
    },
}

/// An encoded column chunk.
enum Chunk {
    /// By parquet's column writer.
    Arrow(ArrowColumnChunk),
    /// By [`parquet_dictionary::encode`]: the chunk's bytes (offsets from 0)
    /// and its metadata.
    Spliced(bytes::Bytes, ColumnCloseResult),
}

impl ParallelParquetWriter {
    pub(crate) fn try_new(
        file: File,
        schema: SchemaRef,
        props: WriterProperties,
        threads: usize,
    ) -> Result<Self> {
        let max_rows = props.max_row_group_row_count().unwrap_or(usize::MAX).max(1);
        let max_bytes = props.max_row_group_bytes().unwrap_or(usize::MAX).max(1);
        // parquet's own buffer passes a chunk on in 8 KiB writes: this one
        // makes them a system call per MiB.
        let file = BufWriter::with_capacity(FILE_BUFFER_BYTES, file);
        let (writer, factory) =
            ArrowWriter::try_new(file, schema.clone(), Some(props))?.into_serialized_writer()?;
        Ok(ParallelParquetWriter {
            writer,
            factory,
            schema,
            threads: threads.max(1),
            max_rows,
            max_bytes,
            pending: Vec::new(),
            pending_rows: 0,
            pending_bytes: 0,
            ready: Vec::new(),
            ready_bytes: 0,
            row_groups: 0,
            parallel_min_bytes: PARALLEL_MIN_BYTES,
        })
    }

    /// Buffers `batch`; row groups are encoded and written in bunches.
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut batch = batch.clone();
        while batch.num_rows() > 0 {
            let room = self.max_rows - self.pending_rows;
            let take = room.min(batch.num_rows());
            let head = batch.slice(0, take);
            batch = batch.slice(take, batch.num_rows() - take);
            // Arrow's in-memory size is an upper bound of the encoded size.
            self.pending_bytes += head.columns().iter().map(memory_size).sum::<usize>();
            self.pending_rows += head.num_rows();
            self.pending.push(head);
            if self.pending_rows >= self.max_rows || self.pending_bytes >= self.max_bytes {
                self.close_row_group();
                if self.ready_bytes >= ENCODE_AHEAD_BYTES {
                    self.encode_ready()?;
                }
            }
        }
        Ok(())
    }

    /// Ends the row group being collected.
    fn close_row_group(&mut self) {
        if self.pending_rows == 0 {
            return;
        }
        self.ready.push(std::mem::take(&mut self.pending));
        self.ready_bytes += self.pending_bytes;
        self.pending_rows = 0;
        self.pending_bytes = 0;
    }

    /// Encodes the complete row groups (all their columns concurrently)
    /// and appends them to the file in order.
    fn encode_ready(&mut self) -> Result<()> {
        let groups = std::mem::take(&mut self.ready);
        self.ready_bytes = 0;
        let mut jobs: Vec<Vec<Mutex<Job>>> = Vec::with_capacity(groups.len());
        let props: WriterPropertiesPtr = self.writer.properties().clone();
        for batches in &groups {
            let writers = self.factory.create_column_writers(self.row_groups)?;
            self.row_groups += 1;
            // The inputs of every leaf column, in the writers' order.
            let mut leaves: Vec<(JobInput, usize)> = Vec::new();
            for (i, field) in self.schema.fields().iter().enumerate() {
                let columns: Vec<&ArrayRef> = batches.iter().map(|b| b.column(i)).collect();
                let bytes: usize = columns.iter().map(|c| memory_size(c)).sum();
                let direct = match field.data_type() {
                    DataType::Utf8 => columns.iter().all(|c| {
                        parquet_dictionary::is_dictionary_strings(std::slice::from_ref(c))
                    }),
                    DataType::Int64 | DataType::Timestamp(_, _) => {
                        columns.iter().all(|c| c.data_type() == field.data_type())
                    }
                    _ => false,
                };
                if direct {
                    let descr = self.writer.schema_descr().column(leaves.len());
                    leaves.push((
                        JobInput::Direct {
                            arrays: columns.into_iter().cloned().collect(),
                            field: field.clone(),
                            descr,
                        },
                        bytes,
                    ));
                    continue;
                }
                let mut per_leaf: Vec<Vec<ArrowLeafColumn>> = Vec::new();
                for col in columns {
                    let col = as_field_type(col, field.data_type())?;
                    for (k, leaf) in compute_leaves(field, &col)?.into_iter().enumerate() {
                        if per_leaf.len() <= k {
                            per_leaf.push(Vec::new());
                        }
                        per_leaf[k].push(leaf);
                    }
                }
                let n = per_leaf.len().max(1);
                leaves.extend(
                    per_leaf
                        .into_iter()
                        .map(|l| (JobInput::Leaves(l), bytes / n)),
                );
            }
            if leaves.len() != writers.len() {
                return Err(ParquetError::General(format!(
                    "internal error: {} leaf columns for {} column writers",
                    leaves.len(),
                    writers.len()
                )));
            }
            jobs.push(
                writers
                    .into_iter()
                    .zip(leaves)
                    .map(|(w, (input, cost))| {
                        Mutex::new(Job {
                            writer: Some(w),
                            input,
                            cost,
                        })
                    })
                    .collect(),
            );
        }
        drop(groups);
        // Row group by row group, the heaviest chunks of each first, handed
        // out to the threads as they free up; a row group is appended to the
        // file as soon as it and those before it are encoded, while the
        // other threads go on encoding.
        let mut order: Vec<(usize, usize, usize)> = Vec::new();
        for (g, cols) in jobs.iter().enumerate() {
            for (c, job) in cols.iter().enumerate() {
                let cost = job.lock().map(|j| j.cost).unwrap_or(0);
                order.push((cost, g, c));
            }
        }
        order.sort_by_key(|&(cost, g, c)| (g, std::cmp::Reverse(cost), c));
        let results: Vec<Vec<Mutex<Option<Result<Chunk>>>>> = jobs
            .iter()
            .map(|cols| cols.iter().map(|_| Mutex::new(None)).collect())
            .collect();
        let unfinished: Vec<AtomicUsize> = jobs
            .iter()
            .map(|cols| AtomicUsize::new(cols.len()))
            .collect();
        // Small writes (a few rows per batch) are not worth a thread.
        let total: usize = order.iter().map(|o| o.0).sum();
        let threads = if total < self.parallel_min_bytes {
            1
        } else {
            self.threads.min(order.len()).max(1)
        };
        let appender = Mutex::new(Appender {
            writer: &mut self.writer,
            next: 0,
            error: None,
        });
        let next = AtomicUsize::new(0);
        let work = || {
            // The row ids of the chunks this thread encodes, one after another.
            let mut scratch: Vec<u32> = Vec::new();
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(_, g, c)) = order.get(k) else {
                    break;
                };
                let (writer, input) = {
                    let mut job = jobs[g][c].lock().unwrap_or_else(|e| e.into_inner());
                    (
                        job.writer.take(),
                        std::mem::replace(&mut job.input, JobInput::Leaves(Vec::new())),
                    )
                };
                let r = match writer {
                    Some(w) => encode_chunk(w, input, &props, &mut scratch),
                    None => Err(ParquetError::General(
                        "internal error: column written twice".into(),
                    )),
                };
                *results[g][c].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                if unfinished[g].fetch_sub(1, Ordering::AcqRel) == 1 {
                    // Another thread appending goes on with this group once it
                    // is done with its own; what both miss is appended below.
                    if let Ok(mut a) = appender.try_lock() {
                        a.append_finished(&results, &unfinished);
                    }
                }
            }
        };
        if threads == 1 {
            work();
        } else {
            std::thread::scope(|s| {
                for _ in 1..threads {
                    s.spawn(work);
                }
                work();
            });
        }
        let mut appender = appender.into_inner().unwrap_or_else(|e| e.into_inner());
        appender.append_finished(&results, &unfinished);
        if let Some(e) = appender.error {
            return Err(e);
        }
        if appender.next < results.len() {
            return Err(ParquetError::General(
                "internal error: a column was not encoded".into(),
            ));
        }
        Ok(())
    }

    /// Writes the remaining row groups and the footer; returns the file.
    pub(crate) fn into_inner(mut self) -> Result<File> {
        self.close_row_group();
        self.encode_ready()?;
        self.writer
            .into_inner()?
            .into_inner()
            .map_err(|e| ParquetError::External(Box::new(e.into_error())))
    }
}

/// Appends encoded row groups to the file in order (see
/// [`ParallelParquetWriter::encode_ready`]).
struct Appender<'w> {
    writer: &'w mut SerializedFileWriter<BufWriter<File>>,
    /// The next row group to append.
    next: usize,
    /// The first error; nothing is appended after it.
    error: Option<ParquetError>,
}

impl Appender<'_> {
    /// Appends every row group from `next` on whose columns are all
    /// encoded (`unfinished` 0), stopping at the first that is not.
    fn append_finished(
        &mut self,
        results: &[Vec<Mutex<Option<Result<Chunk>>>>],
        unfinished: &[AtomicUsize],
    ) {
        while self.error.is_none()
            && self.next < results.len()
            && unfinished[self.next].load(Ordering::Acquire) == 0
        {
            if let Err(e) = self.append(&results[self.next]) {
                self.error = Some(e);
            }
            self.next += 1;
        }
    }

    fn append(&mut self, group: &[Mutex<Option<Result<Chunk>>>]) -> Result<()> {
        let mut rg = self.writer.next_row_group()?;
        for r in group {
            match r.lock().unwrap_or_else(|e| e.into_inner()).take() {
                Some(chunk) => match chunk? {
                    Chunk::Arrow(chunk) => chunk.append_to_row_group(&mut rg)?,
                    Chunk::Spliced(bytes, close) => rg.append_column(&bytes, close)?,
                },
                None => {
                    return Err(ParquetError::General(
                        "internal error: a column was not encoded".into(),
                    ))
                }
            }
        }
        rg.close()?;
        Ok(())
    }
}

/// Encodes one column chunk with parquet's column writer `w`, or by
/// [`parquet_dictionary::encode`] where that applies (`scratch`: its buffer
/// of row ids, reused from chunk to chunk).
fn encode_chunk(
    mut w: ArrowColumnWriter,
    input: JobInput,
    props: &WriterProperties,
    scratch: &mut Vec<u32>,
) -> Result<Chunk> {
    let leaves = match input {
        JobInput::Leaves(leaves) => leaves,
        JobInput::Direct {
            arrays,
            field,
            descr,
        } => {
            if let Some((bytes, close)) =
                parquet_dictionary::encode(&descr, props, &arrays, scratch)?
            {
                return Ok(Chunk::Spliced(bytes, close));
            }
            let mut leaves = Vec::new();
            for a in &arrays {
                let a = as_field_type(a, field.data_type())?;
                leaves.extend(compute_leaves(&field, &a)?);
            }
            leaves
        }
    };
    for leaf in &leaves {
        w.write(leaf)?;
    }
    Ok(Chunk::Arrow(w.close()?))
}

/// `column` cast to the file's type `to` when it is a
/// `Dictionary(Int32, Utf8)` of a `Utf8` column; `column` itself otherwise.
fn as_field_type(column: &ArrayRef, to: &DataType) -> Result<ArrayRef> {
    if column.data_type() == to
        || !parquet_dictionary::is_dictionary_strings(std::slice::from_ref(column))
    {
        return Ok(column.clone());
    }
    arrow::compute::cast(column, to).map_err(|e| ParquetError::General(e.to_string()))
}

/// The bytes `column` takes in memory, a dictionary's counted as the
/// strings its keys stand for (a slice of a dictionary array shares all of
/// its values; counting them for each slice would cut row groups early).
fn memory_size(column: &ArrayRef) -> usize {
    if let Some(d) = column
        .as_any()
        .downcast_ref::<arrow::array::DictionaryArray<arrow::datatypes::Int32Type>>()
    {
        let values = d.values();
        let per_value = if values.is_empty() {
            0
        } else {
            values.to_data().get_slice_memory_size().unwrap_or(0) / values.len()
        };
        return d.len() * (per_value + std::mem::size_of::<i32>());
    }
    column.to_data().get_slice_memory_size().unwrap_or(0)
}

/// How many threads encode one file's columns.
pub(crate) fn encode_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(1, 8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use std::sync::Arc;

    #[test]
    fn same_rows_as_arrow_writer() {
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
        ]));
        let a: ArrayRef = Arc::new(Int64Array::from_iter((0..1000).map(|i| {
            if i % 7 == 0 {
                None
            } else {
                Some(i)
            }
        })));
        let s: ArrayRef = Arc::new(StringArray::from_iter(
            (0..1000).map(|i| Some(format!("v{}", i % 13))),
        ));
        let batch = RecordBatch::try_new(schema.clone(), vec![a, s]).expect("batch");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.parquet");
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(300))
            .build();
        let mut w = ParallelParquetWriter::try_new(
            File::create(&path).expect("create"),
            schema.clone(),
            props,
            2,
        )
        .expect("writer");
        w.parallel_min_bytes = 0;
        w.write(&batch.slice(0, 450)).expect("write");
        w.write(&batch.slice(450, 550)).expect("write");
        w.into_inner().expect("close");
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).expect("open"))
            .expect("reader");
        assert_eq!(reader.metadata().num_row_groups(), 4);
        assert_eq!(reader.schema().as_ref(), schema.as_ref());
        let batches: Vec<RecordBatch> = reader
            .build()
            .expect("build")
            .collect::<std::result::Result<_, _>>()
            .expect("read");
        let all = arrow::compute::concat_batches(&schema, &batches).expect("concat");
        assert_eq!(all, batch);
    }
}
