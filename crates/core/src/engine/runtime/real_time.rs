//! The real-time trigger: records go through the plan as they arrive and
//! reach the sink at once; the checkpoint interval only says how often the
//! progress is made durable.
//!
//! A real-time flow runs in *epochs*. Epoch `N` is an ordinary batch id in
//! the flow's checkpoint, so the same checkpoint can be run with a
//! micro-batch trigger before or after. Within an epoch the flow runs
//! *steps*: each step takes whatever the sources have after the previous
//! step's end ([`Source::read_arrived`](crate::engine::source::Source::read_arrived),
//! waiting for the first record instead of polling on a fixed interval),
//! runs the plan over it with the state kept in memory, and hands the rows
//! to the sink ([`Sink::add_rows`](crate::engine::sink::Sink::add_rows)).
//! The watermark advances after every step, as it does after every
//! micro-batch.
//!
//! When the checkpoint interval has passed (or the run is stopped), the
//! epoch ends, in the micro-batch protocol's order: `offsets/N` (the ends
//! the steps reached), the sink makes every row durable
//! ([`Sink::commit_epoch`](crate::engine::sink::Sink::commit_epoch): the
//! Kafka sink waits for every delivery), each stateful operator writes its
//! whole state as version `N`, then `commits/N`.
//!
//! A crash in the middle of epoch `N` loses nothing: the restart resumes
//! from epoch `N - 1`'s offsets and state and runs the epoch's records
//! again (a sink that cannot recognise them receives them twice: at least
//! once, as in Spark's real-time mode). A crash after `offsets/N` and before
//! `commits/N` replays epoch `N` as one micro-batch over exactly the logged
//! offsets.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use arrow::record_batch::RecordBatch;

use super::{checkpoint_step, ms, FlowSummary, LeafInput, RunOptions, StreamingQuery};
use crate::engine::checkpoint::CommitEntry;
use crate::engine::exec::{BatchContext, StateOperatorProgress};
use crate::engine::progress::{BatchProgress, PhaseDurations, SourceProgress};
use crate::engine::quality::DataQuality;
use crate::engine::source::Offset;
use crate::error::{Error, Result};
use crate::formats::OutputMode;

/// The longest a step waits for the sources before it looks at the clock
/// (the checkpoint interval, a stop request) again.
const STEP_WAIT: Duration = Duration::from_millis(100);

/// How long each source is waited for when a flow reads several streams:
/// short, so that one quiet source does not hold back another.
const MULTI_SOURCE_WAIT: Duration = Duration::from_millis(1);

/// The epoch being run.
struct Epoch {
    /// The batch id it is committed as.
    id: u64,
    started: Instant,
    /// Where each streaming source stands (one per slot).
    positions: Vec<Option<Offset>>,
    /// The watermark when the epoch started: a replay of the epoch as one
    /// micro-batch runs with it.
    start_watermark_ms: i64,
    /// The static inputs, read once per epoch.
    statics: Vec<Option<Vec<RecordBatch>>>,
    steps: u64,
    input_rows: u64,
    output_rows: u64,
    /// Per source: rows read, malformed rows dropped, corrupt files skipped.
    read_rows: Vec<(u64, u64, u64)>,
    execute_ms: f64,
    sink_ms: f64,
    read_ms: f64,
    state_operators: Vec<StateOperatorProgress>,
    /// The expectations' counts over the epoch's steps.
    data_quality: Option<DataQuality>,
}

impl StreamingQuery {
    /// Runs the flow with the real-time trigger until `opts.stop` is set,
    /// committing an epoch every `checkpoint_interval` (and on stop).
    pub(super) async fn run_real_time(
        &mut self,
        checkpoint_interval: Duration,
        opts: &RunOptions,
    ) -> Result<FlowSummary> {
        // The graph refuses these at dry-run; a sink opened some other way
        // is checked here, before any data moves.
        if !self.sink.supports_real_time() {
            return Err(Error::runtime_with_help(
                format!(
                    "flow `{}`: {} cannot take rows in real-time mode",
                    self.flow.def.name, self.sink_description
                ),
                format!(
                    "write to a {} sink, or use a micro-batch trigger",
                    crate::connector::real_time_sink_names().join(", ")
                ),
            ));
        }
        self.sink.start_real_time()?;
        if let Some(late) = self.late_sink.as_mut() {
            late.start_real_time()?;
        }
        if let Some(quarantine) = self.quarantine_sink.as_mut() {
            quarantine.start_real_time()?;
        }
        let mut epoch = self.new_epoch();
        loop {
            // A step without data completes without suspending: let the
            // runtime's other tasks (Ctrl-C, other flows) run between steps.
            tokio::task::yield_now().await;
            let stopping = opts.stop.load(Ordering::SeqCst);
            if stopping || epoch.started.elapsed() >= checkpoint_interval {
                if epoch.steps > 0 {
                    self.commit_epoch(&epoch)?;
                }
                if stopping {
                    break;
                }
                epoch = self.new_epoch();
            }
            let left = checkpoint_interval.saturating_sub(epoch.started.elapsed());
            self.real_time_step(&mut epoch, left.min(STEP_WAIT)).await?;
        }
        Ok(self.summary.clone())
    }

    fn new_epoch(&self) -> Epoch {
        Epoch {
            id: self.next_batch,
            started: Instant::now(),
            positions: self.committed.clone(),
            start_watermark_ms: self.tracker.current_ms(),
            statics: Vec::new(),
            steps: 0,
            input_rows: 0,
            output_rows: 0,
            read_rows: vec![(0, 0, 0); self.committed.len()],
            execute_ms: 0.0,
            sink_ms: 0.0,
            read_ms: 0.0,
            state_operators: Vec::new(),
            data_quality: None,
        }
    }

    /// One step: what arrived (waiting up to `wait` for it) through the
    /// plan and into the sink.
    async fn real_time_step(&mut self, epoch: &mut Epoch, wait: Duration) -> Result<()> {
        let read_started = Instant::now();
        let per_source = if epoch.positions.len() > 1 {
            MULTI_SOURCE_WAIT.min(wait)
        } else {
            wait
        };
        if epoch.statics.is_empty() {
            for i in 0..self.leaves.len() {
                let statics = match &self.leaves[i] {
                    LeafInput::Static { .. } => Some(self.read_static(i)?),
                    LeafInput::Streaming { .. } => None,
                };
                epoch.statics.push(statics);
            }
        }
        let mut inputs: Vec<Vec<RecordBatch>> = Vec::with_capacity(self.leaves.len());
        let mut new_data = false;
        let mut step_rows = 0u64;
        for (i, leaf) in self.leaves.iter_mut().enumerate() {
            match leaf {
                LeafInput::Streaming { slot, source } => {
                    let start = epoch.positions[*slot].clone();
                    let arrived = tokio::task::block_in_place(|| {
                        source.read_arrived(start.as_ref(), per_source)
                    })?;
                    match arrived {
                        Some((end, read)) => {
                            let rows = read.rows_read();
                            epoch.read_rows[*slot].0 += rows;
                            epoch.read_rows[*slot].1 += read.malformed_dropped;
                            epoch.read_rows[*slot].2 += read.corrupt_files_skipped;
                            step_rows += rows;
                            epoch.positions[*slot] = Some(end);
                            new_data = true;
                            inputs.push(read.batches);
                        }
                        None => inputs.push(Vec::new()),
                    }
                }
                LeafInput::Static { .. } => {
                    inputs.push(epoch.statics[i].clone().unwrap_or_default());
                }
            }
        }
        epoch.read_ms += ms(read_started.elapsed());
        if !new_data {
            // As between micro-batches: run without data only when the
            // watermark moved and state may emit or evict.
            let moved = self.tracker.current_ms() > self.last_batch_watermark_ms;
            if !(moved && self.compiled.runs_no_data_batches(self.mode)) {
                return Ok(());
            }
        }
        checkpoint_step(&self.flow.def.name, "real_time_step", epoch.steps)?;

        let exec_started = Instant::now();
        let has_watermark = !self.compiled.watermarks().is_empty();
        let step_watermark_ms = self.tracker.current_ms();
        let ctx = BatchContext {
            batch_id: epoch.id,
            output_mode: self.mode,
            watermark_for_late_ms: has_watermark.then_some(self.last_batch_watermark_ms),
            watermark_for_eviction_ms: has_watermark.then_some(step_watermark_ms),
            capture_late_rows: self.late_sink.is_some(),
            // Rows are processed as they arrive: the time of each step.
            batch_timestamp_ms: None,
        };
        let mut result = self.compiled.execute_batch(inputs, &ctx).await?;
        for (op, max, delay) in &result.event_times {
            self.tracker.observe(*op, *max, *delay);
        }
        self.tracker.advance();
        self.last_batch_watermark_ms = step_watermark_ms;
        let sink_started = Instant::now();
        epoch.execute_ms += ms(sink_started - exec_started);

        let mut output = std::mem::take(&mut result.rows);
        let mut quarantined = Vec::new();
        if let Some(q) = &self.quality {
            // A failed fail-expectation stops the epoch before the sink.
            let checked = q.apply(epoch.id, output)?;
            output = checked.rows;
            quarantined = checked.quarantined;
            epoch
                .data_quality
                .get_or_insert_with(DataQuality::default)
                .add(&checked.quality);
        }
        let written = if output.is_empty() && self.mode != OutputMode::Complete {
            0
        } else {
            self.sink.add_rows(epoch.id, output, self.mode)?
        };
        if let Some(late) = self.late_sink.as_mut() {
            let late_rows = std::mem::take(&mut result.late_rows);
            if !late_rows.is_empty() {
                late.add_rows(epoch.id, late_rows, OutputMode::Append)?;
            }
        }
        if let Some(quarantine) = self.quarantine_sink.as_mut() {
            if !quarantined.is_empty() {
                quarantine.add_rows(epoch.id, quarantined, OutputMode::Append)?;
            }
        }
        epoch.sink_ms += ms(sink_started.elapsed());
        // Crash tests kill the process here: the step's rows were handed to
        // the sink, the epoch is not committed.
        crate::engine::fault::fault_point(&self.flow.def.name, "real_time_delivered", epoch.steps);
        epoch.steps += 1;
        epoch.input_rows += step_rows;
        epoch.output_rows += written;
        epoch.state_operators = result.state_operators;
        Ok(())
    }

    /// Ends the epoch: offsets, the sink's deliveries, the state, the commit.
    fn commit_epoch(&mut self, epoch: &Epoch) -> Result<()> {
        let commit_started = Instant::now();
        let n = epoch.id;
        let flow = self.flow.def.name.clone();
        self.write_offsets(n, &epoch.positions, epoch.start_watermark_ms)?;
        checkpoint_step(&flow, "after_offsets", n)?;
        self.sink.commit_epoch(n)?;
        if let Some(late) = self.late_sink.as_mut() {
            late.commit_epoch(n)?;
        }
        if let Some(quarantine) = self.quarantine_sink.as_mut() {
            quarantine.commit_epoch(n)?;
        }
        self.compiled.commit_state_snapshot(n)?;
        let mut sources = Vec::new();
        for leaf in &mut self.leaves {
            if let LeafInput::Streaming { slot, source } = leaf {
                let (rows, malformed, corrupt) = epoch.read_rows[*slot];
                sources.push(SourceProgress {
                    description: source.describe(),
                    start_offset: self.committed.get(*slot).cloned().flatten(),
                    end_offset: epoch.positions.get(*slot).cloned().flatten(),
                    num_input_rows: rows,
                    num_malformed_dropped: malformed,
                    num_data_lost: source.data_lost(),
                    num_corrupt_files_skipped: corrupt,
                });
            }
        }
        let wall = epoch.started.elapsed().as_secs_f64();
        let busy = (epoch.read_ms + epoch.execute_ms + epoch.sink_ms) / 1000.0;
        let has_watermark = !self.compiled.watermarks().is_empty();
        let progress = BatchProgress {
            pipeline: self.pipeline.clone(),
            flow: flow.clone(),
            query_id: self.checkpoint.query_id().to_string(),
            batch_id: n,
            timestamp: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            replayed: false,
            num_input_rows: epoch.input_rows,
            input_rows_per_second: if wall > 0.0 {
                epoch.input_rows as f64 / wall
            } else {
                0.0
            },
            processed_rows_per_second: if busy > 0.0 {
                epoch.input_rows as f64 / busy
            } else {
                0.0
            },
            num_output_rows: epoch.output_rows,
            duration_ms: PhaseDurations {
                get_batch: epoch.read_ms,
                execute: epoch.execute_ms,
                add_batch: epoch.sink_ms,
                commit: ms(commit_started.elapsed()),
                trigger_execution: ms(epoch.started.elapsed()),
                ..PhaseDurations::default()
            },
            watermark_ms: has_watermark.then_some(self.last_batch_watermark_ms),
            sources,
            sink: self.sink_description.clone(),
            sink_skipped_replay: false,
            backlog: None,
            backlog_detail: Vec::new(),
            state_operators: epoch.state_operators.clone(),
            data_quality: epoch.data_quality.clone(),
        };
        // Logged before the commit: a committed epoch always has its event.
        self.reporter.report(&progress)?;
        checkpoint_step(&flow, "before_commit", n)?;
        self.checkpoint.write_commit(
            n,
            &CommitEntry {
                next_batch_watermark_ms: self.tracker.current_ms(),
                sink_rows: None,
            },
        )?;
        for leaf in &mut self.leaves {
            if let LeafInput::Streaming { slot, source } = leaf {
                if let Some(Some(end)) = epoch.positions.get(*slot) {
                    source.commit(end)?;
                }
            }
        }
        self.committed = epoch.positions.clone();
        self.next_batch = n + 1;
        self.once_done = true;
        if n % 100 == 99 {
            self.checkpoint.purge(100)?;
        }

        self.summary.batches += 1;
        self.summary.input_rows += epoch.input_rows;
        self.summary.output_rows += epoch.output_rows;
        Ok(())
    }
}
