//! The contract every streaming source implements.
//!
//! A source describes positions in its stream as JSON offsets, which the
//! runtime writes to the flow's checkpoint before reading. Reading the same
//! `(start, end]` range again after a crash must return the same rows
//! (unless [`Source::replayable`] says otherwise).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use crate::engine::leaf_filter::LeafFilter;
use crate::error::Result;

/// A position in a source's stream, as stored in `offsets/N`.
pub type Offset = serde_json::Value;

/// What a source is given when it is opened.
#[derive(Clone, Debug)]
pub struct SourceContext {
    /// Flow name, for messages.
    pub flow: String,
    /// Directory private to this source inside the flow's checkpoint
    /// (`<checkpoint>/sources/<index>`, local or in object storage);
    /// created by the runtime.
    pub state_dir: crate::engine::storage::Location,
    /// Directory that relative paths are resolved against (the spec file's directory).
    pub base_dir: PathBuf,
    /// Option overrides from the spec's `flows.<name>.options` (they win over the code's options).
    pub option_overrides: BTreeMap<String, String>,
}

/// What is left of the backlog an available-now run fixed when it started.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Backlog {
    /// Units not yet in a batch.
    pub left: u64,
    /// Units the backlog had when the run started.
    pub total: u64,
    /// What is counted, singular: `file`, `message`.
    pub unit: String,
}

impl Backlog {
    /// `left` of `total` `unit`s.
    pub fn new(left: u64, total: u64, unit: &str) -> Self {
        Backlog {
            left,
            total: total.max(left),
            unit: unit.to_string(),
        }
    }
}

impl std::fmt::Display for Backlog {
    /// "38 files left", "1 file left".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = if self.left == 1 { "" } else { "s" };
        write!(f, "{} {}{s} left", self.left, self.unit)
    }
}

/// The rows of one offset range.
#[derive(Debug, Default)]
pub struct ReadBatch {
    /// The rows, in the source's schema.
    pub batches: Vec<RecordBatch>,
    /// Input bytes read (files: file sizes).
    pub bytes: u64,
    /// Records dropped by `mode=DROPMALFORMED`.
    pub malformed_dropped: u64,
    /// Rows read but not returned because they fail the query's
    /// [`LeafFilter`] (see [`Source::filter_rows`]); they count as input
    /// rows.
    pub rows_filtered: u64,
    /// Files skipped as undecodable (`ignoreCorruptFiles`).
    pub corrupt_files_skipped: u64,
}

impl ReadBatch {
    /// Total rows returned.
    pub fn num_rows(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
    }

    /// Rows read: those returned and those [`rows_filtered`](Self::rows_filtered).
    pub fn rows_read(&self) -> u64 {
        self.num_rows() as u64 + self.rows_filtered
    }
}

/// A streaming source.
pub trait Source: Send {
    /// A short description for progress and messages, e.g. "json source `data/logs`".
    fn describe(&self) -> String;

    /// The schema of every batch this source returns.
    fn schema(&self) -> SchemaRef;

    /// Called once when an available-now run starts: fix what "available
    /// now" means (e.g. the rate source caps at the current time). Default: nothing.
    fn prepare_available_now(&mut self) -> Result<()> {
        Ok(())
    }

    /// The query reads only the columns flagged in `used` (one flag per
    /// column of [`schema`](Self::schema)): the source may return nulls in
    /// the others instead of decoding them (projection pushdown). Called
    /// once, before the first read. Default: every column is decoded.
    fn read_only_columns(&mut self, used: &[bool]) {
        let _ = used;
    }

    /// The query takes the `Utf8` columns flagged in `allowed` (one flag
    /// per column of [`schema`](Self::schema)) as `Dictionary(Int32, Utf8)`
    /// too, so a source holding them dictionary-encoded may return them so,
    /// without decoding every row's string. Called once, before the first
    /// read. Default: every column in its declared type.
    fn read_dictionary_columns(&mut self, allowed: &[bool]) {
        let _ = allowed;
    }

    /// The query converts the `Utf8` columns flagged in `columns` (one flag
    /// per column of [`schema`](Self::schema)) with `CAST(column AS
    /// TIMESTAMP)` before reading them, so a source may return them
    /// converted (`TIMESTAMP` in UTC, NULL for a string that is not a
    /// timestamp, by Spark's rules in `plan::timestamp`) instead of the
    /// strings. Called once, before the first read. Default: the strings.
    fn read_timestamp_columns(&mut self, columns: &[bool]) {
        let _ = columns;
    }

    /// The query outputs no row failing `filter` (a condition on the
    /// columns of [`schema`](Self::schema)), so the source may drop such
    /// rows while decoding, counting them in
    /// [`ReadBatch::rows_filtered`]. Returns true when it drops every one,
    /// in every read: the query then does not evaluate the condition again,
    /// and the source reads the filter's columns for itself; it gives them
    /// only where [`read_only_columns`](Self::read_only_columns) says the
    /// query reads them.
    /// False: the query applies its filters to what the source gives.
    /// Called once, before the first read. Default: every row is returned
    /// (false).
    fn filter_rows(&mut self, filter: &LeafFilter) -> bool {
        let _ = filter;
        false
    }

    /// The end offset of the next batch, which starts after `start` (`None`:
    /// the beginning of the stream), honouring admission limits such as
    /// `maxFilesPerTrigger`. Returns `Ok(None)` when there is no new data.
    fn latest_offset(&mut self, start: Option<&Offset>) -> Result<Option<Offset>>;

    /// The rows in `(start, end]`. Called with the offsets written to the
    /// checkpoint, also when a batch is replayed after a restart.
    fn read(&mut self, start: Option<&Offset>, end: &Offset) -> Result<ReadBatch>;

    /// Everything up to `end` is committed; data before it may be released.
    fn commit(&mut self, end: &Offset) -> Result<()> {
        let _ = end;
        Ok(())
    }

    /// During an available-now run: how much of the backlog fixed at its
    /// start is not yet in a batch (e.g. 38 of 50 files). None when unknown.
    fn backlog(&self) -> Option<Backlog> {
        None
    }

    /// Records lost since the last call (deleted before they were read,
    /// counted instead of failing: Kafka's `failOnDataLoss=false`). The
    /// runtime asks after each read and reports it in the batch's progress.
    fn data_lost(&mut self) -> u64 {
        0
    }

    /// False when a replay may not return the same rows (the socket source).
    fn replayable(&self) -> bool {
        true
    }

    /// Real-time mode: the rows that arrived after `start` and the offset
    /// they end at, waiting up to `timeout` for the first; `Ok(None)` when
    /// nothing arrived. Default: [`latest_offset`](Self::latest_offset) then
    /// [`read`](Self::read), checking every
    /// [`arrival_poll_interval`](Self::arrival_poll_interval).
    fn read_arrived(
        &mut self,
        start: Option<&Offset>,
        timeout: Duration,
    ) -> Result<Option<(Offset, ReadBatch)>> {
        let deadline = Instant::now() + timeout;
        let poll = self.arrival_poll_interval();
        loop {
            if let Some(end) = self.latest_offset(start)? {
                if Some(&end) != start {
                    let read = self.read(start, &end)?;
                    return Ok(Some((end, read)));
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            std::thread::sleep((deadline - now).min(poll));
        }
    }

    /// How often the default [`read_arrived`](Self::read_arrived) looks for
    /// new data: 1 ms; sources whose check lists a directory look less often.
    fn arrival_poll_interval(&self) -> Duration {
        Duration::from_millis(1)
    }
}

/// A source whose errors name the flow reading it. [`open_source`] and
/// [`open_table_reader`] hand every source out wrapped in one, so a
/// source's own messages say only what went wrong ("malformed record in
/// data/logs/a.json line 4: ...") and the flow's name is added here, once
/// ([`Error::in_flow`](crate::error::Error::in_flow)). Every method of
/// [`Source`] is forwarded, those with a default body too: a method added
/// to the trait must be forwarded here as well.
///
/// [`open_source`]: crate::engine::sources::open_source
/// [`open_table_reader`]: crate::engine::sources::open_table_reader
pub struct FlowSource {
    flow: String,
    inner: Box<dyn Source>,
}

impl FlowSource {
    /// Wraps `inner`, read by `flow`.
    pub fn new(flow: impl Into<String>, inner: Box<dyn Source>) -> Self {
        FlowSource {
            flow: flow.into(),
            inner,
        }
    }

    fn named<T>(&self, r: Result<T>) -> Result<T> {
        r.map_err(|e| e.in_flow(&self.flow))
    }
}

impl Source for FlowSource {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }

    fn prepare_available_now(&mut self) -> Result<()> {
        let r = self.inner.prepare_available_now();
        self.named(r)
    }

    fn read_only_columns(&mut self, used: &[bool]) {
        self.inner.read_only_columns(used)
    }

    fn read_dictionary_columns(&mut self, allowed: &[bool]) {
        self.inner.read_dictionary_columns(allowed)
    }

    fn filter_rows(&mut self, filter: &LeafFilter) -> bool {
        self.inner.filter_rows(filter)
    }

    fn read_timestamp_columns(&mut self, columns: &[bool]) {
        self.inner.read_timestamp_columns(columns)
    }

    fn latest_offset(&mut self, start: Option<&Offset>) -> Result<Option<Offset>> {
        let r = self.inner.latest_offset(start);
        self.named(r)
    }

    fn read(&mut self, start: Option<&Offset>, end: &Offset) -> Result<ReadBatch> {
        let r = self.inner.read(start, end);
        self.named(r)
    }

    fn commit(&mut self, end: &Offset) -> Result<()> {
        let r = self.inner.commit(end);
        self.named(r)
    }

    fn backlog(&self) -> Option<Backlog> {
        self.inner.backlog()
    }

    fn data_lost(&mut self) -> u64 {
        self.inner.data_lost()
    }

    fn replayable(&self) -> bool {
        self.inner.replayable()
    }

    fn read_arrived(
        &mut self,
        start: Option<&Offset>,
        timeout: Duration,
    ) -> Result<Option<(Offset, ReadBatch)>> {
        let r = self.inner.read_arrived(start, timeout);
        self.named(r)
    }

    fn arrival_poll_interval(&self) -> Duration {
        self.inner.arrival_poll_interval()
    }
}

/// Every row a source has now (a batch read).
pub fn read_all(source: &mut dyn Source) -> Result<Vec<RecordBatch>> {
    source.prepare_available_now()?;
    let mut out = Vec::new();
    let mut start: Option<Offset> = None;
    while let Some(end) = source.latest_offset(start.as_ref())? {
        if Some(&end) == start.as_ref() {
            break;
        }
        out.extend(source.read(start.as_ref(), &end)?.batches);
        start = Some(end);
    }
    Ok(out)
}
