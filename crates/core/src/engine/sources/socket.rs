//! Spark's socket source: lines read from a TCP connection.
//!
//! **Not fault tolerant** (like Spark's, it is meant for testing): lines
//! live only in this process's memory, so after a restart the lines of an
//! uncommitted batch cannot be read again, and [`Source::replayable`] is
//! false (the runtime warns when the flow starts). Options `host` and `port`; the schema is
//! `value STRING`.
//!
//! A background thread reads lines into a buffer; the offset
//! `{"lines": N}` counts the lines received. Committed lines are released.
//! After a restart the lines of the new connection are numbered after the
//! checkpoint's last offset.

use std::io::{BufRead, BufReader};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow::array::{ArrayRef, StringArray, TimestampMicrosecondArray};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use serde_json::json;

use super::{now_ms, Options};
use crate::engine::source::{Offset, ReadBatch, Source, SourceContext};
use crate::error::{Error, Result};

#[derive(Debug, Default)]
struct Buffer {
    /// Lines `base ..` of the connection (index in the connection), with
    /// their receive time (µs).
    lines: Vec<(String, i64)>,
    /// Connection index of `lines[0]`.
    base: u64,
    /// Lines received on this connection.
    received: u64,
    /// Set when the connection ended with an error.
    error: Option<String>,
    closed: bool,
}

/// The socket source (see the module documentation).
#[derive(Debug)]
pub struct SocketSource {
    flow: String,
    addr: String,
    schema: SchemaRef,
    buffer: Arc<Mutex<Buffer>>,
    /// Offset of the connection's first line: the checkpoint's offset when
    /// the query restarted, else 0.
    origin: Option<u64>,
    reported_error: bool,
}

impl SocketSource {
    /// Connects to `host:port` and starts reading lines in a background thread.
    pub fn open(schema: SchemaRef, options: Options, ctx: SourceContext) -> Result<SocketSource> {
        let host = options
            .get("host")
            .unwrap_or("localhost")
            .trim()
            .to_string();
        let port_text = options.get("port").ok_or_else(|| {
            Error::runtime_with_help(
                "socket source needs the option `port`".to_string(),
                ".option(\"host\", \"localhost\").option(\"port\", 9999)",
            )
        })?;
        let port: u16 = port_text.trim().parse().map_err(|_| {
            Error::runtime_with_help(
                format!("socket source option `port` must be a port number, got `{port_text}`"),
                ".option(\"port\", 9999)",
            )
        })?;
        let addr = format!("{host}:{port}");
        let connect_err = |e: std::io::Error| {
            Error::external_with_help(
                format!("cannot connect to socket source {addr}"),
                format!("start the server first (e.g. `nc -lk {port}`) or fix `host`/`port`"),
                e,
            )
        };
        let addrs: Vec<_> = addr.to_socket_addrs().map_err(connect_err)?.collect();
        let mut last_err = std::io::Error::other("no address");
        let mut stream = None;
        for a in addrs {
            match TcpStream::connect_timeout(&a, Duration::from_secs(10)) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last_err = e,
            }
        }
        let stream = stream.ok_or_else(|| connect_err(last_err))?;
        let buffer = Arc::new(Mutex::new(Buffer::default()));
        let shared = buffer.clone();
        let flow = ctx.flow.clone();
        let thread_addr = addr.clone();
        std::thread::Builder::new()
            .name(format!("socket-source-{addr}"))
            .spawn(move || {
                let mut reader = BufReader::new(stream);
                let mut line = Vec::new();
                loop {
                    line.clear();
                    match reader.read_until(b'\n', &mut line) {
                        Ok(0) => {
                            let mut b = shared.lock().unwrap_or_else(|e| e.into_inner());
                            b.closed = true;
                            tracing::info!(flow = %flow, "socket source {thread_addr}: connection closed");
                            break;
                        }
                        Ok(_) => {
                            while matches!(line.last(), Some(b'\n' | b'\r')) {
                                line.pop();
                            }
                            let text = String::from_utf8_lossy(&line).into_owned();
                            let ts = now_ms() * 1000;
                            let mut b = shared.lock().unwrap_or_else(|e| e.into_inner());
                            b.lines.push((text, ts));
                            b.received += 1;
                        }
                        Err(e) => {
                            let mut b = shared.lock().unwrap_or_else(|e| e.into_inner());
                            b.error = Some(e.to_string());
                            b.closed = true;
                            break;
                        }
                    }
                }
            })
            .map_err(|e| Error::runtime(format!("cannot start the socket reader: {e}")))?;
        Ok(SocketSource {
            flow: ctx.flow,
            addr,
            schema,
            buffer,
            origin: None,
            reported_error: false,
        })
    }

    fn parse_offset(&self, o: &Offset) -> Result<u64> {
        o.get("lines")
            .and_then(|v| v.as_u64())
            .or_else(|| o.as_u64())
            .ok_or_else(|| {
                Error::runtime_with_help(
                    format!(
                        "offset `{o}` is not a socket source offset (expected {{\"lines\": N}})"
                    ),
                    "the checkpoint belongs to a different query: use a new checkpoint location",
                )
            })
    }

    fn origin(&mut self, start: Option<u64>) -> u64 {
        *self.origin.get_or_insert(start.unwrap_or(0))
    }
}

impl Source for SocketSource {
    fn describe(&self) -> String {
        format!("socket source {}", self.addr)
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn latest_offset(&mut self, start: Option<&Offset>) -> Result<Option<Offset>> {
        let start = start.map(|o| self.parse_offset(o)).transpose()?;
        let origin = self.origin(start);
        let b = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
        if let (Some(e), false) = (&b.error, self.reported_error) {
            let e = e.clone();
            drop(b);
            self.reported_error = true;
            tracing::warn!(flow = %self.flow, "socket source {}: connection failed: {e}", self.addr);
            return Ok(None);
        }
        let end = origin + b.received;
        if end <= start.unwrap_or(0) {
            return Ok(None);
        }
        Ok(Some(json!({ "lines": end })))
    }

    fn read(&mut self, start: Option<&Offset>, end: &Offset) -> Result<ReadBatch> {
        let from = start.map(|o| self.parse_offset(o)).transpose()?;
        let origin = self.origin(from);
        let from = from.unwrap_or(0);
        let to = self.parse_offset(end)?;
        let b = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
        // Connection indexes of the range still in the buffer.
        let lo = from.max(origin + b.base) - origin;
        let hi = to.saturating_sub(origin).min(b.received);
        if from < origin + b.base {
            tracing::warn!(
                flow = %self.flow,
                "socket source {}: lines {}..{} were lost (the socket source is not fault tolerant)",
                self.addr,
                from,
                (origin + b.base).min(to)
            );
        }
        if hi <= lo {
            return Ok(ReadBatch::default());
        }
        let rows = &b.lines[(lo - b.base) as usize..(hi - b.base) as usize];
        let mut cols: Vec<ArrayRef> = Vec::new();
        for f in self.schema.fields() {
            let col: ArrayRef = if f.name().eq_ignore_ascii_case("timestamp") {
                let tz = match f.data_type() {
                    DataType::Timestamp(_, tz) => tz.clone(),
                    _ => None,
                };
                Arc::new(
                    TimestampMicrosecondArray::from_iter_values(rows.iter().map(|r| r.1))
                        .with_timezone_opt(tz),
                )
            } else {
                Arc::new(StringArray::from_iter_values(
                    rows.iter().map(|r| r.0.as_str()),
                ))
            };
            let col = if col.data_type() == f.data_type() {
                col
            } else {
                cast_with_options(&col, f.data_type(), &CastOptions::default())?
            };
            cols.push(col);
        }
        let bytes = rows.iter().map(|r| r.0.len() as u64 + 1).sum();
        Ok(ReadBatch {
            batches: vec![RecordBatch::try_new(self.schema.clone(), cols)?],
            bytes,
            malformed_dropped: 0,
            corrupt_files_skipped: 0,
            rows_filtered: 0,
        })
    }

    fn commit(&mut self, end: &Offset) -> Result<()> {
        let to = self.parse_offset(end)?;
        let origin = self.origin.unwrap_or(0);
        let mut b = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
        let upto = to.saturating_sub(origin).min(b.received);
        if upto > b.base {
            let n = (upto - b.base) as usize;
            b.lines.drain(..n);
            b.base = upto;
        }
        Ok(())
    }

    fn replayable(&self) -> bool {
        false
    }
}
