//! Source readers: formats, fixed schemas and errors.

use arrow::datatypes::SchemaRef;
use pipelines_core::plan::ddl::schema_to_ddl;
use pipelines_core::plan::{DataFrame, PlanNode, SourceFormat};
use pipelines_core::{Error, Session};

fn ddl(df: &DataFrame) -> String {
    let s: &SchemaRef = df.sources()[0].schema.as_ref().unwrap();
    schema_to_ddl(s)
}

fn err(r: pipelines_core::Result<DataFrame>) -> (String, Option<String>) {
    match r {
        Err(Error::Plan(e)) => (e.message, e.help),
        Err(other) => panic!("unexpected error {other}"),
        Ok(df) => panic!("expected an error, got {df:?}"),
    }
}

#[test]
fn file_sources() {
    let s = Session::new();
    let df = s
        .read_stream()
        .format("json")
        .schema("ts TIMESTAMP, service_name STRING, level STRING, msg STRING")
        .option("maxFilesPerTrigger", "1")
        .load("data/logs")
        .unwrap();
    assert!(df.is_streaming());
    let src = df.sources()[0];
    assert_eq!(src.format, SourceFormat::Json);
    assert_eq!(src.path.as_deref(), Some("data/logs"));
    assert_eq!(src.option("MAXFILESPERTRIGGER"), Some("1"));
    assert_eq!(src.describe(), "json source `data/logs`");
    assert_eq!(
        ddl(&df),
        "ts TIMESTAMP, service_name STRING, level STRING, msg STRING"
    );
    assert!(matches!(df.node(), PlanNode::Source(_)));

    let csv = s
        .read_stream()
        .format("CSV")
        .schema("a INT, _corrupt_record STRING")
        .load("in")
        .unwrap();
    assert_eq!(ddl(&csv), "a INT, _corrupt_record STRING");

    let text = s.read_stream().format("text").load("lines").unwrap();
    assert_eq!(ddl(&text), "value STRING");

    let parquet = s.read_stream().format("parquet").load("p").unwrap();
    assert!(parquet.sources()[0].schema.is_none());
    let delta = s.read().format("delta").load("d").unwrap();
    assert!(!delta.is_streaming());
    let batch_json = s.read().format("json").load("j").unwrap();
    assert!(batch_json.sources()[0].schema.is_none());
}

#[test]
fn fixed_schema_sources() {
    let s = Session::new();
    let rate = s
        .read_stream()
        .format("rate")
        .option("rowsPerSecond", 10)
        .load_default()
        .unwrap();
    assert_eq!(ddl(&rate), "timestamp TIMESTAMP, value BIGINT");
    let socket = s
        .read_stream()
        .format("socket")
        .options([("host", "localhost"), ("port", "9999")])
        .load_default()
        .unwrap();
    assert_eq!(ddl(&socket), "value STRING");
    let kafka = s
        .read_stream()
        .format("kafka")
        .option("kafka.bootstrap.servers", "${KAFKA_BROKERS}")
        .option("subscribe", "events")
        .load_default()
        .unwrap();
    assert_eq!(
        ddl(&kafka),
        "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, timestampType INT"
    );
    assert_eq!(
        kafka.sources()[0].option("kafka.bootstrap.servers"),
        Some("${KAFKA_BROKERS}")
    );
    let headers = s
        .read_stream()
        .format("kafka")
        .option("kafka.bootstrap.servers", "b:9092")
        .option("subscribe", "events")
        .option("includeHeaders", "true")
        .load_default()
        .unwrap();
    assert!(ddl(&headers).ends_with(", headers ARRAY<STRUCT<key: STRING, value: BINARY>>"));
    let memory = s
        .read_stream()
        .format("memory")
        .schema("n BIGINT")
        .load("numbers")
        .unwrap();
    assert_eq!(ddl(&memory), "n BIGINT");
    assert_eq!(memory.sources()[0].path.as_deref(), Some("numbers"));
}

#[test]
fn reader_errors() {
    let s = Session::new();
    assert_eq!(
        err(s.read_stream().format("jsno").load("x")),
        (
            "unknown source format `jsno`".into(),
            Some("did you mean `json`? known formats: json, csv, parquet, text, rate, socket, memory, kafka, delta".into())
        )
    );
    assert_eq!(
        err(s.read_stream().format("orc").load("x")).1.as_deref(),
        Some("known formats: json, csv, parquet, text, rate, socket, memory, kafka, delta")
    );
    assert_eq!(
        err(s.read_stream().format("json").load("data/logs")),
        (
            "streaming json source needs a schema".into(),
            Some(
                "declare it with .schema(\"ts TIMESTAMP, user_id STRING, ...\") before .load(...)"
                    .into()
            )
        )
    );
    assert_eq!(
        err(s.read_stream().format("csv").load("x")).0,
        "streaming csv source needs a schema"
    );
    assert_eq!(
        err(s.read_stream().format("memory").load_default()).0,
        "memory source needs a schema"
    );
    assert_eq!(
        err(s
            .read_stream()
            .format("json")
            .schema("ts TIMSTAMP")
            .load("x"))
        .0,
        "invalid schema \"ts TIMSTAMP\": unknown type `TIMSTAMP` for column `ts`"
    );
    assert_eq!(
        err(s
            .read_stream()
            .format("json")
            .schema("a INT")
            .load_default()),
        (
            "json source needs a path".into(),
            Some("load it with .load(\"data/json\")".into())
        )
    );
    assert_eq!(
        err(s.read_stream().format("rate").load("x")).0,
        "rate source takes no path, got `x`"
    );
    assert_eq!(
        err(s.read_stream().format("rate").schema("a INT").load_default()),
        (
            "rate source does not take a schema".into(),
            Some("remove .schema(...): the rate source always has the schema timestamp TIMESTAMP, value BIGINT".into())
        )
    );
    assert_eq!(
        err(s
            .read_stream()
            .format("kafka")
            .option("subscribe", "t")
            .load_default())
        .0,
        "kafka source needs the option `kafka.bootstrap.servers`"
    );
    assert_eq!(
        err(s
            .read_stream()
            .format("kafka")
            .option("kafka.bootstrap.servers", "b")
            .load_default())
        .0,
        "kafka source needs one of the options `subscribe`, `subscribePattern` or `assign`"
    );
    assert_eq!(
        err(s
            .read_stream()
            .format("socket")
            .option("host", "h")
            .load_default())
        .0,
        "socket source needs the option `port`"
    );
    assert_eq!(
        err(s
            .read_stream()
            .format("rate")
            .option("rowsPerSecond", "fast")
            .load_default())
        .0,
        "rate source option `rowsPerSecond` has an invalid value `fast`"
    );
    assert_eq!(err(s.read_stream().load("x")).0, "the source has no format");
    assert_eq!(
        err(s.read_stream().format("text").schema("a INT").load("x")).0,
        "text source schema must be a single STRING column"
    );
}

#[test]
fn dataset_reads() {
    let s = Session::new().with_conf([("a", "1")]).with_flow_name("f");
    assert_eq!(s.conf("a"), Some("1"));
    assert_eq!(s.flow_name(), Some("f"));
    let df = s.read_stream_table("logs").unwrap();
    assert!(df.is_streaming());
    assert!(!s.read_table("logs").unwrap().is_streaming());
    assert_eq!(err(s.read_table(" ")).0, "invalid dataset name ` `");
}
