//! The applier against a model of the target (a map from the change set's
//! match columns to rows): the documented worked example, out-of-order
//! events, deletes, truncates, restarts, and property tests over random
//! feeds split into random batches.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use proptest::prelude::*;

use super::{CdcApplier, CdcFlow};
use crate::cdc::{AutoCdc, DELETE_COLUMN, SEQUENCE_COLUMN, TRUNCATE_COLUMN};
use crate::engine::sink::{ChangeSet, CHANGE_DELETES};

/// One change event: (id, name, city, operation, sequence).
type Ev = (
    i64,
    Option<&'static str>,
    Option<&'static str>,
    &'static str,
    Option<i64>,
);

fn feed_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("city", DataType::Utf8, true),
        Field::new("operation", DataType::Utf8, true),
        Field::new("seq", DataType::Int64, true),
        Field::new(SEQUENCE_COLUMN, DataType::Int64, true),
        Field::new(DELETE_COLUMN, DataType::Boolean, false),
        Field::new(TRUNCATE_COLUMN, DataType::Boolean, false),
    ]))
}

/// The rows the flow's query gives for `events` (the delete condition is
/// `operation = 'DELETE'`, the truncate condition `operation = 'TRUNCATE'`).
fn feed(events: &[Ev]) -> RecordBatch {
    let id: Vec<Option<i64>> = events
        .iter()
        .map(|e| (e.3 != "TRUNCATE" && e.0 >= 0).then_some(e.0))
        .collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(id)),
        Arc::new(StringArray::from(
            events.iter().map(|e| e.1).collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            events.iter().map(|e| e.2).collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            events.iter().map(|e| Some(e.3)).collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            events.iter().map(|e| e.4).collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            events.iter().map(|e| e.4).collect::<Vec<_>>(),
        )),
        Arc::new(BooleanArray::from(
            events.iter().map(|e| e.3 == "DELETE").collect::<Vec<_>>(),
        )),
        Arc::new(BooleanArray::from(
            events.iter().map(|e| e.3 == "TRUNCATE").collect::<Vec<_>>(),
        )),
    ];
    RecordBatch::try_new(feed_schema(), columns).unwrap()
}

fn declaration(scd: u8) -> AutoCdc {
    AutoCdc::new("customers", "customers_cdc")
        .keys(["id"])
        .sequence_by("seq")
        .apply_as_deletes("operation = 'DELETE'")
        .except_column_list(["operation", "seq"])
        .stored_as_scd_type(scd)
}

/// The target as the change sets left it: rows by their match columns,
/// every column formatted.
#[derive(Default)]
struct Model {
    rows: BTreeMap<Vec<String>, Vec<String>>,
    columns: Vec<String>,
}

fn format_row(batch: &RecordBatch, row: usize, columns: &[usize]) -> Vec<String> {
    let options = FormatOptions::default().with_null("null");
    columns
        .iter()
        .map(|&c| {
            ArrayFormatter::try_new(batch.column(c).as_ref(), &options)
                .unwrap()
                .value(row)
                .to_string()
        })
        .collect()
}

impl Model {
    fn apply(&mut self, changes: &ChangeSet) {
        let schema = changes.rows.schema();
        let flag = schema.index_of(CHANGE_DELETES).unwrap();
        let on: Vec<usize> = changes
            .match_on
            .iter()
            .map(|c| schema.index_of(c).unwrap())
            .collect();
        let values: Vec<usize> = (0..flag).collect();
        self.columns = values
            .iter()
            .map(|&i| schema.field(i).name().clone())
            .collect();
        let deletes = changes
            .rows
            .column(flag)
            .as_any()
            .downcast_ref::<BooleanArray>()
            .unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for r in 0..changes.rows.num_rows() {
            let key = format_row(&changes.rows, r, &on);
            assert!(seen.insert(key.clone()), "two changes match {key:?}");
            if deletes.value(r) {
                self.rows.remove(&key);
            } else {
                if changes.inserts_only {
                    assert!(
                        !self.rows.contains_key(&key),
                        "inserts_only, but {key:?} is held"
                    );
                }
                self.rows.insert(key, format_row(&changes.rows, r, &values));
            }
        }
    }

    /// Rows as "v1|v2|...", sorted.
    fn lines(&self) -> Vec<String> {
        let mut v: Vec<String> = self.rows.values().map(|r| r.join("|")).collect();
        v.sort();
        v
    }
}

struct Run {
    dir: tempfile::TempDir,
    cdc: AutoCdc,
    applier: CdcApplier,
    model: Model,
    next: u64,
}

impl Run {
    fn new(cdc: AutoCdc) -> Run {
        let dir = tempfile::tempdir().unwrap();
        let applier = open(&cdc, dir.path(), None, None);
        Run {
            dir,
            cdc,
            applier,
            model: Model::default(),
            next: 0,
        }
    }

    fn batch(&mut self, events: &[Ev]) -> &mut Run {
        self.batch_at(events, 1_000_000)
    }

    fn batch_at(&mut self, events: &[Ev], now_ms: i64) -> &mut Run {
        let changes = self
            .applier
            .apply(self.next, &[feed(events)], now_ms)
            .unwrap();
        self.model.apply(&changes);
        self.applier.commit(self.next).unwrap();
        self.next += 1;
        self
    }

    /// A new applier loaded from the state of the last committed batch,
    /// as after a restart.
    fn restart(&mut self) -> &mut Run {
        self.applier = open(&self.cdc, self.dir.path(), self.next.checked_sub(1), None);
        self
    }

    fn lines(&self) -> Vec<String> {
        self.model.lines()
    }
}

fn open(cdc: &AutoCdc, dir: &std::path::Path, last: Option<u64>, gc: Option<&str>) -> CdcApplier {
    let schema = feed_schema();
    let layout = cdc.layout(&schema).unwrap();
    CdcApplier::open(of(cdc, &layout, &schema), &dir.into(), last, gc).unwrap()
}

fn of<'a>(cdc: &'a AutoCdc, layout: &'a crate::cdc::CdcLayout, feed: &'a SchemaRef) -> CdcFlow<'a> {
    CdcFlow {
        flow: "customers_flow",
        target: "customers",
        decl: cdc,
        layout,
        feed,
    }
}

fn s(v: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// Databricks' worked example of AUTO CDC, in arrival order.
const EXAMPLE: &[Ev] = &[
    (124, Some("Raul"), Some("Oaxaca"), "INSERT", Some(1)),
    (123, Some("Isabel"), Some("Monterrey"), "INSERT", Some(1)),
    (125, Some("Mercedes"), Some("Tijuana"), "INSERT", Some(2)),
    (126, Some("Lily"), Some("Cancun"), "INSERT", Some(2)),
    (123, None, None, "DELETE", Some(6)),
    (
        125,
        Some("Mercedes"),
        Some("Guadalajara"),
        "UPDATE",
        Some(6),
    ),
    (125, Some("Mercedes"), Some("Mexicali"), "UPDATE", Some(5)),
    (123, Some("Isabel"), Some("Chihuahua"), "UPDATE", Some(5)),
];

const EXAMPLE_SCD1: &[&str] = &[
    "124|Raul|Oaxaca",
    "125|Mercedes|Guadalajara",
    "126|Lily|Cancun",
];

const EXAMPLE_SCD2: &[&str] = &[
    "123|Isabel|Monterrey|1|5",
    "123|Isabel|Chihuahua|5|6",
    "124|Raul|Oaxaca|1|null",
    "125|Mercedes|Tijuana|2|5",
    "125|Mercedes|Mexicali|5|6",
    "125|Mercedes|Guadalajara|6|null",
    "126|Lily|Cancun|2|null",
];

#[test]
fn the_worked_example_in_one_batch() {
    let mut r = Run::new(declaration(1));
    r.batch(EXAMPLE);
    assert_eq!(r.lines(), s(EXAMPLE_SCD1));
    assert_eq!(r.model.columns, ["id", "name", "city"]);
    let mut r = Run::new(declaration(2));
    r.batch(EXAMPLE);
    assert_eq!(r.lines(), s(EXAMPLE_SCD2));
    assert_eq!(
        r.model.columns,
        ["id", "name", "city", "__START_AT", "__END_AT"]
    );
}

#[test]
fn the_worked_example_one_event_per_batch_with_restarts() {
    for scd in [1, 2] {
        let mut r = Run::new(declaration(scd));
        for (i, e) in EXAMPLE.iter().enumerate() {
            r.batch(std::slice::from_ref(e));
            if i % 3 == 2 {
                r.restart();
            }
        }
        let want = if scd == 1 { EXAMPLE_SCD1 } else { EXAMPLE_SCD2 };
        assert_eq!(r.lines(), s(want), "SCD type {scd}");
    }
}

#[test]
fn scd1_per_batch_tables_with_out_of_order_events_across_batches() {
    let mut r = Run::new(declaration(1));
    r.batch(&[
        (1, Some("a"), Some("x"), "INSERT", Some(10)),
        (2, Some("b"), Some("y"), "INSERT", Some(10)),
    ]);
    assert_eq!(r.lines(), s(&["1|a|x", "2|b|y"]));
    // Older than what the table holds: nothing changes.
    r.batch(&[(1, Some("old"), Some("x"), "UPDATE", Some(5))]);
    assert_eq!(r.lines(), s(&["1|a|x", "2|b|y"]));
    // Newer, arriving in reverse order within the batch.
    r.batch(&[
        (2, Some("b3"), Some("y"), "UPDATE", Some(13)),
        (2, Some("b2"), Some("y"), "UPDATE", Some(12)),
        (1, Some("a2"), Some("x"), "UPDATE", Some(11)),
    ]);
    assert_eq!(r.lines(), s(&["1|a2|x", "2|b3|y"]));
}

#[test]
fn scd1_a_delete_then_a_late_older_upsert_stays_deleted_and_a_newer_one_reinserts() {
    let mut r = Run::new(declaration(1));
    r.batch(&[(1, Some("a"), Some("x"), "INSERT", Some(1))]);
    r.batch(&[(1, None, None, "DELETE", Some(5))]);
    assert_eq!(r.lines(), Vec::<String>::new());
    r.batch(&[(1, Some("late"), Some("x"), "UPDATE", Some(3))]);
    assert_eq!(r.lines(), Vec::<String>::new());
    r.restart();
    r.batch(&[(1, Some("late"), Some("x"), "UPDATE", Some(4))]);
    assert_eq!(r.lines(), Vec::<String>::new());
    r.batch(&[(1, Some("again"), Some("z"), "INSERT", Some(7))]);
    assert_eq!(r.lines(), s(&["1|again|z"]));
}

#[test]
fn scd1_a_delete_arriving_before_its_insert_keeps_the_key_out() {
    let mut r = Run::new(declaration(1));
    r.batch(&[(1, None, None, "DELETE", Some(5))]);
    r.batch(&[(1, Some("a"), Some("x"), "INSERT", Some(1))]);
    assert_eq!(r.lines(), Vec::<String>::new());
}

#[test]
fn scd1_ties_an_upsert_wins_over_a_delete_and_the_later_upsert_over_an_earlier_one() {
    let mut r = Run::new(declaration(1));
    r.batch(&[
        (1, Some("a"), Some("x"), "INSERT", Some(1)),
        (1, Some("b"), Some("x"), "UPDATE", Some(1)),
        (2, Some("c"), Some("y"), "INSERT", Some(2)),
        (2, None, None, "DELETE", Some(2)),
    ]);
    assert_eq!(r.lines(), s(&["1|b|x", "2|c|y"]));
    // Across batches too: a delete at the held sequence changes nothing,
    // an upsert at it replaces the row.
    r.batch(&[
        (2, None, None, "DELETE", Some(2)),
        (1, Some("d"), Some("x"), "UPDATE", Some(1)),
    ]);
    assert_eq!(r.lines(), s(&["1|d|x", "2|c|y"]));
}

#[test]
fn scd1_duplicate_keys_within_a_batch_and_column_list() {
    let cdc = AutoCdc::new("customers", "customers_cdc")
        .keys(["id"])
        .sequence_by("seq")
        .apply_as_deletes("operation = 'DELETE'")
        .column_list(["city", "id"]);
    let mut r = Run::new(cdc);
    r.batch(&[
        (1, Some("a"), Some("x1"), "INSERT", Some(1)),
        (1, Some("a"), Some("x3"), "UPDATE", Some(3)),
        (1, Some("a"), Some("x2"), "UPDATE", Some(2)),
    ]);
    // In the feed's order: id, then city.
    assert_eq!(r.model.columns, ["id", "city"]);
    assert_eq!(r.lines(), s(&["1|x3"]));
}

#[test]
fn scd1_truncate_removes_older_rows_and_ignores_older_late_events() {
    let cdc = declaration(1).apply_as_truncates("operation = 'TRUNCATE'");
    let mut r = Run::new(cdc);
    r.batch(&[
        (1, Some("a"), Some("x"), "INSERT", Some(1)),
        (2, Some("b"), Some("y"), "INSERT", Some(9)),
    ]);
    r.batch(&[
        (-1, None, None, "TRUNCATE", Some(5)),
        (3, Some("c"), Some("z"), "INSERT", Some(6)),
    ]);
    assert_eq!(r.lines(), s(&["2|b|y", "3|c|z"]));
    r.restart();
    r.batch(&[
        (1, Some("late"), Some("x"), "UPDATE", Some(4)),
        (4, Some("d"), Some("w"), "INSERT", Some(7)),
    ]);
    assert_eq!(r.lines(), s(&["2|b|y", "3|c|z", "4|d|w"]));
}

#[test]
fn scd1_tombstones_are_forgotten_after_the_threshold() {
    let cdc = declaration(1);
    let dir = tempfile::tempdir().unwrap();
    let mut applier = open(&cdc, dir.path(), None, Some("60"));
    let mut model = Model::default();
    for (n, (events, now)) in [
        (vec![(1, Some("a"), Some("x"), "INSERT", Some(1))], 0),
        (vec![(1, None, None, "DELETE", Some(5))], 1_000),
        // 30 s after the delete: the tombstone holds.
        (
            vec![(1, Some("late"), Some("x"), "UPDATE", Some(3))],
            31_000,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        model.apply(&applier.apply(n as u64, &[feed(&events)], now).unwrap());
        applier.commit(n as u64).unwrap();
    }
    assert_eq!(model.lines(), Vec::<String>::new());
    assert_eq!(applier.state_rows(), 1);
    // 61 s after it: forgotten, and the late upsert comes back.
    model.apply(
        &applier
            .apply(
                3,
                &[feed(&[(1, Some("late"), Some("x"), "UPDATE", Some(3))])],
                62_000,
            )
            .unwrap(),
    );
    assert_eq!(model.lines(), s(&["1|late|x"]));
}

#[test]
fn scd2_out_of_order_deletes_and_reinserts() {
    let mut r = Run::new(declaration(2));
    r.batch(&[(1, Some("a"), Some("x"), "INSERT", Some(1))]);
    r.batch(&[(1, None, None, "DELETE", Some(5))]);
    assert_eq!(r.lines(), s(&["1|a|x|1|5"]));
    // A re-insert after the delete opens a new version.
    r.batch(&[(1, Some("b"), Some("y"), "INSERT", Some(8))]);
    assert_eq!(r.lines(), s(&["1|a|x|1|5", "1|b|y|8|null"]));
    // A late event lands in history at its place and splits a version.
    r.restart();
    r.batch(&[(1, Some("c"), Some("z"), "UPDATE", Some(3))]);
    assert_eq!(r.lines(), s(&["1|a|x|1|3", "1|c|z|3|5", "1|b|y|8|null"]));
    // A delete before everything closes nothing; an upsert before it then ends there.
    r.batch(&[(2, None, None, "DELETE", Some(4))]);
    assert_eq!(r.lines().len(), 3);
    r.batch(&[(2, Some("e"), Some("q"), "INSERT", Some(2))]);
    assert_eq!(
        r.lines(),
        s(&["1|a|x|1|3", "1|c|z|3|5", "1|b|y|8|null", "2|e|q|2|4"])
    );
}

#[test]
fn scd2_unchanged_tracked_columns_coalesce_into_the_open_version() {
    let cdc = declaration(2).track_history_column_list(["city"]);
    let mut r = Run::new(cdc);
    r.batch(&[(1, Some("a"), Some("x"), "INSERT", Some(1))]);
    // Only the name changes: the version is updated in place.
    r.batch(&[(1, Some("b"), Some("x"), "UPDATE", Some(2))]);
    assert_eq!(r.lines(), s(&["1|b|x|1|null"]));
    // The city changes: a new version.
    r.batch(&[(1, Some("b"), Some("y"), "UPDATE", Some(3))]);
    assert_eq!(r.lines(), s(&["1|b|x|1|3", "1|b|y|3|null"]));
    // A late event at sequence 1 (the later of the two counts) with the
    // same city: still one version, showing the event at 2.
    r.batch(&[(1, Some("late"), Some("x"), "UPDATE", Some(1))]);
    assert_eq!(r.lines(), s(&["1|b|x|1|3", "1|b|y|3|null"]));
    // Another city at sequence 2 (replacing the event there) splits the
    // first version.
    r.batch(&[(1, Some("m"), Some("w"), "UPDATE", Some(2))]);
    assert_eq!(r.lines(), s(&["1|late|x|1|2", "1|m|w|2|3", "1|b|y|3|null"]));
}

#[test]
fn scd2_except_tracked_columns_and_a_delete_wins_a_tie() {
    let cdc = declaration(2).track_history_except_column_list(["name"]);
    let mut r = Run::new(cdc);
    r.batch(&[
        (1, Some("a"), Some("x"), "INSERT", Some(1)),
        (1, Some("b"), Some("x"), "UPDATE", Some(2)),
        (1, Some("c"), Some("y"), "UPDATE", Some(3)),
        (1, None, None, "DELETE", Some(3)),
    ]);
    assert_eq!(r.lines(), s(&["1|b|x|1|3"]));
}

#[test]
fn a_null_sequence_or_key_fails_the_batch_naming_the_flow_key_and_batch() {
    let mut r = Run::new(declaration(1));
    let e = r
        .applier
        .apply(
            0,
            &[feed(&[
                (1, Some("a"), None, "INSERT", Some(1)),
                (7, Some("b"), None, "INSERT", None),
            ])],
            0,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "AUTO CDC flow `customers_flow` into `customers`, batch 0: 1 row with a NULL sequence value (sequence_by `seq`), the first with key id=7 [AUTOCDC_MICROBATCH_VALIDATION.NULL_SEQUENCE]\n  help: every event needs a sequence value: fill or filter the NULLs in a view before the flow; nothing of batch 0 was written, and it runs again on the next start"
    );
    let e = r
        .applier
        .apply(
            0,
            &[feed(&[
                (-1, Some("a"), None, "INSERT", Some(1)),
                (-1, Some("b"), None, "INSERT", Some(2)),
            ])],
            0,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "AUTO CDC flow `customers_flow` into `customers`, batch 0: rows with a NULL key (`id`: 2), the first with key id=NULL [AUTOCDC_MICROBATCH_VALIDATION.NULL_KEY]\n  help: every event needs its keys: filter the NULL keys out of the change feed in a view; nothing of batch 0 was written, and it runs again on the next start"
    );
    // Nothing of the failed batches is in the state.
    assert_eq!(r.applier.state_rows(), 0);
}

#[test]
fn a_changed_sequence_type_is_refused_at_restart() {
    let r = {
        let mut r = Run::new(declaration(1));
        r.batch(&[(1, Some("a"), Some("x"), "INSERT", Some(1))]);
        r
    };
    let mut fields: Vec<Field> = feed_schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields[5] = Field::new(SEQUENCE_COLUMN, DataType::Utf8, true);
    let schema: SchemaRef = Arc::new(Schema::new(fields));
    let layout = r.cdc.layout(&schema).unwrap();
    let e = CdcApplier::open(
        of(&r.cdc, &layout, &schema),
        &r.dir.path().into(),
        Some(0),
        None,
    )
    .err()
    .unwrap();
    assert_eq!(
        e.to_string(),
        "AUTO CDC flow `customers_flow` into `customers`, batch 1: the sequence (sequence_by `seq`) is STRING now but was BIGINT when the table was written [AUTOCDC_INVALID_STATE.SEQUENCING_TYPE_DRIFT]\n  help: cast sequence_by back to BIGINT in the flow, or rebuild the table from the whole feed with `--full-refresh customers`"
    );
}

// ---- property tests ------------------------------------------------------

/// Random events over 4 keys: distinct sequences per key (ties are
/// covered above), a third of them deletes.
fn events() -> impl Strategy<Value = Vec<Ev>> {
    const NAMES: [&str; 3] = ["n0", "n1", "n2"];
    const CITIES: [&str; 2] = ["c0", "c1"];
    proptest::collection::vec((0i64..4, 0usize..3, 0usize..2, 0u8..3), 1..40).prop_map(|raw| {
        raw.into_iter()
            .enumerate()
            .map(|(i, (k, n, c, op))| {
                let seq = Some((i as i64 * 7919) % 1000 * 10 + k);
                if op == 0 {
                    (k, None, None, "DELETE", seq)
                } else {
                    (k, Some(NAMES[n]), Some(CITIES[c]), "UPSERT", seq)
                }
            })
            .collect()
    })
}

/// Splits `events` at the given cut points.
fn split(events: &[Ev], cuts: &[usize]) -> Vec<Vec<Ev>> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (events.len() + 1)).collect();
    cuts.sort();
    cuts.dedup();
    let mut out = Vec::new();
    let mut from = 0;
    for c in cuts.into_iter().chain([events.len()]) {
        if c > from {
            out.push(events[from..c].to_vec());
            from = c;
        }
    }
    out
}

fn by_key(events: &[Ev]) -> BTreeMap<i64, Vec<Ev>> {
    let mut m: BTreeMap<i64, Vec<Ev>> = BTreeMap::new();
    for e in events {
        m.entry(e.0).or_default().push(*e);
    }
    for v in m.values_mut() {
        v.sort_by_key(|e| e.4);
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// SCD 1 = the latest event per key, absent when it is a delete.
    #[test]
    fn scd1_is_the_latest_event_per_key(events in events(), cuts in proptest::collection::vec(0usize..50, 0..6)) {
        let mut r = Run::new(declaration(1));
        for (i, b) in split(&events, &cuts).iter().enumerate() {
            r.batch(b);
            if i % 2 == 1 { r.restart(); }
        }
        let want: Vec<String> = by_key(&events)
            .values()
            .filter_map(|v| v.last())
            .filter(|e| e.3 != "DELETE")
            .map(|e| format!("{}|{}|{}", e.0, e.1.unwrap(), e.2.unwrap()))
            .collect();
        let mut want = want;
        want.sort();
        prop_assert_eq!(r.lines(), want);
    }

    /// SCD 2 = the versions of every key's events in sequence order, the
    /// same however the feed is cut into batches: gap-free (each version
    /// ends where the next starts, or at a delete), the last one open
    /// unless a delete closed it.
    #[test]
    fn scd2_history_is_gap_free_and_independent_of_batching(events in events(), cuts in proptest::collection::vec(0usize..50, 0..6)) {
        let mut whole = Run::new(declaration(2));
        whole.batch(&events);
        let mut r = Run::new(declaration(2));
        for (i, b) in split(&events, &cuts).iter().enumerate() {
            r.batch(b);
            if i % 2 == 0 { r.restart(); }
        }
        prop_assert_eq!(r.lines(), whole.lines());
        // The versions per key, from the events alone.
        let mut want = Vec::new();
        for (k, evs) in by_key(&events) {
            let mut open: Option<(i64, &'static str, &'static str)> = None;
            let mut last_values: Option<(&'static str, &'static str)> = None;
            for e in evs {
                let seq = e.4.unwrap();
                if e.3 == "DELETE" {
                    if let Some((start, _, _)) = open.take() {
                        let (n, c) = last_values.unwrap();
                        want.push(format!("{k}|{n}|{c}|{start}|{seq}"));
                    }
                    continue;
                }
                let (n, c) = (e.1.unwrap(), e.2.unwrap());
                match open {
                    Some((_, on, oc)) if on == n && oc == c => {}
                    Some((start, _, _)) => {
                        let (ln, lc) = last_values.unwrap();
                        want.push(format!("{k}|{ln}|{lc}|{start}|{seq}"));
                        open = Some((seq, n, c));
                    }
                    None => open = Some((seq, n, c)),
                }
                last_values = Some((n, c));
            }
            if let Some((start, _, _)) = open {
                let (n, c) = last_values.unwrap();
                want.push(format!("{k}|{n}|{c}|{start}|null"));
            }
        }
        want.sort();
        prop_assert_eq!(r.lines(), want);
    }
}
