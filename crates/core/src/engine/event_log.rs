//! The pipeline's event log: what happened in each run ("update"), one
//! [`Event`] per line of `<storage>/event_log/events.jsonl`, in the shape of
//! Lakeflow's event log (`id`, `sequence`, `timestamp`, `origin`, `level`,
//! `event_type`, `message`, `details`, `error`).
//!
//! The file is the log of record: an event is appended (one `write`) before
//! the run goes on, and a batch's `flow_progress` event is appended just
//! before its commit, so every committed batch has its event even when the
//! process is killed (a batch killed between the two is replayed and logged
//! again, `replayed: true`). [`crate::engine::event_table`] copies the
//! file into the event log table in small appends.
//!
//! With the storage root in object storage, which cannot append, the log is
//! one object per event, `<storage>/event_log/events/<sequence>.json`
//! (20 digits), each written once; readers list from the sequence they
//! read last. A position in the log ([`read_events_from`]) is a byte
//! offset in the file, and the next sequence among the objects.
//!
//! ```
//! use pipelines_core::engine::event_log::{EventLog, NewEvent};
//! let dir = tempfile::tempdir().unwrap();
//! let log = EventLog::open(dir.path(), "shop").unwrap();
//! log.emit(NewEvent::info("create_update", "run started")).unwrap();
//! let events = pipelines_core::engine::event_log::read_events(log.location()).unwrap();
//! assert_eq!(events[0].sequence, 1);
//! assert_eq!(events[0].origin.pipeline_name, "shop");
//! ```

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::engine::storage::{Location, WriteOnce};
use crate::error::{Error, Result};

/// Where an event comes from (Lakeflow's `origin`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Origin {
    /// The pipeline's name.
    pub pipeline_name: String,
    /// The run the event belongs to (one id per `run`).
    pub update_id: String,
    /// The flow, for flow events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_name: Option<String>,
    /// The dataset, for dataset events and a flow's target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_name: Option<String>,
    /// The micro-batch, for a batch's progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<u64>,
}

/// An event's severity (Lakeflow's `level`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    /// Something happened as planned.
    Info,
    /// Something the user should know (e.g. a source that cannot be replayed).
    Warn,
    /// A flow or the run failed.
    Error,
    /// A batch's figures.
    Metrics,
}

impl Level {
    /// `INFO`, `WARN`, `ERROR` or `METRICS`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
            Level::Metrics => "METRICS",
        }
    }
}

/// A failure as the event log keeps it: the message, the fix, and the
/// causes underneath, outermost first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EventError {
    /// What went wrong.
    pub message: String,
    /// How to fix it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// The chain of causes under the message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chain: Vec<String>,
}

impl EventError {
    /// The error's message, fix and causes.
    pub fn from_error(e: &Error) -> Self {
        let (message, fix) = match e {
            Error::Runtime { message, help } => (message.clone(), help.clone()),
            other => (other.to_string(), None),
        };
        let mut chain = Vec::new();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            chain.push(s.to_string());
            source = s.source();
        }
        EventError {
            message,
            fix,
            chain,
        }
    }
}

/// One line of the event log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// A unique id (UUID).
    pub id: String,
    /// Position in the pipeline's log: 1, 2, 3, ... across runs.
    pub sequence: u64,
    /// When it happened (RFC 3339, UTC, milliseconds).
    pub timestamp: String,
    /// Pipeline, run, flow, dataset, batch.
    pub origin: Origin,
    /// Severity.
    pub level: Level,
    /// `create_update`, `update_progress`, `flow_definition`,
    /// `dataset_definition`, `flow_progress`, or a warning's own type
    /// (`source_not_replayable`, `checkpoint_imported`).
    pub event_type: String,
    /// A sentence for people.
    pub message: String,
    /// The event's figures, keyed by its kind (`{"flow_progress": {...}}`).
    #[serde(default)]
    pub details: serde_json::Value,
    /// The failure, for `ERROR` events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<EventError>,
}

impl Event {
    /// A batch's progress (`details.batch_progress`, Spark's
    /// `StreamingQueryProgress` fields), for a `flow_progress` event of a
    /// committed batch.
    pub fn batch_progress(&self) -> Option<&serde_json::Value> {
        self.details.get("batch_progress")
    }

    /// The flow or update state this event reports (`details.*.status`
    /// or `details.update_progress.state`).
    pub fn state(&self) -> Option<&str> {
        self.details
            .get("flow_progress")
            .and_then(|f| f.get("status"))
            .or_else(|| {
                self.details
                    .get("update_progress")
                    .and_then(|u| u.get("state"))
            })
            .and_then(|s| s.as_str())
    }
}

/// An event before the log numbers and stamps it.
#[derive(Clone, Debug)]
pub struct NewEvent {
    /// Severity.
    pub level: Level,
    /// See [`Event::event_type`].
    pub event_type: String,
    /// A sentence for people.
    pub message: String,
    /// The flow it is about.
    pub flow: Option<String>,
    /// The dataset it is about.
    pub dataset: Option<String>,
    /// The batch it is about.
    pub batch_id: Option<u64>,
    /// Its figures.
    pub details: serde_json::Value,
    /// Its failure.
    pub error: Option<EventError>,
}

impl NewEvent {
    /// An event of `level`.
    pub fn new(level: Level, event_type: &str, message: impl Into<String>) -> Self {
        NewEvent {
            level,
            event_type: event_type.to_string(),
            message: message.into(),
            flow: None,
            dataset: None,
            batch_id: None,
            details: serde_json::Value::Object(Default::default()),
            error: None,
        }
    }

    /// An `INFO` event.
    pub fn info(event_type: &str, message: impl Into<String>) -> Self {
        Self::new(Level::Info, event_type, message)
    }

    /// About `flow`.
    pub fn flow(mut self, flow: &str) -> Self {
        self.flow = Some(flow.to_string());
        self
    }

    /// About `dataset`.
    pub fn dataset(mut self, dataset: &str) -> Self {
        self.dataset = Some(dataset.to_string());
        self
    }

    /// About batch `id`.
    pub fn batch(mut self, id: u64) -> Self {
        self.batch_id = Some(id);
        self
    }

    /// With these figures.
    pub fn details(mut self, details: serde_json::Value) -> Self {
        self.details = details;
        self
    }

    /// With this failure (and level `ERROR`).
    pub fn error(mut self, e: EventError) -> Self {
        self.level = Level::Error;
        self.error = Some(e);
        self
    }
}

/// Something told of every event as it is logged (the `--ui` server).
pub type EventObserver = Arc<dyn Fn(&Event) + Send + Sync>;

/// The open event log of one run: numbers, stamps and appends events.
pub struct EventLog {
    location: Location,
    pipeline: String,
    update_id: String,
    writer: Mutex<Writer>,
    observers: Vec<EventObserver>,
}

impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog")
            .field("location", &self.location)
            .field("update_id", &self.update_id)
            .finish()
    }
}

struct Writer {
    target: Target,
    next_sequence: u64,
}

/// Where events are appended.
enum Target {
    /// The local file, opened for appending.
    File(std::fs::File),
    /// The directory of one object per event.
    Objects(Location),
}

/// `<storage>/event_log/events.jsonl`.
pub fn log_path(storage: &Path) -> PathBuf {
    storage.join("event_log").join("events.jsonl")
}

/// The log of `storage`: the file `<storage>/event_log/events.jsonl`
/// locally, the directory `<storage>/event_log/events` in object storage.
pub fn log_location(storage: &Location) -> Location {
    match storage {
        Location::Local(p) => Location::Local(log_path(p)),
        Location::Object(_) => storage.join("event_log").join("events"),
    }
}

/// The object name of event `sequence`.
fn object_name(sequence: u64) -> String {
    format!("{sequence:020}.json")
}

/// The sequence an object's name holds, if it is one.
fn object_sequence(name: &str) -> Option<u64> {
    name.strip_suffix(".json")
        .filter(|n| n.len() == 20)
        .and_then(|n| n.parse().ok())
}

impl EventLog {
    /// Opens (or creates) the log of `storage` ([`log_location`]) for a new
    /// run of `pipeline`, numbering on from the last event in it.
    pub fn open(storage: impl Into<Location>, pipeline: &str) -> Result<Self> {
        let location = log_location(&storage.into());
        let path = match &location {
            Location::Local(p) => p.clone(),
            Location::Object(_) => {
                let last = location
                    .list()?
                    .iter()
                    .filter_map(|n| object_sequence(n))
                    .max()
                    .unwrap_or(0);
                return Ok(EventLog {
                    writer: Mutex::new(Writer {
                        target: Target::Objects(location.clone()),
                        next_sequence: last + 1,
                    }),
                    location,
                    pipeline: pipeline.to_string(),
                    update_id: uuid::Uuid::new_v4().to_string(),
                    observers: Vec::new(),
                });
            }
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        let (last, torn) = last_sequence(&mut file).map_err(|e| Error::io(&path, e))?;
        if torn {
            // A line cut short by a crash: end it, so the next event starts
            // on its own line (readers skip the cut one).
            file.write_all(b"\n").map_err(|e| Error::io(&path, e))?;
        }
        Ok(EventLog {
            location,
            pipeline: pipeline.to_string(),
            update_id: uuid::Uuid::new_v4().to_string(),
            writer: Mutex::new(Writer {
                target: Target::File(file),
                next_sequence: last + 1,
            }),
            observers: Vec::new(),
        })
    }

    /// Also tells `observer` of each event.
    pub fn with_observer(mut self, observer: EventObserver) -> Self {
        self.observers.push(observer);
        self
    }

    /// The file (or, in object storage, the directory of events).
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// This run's id (`origin.update_id`).
    pub fn update_id(&self) -> &str {
        &self.update_id
    }

    /// The pipeline's name.
    pub fn pipeline(&self) -> &str {
        &self.pipeline
    }

    /// Numbers, stamps and appends `new` (one `write` of one line), then
    /// tells the observers.
    pub fn emit(&self, new: NewEvent) -> Result<Event> {
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut event = Event {
            id: uuid::Uuid::new_v4().to_string(),
            sequence: w.next_sequence,
            timestamp: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            origin: Origin {
                pipeline_name: self.pipeline.clone(),
                update_id: self.update_id.clone(),
                flow_name: new.flow,
                dataset_name: new.dataset,
                batch_id: new.batch_id,
            },
            level: new.level,
            event_type: new.event_type,
            message: new.message,
            details: new.details,
            error: new.error,
        };
        let line = |event: &Event| {
            serde_json::to_string(event)
                .map(|l| l + "\n")
                .map_err(|e| Error::runtime(format!("event log: {e}")))
        };
        match &mut w.target {
            Target::File(file) => {
                let path = self.location.shown();
                file.write_all(line(&event)?.as_bytes())
                    .map_err(|e| Error::io(&path, e))?;
                if crate::engine::storage::local::fsync_enabled() {
                    file.sync_data().map_err(|e| Error::io(&path, e))?;
                }
            }
            Target::Objects(dir) => {
                // Write-once: a sequence another run took meanwhile is
                // skipped, and the event numbered after it.
                let mut attempts = 0;
                while dir
                    .join(&object_name(event.sequence))
                    .write_once(line(&event)?.as_bytes())?
                    == WriteOnce::Differs
                {
                    attempts += 1;
                    if attempts > 1000 {
                        return Err(Error::runtime(format!(
                            "event log {dir}: 1000 sequences in a row were taken by another run"
                        )));
                    }
                    event.sequence += 1;
                }
            }
        }
        w.next_sequence = event.sequence + 1;
        drop(w);
        for observe in &self.observers {
            observe(&event);
        }
        Ok(event)
    }
}

/// The last complete event's sequence in the file (0 when none), and
/// whether the file ends in a cut line.
fn last_sequence(file: &mut std::fs::File) -> std::io::Result<(u64, bool)> {
    let len = file.seek(SeekFrom::End(0))?;
    let mut window = 64 * 1024u64;
    loop {
        let start = len.saturating_sub(window);
        file.seek(SeekFrom::Start(start))?;
        let mut buf = Vec::new();
        file.read_to_end(&mut buf)?;
        let torn = buf.last().is_some_and(|b| *b != b'\n');
        let lines: Vec<&[u8]> = buf.split(|b| *b == b'\n').collect();
        // The first piece may be a partial line when the window starts
        // mid-file; the last is empty or cut.
        let skip_first = start > 0;
        for (i, line) in lines.iter().enumerate().rev() {
            if (i == 0 && skip_first) || line.is_empty() {
                continue;
            }
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) {
                if let Some(seq) = v.get("sequence").and_then(|s| s.as_u64()) {
                    return Ok((seq, torn));
                }
            }
        }
        if start == 0 {
            return Ok((0, torn));
        }
        window *= 4;
    }
}

/// Every event in an event log file, in order. A line cut short by a crash
/// is skipped; any other line that is not an event is an error naming it.
pub fn read_events(log: impl Into<Location>) -> Result<Vec<Event>> {
    let path = match log.into() {
        Location::Local(p) => p,
        objects => return Ok(read_events_from(&objects, 0, None)?.0),
    };
    let path = path.as_path();
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(path, e)),
    };
    parse_events(&text, path)
}

/// The events on the whole lines of the log at `path` from byte `from` up
/// to byte `to` (or its end), and the byte after the last whole line read
/// (`from` when there is none: a line still being written is read next
/// time). A missing file has no events.
pub fn read_events_from(log: &Location, from: u64, to: Option<u64>) -> Result<(Vec<Event>, u64)> {
    let path = match log {
        Location::Local(p) => p.as_path(),
        Location::Object(_) => return read_objects_from(log, from, to),
    };
    let io = |e| Error::io(path, e);
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), from)),
        Err(e) => return Err(io(e)),
    };
    let len = f.metadata().map_err(io)?.len();
    let end = to.map_or(len, |t| t.min(len));
    if end <= from {
        return Ok((Vec::new(), from));
    }
    f.seek(SeekFrom::Start(from)).map_err(io)?;
    let mut buf = Vec::with_capacity((end - from) as usize);
    f.take(end - from).read_to_end(&mut buf).map_err(io)?;
    let Some(last_newline) = buf.iter().rposition(|b| *b == b'\n') else {
        return Ok((Vec::new(), from));
    };
    let text = String::from_utf8_lossy(&buf[..=last_newline]);
    Ok((parse_events(&text, path)?, from + last_newline as u64 + 1))
}

/// [`read_events_from`] over one object per event: `from` and `to` are
/// sequences (the events with `from <= sequence < to`).
fn read_objects_from(dir: &Location, from: u64, to: Option<u64>) -> Result<(Vec<Event>, u64)> {
    let after = from.checked_sub(1).map(object_name);
    let mut events = Vec::new();
    let mut next = from;
    for name in dir.list_after(after.as_deref())? {
        let Some(sequence) = object_sequence(&name) else {
            continue;
        };
        if to.is_some_and(|t| sequence >= t) {
            break;
        }
        let object = dir.join(&name);
        let Some(text) = object.read_text("move the event log aside to start a new one")? else {
            continue;
        };
        events.extend(parse_events(&text, &object.shown())?);
        next = sequence + 1;
    }
    Ok((events, next))
}

/// The events in `text` (the contents of `path`, for messages).
pub fn parse_events(text: &str, path: &Path) -> Result<Vec<Event>> {
    let mut out = Vec::new();
    let complete = if text.ends_with('\n') || text.is_empty() {
        text
    } else {
        // The last line was cut by a crash.
        &text[..text.rfind('\n').map(|i| i + 1).unwrap_or(0)]
    };
    for (i, line) in complete.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Event>(line) {
            Ok(e) => out.push(e),
            Err(e) => {
                // A line cut by a crash and ended by the next run.
                if serde_json::from_str::<serde_json::Value>(line).is_err()
                    && e.classify() == serde_json::error::Category::Eof
                {
                    continue;
                }
                return Err(Error::runtime_with_help(
                    format!(
                        "event log {}:{}: not an event: {e}",
                        crate::spec::display_path(path),
                        i + 1
                    ),
                    "the event log was written by another program or an older version; move it aside to start a new one",
                ));
            }
        }
    }
    Ok(out)
}

/// The progress of every batch logged under `storage`, in order (each
/// `flow_progress` event's `details.batch_progress`: `flow`, `batchId`,
/// `numInputRows`, `durationMs`, `stateOperators`, ...).
pub fn read_batch_progress(storage: impl Into<Location>) -> Result<Vec<serde_json::Value>> {
    Ok(read_events(log_location(&storage.into()))?
        .into_iter()
        .filter_map(|mut e| e.details.get_mut("batch_progress").map(|p| p.take()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_continue_across_runs_and_a_cut_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::open(dir.path(), "p").unwrap();
        log.emit(NewEvent::info("create_update", "one")).unwrap();
        log.emit(NewEvent::info("update_progress", "two").flow("f"))
            .unwrap();
        let first_update = log.update_id().to_string();
        drop(log);
        // A crash cut the next line short.
        let path = log_path(dir.path());
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"id":"x","sequence":3,"timest"#).unwrap();
        drop(f);
        let log = EventLog::open(dir.path(), "p").unwrap();
        assert_ne!(log.update_id(), first_update);
        let e = log
            .emit(NewEvent::new(Level::Warn, "source_not_replayable", "three").batch(4))
            .unwrap();
        assert_eq!(e.sequence, 3);
        let events = read_events(&path).unwrap();
        let got: Vec<(u64, &str, Option<&str>, Option<u64>)> = events
            .iter()
            .map(|e| {
                (
                    e.sequence,
                    e.message.as_str(),
                    e.origin.flow_name.as_deref(),
                    e.origin.batch_id,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (1, "one", None, None),
                (2, "two", Some("f"), None),
                (3, "three", None, Some(4))
            ]
        );
        assert_eq!(events[2].level, Level::Warn);
        let line = std::fs::read_to_string(&path).unwrap();
        assert!(line.lines().last().unwrap().contains(r#""level":"WARN""#));
    }

    #[test]
    fn a_line_that_is_not_an_event_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        std::fs::write(&path, "{\"flow\":\"old\"}\n").unwrap();
        let err = read_events(&path).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "event log {}:1: not an event: missing field `id`",
                path.display()
            )),
            "{err}"
        );
    }
}
