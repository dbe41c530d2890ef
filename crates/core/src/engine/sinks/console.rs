//! The console sink: prints each batch like Spark's console sink, a
//! banner then the rows as `Dataset.show()` lays them out.
//!
//! ```text
//! -------------------------------------------
//! Batch: 0
//! -------------------------------------------
//! +-------+-----+
//! |service|count|
//! +-------+-----+
//! |    api|    2|
//! +-------+-----+
//!
//! ```
//!
//! Options: `numRows` (default 20; "only showing top N rows" follows when
//! there are more) and `truncate` (default `true`: cells longer than 20
//! characters are cut to 17 and `...`, and cells are right-aligned; `false`:
//! full cells, left-aligned). Cells are rendered with Arrow's display
//! formatter, in Spark's style (`null`, timestamps `2024-01-01 10:00:00`,
//! structs `{a, b}`, arrays `[1, 2]`, maps `{k -> v}`). Accepts every output
//! mode (complete mode prints the whole result each batch).

use std::io::Write;

use arrow::array::{Array, AsArray};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};

use crate::engine::connectors::builtin::NUM_ROWS_HELP;
use crate::engine::sink::{Sink, SinkContext, SinkWrite};
use crate::error::{Error, Result};
use crate::formats::OutputMode;
use crate::options::Options;

/// Spark's cell width limit when `truncate` is on.
const TRUNCATE_WIDTH: usize = 20;

/// A sink printing batches to a writer (standard output by default).
pub struct ConsoleSink {
    name: String,
    num_rows: usize,
    truncate: usize,
    out: Box<dyn Write + Send>,
}

impl ConsoleSink {
    /// Opens a console sink printing to standard output.
    pub fn open(ctx: &SinkContext) -> Result<ConsoleSink> {
        Self::with_writer(ctx, Box::new(std::io::stdout()))
    }

    /// Opens a console sink printing to `out` (tests capture output this way).
    pub fn with_writer(ctx: &SinkContext, out: Box<dyn Write + Send>) -> Result<ConsoleSink> {
        let options = Options::for_sink(&ctx.options, &ctx.name);
        let num_rows = options
            .count_with_help("numRows", Some(NUM_ROWS_HELP))?
            .map_or(20, |n| n as usize);
        let truncate = if options.bool("truncate", true)? {
            TRUNCATE_WIDTH
        } else {
            0
        };
        Ok(ConsoleSink {
            name: ctx.name.clone(),
            num_rows,
            truncate,
            out,
        })
    }
}

impl Sink for ConsoleSink {
    fn describe(&self) -> String {
        format!("console sink `{}`", self.name)
    }

    fn add_batch(
        &mut self,
        batch_id: u64,
        batches: Vec<RecordBatch>,
        _mode: OutputMode,
    ) -> Result<SinkWrite> {
        let rows = self.print(&format!("Batch: {batch_id}"), &batches)?;
        Ok(SinkWrite {
            rows,
            ..SinkWrite::default()
        })
    }

    fn supports_real_time(&self) -> bool {
        true
    }

    /// Prints the rows a real-time step produced, headed `Epoch: N`.
    fn add_rows(
        &mut self,
        epoch: u64,
        batches: Vec<RecordBatch>,
        _mode: OutputMode,
    ) -> Result<u64> {
        if batches.iter().all(|b| b.num_rows() == 0) {
            return Ok(0);
        }
        self.print(&format!("Epoch: {epoch}"), &batches)
    }
}

impl ConsoleSink {
    /// Prints a header line, then the rows as a table; returns the rows.
    fn print(&mut self, title: &str, batches: &[RecordBatch]) -> Result<u64> {
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        let mut text = String::new();
        text.push_str("-------------------------------------------\n");
        text.push_str(title);
        text.push('\n');
        text.push_str("-------------------------------------------\n");
        text.push_str(&show_string(batches, self.num_rows, self.truncate)?);
        text.push('\n');
        let name = self.name.clone();
        let io_err = |e: std::io::Error| {
            Error::runtime(format!(
                "sink `{name}`: printing to the console failed: {e}"
            ))
        };
        self.out.write_all(text.as_bytes()).map_err(io_err)?;
        self.out.flush().map_err(io_err)?;
        Ok(rows as u64)
    }
}

/// The rows of `batches` laid out like Spark's `Dataset.showString(numRows,
/// truncate)`: `truncate` 0 means no truncation (left-aligned cells),
/// otherwise the maximum cell width (right-aligned cells). Ends with a
/// newline. With no batches there are no columns: an empty table `++`.
pub fn show_string(batches: &[RecordBatch], num_rows: usize, truncate: usize) -> Result<String> {
    let header: Vec<String> = match batches.first() {
        Some(b) => b
            .schema()
            .fields()
            .iter()
            .map(|f| truncate_cell(escape_meta(f.name()), truncate))
            .collect(),
        None => Vec::new(),
    };
    let total: usize = batches.iter().map(|b| b.num_rows()).sum();
    let mut rows: Vec<Vec<String>> = Vec::new();
    'outer: for batch in batches {
        for r in 0..batch.num_rows() {
            if rows.len() >= num_rows {
                break 'outer;
            }
            let mut row = Vec::with_capacity(batch.num_columns());
            for col in batch.columns() {
                row.push(truncate_cell(
                    escape_meta(&cell(col.as_ref(), r)?),
                    truncate,
                ));
            }
            rows.push(row);
        }
    }
    let mut widths: Vec<usize> = vec![3; header.len()];
    for row in std::iter::once(&header).chain(rows.iter()) {
        for (i, c) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(half_width(c));
            }
        }
    }
    let pad = |c: &str, w: usize| -> String {
        let fill = " ".repeat(w.saturating_sub(half_width(c)));
        if truncate > 0 {
            format!("{fill}{c}")
        } else {
            format!("{c}{fill}")
        }
    };
    let mut sep = String::from("+");
    for w in &widths {
        sep.push_str(&"-".repeat(*w));
        sep.push('+');
    }
    sep.push('\n');
    let line = |row: &[String]| -> String {
        let mut s = String::from("|");
        for (c, w) in row.iter().zip(&widths) {
            s.push_str(&pad(c, *w));
            s.push('|');
        }
        s.push('\n');
        s
    };
    let mut out = sep.clone();
    out.push_str(&line(&header));
    out.push_str(&sep);
    for row in &rows {
        out.push_str(&line(row));
    }
    out.push_str(&sep);
    if total > num_rows {
        let word = if num_rows == 1 { "row" } else { "rows" };
        out.push_str(&format!("only showing top {num_rows} {word}\n"));
    }
    Ok(out)
}

/// Display width as Spark's `Utils.stringHalfWidth` counts it: full-width
/// (East Asian) characters take two columns.
fn half_width(s: &str) -> usize {
    s.chars()
        .map(|c| {
            let full = matches!(c as u32,
                0x1100..=0x115F | 0x2E80..=0xA4CF | 0xAC00..=0xD7A3 | 0xF900..=0xFAFF
                | 0xFE10..=0xFE19 | 0xFE30..=0xFE6F | 0xFF00..=0xFF60 | 0xFFE0..=0xFFE6);
            if full {
                2
            } else {
                1
            }
        })
        .sum()
}

fn truncate_cell(s: String, truncate: usize) -> String {
    if truncate == 0 || s.chars().count() <= truncate {
        return s;
    }
    if truncate < 4 {
        s.chars().take(truncate).collect()
    } else {
        let mut t: String = s.chars().take(truncate - 3).collect();
        t.push_str("...");
        t
    }
}

/// Spark escapes control characters in `show()` output.
fn escape_meta(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0C}' => out.push_str("\\f"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0B}' => out.push_str("\\v"),
            '\u{07}' => out.push_str("\\a"),
            c => out.push(c),
        }
    }
    out
}

/// One cell in Spark's `show()` style.
fn cell(array: &dyn Array, row: usize) -> Result<String> {
    if array.is_null(row) {
        return Ok("null".to_string());
    }
    Ok(match array.data_type() {
        DataType::Struct(_) => {
            let s = array.as_struct();
            let parts = s
                .columns()
                .iter()
                .map(|c| cell(c.as_ref(), row))
                .collect::<Result<Vec<_>>>()?;
            format!("{{{}}}", parts.join(", "))
        }
        DataType::List(_) => list_cell(&array.as_list::<i32>().value(row))?,
        DataType::LargeList(_) => list_cell(&array.as_list::<i64>().value(row))?,
        DataType::Map(_, _) => {
            let m = array.as_map();
            let entries = m.value(row);
            let (keys, values) = (entries.column(0), entries.column(1));
            let parts = (0..entries.len())
                .map(|i| {
                    Ok(format!(
                        "{} -> {}",
                        cell(keys.as_ref(), i)?,
                        cell(values.as_ref(), i)?
                    ))
                })
                .collect::<Result<Vec<_>>>()?;
            format!("{{{}}}", parts.join(", "))
        }
        DataType::Binary => hex(array.as_binary::<i32>().value(row)),
        DataType::LargeBinary => hex(array.as_binary::<i64>().value(row)),
        _ => {
            let opts = FormatOptions::default()
                .with_null("null")
                .with_timestamp_format(Some("%Y-%m-%d %H:%M:%S%.f"))
                .with_timestamp_tz_format(Some("%Y-%m-%d %H:%M:%S%.f"));
            ArrayFormatter::try_new(array, &opts)?
                .value(row)
                .to_string()
        }
    })
}

fn list_cell(values: &dyn Array) -> Result<String> {
    let parts = (0..values.len())
        .map(|i| cell(values, i))
        .collect::<Result<Vec<_>>>()?;
    Ok(format!("[{}]", parts.join(", ")))
}

fn hex(bytes: &[u8]) -> String {
    let parts: Vec<String> = bytes.iter().map(|b| format!("{b:02X}")).collect();
    format!("[{}]", parts.join(" "))
}
