//! The partial aggregation of a batch grouped by a time key (a window's
//! start), alone or with other keys, faster than a general grouping.
//!
//! DataFusion's grouping hashes (and compares) every key column of every
//! row. Grouping by a window almost always pairs a 64-bit time key with a
//! few low-cardinality keys (a service, a level), or has no other key, and
//! event times arrive mostly in order. Here the other keys are interned alone
//! (DataFusion's group values, one id per distinct combination; a single
//! string key through [`StringIds`]' cache first, or, dictionary-encoded,
//! through [`DictionaryIds`]' ids of its dictionary), and each
//! row's group is found from (time key, other id): first in a one-entry
//! cache per other id (the last time key seen with it, which holds while
//! the rows stay in one window), else in a hash map. The aggregates are
//! DataFusion's own group accumulators, updated with those group indices,
//! so the partial state rows are the same as `AggregateExec` in partial mode
//! produces (their order may differ); when every aggregate is `count(*)`,
//! rows are counted here instead, in four interleaved tallies (an increment
//! need not wait for the one before it, as one group's rows in a row would
//! make it), and the counts merged into the accumulators once.
//! With no other key, every row has other id 0. Rows with a null time key
//! fall back to the general path (the caller's).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, UInt32Array};
use arrow::datatypes::{DataType, Int32Type, Int64Type, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::common::HashMap;
use datafusion::logical_expr::EmitTo;
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::expressions::{Column, Literal};
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_plan::aggregates::group_values::{new_group_values, GroupValues};
use datafusion::physical_plan::aggregates::order::GroupOrdering;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::ExecutionPlan;

use super::dictionary_ids::{is_string_dictionary, DictionaryIds};
use super::leaf::SlotExec;
use super::string_ids::StringIds;
use super::watermark::timestamp_micros;
use super::OpFailure;

/// How a partial aggregation grouped by a time key runs, when it can.
#[derive(Debug)]
pub(crate) struct TimeKeyed {
    /// The slot's projection (columns of the prepared batch the aggregate reads).
    projection: Option<Vec<usize>>,
    /// Each grouping key's column in the projected batch.
    key_columns: Vec<usize>,
    /// Which key is the time key.
    time_key: usize,
    aggs: Vec<Arc<AggregateFunctionExpr>>,
    /// The partial aggregation's output schema (keys, then states).
    output_schema: SchemaRef,
    /// The schema of the other keys (no field: the time key is the only
    /// one, and every row has other id 0).
    others_schema: SchemaRef,
    /// The tumbling window whose start is the time key, computed here from
    /// the event time (see [`with_inline_window`](Self::with_inline_window)).
    window: Option<InlineWindow>,
    /// Every aggregate counts rows (`count(*)`): rows are counted per group
    /// here (see [`count_rows`]), the accumulators merge the counts once.
    counts_rows: bool,
}

/// A tumbling window: each event time `t` falls in the window starting at
/// `t - (t - start_us) mod slide_us`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InlineWindow {
    /// The event-time column in the prepared rows (an input column).
    pub time_index: usize,
    pub start_us: i64,
    pub slide_us: i64,
}

impl TimeKeyed {
    /// The fast path for `partial` (an `AggregateExec` in partial mode over
    /// a slot), or None when it does not apply: a grouping set, an
    /// aggregate filter, a key that is not a plain column, or no 64-bit
    /// time key.
    pub(crate) fn new(partial: &AggregateExec) -> Option<TimeKeyed> {
        let slot = partial.input().downcast_ref::<SlotExec>()?;
        let group_by = partial.group_expr();
        if !group_by.is_single() || partial.filter_expr().iter().any(|f| f.is_some()) {
            return None;
        }
        let key_columns: Vec<usize> = group_by
            .expr()
            .iter()
            .map(|(e, _)| e.downcast_ref::<Column>().map(|c| c.index()))
            .collect::<Option<_>>()?;
        if key_columns.is_empty() {
            return None;
        }
        let input_schema = partial.input().schema();
        let time_key = key_columns
            .iter()
            .position(|&c| matches!(input_schema.field(c).data_type(), DataType::Timestamp(..)))?;
        let others_schema = Arc::new(arrow::datatypes::Schema::new(
            key_columns
                .iter()
                .enumerate()
                .filter(|(k, _)| *k != time_key)
                .map(|(_, &c)| input_schema.field(c).clone())
                .collect::<Vec<_>>(),
        ));
        let aggs = partial.aggr_expr().to_vec();
        let counts_rows = !aggs.is_empty() && aggs.iter().all(|a| is_row_count(a));
        Some(TimeKeyed {
            projection: slot.projection().map(|p| p.to_vec()),
            key_columns,
            time_key,
            aggs,
            output_schema: partial.schema(),
            others_schema,
            window: None,
            counts_rows,
        })
    }

    /// Computes the time key from the event time as `window`'s start, when
    /// the time key is the prepared column `window_column` and no aggregate
    /// reads it: the caller then need not fill that column (see
    /// [`has_inline_window`](Self::has_inline_window)). Unchanged otherwise.
    pub(crate) fn with_inline_window(mut self, window_column: usize, window: InlineWindow) -> Self {
        let key = self.key_columns[self.time_key];
        if self.prepared_index(key) == Some(window_column)
            && !self.aggregates_read(key)
            && window.slide_us > 0
        {
            self.window = Some(window);
        }
        self
    }

    /// True when an aggregate (an argument or an ordering) reads column
    /// `column` of the projected rows.
    fn aggregates_read(&self, column: usize) -> bool {
        self.aggs.iter().any(|agg| {
            let all = agg.all_expressions();
            all.args
                .iter()
                .chain(&all.order_by_exprs)
                .any(|e| collect_columns(e).iter().any(|c| c.index() == column))
        })
    }

    /// True when [`run`](Self::run) computes the window start itself: the
    /// prepared rows' window column may hold anything (nulls).
    pub(crate) fn has_inline_window(&self) -> bool {
        self.window.is_some()
    }

    /// The column of the prepared rows (before the slot's projection) that
    /// is the only key beside the time key, when it is a string column no
    /// aggregate reads: [`run`](Self::run) takes it dictionary-encoded too.
    pub(crate) fn dictionary_key(&self) -> Option<usize> {
        let [a, b] = self.key_columns[..] else {
            return None;
        };
        let key = if self.time_key == 0 { b } else { a };
        if self.others_schema.field(0).data_type() != &DataType::Utf8 {
            return None;
        }
        if self.aggregates_read(key) {
            return None;
        }
        self.prepared_index(key)
    }

    /// The column of the prepared rows behind column `column` of the
    /// projected rows.
    fn prepared_index(&self, column: usize) -> Option<usize> {
        match &self.projection {
            Some(p) => p.get(column).copied(),
            None => Some(column),
        }
    }

    /// The partial aggregation of `batches` (prepared rows), or None when a
    /// batch has a null time key (then the general path runs).
    pub(crate) fn run(
        &self,
        batches: &[RecordBatch],
    ) -> std::result::Result<Option<RecordBatch>, OpFailure> {
        // No other key: every row has other id 0.
        let mut others = if self.others_schema.fields().is_empty() {
            None
        } else {
            Some(new_group_values(
                self.others_schema.clone(),
                &GroupOrdering::None,
            )?)
        };
        let mut accs = self
            .aggs
            .iter()
            .map(super::accumulator::accumulator)
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        // (time key, other id) of each group, the map back, and per other
        // id the last (time key, group) seen.
        let mut groups: Vec<(i64, u32)> = Vec::new();
        let mut index: HashMap<(i64, u32), u32> = HashMap::new();
        let mut last: Vec<(i64, u32)> = Vec::new();
        let mut other_ids: Vec<usize> = Vec::new();
        let mut strings = StringIds::new();
        let mut dictionary = DictionaryIds::default();
        let mut group_ids: Vec<usize> = Vec::new();
        // Rows per group, when every aggregate counts rows.
        let mut row_counts: Option<Tallies> = self.counts_rows.then(Vec::new);
        let mut literals: Vec<Vec<Option<ArrayRef>>> = self
            .aggs
            .iter()
            .map(|a| vec![None; a.expressions().len()])
            .collect();
        for full in batches {
            let batch = match &self.projection {
                Some(p) => full.project(p)?,
                None => full.clone(),
            };
            let n = batch.num_rows();
            let time: Int64Array = match &self.window {
                Some(w) => {
                    let t = full.column(w.time_index);
                    if t.null_count() > 0 {
                        return Ok(None);
                    }
                    timestamp_micros(t).ok_or_else(|| {
                        OpFailure("the window's time column is not a timestamp".into())
                    })?
                }
                None => {
                    let t = batch.column(self.key_columns[self.time_key]);
                    if t.null_count() > 0 {
                        return Ok(None);
                    }
                    arrow::compute::cast(t, &DataType::Int64)?
                        .as_primitive::<Int64Type>()
                        .clone()
                }
            };
            let cols: Vec<ArrayRef> = self
                .key_columns
                .iter()
                .enumerate()
                .filter(|(k, _)| *k != self.time_key)
                .map(|(_, &c)| batch.column(c).clone())
                .collect();
            let others_len = match others.as_mut() {
                None => {
                    // Only ever zeros: grown, never rewritten.
                    if other_ids.len() < n {
                        other_ids.resize(n, 0);
                    }
                    1
                }
                Some(others) => {
                    intern_others(
                        &cols,
                        &self.others_schema,
                        others.as_mut(),
                        &mut strings,
                        &mut dictionary,
                        &mut other_ids,
                    )?;
                    others.len()
                }
            };
            // Every id interned so far has its slot in `last`.
            if others_len > last.len() {
                last.resize(others_len, (0, u32::MAX));
            }
            let mut found = Found {
                index: &mut index,
                groups: &mut groups,
            };
            // The first `n` slots are written below: zeroed only when the
            // buffer grows, never shrunk.
            if group_ids.len() < n {
                group_ids.resize(n, 0);
            }
            let group_ids = &mut group_ids[..n];
            let times = &time.values()[..];
            match self.window {
                Some(w) => {
                    // Event times come mostly in order: the last window,
                    // [lo, hi), is reused while it holds, saving a division
                    // per row.
                    let (mut lo, mut hi) = (0i64, i64::MIN);
                    let start = move |t: i64| {
                        if t < lo || t >= hi {
                            lo = t - (t - w.start_us).rem_euclid(w.slide_us);
                            hi = lo.saturating_add(w.slide_us);
                        }
                        lo
                    };
                    assign(times, &other_ids, start, &mut last, &mut found, group_ids)?
                }
                None => assign(times, &other_ids, |t| t, &mut last, &mut found, group_ids)?,
            }
            if let Some(tallies) = row_counts.as_mut() {
                tallies.resize(groups.len(), [0; 4]);
                count_rows(group_ids, tallies)?;
                continue;
            }
            for ((acc, agg), constants) in accs.iter_mut().zip(&self.aggs).zip(&mut literals) {
                let values = agg
                    .expressions()
                    .iter()
                    .zip(constants.iter_mut())
                    .map(|(e, constant)| match constant {
                        // A literal (`count(*)`'s): one array, sliced per batch.
                        Some(c) if c.len() >= n => Ok(c.slice(0, n)),
                        _ => {
                            let v = e.evaluate(&batch)?.into_array(n)?;
                            if e.downcast_ref::<Literal>().is_some() {
                                *constant = Some(v.clone());
                            }
                            Ok(v)
                        }
                    })
                    .collect::<datafusion::error::Result<Vec<_>>>()?;
                acc.update_batch(&values, group_ids, None, groups.len())?;
            }
        }
        if let Some(tallies) = row_counts {
            // Each count's state is its groups' counts: merged once.
            let all: Vec<usize> = (0..tallies.len()).collect();
            let state: ArrayRef = Arc::new(Int64Array::from_iter_values(
                tallies.iter().map(|t| t.iter().sum::<i64>()),
            ));
            for acc in accs.iter_mut() {
                acc.merge_batch(std::slice::from_ref(&state), &all, all.len())?;
            }
        }
        // Keys in the grouping's order, then each aggregate's state.
        let time_type = self.output_schema.field(self.time_key).data_type().clone();
        let mut time_column: Option<ArrayRef> = Some(arrow::compute::cast(
            &Int64Array::from_iter_values(groups.iter().map(|g| g.0)),
            &time_type,
        )?);
        let ids = UInt32Array::from_iter_values(groups.iter().map(|g| g.1));
        let other_values = match others.as_mut() {
            Some(others) => others.emit(EmitTo::All)?,
            None => Vec::new(),
        };
        let mut other_columns = other_values
            .iter()
            .map(|v| arrow::compute::take(v, &ids, None))
            .collect::<std::result::Result<Vec<_>, _>>()?
            .into_iter();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.output_schema.fields().len());
        for k in 0..self.key_columns.len() {
            let column = if k == self.time_key {
                time_column.take()
            } else {
                other_columns.next()
            };
            columns.push(column.ok_or_else(|| OpFailure("a grouping key is missing".into()))?);
        }
        for acc in accs.iter_mut() {
            columns.extend(acc.state(EmitTo::All)?);
        }
        Ok(Some(RecordBatch::try_new_with_options(
            self.output_schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(groups.len())),
        )?))
    }
}

/// Interns the other keys `cols` of one batch (in the types of
/// `others_schema`, a single string column through `strings` or, when
/// dictionary-encoded, `dictionary` first) into `others`; their ids go to
/// `ids`.
fn intern_others(
    cols: &[ArrayRef],
    others_schema: &SchemaRef,
    others: &mut dyn GroupValues,
    strings: &mut StringIds,
    dictionary: &mut DictionaryIds,
    ids: &mut Vec<usize>,
) -> std::result::Result<(), OpFailure> {
    ids.clear();
    match cols {
        [one] if one.data_type() == &DataType::Utf8 => {
            strings.intern(one.as_string::<i32>(), others, ids)?
        }
        [one] if is_string_dictionary(one.data_type()) => {
            dictionary.intern(one.as_dictionary::<Int32Type>(), others, ids)?
        }
        _ => {
            // Keys in the types the group values were made for.
            let cols = cols
                .iter()
                .zip(others_schema.fields())
                .map(|(c, f)| {
                    if c.data_type() == f.data_type() {
                        Ok(c.clone())
                    } else {
                        arrow::compute::cast(c, f.data_type())
                    }
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            others.intern(&cols, ids)?
        }
    }
    Ok(())
}

/// True when `agg` counts rows: `count` of non-null literals (`count(*)`,
/// `count(1)`), not distinct, its state one `Int64` count.
fn is_row_count(agg: &AggregateFunctionExpr) -> bool {
    let literals = agg.expressions();
    agg.fun().name() == "count"
        && !agg.is_distinct()
        && agg.order_bys().is_empty()
        && !literals.is_empty()
        && literals.iter().all(|e| {
            e.downcast_ref::<Literal>()
                .is_some_and(|l| !l.value().is_null())
        })
        && agg
            .state_fields()
            .is_ok_and(|f| f.len() == 1 && f[0].data_type() == &DataType::Int64)
}

/// Tallies per group of the rows counted so far: four per group, row `i`
/// counted in tally `i % 4`, so that an increment need not wait for the one
/// before it (as one group's rows in a row would make it) and rows
/// alternating between groups cost no mispredicted branch.
type Tallies = Vec<[i64; 4]>;

/// Counts the rows of each group in `group_ids` into `tallies` (one entry
/// per group).
fn count_rows(group_ids: &[usize], tallies: &mut Tallies) -> std::result::Result<(), OpFailure> {
    let missing = || OpFailure("a row's group has no count".into());
    let mut chunks = group_ids.chunks_exact(4);
    for chunk in &mut chunks {
        for (lane, &g) in chunk.iter().enumerate() {
            tallies.get_mut(g).ok_or_else(missing)?[lane] += 1;
        }
    }
    for &g in chunks.remainder() {
        tallies.get_mut(g).ok_or_else(missing)?[0] += 1;
    }
    Ok(())
}

/// The groups found so far: each (time key, other id) and the map back.
struct Found<'a> {
    index: &'a mut HashMap<(i64, u32), u32>,
    groups: &'a mut Vec<(i64, u32)>,
}

impl Found<'_> {
    /// The group of (time key `t`, other id `id`), made if new; recorded
    /// in `last` (the id's last time key and group).
    #[cold]
    #[inline(never)]
    fn group(&mut self, t: i64, id: usize, last: &mut (i64, u32)) -> usize {
        let key = (t, id as u32);
        let groups = &mut *self.groups;
        let g = *self.index.entry(key).or_insert_with(|| {
            groups.push(key);
            (groups.len() - 1) as u32
        });
        *last = (t, g);
        g as usize
    }
}

/// A failure for an other id without its slot in `last` (never: the slots
/// are made for every interned id first).
fn missing_slot() -> OpFailure {
    OpFailure("a grouping key id has no slot".into())
}

/// Sets `out[i]` to the group of row `i`: time key `key(times[i])` (the
/// time itself, or its window's start), other id `ids[i]`. `last` holds per
/// other id the last (time key, group) seen: while rows stay in one window,
/// that is the group.
fn assign(
    times: &[i64],
    ids: &[usize],
    mut key: impl FnMut(i64) -> i64,
    last: &mut [(i64, u32)],
    found: &mut Found,
    out: &mut [usize],
) -> std::result::Result<(), OpFailure> {
    for ((slot, &t), &id) in out.iter_mut().zip(times).zip(ids) {
        let t = key(t);
        let l = last.get_mut(id).ok_or_else(missing_slot)?;
        *slot = if l.1 != u32::MAX && l.0 == t {
            l.1 as usize
        } else {
            found.group(t, id, l)
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The tallies add up to what counting row by row gives.
        #[test]
        fn tallies_count_every_row_once(
            ids in proptest::collection::vec(0usize..6, 0..300),
            before in proptest::collection::vec(0i64..5, 6),
        ) {
            let mut tallies: Tallies = before.iter().map(|&b| [b, 0, 0, 0]).collect();
            count_rows(&ids, &mut tallies).unwrap();
            let counts: Vec<i64> = tallies.iter().map(|t| t.iter().sum()).collect();
            let mut want = before;
            for &g in &ids {
                want[g] += 1;
            }
            prop_assert_eq!(counts, want);
        }
    }

    #[test]
    fn a_group_without_its_tally_is_an_error() {
        // In a chunk of four, and in the rows after the last chunk.
        for ids in [vec![0, 1, 2, 0], vec![0, 1, 0, 1, 2]] {
            let mut tallies: Tallies = vec![[0; 4]; 2];
            let err = count_rows(&ids, &mut tallies).unwrap_err();
            assert_eq!(err.0, "a row's group has no count");
        }
    }
}
