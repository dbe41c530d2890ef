//! Strings to timestamps against real Apache Spark 4.3's answers, recorded
//! in `data/timestamp/*_golden.tsv` by `tests/spark/timestamp_golden.py`
//! (inputs hex-encoded, results in microseconds, `NULL`, or `ERROR` where
//! Spark raises).

use super::timestamp_reference::cast_reference;
use pipelines_core::plan::timestamp::{
    cast_timestamp, cast_timestamp_with_zones, Fallback, Parsed, PatternError, SparkPattern,
};
use std::collections::HashMap;

fn unhex(h: &str) -> Vec<u8> {
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
        .collect()
}

fn load(name: &str) -> Vec<Vec<String>> {
    let path = format!(
        "{}/tests/it/data/timestamp/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

/// Does our three-way answer agree with Spark's recorded answer?
fn agrees(ours: Parsed, spark: &str, time_only_ok: bool) -> bool {
    match ours {
        Parsed::Micros(v) => spark == v.to_string(),
        Parsed::Null => spark == "NULL",
        // Spark used today's date: any non-NULL value is consistent.
        Parsed::Fallback(Fallback::TimeOnly) => time_only_ok && spark != "NULL",
        // Region ids need a tz database; Spark may also return NULL for unknown regions.
        Parsed::Fallback(Fallback::RegionZone) => spark != "ERROR",
        Parsed::Fallback(Fallback::Overflow) => spark == "ERROR",
        Parsed::Fallback(Fallback::NonAscii) => true,
    }
}

/// A time of day without a date (`17:58:52Asia/Kolkata`, `T10:32:46Z`):
/// Spark gives it the date of the day it runs.
fn is_time_only(s: &[u8]) -> bool {
    let t = String::from_utf8_lossy(s);
    let t = t.trim_start();
    let t = t.strip_prefix('T').unwrap_or(t);
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    (1..=2).contains(&digits) && t.as_bytes().get(digits) == Some(&b':')
}

#[test]
fn cast_matches_spark() {
    let rows = load("cast_golden.tsv");
    assert!(rows.len() > 5000);
    let mut bad = Vec::new();
    let mut stats: HashMap<&str, usize> = HashMap::new();
    for r in &rows {
        let s = unhex(&r[0]);
        let spark = r[1].as_str();
        let fast = cast_timestamp(&s);
        let slow = cast_reference(&s);
        *stats
            .entry(match fast {
                Parsed::Micros(_) => "micros",
                Parsed::Null => "null",
                Parsed::Fallback(Fallback::TimeOnly) => "time-only",
                Parsed::Fallback(_) => "region",
            })
            .or_default() += 1;
        // With the time-zone database, a region zone gives exactly Spark's
        // answer; a time without a date takes today's date in that zone, so
        // it may differ from the recorded answer by whole days.
        let with_zones = cast_timestamp_with_zones(&s);
        let region_differs = fast == Parsed::Fallback(Fallback::RegionZone)
            && with_zones.map_or("NULL".to_string(), |v| v.to_string()) != spark
            && !(is_time_only(&s)
                && with_zones
                    .zip(spark.parse::<i64>().ok())
                    .is_some_and(|(ours, theirs)| (ours - theirs) % 86_400_000_000 == 0));
        if !agrees(fast, spark, true) || fast != slow || region_differs {
            bad.push(format!(
                "{:?} spark={} fast={:?} ref={:?}",
                String::from_utf8_lossy(&s),
                spark,
                fast,
                slow
            ));
        }
    }
    eprintln!("cast golden rows: {} {:?}", rows.len(), stats);
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad[..bad.len().min(40)].join("\n")
    );
}

#[test]
fn patterns_match_spark() {
    let mut rows = load("pattern_golden_small.tsv");
    assert!(rows.len() > 3_000);
    rows.extend(load("pattern_extra_golden.tsv"));
    let mut compiled: HashMap<String, Result<SparkPattern, PatternError>> = HashMap::new();
    let mut bad = Vec::new();
    let (mut checked, mut skipped) = (0usize, 0usize);
    for r in &rows {
        let (pat, s, spark) = (&r[0], unhex(&r[1]), r[2].as_str());
        let p = compiled
            .entry(pat.clone())
            .or_insert_with(|| SparkPattern::compile(pat));
        match p {
            Err(PatternError::RejectedBySpark { .. }) => {
                if spark != "PATTERN_ERROR" {
                    bad.push(format!("pattern {pat:?}: we reject, Spark gave {spark}"));
                }
            }
            Err(e) => {
                skipped += 1;
                if spark == "PATTERN_ERROR" {
                    bad.push(format!("pattern {pat:?}: Spark rejects it but we say {e}"));
                }
            }
            Ok(p) => {
                checked += 1;
                let ours = p.parse_ext(&s);
                if !agrees(ours, spark, false) {
                    bad.push(format!(
                        "{pat:?} {:?} spark={spark} ours={ours:?}",
                        String::from_utf8_lossy(&s)
                    ));
                }
            }
        }
    }
    eprintln!("pattern golden rows: checked {checked}, skipped (unsupported) {skipped}");
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad[..bad.len().min(60)].join("\n")
    );
}
