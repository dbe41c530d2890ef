//! Property tests.
//! (a) random valid datetimes, formatted in many Spark-accepted ways, parse to the value
//!     chrono computes;
//! (b) random bytes and mutations of valid strings: the fast cast path agrees with the slow,
//!     literal reference transcription (`timestamp_reference`) and never panics;
//! (c) the same for `SparkPattern`, against a small declarative reference written here for
//!     a few common patterns.

use super::timestamp_reference::cast_reference;
use chrono::{FixedOffset, NaiveDate, TimeZone};
use pipelines_core::plan::timestamp::{cast_timestamp, Fallback, Parsed, SparkPattern};
use proptest::prelude::*;

fn days_in_month(y: i32, m: u32) -> u32 {
    let next = if m == 12 {
        NaiveDate::from_ymd_opt(y + 1, 1, 1)
    } else {
        NaiveDate::from_ymd_opt(y, m + 1, 1)
    };
    next.unwrap().pred_opt().unwrap().day0() + 1
}
use chrono::Datelike;

#[derive(Debug, Clone)]
struct Dt {
    y: i32,
    mo: u32,
    d: u32,
    h: u32,
    mi: u32,
    s: u32,
    frac: Vec<u8>, // 0..=9 fraction digits
}

fn dt() -> impl Strategy<Value = Dt> {
    (
        1i32..=9999,
        1u32..=12,
        0u32..31,
        0u32..24,
        0u32..60,
        0u32..60,
        prop::collection::vec(0u8..10, 0..=9),
    )
        .prop_map(|(y, mo, dd, h, mi, s, frac)| {
            let d = dd % days_in_month(y, mo) + 1;
            Dt {
                y,
                mo,
                d,
                h,
                mi,
                s,
                frac,
            }
        })
}

impl Dt {
    fn micros_of_second(&self) -> u32 {
        let mut us = 0u32;
        for i in 0..6 {
            us = us * 10 + *self.frac.get(i).unwrap_or(&0) as u32;
        }
        us
    }
    /// chrono: UTC wall time -> micros
    fn utc_micros(&self) -> i64 {
        NaiveDate::from_ymd_opt(self.y, self.mo, self.d)
            .unwrap()
            .and_hms_micro_opt(self.h, self.mi, self.s, self.micros_of_second())
            .unwrap()
            .and_utc()
            .timestamp_micros()
    }
    fn frac_str(&self) -> String {
        self.frac.iter().map(|d| (b'0' + d) as char).collect()
    }
}

/// Zone forms accepted by CAST with their offsets in seconds.
fn zone() -> impl Strategy<Value = (String, i32)> {
    let fixed = prop::sample::select(vec![
        ("", 0),
        ("Z", 0),
        (" Z", 0),
        ("UTC", 0),
        (" UTC", 0),
        ("GMT", 0),
        ("UT", 0),
        ("EST", -5 * 3600),
        ("+00:00", 0),
        ("-00:00", 0),
        ("+5", 5 * 3600),
        ("-5:30", -(5 * 3600 + 1800)),
        ("+05:3", 5 * 3600 + 180),
        ("GMT+5", 5 * 3600),
        ("UTC-08:00", -8 * 3600),
        ("UT+01:30", 5400),
        ("+053015", 5 * 3600 + 1800 + 15),
        ("-05:30:15", -(5 * 3600 + 1800 + 15)),
        ("+18:00", 18 * 3600),
    ])
    .prop_map(|(s, o)| (s.to_string(), o));
    let random = (any::<bool>(), 0i32..18, 0i32..60, 0u8..3, any::<bool>()).prop_map(
        |(neg, h, m, style, space)| {
            let sign = if neg { '-' } else { '+' };
            let s = match style {
                0 => format!("{sign}{h:02}:{m:02}"),
                1 => format!("{sign}{h:02}{m:02}"),
                _ => format!("GMT{sign}{h:02}:{m:02}"),
            };
            let off = (h * 3600 + m * 60) * if neg { -1 } else { 1 };
            (if space { format!(" {s}") } else { s }, off)
        },
    );
    prop_oneof![fixed, random]
}

fn pad(v: u32, padded: bool) -> String {
    if padded {
        format!("{v:02}")
    } else {
        v.to_string()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, .. ProptestConfig::default() })]

    // (a)
    #[test]
    fn cast_valid_datetimes(d in dt(), sep in prop::sample::select(vec![" ", "T"]), z in zone(),
                            pads in any::<[bool; 5]>(), ws in prop::sample::select(vec!["", " ", "\t", "\n ", "\u{0}"]),
                            dot in any::<bool>()) {
        let mut s = format!("{ws}{:04}-{}-{}{sep}{}:{}:{}", d.y, pad(d.mo, pads[0]), pad(d.d, pads[1]),
                            pad(d.h, pads[2]), pad(d.mi, pads[3]), pad(d.s, pads[4]));
        if !d.frac.is_empty() || dot {
            s.push('.');
            s += &d.frac_str();
        }
        s += &z.0;
        s += ws;
        let expected = d.utc_micros() - z.1 as i64 * 1_000_000;
        prop_assert_eq!(cast_timestamp(s.as_bytes()), Parsed::Micros(expected), "{:?}", s);
        // date-only forms
        let s2 = format!("{ws}{:04}-{}-{}{ws}", d.y, pad(d.mo, pads[0]), pad(d.d, pads[1]));
        let e2 = NaiveDate::from_ymd_opt(d.y, d.mo, d.d).unwrap().and_hms_opt(0, 0, 0).unwrap().and_utc().timestamp_micros();
        prop_assert_eq!(cast_timestamp(s2.as_bytes()), Parsed::Micros(e2), "{:?}", s2);
    }

    // (b) arbitrary bytes
    #[test]
    fn cast_random_bytes_agree(b in prop::collection::vec(any::<u8>(), 0..40)) {
        prop_assert_eq!(cast_timestamp(&b), cast_reference(&b), "{:?}", String::from_utf8_lossy(&b));
    }

    // (b) bytes from a datetime-ish alphabet (far more likely to get deep into the grammar)
    #[test]
    fn cast_alphabet_bytes_agree(b in prop::collection::vec(prop::sample::select(
            b"0123456789-:.T +Z/GMUTCESzt\t\x00\x7f\xc3\xa9".to_vec()), 0..32)) {
        prop_assert_eq!(cast_timestamp(&b), cast_reference(&b), "{:?}", String::from_utf8_lossy(&b));
    }

    // (b) mutations of valid strings
    #[test]
    fn cast_mutations_agree(d in dt(), z in zone(), sep in prop::sample::select(vec![" ", "T"]),
                            edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..4,
                                prop::sample::select(b"0123456789-:.T +Z/\x00 \xff".to_vec())), 1..4)) {
        let s = format!("{:04}-{:02}-{:02}{sep}{:02}:{:02}:{:02}.{}{}", d.y, d.mo, d.d, d.h, d.mi, d.s, d.frac_str(), z.0);
        let mut b = s.into_bytes();
        for (idx, op, c) in edits {
            let n = b.len();
            match op {
                0 if n > 0 => { b.remove(idx.index(n)); }
                1 => { b.insert(idx.index(n + 1), c); }
                2 if n > 0 => { let i = idx.index(n); b[i] = c; }
                _ if n > 0 => { let i = idx.index(n); let x = b[i]; b.insert(i, x); }
                _ => {}
            }
        }
        prop_assert_eq!(cast_timestamp(&b), cast_reference(&b), "{:?}", String::from_utf8_lossy(&b));
    }
}

// ---------------------------------------------------------------------------------------
// (c) SparkPattern
// ---------------------------------------------------------------------------------------

const PATS: [&str; 5] = [
    "yyyy-MM-dd HH:mm:ss",
    "yyyy-MM-dd'T'HH:mm:ss.SSS",
    "yyyyMMdd",
    "dd/MM/yyyy",
    "yyyy-MM-dd'T'HH:mm:ssXXX",
];

/// Declarative reference for the five patterns above (java.time strict-parse rules spelled
/// out per pattern; chrono for calendar validity).
fn ref_pattern(k: usize, s: &[u8]) -> Parsed {
    if !s.is_ascii() {
        return Parsed::Null;
    }
    let st = std::str::from_utf8(s).unwrap();
    let null = Parsed::Null;
    // 'yyyy' (appendValue(YEAR, 4, 19, EXCEEDS_PAD)): returns (year, rest)
    fn year_prefix(st: &str, fixed_after: usize) -> Option<(i64, &str)> {
        let (sign, body) = match st.as_bytes().first() {
            Some(b'+') => (1, &st[1..]),
            Some(b'-') => (-1, &st[1..]),
            _ => (0, st),
        };
        let run = body.bytes().take_while(u8::is_ascii_digit).count();
        // adjacent fixed-width fields take their digits from the end of the run
        let width = if fixed_after > 0 {
            run.checked_sub(fixed_after)?.max(4)
        } else {
            run
        };
        if !(4..=19).contains(&width) || run < width + fixed_after {
            return None;
        }
        match sign {
            0 if width != 4 => return None,
            1 if width <= 4 => return None,
            _ => {}
        }
        let v: u128 = body[..width].parse().ok()?;
        if v > 999_999_999 {
            return None; // out of YEAR range (or > 63 bits): never a valid result
        }
        if sign == -1 && v == 0 {
            return None;
        }
        Some((
            if sign == -1 { -(v as i64) } else { v as i64 },
            &body[width..],
        ))
    }
    // template: 'd' = ASCII digit, 'T' = case-insensitive T, others literal
    fn template(rest: &str, t: &str) -> Option<Vec<u32>> {
        if rest.len() != t.len() {
            return None;
        }
        let mut nums = Vec::new();
        let (rb, tb) = (rest.as_bytes(), t.as_bytes());
        let mut i = 0;
        while i < tb.len() {
            match tb[i] {
                b'd' => {
                    if !rb[i].is_ascii_digit() || !rb[i + 1].is_ascii_digit() {
                        return None;
                    }
                    nums.push(((rb[i] - b'0') * 10 + (rb[i + 1] - b'0')) as u32);
                    i += 2;
                    continue;
                }
                b'T' => {
                    if rb[i] != b'T' && rb[i] != b't' {
                        return None;
                    }
                }
                c => {
                    if rb[i] != c {
                        return None;
                    }
                }
            }
            i += 1;
        }
        Some(nums)
    }
    let (y, mo, d, h, mi, sec, nanos, off): (i64, u32, u32, u32, u32, u32, u32, i64) = match k {
        0 => {
            let Some((y, rest)) = year_prefix(st, 0) else {
                return null;
            };
            let Some(n) = template(rest, "-dd-dd dd:dd:dd") else {
                return null;
            };
            (y, n[0], n[1], n[2], n[3], n[4], 0, 0)
        }
        1 => {
            let Some((y, rest)) = year_prefix(st, 0) else {
                return null;
            };
            let Some(dot) = rest.find('.') else {
                return null;
            };
            let Some(n) = template(&rest[..dot], "-dd-ddTdd:dd:dd") else {
                return null;
            };
            let f = &rest[dot + 1..];
            if f.is_empty() || f.len() > 3 || !f.bytes().all(|c| c.is_ascii_digit()) {
                return null;
            }
            let nanos = format!("{f:0<9}").parse().unwrap();
            (y, n[0], n[1], n[2], n[3], n[4], nanos, 0)
        }
        2 => {
            let Some((y, rest)) = year_prefix(st, 4) else {
                return null;
            };
            let Some(n) = template(rest, "dddd") else {
                return null;
            };
            (y, n[0], n[1], 0, 0, 0, 0, 0)
        }
        3 => {
            if st.len() < 6 {
                return null;
            }
            let Some(n) = template(&st[..6], "dd/dd/") else {
                return null;
            };
            let Some((y, rest)) = year_prefix(&st[6..], 0) else {
                return null;
            };
            if !rest.is_empty() {
                return null;
            }
            (y, n[1], n[0], 0, 0, 0, 0, 0)
        }
        _ => {
            let Some((y, rest)) = year_prefix(st, 0) else {
                return null;
            };
            if rest.len() < 15 {
                return null;
            }
            let Some(n) = template(&rest[..15], "-dd-ddTdd:dd:dd") else {
                return null;
            };
            let z = &rest[15..];
            let off = if z == "Z" || z == "z" {
                0
            } else {
                let zb = z.as_bytes();
                if zb.len() != 6 || (zb[0] != b'+' && zb[0] != b'-') {
                    return null;
                }
                let Some(t) = template(&z[1..], "dd:dd") else {
                    return null;
                };
                if t[0] > 23 || t[1] > 59 {
                    return null;
                }
                let o = (t[0] * 3600 + t[1] * 60) as i64;
                if o > 18 * 3600 {
                    return null;
                }
                if zb[0] == b'-' {
                    -o
                } else {
                    o
                }
            };
            (y, n[0], n[1], n[2], n[3], n[4], 0, off)
        }
    };
    // calendar validity via chrono, years folded into chrono's range by 400-year cycles
    let cyc = y.div_euclid(400);
    let Some(date) = NaiveDate::from_ymd_opt((y - 400 * cyc) as i32 + 2000, mo, d) else {
        return null;
    };
    let Some(t) = date.and_hms_nano_opt(h, mi, sec, nanos) else {
        return null;
    };
    let base = t.and_utc().timestamp() as i128 - 2000i128 / 400 * 146_097 * 86_400;
    let es = base + cyc as i128 * 146_097 * 86_400 - off as i128;
    let ms = es * 1_000_000;
    if ms < i64::MIN as i128 || ms > i64::MAX as i128 {
        return Parsed::Fallback(Fallback::Overflow);
    }
    let v = ms + (nanos / 1000) as i128;
    if v < i64::MIN as i128 || v > i64::MAX as i128 {
        return Parsed::Fallback(Fallback::Overflow);
    }
    Parsed::Micros(v as i64)
}

fn format_for(k: usize, d: &Dt, off_min: i32) -> (String, i64) {
    let nd = NaiveDate::from_ymd_opt(d.y, d.mo, d.d).unwrap();
    let ndt = nd
        .and_hms_micro_opt(d.h, d.mi, d.s, d.micros_of_second() / 1000 * 1000)
        .unwrap();
    match k {
        0 => (
            ndt.format("%Y-%m-%d %H:%M:%S").to_string(),
            ndt.and_utc().timestamp_micros().div_euclid(1_000_000) * 1_000_000,
        ),
        1 => (
            ndt.format("%Y-%m-%dT%H:%M:%S%.3f").to_string(),
            ndt.and_utc().timestamp_micros(),
        ),
        2 => (
            nd.format("%Y%m%d").to_string(),
            nd.and_hms_opt(0, 0, 0)
                .unwrap()
                .and_utc()
                .timestamp_micros(),
        ),
        3 => (
            nd.format("%d/%m/%Y").to_string(),
            nd.and_hms_opt(0, 0, 0)
                .unwrap()
                .and_utc()
                .timestamp_micros(),
        ),
        _ => {
            let tz = FixedOffset::east_opt(off_min * 60).unwrap();
            let z = tz
                .from_local_datetime(&nd.and_hms_opt(d.h, d.mi, d.s).unwrap())
                .unwrap();
            (
                z.format("%Y-%m-%dT%H:%M:%S%:z").to_string(),
                z.timestamp_micros(),
            )
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, .. ProptestConfig::default() })]

    // (c) valid values round-trip
    #[test]
    fn pattern_valid_roundtrip(k in 0usize..5, d in dt(), off_min in -18 * 60..=18 * 60) {
        let p = SparkPattern::compile(PATS[k]).unwrap();
        let (s, expected) = format_for(k, &d, off_min);
        prop_assert_eq!(p.parse_ext(s.as_bytes()), Parsed::Micros(expected), "{} {:?}", PATS[k], s);
        prop_assert_eq!(ref_pattern(k, s.as_bytes()), Parsed::Micros(expected), "ref {} {:?}", PATS[k], s);
    }

    // (c) mutations agree with the reference
    #[test]
    fn pattern_mutations_agree(k in 0usize..5, d in dt(), off_min in -18 * 60..=18 * 60,
                               big_year in prop::option::of(prop::sample::select(vec!["+12345", "-0001", "-0000", "+294248", "+999999999", "+1000000000", "0", "+0000", "+00000"])),
                               edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..4,
                                   prop::sample::select(b"0123456789-:.Tt +Z/\xff".to_vec())), 0..3)) {
        let p = SparkPattern::compile(PATS[k]).unwrap();
        let (s, _) = format_for(k, &d, off_min);
        let mut b = s.into_bytes();
        if let Some(y) = big_year {
            // replace the 4-digit year
            let at = if k == 3 { 6 } else { 0 };
            b.splice(at..at + 4, y.bytes());
        }
        for (idx, op, c) in edits {
            let n = b.len();
            match op {
                0 if n > 0 => { b.remove(idx.index(n)); }
                1 => { b.insert(idx.index(n + 1), c); }
                2 if n > 0 => { let i = idx.index(n); b[i] = c; }
                _ if n > 0 => { let i = idx.index(n); let x = b[i]; b.insert(i, x); }
                _ => {}
            }
        }
        prop_assert_eq!(p.parse_ext(&b), ref_pattern(k, &b), "{} {:?}", PATS[k], String::from_utf8_lossy(&b));
    }

    // never panics, any pattern letters / any input
    #[test]
    fn pattern_never_panics(pat in "[yMdHhkKmsSaXxZ'T:./ -]{0,16}", b in prop::collection::vec(any::<u8>(), 0..24)) {
        if let Ok(p) = SparkPattern::compile(&pat) {
            let _ = p.parse_ext(&b);
        }
    }
}

// (d) `to_timestamp` computed by a plan's leaf (`push_timestamps_into_leaves`),
//     from plain strings and from dictionary-encoded ones, gives the rows the
//     plan gives without it.

/// A string that is often a timestamp, sometimes a near miss or junk.
fn maybe_timestamp() -> impl Strategy<Value = Option<String>> {
    let valid =
        (dt(), prop::sample::select(vec![" ", "T"]), any::<bool>()).prop_map(|(d, sep, z)| {
            let mut s = format!(
                "{:04}-{:02}-{:02}{sep}{:02}:{:02}:{:02}",
                d.y, d.mo, d.d, d.h, d.mi, d.s
            );
            if !d.frac.is_empty() {
                s.push('.');
                s += &d.frac_str();
            }
            if z {
                s.push('Z');
            }
            s
        });
    prop_oneof![
        6 => valid.prop_map(Some),
        2 => "[0-9:T .Z+-]{0,24}".prop_map(Some),
        1 => Just(None),
    ]
}

/// The rows of `select_expr([expr AS t, id])` over `strings`, with and
/// without the leaf conversion; dictionary-encoded (keys `keys` into
/// `strings`) for the leaf.
fn through_plans(
    expr: &str,
    strings: &[Option<String>],
    keys: &[Option<usize>],
) -> (Vec<Option<i64>>, Vec<Option<i64>>) {
    use arrow::array::{
        Array, ArrayRef, AsArray, DictionaryArray, Int32Array, Int64Array, StringArray,
    };
    use arrow::datatypes::TimestampMicrosecondType;
    use arrow::record_batch::RecordBatch;
    use pipelines_core::engine::exec::CompiledPlan;
    use pipelines_core::prelude::*;
    use std::sync::Arc;

    let df = Session::new()
        .read_stream()
        .format("memory")
        .schema("s STRING, id BIGINT")
        .load("leaf_conversion_props")
        .unwrap()
        .select_expr([format!("{expr} AS t"), "id".to_string()])
        .unwrap();
    let resolved = df.resolve(&std::collections::HashMap::new()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..keys.len() as i64));
    let run = |push: bool| {
        let mut plan = CompiledPlan::compile("f", &df, &resolved, 1).unwrap();
        let schema = plan.leaves()[0].schema.clone();
        let column: ArrayRef = if push {
            plan.push_timestamps_into_leaves();
            assert!(
                plan.leaf_dictionary_columns()[0][0],
                "the leaf converts `s`"
            );
            let values: ArrayRef = Arc::new(StringArray::from(strings.to_vec()));
            let keys = Int32Array::from_iter(keys.iter().map(|k| k.map(|k| k as i32)));
            Arc::new(DictionaryArray::new(keys, values))
        } else {
            let rows: Vec<Option<String>> = keys
                .iter()
                .map(|k| k.and_then(|k| strings[k].clone()))
                .collect();
            Arc::new(StringArray::from(rows))
        };
        let fields = vec![
            schema
                .field(0)
                .clone()
                .with_data_type(column.data_type().clone()),
            schema.field(1).clone(),
        ];
        let batch = RecordBatch::try_new(
            Arc::new(arrow::datatypes::Schema::new(fields)),
            vec![column, ids.clone()],
        )
        .unwrap();
        let out = rt.block_on(plan.execute(vec![vec![batch]])).unwrap();
        let mut got = Vec::new();
        for b in &out {
            let t = b.column(0).as_primitive::<TimestampMicrosecondType>();
            got.extend((0..t.len()).map(|i| t.is_valid(i).then(|| t.value(i))));
        }
        got
    };
    (run(false), run(true))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    #[test]
    fn leaf_conversion_agrees_with_the_plan(strings in prop::collection::vec(maybe_timestamp(), 1..30),
                                            picks in prop::collection::vec(prop::option::weighted(0.9, any::<prop::sample::Index>()), 0..60),
                                            pattern in any::<bool>()) {
        let keys: Vec<Option<usize>> = picks.iter().map(|p| p.as_ref().map(|i| i.index(strings.len()))).collect();
        let expr = if pattern { "to_timestamp(s, 'yyyy-MM-dd HH:mm:ss')" } else { "to_timestamp(s)" };
        let (plain, leaf) = through_plans(expr, &strings, &keys);
        prop_assert_eq!(plain.len(), keys.len());
        prop_assert_eq!(leaf, plain);
    }
}
