//! Text the engine parses from users and files — DDL schemas, interval
//! strings, the YAML spec with `${ENV}` values — mutated at random: always a
//! value or a typed error, never a panic (debug builds, so overflows panic).

use std::collections::BTreeMap;
use std::path::Path;

use pipelines_core::duration::parse_interval;
use pipelines_core::plan::ddl::parse_ddl;
use pipelines_core::spec;
use proptest::prelude::*;

const DDL_SAMPLES: &[&str] = &[
    "ts TIMESTAMP, user_id STRING NOT NULL COMMENT 'the user'",
    "a DECIMAL(10, 2), b ARRAY<STRUCT<x: INT, y: MAP<STRING, ARRAY<BIGINT>>>>",
    "`weird name` STRING, n INT",
];
const INTERVAL_SAMPLES: &[&str] = &[
    "10 minutes",
    "1 hour 30 seconds",
    "INTERVAL '5' MINUTE",
    "250 ms",
];
const SPEC_SAMPLE: &str = "name: p\nstorage: ${STORE:-./s}\nconfiguration:\n  spark.sql.shuffle.partitions: \"4\"\ntables:\n  t: { format: parquet, partition_cols: [day], schema: \"a INT\" }\nsinks:\n  k:\n    format: kafka\n    options:\n      kafka.bootstrap.servers: ${BROKERS}\n      topic: t\nflows:\n  f:\n    trigger: { processing_time: 1 minute }\nlibraries:\n  - glob:\n      include: transformations/**\n";

/// `sample` with bytes replaced, inserted or removed, or cut short.
fn mutated(samples: &'static [&'static str]) -> impl Strategy<Value = String> {
    (
        prop::sample::select(samples),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 0..6),
        any::<prop::sample::Index>(),
        any::<bool>(),
    )
        .prop_map(|(s, edits, cut, do_cut)| {
            let mut b = s.as_bytes().to_vec();
            for (at, byte, kind) in edits {
                let i = at.index(b.len() + 1);
                const BYTES: &[u8] = b"(<>,: '`\"{}[]-$\\\n\t0123456789aZ";
                let byte = BYTES[byte as usize % BYTES.len()];
                match kind {
                    0 if i < b.len() => b[i] = byte,
                    1 => b.insert(i, byte),
                    _ if i < b.len() => {
                        b.remove(i);
                    }
                    _ => {}
                }
            }
            if do_cut {
                b.truncate(cut.index(b.len() + 1));
            }
            String::from_utf8_lossy(&b).into_owned()
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, .. ProptestConfig::default() })]

    #[test]
    fn ddl_strings(s in prop_oneof![mutated(DDL_SAMPLES), ".{0,40}"]) {
        let _ = parse_ddl(&s);
    }

    #[test]
    fn deeply_nested_ddl_is_an_error(depth in 100usize..3000) {
        let ddl = format!("a {}INT{}", "ARRAY<".repeat(depth), ">".repeat(depth));
        prop_assert!(parse_ddl(&ddl).is_err());
    }

    #[test]
    fn interval_strings(s in prop_oneof![mutated(INTERVAL_SAMPLES), ".{0,30}", "[0-9]{15,30} (days|seconds|ms)"]) {
        let _ = parse_interval(&s);
    }

    #[test]
    fn spec_files(s in mutated(&[SPEC_SAMPLE])) {
        if let Ok(mut parsed) = spec::parse_str(&s, Path::new("pipeline.yml")) {
            let env: BTreeMap<String, String> = [("BROKERS".to_string(), "h:9092".to_string())].into();
            let _ = parsed.resolve_env(|k: &str| env.get(k).cloned());
        }
    }
}
