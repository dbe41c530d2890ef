//! The console sink prints batches exactly like Spark's console sink.

use std::io::Write;
use std::sync::{Arc, Mutex};

use arrow::array::{Int64Array, RecordBatch, StringArray, StructArray};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use pipelines_core::engine::sink::{Sink, SinkContext};
use pipelines_core::engine::sinks::console::show_string;
use pipelines_core::engine::sinks::ConsoleSink;
use pipelines_core::OutputMode;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn take(&self) -> String {
        String::from_utf8(std::mem::take(&mut *self.0.lock().unwrap())).unwrap()
    }
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("service_name", DataType::Utf8, true),
        Field::new("count", DataType::Int64, false),
    ]))
}

fn rows(names: Vec<Option<&str>>, counts: Vec<i64>) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from(names)),
            Arc::new(Int64Array::from(counts)),
        ],
    )
    .unwrap()
}

fn sink(options: &[(&str, &str)]) -> (ConsoleSink, Captured) {
    let ctx = SinkContext {
        name: "console_out".into(),
        format: "console".into(),
        options: options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        path: None,
        partition_cols: vec![],
        merge_keys: vec![],
        schema: schema(),
        flow: "f".into(),
        query_id: "q".into(),
    };
    let out = Captured::default();
    let s = ConsoleSink::with_writer(&ctx, Box::new(out.clone())).unwrap();
    (s, out)
}

#[test]
fn prints_a_batch_like_spark() {
    let (mut s, out) = sink(&[]);
    assert_eq!(s.describe(), "console sink `console_out`");
    let w = s
        .add_batch(
            0,
            vec![
                rows(vec![Some("api"), None], vec![2, 10]),
                rows(vec![Some("a-very-long-service-name-indeed")], vec![1]),
            ],
            OutputMode::Complete,
        )
        .unwrap();
    assert_eq!(w.rows, 3);
    assert_eq!(
        out.take(),
        "-------------------------------------------\n\
         Batch: 0\n\
         -------------------------------------------\n\
         +--------------------+-----+\n\
         |        service_name|count|\n\
         +--------------------+-----+\n\
         |                 api|    2|\n\
         |                null|   10|\n\
         |a-very-long-servi...|    1|\n\
         +--------------------+-----+\n\
         \n"
    );
}

#[test]
fn num_rows_and_truncate_options() {
    let (mut s, out) = sink(&[("numRows", "2"), ("truncate", "false")]);
    s.add_batch(
        7,
        vec![rows(
            vec![
                Some("api"),
                Some("a-very-long-service-name-indeed"),
                Some("db"),
            ],
            vec![1, 2, 3],
        )],
        OutputMode::Append,
    )
    .unwrap();
    assert_eq!(
        out.take(),
        "-------------------------------------------\n\
         Batch: 7\n\
         -------------------------------------------\n\
         +-------------------------------+-----+\n\
         |service_name                   |count|\n\
         +-------------------------------+-----+\n\
         |api                            |1    |\n\
         |a-very-long-service-name-indeed|2    |\n\
         +-------------------------------+-----+\n\
         only showing top 2 rows\n\
         \n"
    );
    // An empty batch still prints its header.
    s.add_batch(8, vec![rows(vec![], vec![])], OutputMode::Append)
        .unwrap();
    assert_eq!(
        out.take(),
        "-------------------------------------------\n\
         Batch: 8\n\
         -------------------------------------------\n\
         +------------+-----+\n\
         |service_name|count|\n\
         +------------+-----+\n\
         +------------+-----+\n\
         \n"
    );
}

#[test]
fn nested_values_and_bad_options() {
    let fields = Fields::from(vec![
        Field::new("start", DataType::Int64, false),
        Field::new("end", DataType::Int64, false),
    ]);
    let st = StructArray::new(
        fields.clone(),
        vec![
            Arc::new(Int64Array::from(vec![0])),
            Arc::new(Int64Array::from(vec![5])),
        ],
        None,
    );
    let b = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("w", DataType::Struct(fields), false),
            Field::new("s", DataType::Utf8, false),
        ])),
        vec![Arc::new(st), Arc::new(StringArray::from(vec!["a\tb"]))],
    )
    .unwrap();
    assert_eq!(
        show_string(&[b], 20, 20).unwrap(),
        "+------+----+\n|     w|   s|\n+------+----+\n|{0, 5}|a\\tb|\n+------+----+\n"
    );
    let ctx = SinkContext {
        name: "c".into(),
        format: "console".into(),
        options: [("numRows".to_string(), "x".to_string())].into(),
        path: None,
        partition_cols: vec![],
        merge_keys: vec![],
        schema: schema(),
        flow: "f".into(),
        query_id: "q".into(),
    };
    let err = ConsoleSink::with_writer(&ctx, Box::new(Captured::default()))
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "sink `c`: option `numRows` is `x`, not a whole number\n  help: set `numRows` to how many rows to print per batch (default 20)"
    );
}

#[test]
fn full_width_characters_take_two_columns() {
    let b = rows(vec![Some("日本"), Some("ab")], vec![1, 2]);
    assert_eq!(
        show_string(&[b], 20, 20).unwrap(),
        "+------------+-----+\n|service_name|count|\n+------------+-----+\n|        日本|    1|\n|          ab|    2|\n+------------+-----+\n"
    );
}
