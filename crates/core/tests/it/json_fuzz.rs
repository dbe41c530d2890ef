//! The JSON-lines reader against arrow-json on valid input, and on damaged
//! input in each parse mode: rows or a typed error, never a panic.

use std::collections::BTreeMap;
use std::fs;
use std::io::Cursor;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema};
use pipelines_core::engine::source::SourceContext;
use pipelines_core::engine::sources::open_source;
use pipelines_core::Session;
use proptest::prelude::*;

const DDL: &str = "id BIGINT, msg STRING, x DOUBLE, ok BOOLEAN";

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("msg", DataType::Utf8, true),
        Field::new("x", DataType::Float64, true),
        Field::new("ok", DataType::Boolean, true),
    ]))
}

/// Reads `text` as one JSON-lines file through the file source.
fn ours(text: &[u8], mode: &str) -> pipelines_core::Result<Vec<RecordBatch>> {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("p");
    fs::create_dir_all(base.join("data")).unwrap();
    fs::create_dir_all(tmp.path().join("state")).unwrap();
    fs::write(base.join("data/part-0.json"), text).unwrap();
    let spec = Session::new()
        .read_stream()
        .format("json")
        .schema(DDL)
        .option("mode", mode)
        .load("data")
        .unwrap()
        .sources()[0]
        .clone();
    let ctx = SourceContext {
        flow: "f".into(),
        state_dir: tmp.path().join("state").into(),
        base_dir: base,
        option_overrides: BTreeMap::new(),
    };
    let mut src = open_source(&spec, spec.schema.clone().unwrap(), ctx)?;
    let end = src.latest_offset(None)?.expect("one file");
    Ok(src.read(None, &end)?.batches)
}

fn rows(batches: &[RecordBatch]) -> Vec<String> {
    use arrow::array::Array;
    use arrow::util::display::array_value_to_string;
    let mut out = Vec::new();
    for b in batches {
        for r in 0..b.num_rows() {
            let cells: Vec<String> = (0..4)
                .map(|c| {
                    let col = b.column(c);
                    if col.is_null(r) {
                        "NULL".to_string()
                    } else {
                        format!("{:?}", array_value_to_string(col, r).unwrap())
                    }
                })
                .collect();
            out.push(cells.join("|"));
        }
    }
    out
}

fn json_string() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            4 => "[a-zA-Z0-9 ]",
            1 => Just("\\\"".to_string()),
            1 => Just("\\\\".to_string()),
            1 => Just("\\n".to_string()),
            1 => Just("\\u00e9".to_string()),
            1 => Just("\\ud83d\\ude00".to_string()),
            1 => Just("é".to_string()),
            1 => Just("日本".to_string()),
        ],
        0..12,
    )
    .prop_map(|parts| format!("\"{}\"", parts.concat()))
}

fn record() -> impl Strategy<Value = String> {
    (
        prop::option::of(any::<i64>()),
        prop::option::of(json_string()),
        prop::option::of(-1.0e12f64..1.0e12),
        prop::option::of(any::<bool>()),
        any::<[bool; 4]>(),
    )
        .prop_map(|(id, msg, x, ok, absent)| {
            let mut fields = Vec::new();
            // A null is written as null or left out.
            let mut put = |name: &str, v: Option<String>, absent: bool| match v {
                Some(v) => fields.push(format!("\"{name}\":{v}")),
                None if !absent => fields.push(format!("\"{name}\":null")),
                None => {}
            };
            put("id", id.map(|v| v.to_string()), absent[0]);
            put("msg", msg, absent[1]);
            put("x", x.map(|v| format!("{v:?}")), absent[2]);
            put("ok", ok.map(|v| v.to_string()), absent[3]);
            format!("{{{}}}", fields.join(","))
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    /// Valid records: the same rows as arrow-json reads.
    #[test]
    fn valid_records_read_as_arrow_json_reads_them(lines in prop::collection::vec(record(), 1..20)) {
        let text = lines.join("\n") + "\n";
        let expected: Vec<RecordBatch> = arrow::json::ReaderBuilder::new(schema())
            .build(Cursor::new(text.as_bytes()))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let got = ours(text.as_bytes(), "FAILFAST").unwrap();
        prop_assert_eq!(rows(&got).len(), lines.len());
        prop_assert_eq!(rows(&got), rows(&expected), "{}", text);
    }

    /// Damaged records (bytes overwritten, lines cut): rows or a typed
    /// error in every mode, and PERMISSIVE / DROPMALFORMED always read.
    #[test]
    fn damaged_records_are_rows_or_errors(
        lines in prop::collection::vec(record(), 1..10),
        damage in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = (lines.join("\n") + "\n").into_bytes();
        for (at, b) in &damage {
            let i = at.index(bytes.len());
            bytes[i] = *b;
        }
        let keep = cut.index(bytes.len() + 1);
        bytes.truncate(keep.max(1));
        for mode in ["PERMISSIVE", "DROPMALFORMED"] {
            prop_assert!(ours(&bytes, mode).is_ok(), "{} {:?}", mode, String::from_utf8_lossy(&bytes));
        }
        let _ = ours(&bytes, "FAILFAST");
    }
}
