//! In-memory streams: a process-wide registry of named streams that tests
//! (and embedding programs) push record batches into.
//!
//! ```
//! use std::sync::Arc;
//! use arrow::array::Int64Array;
//! use arrow::datatypes::{DataType, Field, Schema};
//! use arrow::record_batch::RecordBatch;
//! use pipelines_core::engine::sources::{memory_stream, MemoryStream};
//!
//! let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, true)]));
//! let stream = MemoryStream::new("doc_numbers", schema.clone());
//! let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1, 2]))]).unwrap();
//! assert_eq!(stream.push(batch).unwrap(), 1);
//! assert_eq!(memory_stream("doc_numbers").unwrap().len(), 1);
//! ```
//!
//! Each push is one offset step: the offset `{"index": n}` means "the first
//! `n` pushes"; reading `(start, end]` returns the batches pushed in that
//! range. Batches are kept until committed, so a replay returns the same rows.
//! A flow reads a stream with `read_stream().format("memory").load("name")`
//! (or the option `name`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use serde_json::json;

use crate::engine::source::{Offset, ReadBatch, Source, SourceContext};
use crate::error::{Error, Result};

#[derive(Debug, Default)]
struct State {
    /// Pushes `base ..`.
    batches: Vec<Vec<RecordBatch>>,
    /// Index of `batches[0]`; pushes before it were committed by every
    /// open reader and released.
    base: u64,
    /// Open readers and what each has committed.
    readers: HashMap<u64, u64>,
    next_reader: u64,
}

#[derive(Debug)]
struct Inner {
    name: String,
    schema: SchemaRef,
    state: Mutex<State>,
    /// Signalled on every push (real-time readers wait on it).
    pushed: std::sync::Condvar,
}

/// A named in-memory stream (a cheap handle; clones share the stream).
#[derive(Clone, Debug)]
pub struct MemoryStream {
    inner: Arc<Inner>,
}

fn registry() -> &'static Mutex<HashMap<String, MemoryStream>> {
    static REGISTRY: OnceLock<Mutex<HashMap<String, MemoryStream>>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The registered stream `name`, if any.
pub fn memory_stream(name: &str) -> Option<MemoryStream> {
    registry()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(name)
        .cloned()
}

impl MemoryStream {
    /// Creates and registers the stream `name` (replacing a stream of that name).
    pub fn new(name: impl Into<String>, schema: SchemaRef) -> MemoryStream {
        let name = name.into();
        let stream = MemoryStream {
            inner: Arc::new(Inner {
                name: name.clone(),
                schema,
                state: Mutex::new(State::default()),
                pushed: std::sync::Condvar::new(),
            }),
        };
        registry()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name, stream.clone());
        stream
    }

    /// The stream's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The stream's schema.
    pub fn schema(&self) -> SchemaRef {
        self.inner.schema.clone()
    }

    /// Appends one batch as one offset step; returns the new offset index.
    /// Fails when the batch's columns don't match the stream's schema.
    pub fn push(&self, batch: RecordBatch) -> Result<u64> {
        self.push_batches(vec![batch])
    }

    /// Appends several batches as one offset step; returns the new offset index.
    pub fn push_batches(&self, batches: Vec<RecordBatch>) -> Result<u64> {
        let batches = batches
            .into_iter()
            .map(|b| conform(&self.inner.name, &self.inner.schema, b))
            .collect::<Result<Vec<_>>>()?;
        let mut st = self.lock();
        st.batches.push(batches);
        let n = st.base + st.batches.len() as u64;
        drop(st);
        self.inner.pushed.notify_all();
        Ok(n)
    }

    /// Number of pushes so far (the latest offset index).
    pub fn len(&self) -> u64 {
        let st = self.lock();
        st.base + st.batches.len() as u64
    }

    /// True when nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A batch in `schema`: same column types (columns renamed to the schema's
/// names), or cast to them.
fn conform(name: &str, schema: &SchemaRef, batch: RecordBatch) -> Result<RecordBatch> {
    if batch.schema() == *schema {
        return Ok(batch);
    }
    if batch.num_columns() != schema.fields().len() {
        return Err(Error::runtime_with_help(
            format!(
                "memory stream `{name}`: pushed batch has {} columns, the stream has {}",
                batch.num_columns(),
                schema.fields().len()
            ),
            format!("push batches with the schema {schema}"),
        ));
    }
    let mut cols = Vec::with_capacity(batch.num_columns());
    for (c, f) in batch.columns().iter().zip(schema.fields()) {
        if c.data_type() == f.data_type() {
            cols.push(c.clone());
        } else {
            cols.push(
                cast_with_options(c, f.data_type(), &CastOptions::default()).map_err(|e| {
                    Error::runtime(format!(
                        "memory stream `{name}`: column `{}` is {} and cannot be cast to {}: {e}",
                        f.name(),
                        c.data_type(),
                        f.data_type()
                    ))
                })?,
            );
        }
    }
    RecordBatch::try_new(schema.clone(), cols).map_err(|e| {
        Error::runtime(format!(
            "memory stream `{name}`: pushed batch does not fit the schema: {e}"
        ))
    })
}

/// The source reading a [`MemoryStream`].
#[derive(Debug)]
pub struct MemorySource {
    stream: MemoryStream,
    schema: SchemaRef,
    /// This reader's id in the stream's reader table.
    id: u64,
}

impl Drop for MemorySource {
    fn drop(&mut self) {
        self.stream.lock().readers.remove(&self.id);
    }
}

impl MemorySource {
    /// Opens the registered stream `name`; batches are returned in `schema`.
    pub fn open(name: &str, schema: SchemaRef, _ctx: SourceContext) -> Result<MemorySource> {
        let stream = memory_stream(name).ok_or_else(|| {
            Error::runtime_with_help(
                format!("no memory stream named `{name}`"),
                format!("create it with MemoryStream::new(\"{name}\", schema) before running the pipeline"),
            )
        })?;
        let id = {
            let mut st = stream.lock();
            let id = st.next_reader;
            st.next_reader += 1;
            let base = st.base;
            st.readers.insert(id, base);
            id
        };
        Ok(MemorySource { stream, schema, id })
    }

    fn parse_offset(&self, o: &Offset) -> Result<u64> {
        o.get("index")
            .and_then(|v| v.as_u64())
            .or_else(|| o.as_u64())
            .ok_or_else(|| {
                Error::runtime_with_help(
                    format!(
                        "offset `{o}` is not a memory source offset (expected {{\"index\": N}})"
                    ),
                    "the checkpoint belongs to a different query: use a new checkpoint location",
                )
            })
    }
}

impl Source for MemorySource {
    fn describe(&self) -> String {
        format!("memory source `{}`", self.stream.name())
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn latest_offset(&mut self, start: Option<&Offset>) -> Result<Option<Offset>> {
        let from = start
            .map(|o| self.parse_offset(o))
            .transpose()?
            .unwrap_or(0);
        let n = self.stream.len();
        Ok((n > from).then(|| json!({ "index": n })))
    }

    fn read(&mut self, start: Option<&Offset>, end: &Offset) -> Result<ReadBatch> {
        let from = start
            .map(|o| self.parse_offset(o))
            .transpose()?
            .unwrap_or(0);
        let to = self.parse_offset(end)?;
        let st = self.stream.lock();
        if from < st.base {
            return Err(Error::runtime(format!(
                "memory stream `{}` has released pushes before {} (committed); cannot read ({from}, {to}]",
                self.stream.name(),
                st.base
            )));
        }
        let have = st.base + st.batches.len() as u64;
        if to > have {
            return Err(Error::runtime(format!(
                "memory stream `{}` has {have} pushes, cannot read ({from}, {to}]",
                self.stream.name()
            )));
        }
        let mut out = Vec::new();
        for i in from..to {
            for b in &st.batches[(i - st.base) as usize] {
                out.push(conform(self.stream.name(), &self.schema, b.clone())?);
            }
        }
        let bytes = out.iter().map(|b| b.get_array_memory_size() as u64).sum();
        Ok(ReadBatch {
            batches: out,
            bytes,
            malformed_dropped: 0,
            corrupt_files_skipped: 0,
            rows_filtered: 0,
        })
    }

    /// Waits on the stream's push signal: a push is read at once.
    fn read_arrived(
        &mut self,
        start: Option<&Offset>,
        timeout: std::time::Duration,
    ) -> Result<Option<(Offset, ReadBatch)>> {
        let from = start
            .map(|o| self.parse_offset(o))
            .transpose()?
            .unwrap_or(0);
        {
            let st = self.stream.lock();
            let (_st, _) = self
                .stream
                .inner
                .pushed
                .wait_timeout_while(st, timeout, |st| st.base + st.batches.len() as u64 <= from)
                .unwrap_or_else(|e| e.into_inner());
        }
        let Some(end) = self.latest_offset(start)? else {
            return Ok(None);
        };
        let read = self.read(start, &end)?;
        Ok(Some((end, read)))
    }

    fn commit(&mut self, end: &Offset) -> Result<()> {
        let to = self.parse_offset(end)?;
        let mut st = self.stream.lock();
        st.readers.insert(self.id, to);
        let release = st.readers.values().copied().min().unwrap_or(to);
        if release > st.base {
            let n = ((release - st.base) as usize).min(st.batches.len());
            st.batches.drain(..n);
            st.base += n as u64;
        }
        Ok(())
    }
}
