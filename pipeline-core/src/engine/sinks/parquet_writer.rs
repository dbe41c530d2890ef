//! A parquet file writer that encodes the columns of each row group on
//! several threads (parquet's `ArrowColumnWriter` API), so one output file
//! uses every core. The file is the same as `ArrowWriter` writes (arrow
//! schema in the metadata, same properties and row-group limits), only the
//! column chunks of a row group are encoded concurrently.

use std::fs::File;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use arrow::array::Array;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnChunk, ArrowColumnWriter, ArrowLeafColumn,
    ArrowRowGroupWriterFactory,
};
use parquet::arrow::ArrowWriter;
use parquet::errors::{ParquetError, Result};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;

/// Writes one parquet file; see the module documentation.
pub(crate) struct ParallelParquetWriter {
    writer: SerializedFileWriter<File>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    threads: usize,
    max_rows: usize,
    max_bytes: usize,
    /// The rows of the row group being collected.
    pending: Vec<RecordBatch>,
    pending_rows: usize,
    pending_bytes: usize,
    row_groups: usize,
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
            row_groups: 0,
        })
    }

    /// Buffers `batch`; full row groups are encoded and written.
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut batch = batch.clone();
        while batch.num_rows() > 0 {
            let room = self.max_rows - self.pending_rows;
            let take = room.min(batch.num_rows());
            let head = batch.slice(0, take);
            batch = batch.slice(take, batch.num_rows() - take);
            // Arrow's in-memory size is an upper bound of the encoded size.
            self.pending_bytes += head
                .columns()
                .iter()
                .map(|c| c.get_buffer_memory_size())
                .sum::<usize>();
            self.pending_rows += head.num_rows();
            self.pending.push(head);
            if self.pending_rows >= self.max_rows || self.pending_bytes >= self.max_bytes {
                self.flush()?;
            }
        }
        Ok(())
    }

    /// Encodes the buffered rows as one row group.
    fn flush(&mut self) -> Result<()> {
        if self.pending_rows == 0 {
            return Ok(());
        }
        let batches = std::mem::take(&mut self.pending);
        self.pending_rows = 0;
        self.pending_bytes = 0;
        let writers = self.factory.create_column_writers(self.row_groups)?;
        self.row_groups += 1;
        // The leaves of every column, in the writers' order.
        let mut leaves: Vec<Vec<ArrowLeafColumn>> = Vec::new();
        let mut cost: Vec<usize> = Vec::new();
        for (i, field) in self.schema.fields().iter().enumerate() {
            let mut per_leaf: Vec<Vec<ArrowLeafColumn>> = Vec::new();
            let mut bytes = 0usize;
            for b in &batches {
                let col = b.column(i);
                bytes += col.get_buffer_memory_size();
                for (k, leaf) in compute_leaves(field, col)?.into_iter().enumerate() {
                    if per_leaf.len() <= k {
                        per_leaf.push(Vec::new());
                    }
                    per_leaf[k].push(leaf);
                }
            }
            let n = per_leaf.len().max(1);
            for l in per_leaf {
                leaves.push(l);
                cost.push(bytes / n);
            }
        }
        if leaves.len() != writers.len() {
            return Err(ParquetError::General(format!(
                "internal error: {} leaf columns for {} column writers",
                leaves.len(),
                writers.len()
            )));
        }
        // Heaviest columns first, handed out to the threads as they free up.
        let mut order: Vec<usize> = (0..writers.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(cost[i]));
        type Job = (Option<ArrowColumnWriter>, Vec<ArrowLeafColumn>);
        let jobs: Vec<Mutex<Job>> = writers
            .into_iter()
            .zip(leaves)
            .map(|(w, l)| Mutex::new((Some(w), l)))
            .collect();
        let results: Vec<Mutex<Option<Result<ArrowColumnChunk>>>> =
            jobs.iter().map(|_| Mutex::new(None)).collect();
        let next = AtomicUsize::new(0);
        let work = || loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let Some(&i) = order.get(k) else { break };
            let (writer, leaves) = {
                let mut job = jobs[i].lock().unwrap_or_else(|e| e.into_inner());
                (job.0.take(), std::mem::take(&mut job.1))
            };
            let r = match writer {
                Some(mut w) => (|| {
                    for leaf in &leaves {
                        w.write(leaf)?;
                    }
                    w.close()
                })(),
                None => Err(ParquetError::General(
                    "internal error: column written twice".into(),
                )),
            };
            *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        };
        let threads = self.threads.min(order.len()).max(1);
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
        let mut rg = self.writer.next_row_group()?;
        for r in results {
            match r.into_inner().unwrap_or_else(|e| e.into_inner()) {
                Some(chunk) => chunk?.append_to_row_group(&mut rg)?,
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

    /// Writes the last row group and the footer; returns the file.
    pub(crate) fn into_inner(mut self) -> Result<File> {
        self.flush()?;
        self.writer.into_inner()
    }
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
