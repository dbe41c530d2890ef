//! Every attribute macro with every key: the declarations they register.

use pipelines as dp;
use pipelines::registry::{
    datasets, flows, DatasetDecl, DatasetKind, ExpectationAction, ExpectationDecl, FlowDecl,
    FlowKind, SourceLocation,
};
use pipelines::{
    append_flow, materialized_view, table, temporary_view, update_flow, DataFrame, Result, Session,
};

const FILE: &str = "tests/it/macros_registry.rs";

fn not_run(what: &str) -> Result<DataFrame> {
    Err(pipelines::Error::Usage(format!(
        "{what}: not run in this test"
    )))
}

// ---- append flows ----------------------------------------------------------

const APPEND_MINIMAL: u32 = line!() + 1;
#[append_flow(target = "events")]
fn append_minimal(_s: &Session) -> Result<DataFrame> {
    not_run("append_minimal")
}

const APPEND_FULL: u32 = line!() + 3;
/// Doc comments and other attributes stay on the function.
#[allow(clippy::needless_pass_by_value)]
#[append_flow(
    target = "events",
    name = "backfill_2024",
    once = true,
    comment = "one-time backfill",
    conf("pipelines.trigger" = "RealTime", "k2" = "v2")
)]
fn append_full(s: &pipelines::Session) -> pipelines::Result<pipelines::DataFrame> {
    let _ = s;
    not_run("append_full")
}

const APPEND_EXPLICIT_FALSE: u32 = line!() + 1;
#[append_flow(target = "events", once = false, conf())]
pub(crate) fn append_explicit_false(_: &Session) -> Result<DataFrame> {
    not_run("append_explicit_false")
}

// ---- update flows ----------------------------------------------------------

const UPDATE_MINIMAL: u32 = line!() + 1;
#[update_flow(target = "counts_sink")]
fn update_minimal(_s: &Session) -> Result<DataFrame> {
    not_run("update_minimal")
}

const UPDATE_FULL: u32 = line!() + 1;
#[update_flow(
    target = "counts_sink",
    name = "counts_v2",
    comment = "running counts",
    conf("spark.sql.shuffle.partitions" = "4"),
    import_checkpoint = "/checkpoints/counts_v1"
)]
fn update_full(_s: &Session) -> Result<DataFrame> {
    not_run("update_full")
}

// ---- datasets --------------------------------------------------------------

const BARE_TABLE: u32 = line!() + 1;
#[table]
fn bare_table(_s: &Session) -> Result<DataFrame> {
    not_run("bare_table")
}

const EVENTS_TABLE: u32 = line!() + 1;
#[table(
    name = "events",
    comment = "all events",
    format = "delta",
    path = "/data/events",
    partition_cols = ["day", "country"],
    schema = "ts TIMESTAMP, id STRING"
)]
fn events_table(_s: &Session) -> Result<DataFrame> {
    not_run("events_table")
}

const BARE_VIEW: u32 = line!() + 1;
#[materialized_view]
fn bare_view(_s: &Session) -> Result<DataFrame> {
    not_run("bare_view")
}

const TOTALS: u32 = line!() + 1;
#[materialized_view(
    name = "daily_totals",
    comment = "totals per day",
    format = "parquet",
    path = "/data/totals",
    partition_cols = ["day"],
    schema = "day DATE, n BIGINT"
)]
fn totals(_s: &Session) -> Result<DataFrame> {
    not_run("totals")
}

const BARE_TEMP: u32 = line!() + 1;
#[temporary_view]
fn bare_temp(_s: &Session) -> Result<DataFrame> {
    not_run("bare_temp")
}

const REAL_EVENTS: u32 = line!() + 1;
#[temporary_view(
    name = "real_events",
    comment = "no test traffic",
    schema = "id STRING"
)]
fn real_events(_s: &Session) -> Result<DataFrame> {
    not_run("real_events")
}

// A raw identifier's name is registered without `r#`.
const RAW_IDENT: u32 = line!() + 1;
#[table]
fn r#type(_s: &Session) -> Result<DataFrame> {
    not_run("type")
}

// A function named like the hygienic local of the expansion still works.
const SESSION: u32 = line!() + 1;
#[table]
fn session(_s: &Session) -> Result<DataFrame> {
    not_run("session")
}

// Declarations inside a module and inside a function body register too.
mod nested {
    use pipelines::{append_flow, DataFrame, Result, Session};

    pub const LINE: u32 = line!() + 1;
    #[append_flow(target = "events", name = "from_module")]
    pub fn flow(_s: &Session) -> Result<DataFrame> {
        super::not_run("from_module")
    }
}

/// Returns the line of the attribute inside.
fn holder() -> u32 {
    const LINE: u32 = line!() + 1;
    #[append_flow(target = "events", name = "from_fn_body")]
    fn inner(_s: &Session) -> Result<DataFrame> {
        not_run("from_fn_body")
    }
    LINE
}

// Values passed through `macro_rules!` (`$target:expr` arrives wrapped in an
// invisible group).
macro_rules! flow_into {
    ($target:expr, $name:ident) => {
        #[append_flow(target = $target)]
        fn $name(_s: &Session) -> Result<DataFrame> {
            not_run(stringify!($name))
        }
    };
}
flow_into!("events", from_macro_rules);

// ---- expectations ----------------------------------------------------------

// All six kinds, above and below the dataset attribute: the declaration
// lists them in source order, each with the line of its attribute.
const ORDERS: u32 = line!() + 1;
#[dp::expect("valid_id", "id IS NOT NULL")]
#[dp::expect_all_or_drop(c = "z <> 0")]
#[dp::expect_all("a" = "x > 0", b = "y < 10")]
#[table(name = "orders", quarantine = "bad_orders")]
#[dp::expect_or_drop("positive", "amount > 0")]
#[dp::expect_all_or_fail("d" = "w IS NOT NULL", r#type = "t IN ('a', 'b')")]
#[dp::expect_or_fail("has_ts", "ts IS NOT NULL")]
fn orders(_s: &Session) -> Result<DataFrame> {
    not_run("orders")
}

// All six above (each moves itself below the dataset attribute, so they
// arrive there in reverse order), and Rust's lint `#[expect]`, left alone.
const CLEAN_ORDERS: u32 = line!() + 1;
#[dp::expect_or_fail("has_ts", "ts IS NOT NULL")]
#[dp::expect_all(a = "x > 0")]
#[dp::expect_or_drop("positive", "amount > 0")]
#[dp::expect_all_or_fail(b = "y < 10")]
#[dp::expect("valid_id", "id IS NOT NULL")]
#[dp::expect_all_or_drop("c" = "z <> 0", "d" = "w <> 0",)]
#[materialized_view(name = "clean_orders")]
#[expect(non_snake_case)]
fn Clean_Orders(_s: &Session) -> Result<DataFrame> {
    not_run("clean_orders")
}

const ORDERS_BACKFILL: u32 = line!() + 1;
#[append_flow(target = "orders", quarantine = "orders_quarantine")]
#[dp::expect_or_drop("positive", "amount > 0")]
fn orders_backfill(_s: &Session) -> Result<DataFrame> {
    not_run("orders_backfill")
}

// ---- helpers ---------------------------------------------------------------

fn flow(name: &str) -> &'static FlowDecl {
    let found: Vec<_> = flows().into_iter().filter(|f| f.name == name).collect();
    assert_eq!(found.len(), 1, "flows named {name}: {found:?}");
    found[0]
}

fn dataset(name: &str) -> &'static DatasetDecl {
    let found: Vec<_> = datasets().into_iter().filter(|d| d.name == name).collect();
    assert_eq!(found.len(), 1, "datasets named {name}: {found:?}");
    found[0]
}

fn at(line: u32) -> SourceLocation {
    SourceLocation { file: FILE, line }
}

fn expectation(
    name: &'static str,
    condition: &'static str,
    action: ExpectationAction,
    line: u32,
) -> ExpectationDecl {
    ExpectationDecl {
        name,
        condition,
        action,
        line,
    }
}

// ---- tests -----------------------------------------------------------------

#[test]
fn append_flows() {
    let f = flow("append_minimal");
    assert_eq!(f.kind, FlowKind::Append);
    assert_eq!(f.target, "events");
    assert!(!f.once);
    assert_eq!(f.comment, None);
    assert!(f.conf.is_empty());
    assert_eq!(f.import_checkpoint, None);
    assert!(f.expectations.is_empty());
    assert_eq!(f.quarantine, None);
    assert_eq!(f.location, at(APPEND_MINIMAL));

    let f = flow("backfill_2024");
    assert_eq!(f.kind, FlowKind::Append);
    assert_eq!(f.target, "events");
    assert!(f.once);
    assert_eq!(f.comment, Some("one-time backfill"));
    assert_eq!(
        f.conf,
        &[("pipelines.trigger", "RealTime"), ("k2", "v2")][..]
    );
    assert_eq!(f.import_checkpoint, None);
    // The line of the attribute, not of the doc comment or the other attribute.
    assert_eq!(f.location, at(APPEND_FULL));

    let f = flow("append_explicit_false");
    assert!(!f.once);
    assert!(f.conf.is_empty());
    assert_eq!(f.location, at(APPEND_EXPLICIT_FALSE));
}

#[test]
fn update_flows() {
    let f = flow("update_minimal");
    assert_eq!(f.kind, FlowKind::Update);
    assert_eq!(f.target, "counts_sink");
    assert!(!f.once);
    assert_eq!(f.comment, None);
    assert!(f.conf.is_empty());
    assert_eq!(f.import_checkpoint, None);
    assert_eq!(f.location, at(UPDATE_MINIMAL));

    let f = flow("counts_v2");
    assert_eq!(f.kind, FlowKind::Update);
    assert_eq!(f.target, "counts_sink");
    assert!(!f.once);
    assert_eq!(f.comment, Some("running counts"));
    assert_eq!(f.conf, &[("spark.sql.shuffle.partitions", "4")][..]);
    assert_eq!(f.import_checkpoint, Some("/checkpoints/counts_v1"));
    assert!(f.expectations.is_empty());
    assert_eq!(f.quarantine, None);
    assert_eq!(f.location, at(UPDATE_FULL));
}

#[test]
fn streaming_tables() {
    let d = dataset("bare_table");
    assert_eq!(d.kind, DatasetKind::StreamingTable);
    assert_eq!(d.comment, None);
    assert_eq!(d.format, None);
    assert_eq!(d.path, None);
    assert!(d.partition_cols.is_empty());
    assert_eq!(d.schema, None);
    assert_eq!(d.location, at(BARE_TABLE));

    let d = dataset("events");
    assert_eq!(d.kind, DatasetKind::StreamingTable);
    assert_eq!(d.comment, Some("all events"));
    assert_eq!(d.format, Some("delta"));
    assert_eq!(d.path, Some("/data/events"));
    assert_eq!(d.partition_cols, &["day", "country"][..]);
    assert_eq!(d.schema, Some("ts TIMESTAMP, id STRING"));
    assert!(d.expectations.is_empty());
    assert_eq!(d.quarantine, None);
    assert_eq!(d.location, at(EVENTS_TABLE));
}

#[test]
fn materialized_views() {
    let d = dataset("bare_view");
    assert_eq!(d.kind, DatasetKind::MaterializedView);
    assert_eq!(d.comment, None);
    assert_eq!(d.format, None);
    assert_eq!(d.path, None);
    assert!(d.partition_cols.is_empty());
    assert_eq!(d.schema, None);
    assert_eq!(d.location, at(BARE_VIEW));

    let d = dataset("daily_totals");
    assert_eq!(d.kind, DatasetKind::MaterializedView);
    assert_eq!(d.comment, Some("totals per day"));
    assert_eq!(d.format, Some("parquet"));
    assert_eq!(d.path, Some("/data/totals"));
    assert_eq!(d.partition_cols, &["day"][..]);
    assert_eq!(d.schema, Some("day DATE, n BIGINT"));
    assert_eq!(d.location, at(TOTALS));
}

#[test]
fn temporary_views() {
    let d = dataset("bare_temp");
    assert_eq!(d.kind, DatasetKind::TemporaryView);
    assert_eq!(d.comment, None);
    assert_eq!(d.format, None);
    assert_eq!(d.path, None);
    assert!(d.partition_cols.is_empty());
    assert_eq!(d.schema, None);
    assert_eq!(d.location, at(BARE_TEMP));

    let d = dataset("real_events");
    assert_eq!(d.kind, DatasetKind::TemporaryView);
    assert_eq!(d.comment, Some("no test traffic"));
    assert_eq!(d.format, None);
    assert_eq!(d.path, None);
    assert!(d.partition_cols.is_empty());
    assert_eq!(d.schema, Some("id STRING"));
    assert!(d.expectations.is_empty());
    assert_eq!(d.quarantine, None);
    assert_eq!(d.location, at(REAL_EVENTS));
}

#[test]
fn expectations() {
    use ExpectationAction as A;

    let d = dataset("orders");
    assert_eq!(d.kind, DatasetKind::StreamingTable);
    assert_eq!(d.quarantine, Some("bad_orders"));
    assert_eq!(
        d.expectations,
        &[
            expectation("valid_id", "id IS NOT NULL", A::Warn, ORDERS),
            expectation("c", "z <> 0", A::Drop, ORDERS + 1),
            expectation("a", "x > 0", A::Warn, ORDERS + 2),
            expectation("b", "y < 10", A::Warn, ORDERS + 2),
            expectation("positive", "amount > 0", A::Drop, ORDERS + 4),
            expectation("d", "w IS NOT NULL", A::Fail, ORDERS + 5),
            expectation("type", "t IN ('a', 'b')", A::Fail, ORDERS + 5),
            expectation("has_ts", "ts IS NOT NULL", A::Fail, ORDERS + 6),
        ][..]
    );
    // The line of the dataset attribute, not of the first expectation.
    assert_eq!(d.location, at(ORDERS + 3));

    let d = dataset("clean_orders");
    assert_eq!(d.kind, DatasetKind::MaterializedView);
    assert_eq!(d.quarantine, None);
    assert_eq!(
        d.expectations,
        &[
            expectation("has_ts", "ts IS NOT NULL", A::Fail, CLEAN_ORDERS),
            expectation("a", "x > 0", A::Warn, CLEAN_ORDERS + 1),
            expectation("positive", "amount > 0", A::Drop, CLEAN_ORDERS + 2),
            expectation("b", "y < 10", A::Fail, CLEAN_ORDERS + 3),
            expectation("valid_id", "id IS NOT NULL", A::Warn, CLEAN_ORDERS + 4),
            expectation("c", "z <> 0", A::Drop, CLEAN_ORDERS + 5),
            expectation("d", "w <> 0", A::Drop, CLEAN_ORDERS + 5),
        ][..]
    );
    assert_eq!(d.location, at(CLEAN_ORDERS + 6));

    let f = flow("orders_backfill");
    assert_eq!((f.kind, f.target), (FlowKind::Append, "orders"));
    assert_eq!(f.quarantine, Some("orders_quarantine"));
    assert_eq!(
        f.expectations,
        &[expectation(
            "positive",
            "amount > 0",
            A::Drop,
            ORDERS_BACKFILL + 1
        )][..]
    );
    assert_eq!(f.location, at(ORDERS_BACKFILL));

    // The functions themselves are unchanged.
    let s = Session::default();
    assert!(orders(&s).is_err());
    assert!(Clean_Orders(&s).is_err());
    assert!(orders_backfill(&s).is_err());
}

#[test]
fn names_and_scopes() {
    assert_eq!(dataset("type").location, at(RAW_IDENT));
    assert_eq!(dataset("session").location, at(SESSION));
    assert_eq!(flow("from_module").location, at(nested::LINE));
    assert_eq!(flow("from_fn_body").location, at(holder()));
    let f = flow("from_macro_rules");
    assert_eq!((f.kind, f.target), (FlowKind::Append, "events"));
    assert_eq!(f.location.file, FILE);
}

#[test]
fn exact_registry() {
    let flow_names: Vec<_> = flows().iter().map(|f| f.name).collect();
    assert_eq!(
        flow_names,
        [
            "append_explicit_false",
            "append_minimal",
            "backfill_2024",
            "counts_v2",
            "from_fn_body",
            "from_macro_rules",
            "from_module",
            "orders_backfill",
            "update_minimal",
        ]
    );
    let dataset_names: Vec<_> = datasets().iter().map(|d| d.name).collect();
    assert_eq!(
        dataset_names,
        [
            "bare_table",
            "bare_temp",
            "bare_view",
            "clean_orders",
            "daily_totals",
            "events",
            "orders",
            "real_events",
            "session",
            "type",
        ]
    );
    for f in flows() {
        assert_eq!(f.location.file, FILE);
    }
    for d in datasets() {
        assert_eq!(d.location.file, FILE);
    }
}

#[test]
fn queries_call_the_functions() {
    let s = Session::default();
    let message = |r: Result<DataFrame>| match r {
        Err(pipelines::Error::Usage(m)) => m,
        Err(other) => panic!("unexpected error {other:?}"),
        Ok(_) => panic!("unexpected Ok"),
    };
    // The registered query runs the annotated function...
    assert_eq!(
        message((flow("backfill_2024").query)(&s)),
        "append_full: not run in this test"
    );
    assert_eq!(
        message((dataset("real_events").query)(&s)),
        "real_events: not run in this test"
    );
    assert_eq!(
        message((flow("from_module").query)(&s)),
        "from_module: not run in this test"
    );
    assert_eq!(
        message((dataset("session").query)(&s)),
        "session: not run in this test"
    );
    // ...which is still an ordinary function.
    assert_eq!(
        message(append_full(&s)),
        "append_full: not run in this test"
    );
    assert_eq!(
        message(nested::flow(&s)),
        "from_module: not run in this test"
    );
}

// ---- AUTO CDC flows ----------------------------------------------------------

const CDC_MINIMAL: u32 = line!() + 1;
dp::create_auto_cdc_flow!(
    target = "customers",
    source = "customers_cdc",
    keys = ["id"],
    sequence_by = "seq",
);

const CDC_FULL: u32 = line!() + 1;
dp::create_auto_cdc_flow!(
    target = "customers_history",
    source = "customers_cdc",
    keys = ["id", "region"],
    sequence_by = "struct(seq, ts)",
    apply_as_deletes = "operation = 'DELETE'",
    except_column_list = ["operation"],
    stored_as_scd_type = 2,
    track_history_except_column_list = ["name"],
    name = "history_flow",
    comment = "every version",
    conf("pipelines.cdc.tombstoneGCThresholdInSeconds" = "60"),
);

#[test]
fn auto_cdc_flows() {
    let all = pipelines::registry::auto_cdc_flows();
    let f = all.iter().find(|f| f.target == "customers").unwrap();
    assert_eq!(
        (
            f.source,
            f.keys,
            f.sequence_by,
            f.name,
            f.stored_as_scd_type
        ),
        ("customers_cdc", &["id"][..], "seq", None, None)
    );
    assert_eq!(
        (f.apply_as_deletes, f.column_list, f.except_column_list),
        (None, None, None)
    );
    assert_eq!(f.location, at(CDC_MINIMAL));

    let f = all
        .iter()
        .find(|f| f.target == "customers_history")
        .unwrap();
    assert_eq!(f.keys, &["id", "region"][..]);
    assert_eq!(f.sequence_by, "struct(seq, ts)");
    assert_eq!(f.apply_as_deletes, Some("operation = 'DELETE'"));
    assert_eq!(f.except_column_list, Some(&["operation"][..]));
    assert_eq!(f.stored_as_scd_type, Some(2));
    assert_eq!(f.track_history_except_column_list, Some(&["name"][..]));
    assert_eq!(f.track_history_column_list, None);
    assert_eq!(f.name, Some("history_flow"));
    assert_eq!(f.comment, Some("every version"));
    assert_eq!(
        f.conf,
        &[("pipelines.cdc.tombstoneGCThresholdInSeconds", "60")][..]
    );
    assert_eq!(f.location, at(CDC_FULL));
    // As the builder would declare it.
    let decl = dp::cdc::AutoCdc::from(*f);
    assert_eq!(decl.flow_name(), "history_flow");
    assert_eq!(decl.scd_type(), dp::cdc::ScdType::Two);
}
