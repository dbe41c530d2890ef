//! Hand-written edge cases. Expected values are computed independently of the crate's
//! calendar code: either spelled out (days * 86_400_000_000 + ...) or via chrono.

use chrono::NaiveDate;
use pipelines_core::plan::timestamp::{
    cast_timestamp, cast_timestamp_at, Fallback, Parsed, PatternError, SparkPattern,
};

fn parse_cast(s: &[u8]) -> Option<i64> {
    cast_timestamp(s).micros()
}

const DAY: i64 = 86_400_000_000;
const H: i64 = 3_600_000_000;
const MIN: i64 = 60_000_000;
const SEC: i64 = 1_000_000;

/// chrono-computed micros for a UTC wall time.
fn ch(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32, us: u32) -> i64 {
    NaiveDate::from_ymd_opt(y, mo, d)
        .unwrap()
        .and_hms_micro_opt(h, mi, s, us)
        .unwrap()
        .and_utc()
        .timestamp_micros()
}

fn c(s: &str) -> Parsed {
    cast_timestamp(s.as_bytes())
}
fn m(v: i64) -> Parsed {
    Parsed::Micros(v)
}

#[test]
fn cast_basic_dates() {
    // 2024-01-01 is day 19723 after 1970-01-01 (54 years, 13 leap days: 54*365+13).
    assert_eq!(c("2024-01-01T00:00:07"), m(19_723 * DAY + 7 * SEC));
    assert_eq!(c("2024-01-01T00:00:07"), m(ch(2024, 1, 1, 0, 0, 7, 0)));
    assert_eq!(c("1970-01-01"), m(0));
    assert_eq!(c("1969-12-31 23:59:59.999999"), m(-1));
    assert_eq!(c("2024"), m(19_723 * DAY));
    assert_eq!(c("2024-1"), m(19_723 * DAY));
    assert_eq!(c("2024-1-1"), m(19_723 * DAY));
    assert_eq!(c("2024-01-01 "), m(19_723 * DAY));
    assert_eq!(c("2024-01-01T"), Parsed::Null);
    assert_eq!(
        c("2024-01-01 1:2:3"),
        m(19_723 * DAY + H + 2 * MIN + 3 * SEC)
    );
    assert_eq!(c("2024-01-01 12"), m(19_723 * DAY + 12 * H));
    assert_eq!(c("2024-01-01 12:30"), m(19_723 * DAY + 12 * H + 30 * MIN));
    assert_eq!(c("2024-01-01 12:"), Parsed::Null);
    assert_eq!(c("2024-01-01 12:30:"), Parsed::Null);
    assert_eq!(parse_cast(b"2024-01-01"), Some(19_723 * DAY));
}

#[test]
fn cast_leap_and_month_ends() {
    // 2024-02-29: 19723 + 31 + 28
    assert_eq!(c("2024-02-29"), m(19_782 * DAY));
    assert_eq!(c("2024-02-29 23:59:59"), m(ch(2024, 2, 29, 23, 59, 59, 0)));
    assert_eq!(c("2023-02-29"), Parsed::Null);
    assert_eq!(c("1900-02-29"), Parsed::Null);
    assert_eq!(c("2000-02-29"), m(ch(2000, 2, 29, 0, 0, 0, 0)));
    assert_eq!(c("2024-04-30"), m(ch(2024, 4, 30, 0, 0, 0, 0)));
    assert_eq!(c("2024-04-31"), Parsed::Null);
    assert_eq!(
        c("2024-12-31 23:59:59.999999"),
        m(ch(2024, 12, 31, 23, 59, 59, 999_999))
    );
    assert_eq!(c("2024-01-32"), Parsed::Null);
    assert_eq!(c("2024-13-01"), Parsed::Null);
    assert_eq!(c("2024-00-10"), Parsed::Null);
    assert_eq!(c("2024-01-00"), Parsed::Null);
    assert_eq!(c("2024-01-01 24:00:00"), Parsed::Null);
    assert_eq!(c("2024-01-01 23:60:00"), Parsed::Null);
    assert_eq!(c("2024-01-01 23:59:60"), Parsed::Null);
}

#[test]
fn cast_fractions_1_to_9_digits_truncate() {
    let base = 19_723 * DAY;
    let expect = [
        100_000, 120_000, 123_000, 123_400, 123_450, 123_456, 123_456, 123_456, 123_456,
    ];
    let digits = "123456789";
    for n in 1..=9 {
        let s = format!("2024-01-01 00:00:00.{}", &digits[..n]);
        assert_eq!(c(&s), m(base + expect[n - 1]), "{s}");
    }
    assert_eq!(c("2024-01-01 00:00:00.999999999"), m(base + 999_999)); // truncated, not rounded
    assert_eq!(c("2024-01-01 00:00:00.1234567890123"), m(base + 123_456));
    assert_eq!(c("2024-01-01 00:00:00."), m(base));
    assert_eq!(c("2024-01-01 00:00:00.Z"), m(base));
    assert_eq!(c("2024-01-01 00:00:00.1.2"), Parsed::Null);
}

#[test]
fn cast_zones() {
    let base = 19_723 * DAY + 12 * H;
    assert_eq!(c("2024-01-01T12:00:00Z"), m(base));
    assert_eq!(c("2024-01-01T12:00:00 Z"), m(base));
    assert_eq!(c("2024-01-01T12:00:00z"), Parsed::Null); // ZoneId.of is case-sensitive
    assert_eq!(c("2024-01-01T12:00:00UTC"), m(base));
    assert_eq!(c("2024-01-01T12:00:00 GMT"), m(base));
    assert_eq!(c("2024-01-01T12:00:00+05:30"), m(base - 5 * H - 30 * MIN));
    assert_eq!(
        c("2024-01-01T12:00:00.5+05:30"),
        m(base - 5 * H - 30 * MIN + 500_000)
    );
    assert_eq!(c("2024-01-01T12:00:00-0800"), m(base + 8 * H));
    assert_eq!(c("2024-01-01T12:00:00-08"), m(base + 8 * H));
    assert_eq!(c("2024-01-01T12:00:00+5"), m(base - 5 * H));
    assert_eq!(c("2024-01-01T12:00:00+5:30"), m(base - 5 * H - 30 * MIN)); // singleHourTz
    assert_eq!(c("2024-01-01T12:00:00+05:3"), m(base - 5 * H - 3 * MIN)); // singleMinuteTz
    assert_eq!(c("2024-01-01T12:00:00GMT+5:30"), m(base - 5 * H - 30 * MIN));
    assert_eq!(c("2024-01-01T12:00:00UTC-08:00"), m(base + 8 * H));
    assert_eq!(
        c("2024-01-01T12:00:00+05:30:15"),
        m(base - 5 * H - 30 * MIN - 15 * SEC)
    );
    assert_eq!(c("2024-01-01T12:00:00+18:00"), m(base - 18 * H));
    assert_eq!(c("2024-01-01T12:00:00+18:01"), Parsed::Null);
    assert_eq!(c("2024-01-01T12:00:00+19"), Parsed::Null);
    assert_eq!(c("2024-01-01T12:00:00 EST"), m(base + 5 * H)); // SHORT_IDS fixed offset
    assert_eq!(c("2024-01-01T12:00:00+"), Parsed::Null);
    assert_eq!(c("2024-01-01T12:00:00 +05 30"), Parsed::Null);
    assert_eq!(
        c("2024-01-01T12:00:00 America/Los_Angeles"),
        Parsed::Fallback(Fallback::RegionZone)
    );
    assert_eq!(
        c("2024-01-01T12:00:00 PST"),
        Parsed::Fallback(Fallback::RegionZone)
    );
    assert_eq!(c("2024-01-01T12:00:00 Foo Bar"), Parsed::Null); // space fails checkName
    assert_eq!(c("2023-02-29T12:00:00 America/Los_Angeles"), Parsed::Null); // date invalid anyway
    assert_eq!(c("2024-01-01 12:00Z"), Parsed::Null); // zone only after seconds
    assert_eq!(c("2024-01-01Z"), Parsed::Null);
}

#[test]
fn cast_separators_whitespace_garbage() {
    let base = ch(2024, 6, 15, 10, 20, 30, 0);
    assert_eq!(c("2024-06-15T10:20:30"), m(base));
    assert_eq!(c("2024-06-15 10:20:30"), m(base));
    assert_eq!(c("2024-06-15t10:20:30"), Parsed::Null);
    assert_eq!(c("2024-06-15\t10:20:30"), Parsed::Null);
    assert_eq!(c("2024-06-15  10:20:30"), Parsed::Null);
    assert_eq!(c("  \t\n2024-06-15 10:20:30 \r\n\u{0}\u{7f}"), m(base));
    assert_eq!(c("\u{a0}2024-06-15 10:20:30"), Parsed::Null); // U+00A0 bytes are not trimmed
    assert_eq!(c(""), Parsed::Null);
    assert_eq!(c("   "), Parsed::Null);
    assert_eq!(c("garbage"), Parsed::Null);
    assert_eq!(c("2024/06/15"), Parsed::Null);
    assert_eq!(c("20240615"), Parsed::Null);
    assert_eq!(c("024-01-01"), Parsed::Null);
    assert_eq!(c("2024-001-01"), Parsed::Null);
    assert_eq!(cast_timestamp(b"\xff\xfe2024-01-01"), Parsed::Null);
    assert_eq!(cast_timestamp(b"2024-01-01 00:00:00\xff"), Parsed::Null);
    assert_eq!(
        cast_timestamp(b"2024-01-01 00:00:00 \xc3\xa9"),
        Parsed::Null
    );
}

#[test]
fn cast_signed_and_huge_years() {
    assert_eq!(c("+2024-01-01"), m(19_723 * DAY));
    assert_eq!(c("-0001-01-01"), m(ch(-1, 1, 1, 0, 0, 0, 0)));
    assert_eq!(c("0000-02-29"), m(ch(0, 2, 29, 0, 0, 0, 0)));
    assert_eq!(c("12024-01-01"), m(ch(12024, 1, 1, 0, 0, 0, 0)));
    assert_eq!(c("+294247-01-10T04:00:54.775807Z"), m(i64::MAX));
    assert_eq!(c("+294247-01-10T04:00:54.775808Z"), Parsed::Null);
    assert_eq!(c("-290308-12-21T19:59:05.224192Z"), m(i64::MIN));
    assert_eq!(c("-290308-12-21T19:59:05.224191Z"), Parsed::Null);
    assert_eq!(c("999999-12-31"), Parsed::Null); // overflow -> NULL for CAST
    assert_eq!(c("1000000-01-01"), Parsed::Null); // 7 year digits
    assert_eq!(c("99999999999999999999-01-01"), Parsed::Null);
    assert_eq!(c("+-2024"), Parsed::Null);
    assert_eq!(c("-2024"), m(ch(-2024, 1, 1, 0, 0, 0, 0)));
}

#[test]
fn cast_time_only() {
    assert_eq!(c("12:00:00"), Parsed::Fallback(Fallback::TimeOnly));
    assert_eq!(c("T12:00"), Parsed::Fallback(Fallback::TimeOnly));
    assert_eq!(c("1:2"), Parsed::Fallback(Fallback::TimeOnly));
    assert_eq!(c(" T12:00:00"), Parsed::Null); // the 'T' must be byte 0 of the untrimmed input
    assert_eq!(c("+12:00:00"), Parsed::Null);
    assert_eq!(c("25:00:00"), Parsed::Null);
    assert_eq!(c("123:00"), Parsed::Null);
    assert_eq!(
        c("12:00:00 Europe/Paris"),
        Parsed::Fallback(Fallback::RegionZone)
    );
    let now = ch(2024, 3, 10, 22, 0, 0, 0);
    assert_eq!(
        cast_timestamp_at(b"12:00:00", now),
        m(ch(2024, 3, 10, 12, 0, 0, 0))
    );
    // at 22:00Z it is already March 11 in +05:00
    assert_eq!(
        cast_timestamp_at(b"12:00:00+05:00", now),
        m(ch(2024, 3, 11, 7, 0, 0, 0))
    );
    assert_eq!(cast_timestamp_at(b"2024-01-01", now), m(19_723 * DAY));
}

#[test]
fn pattern_compile_errors() {
    let err = |p: &str| SparkPattern::compile(p).unwrap_err();
    assert!(matches!(
        err("yyyy-MM-dd EEE"),
        PatternError::RejectedBySpark {
            letter: Some('E'),
            ..
        }
    ));
    assert!(matches!(
        err("YYYY-MM-dd"),
        PatternError::RejectedBySpark {
            letter: Some('Y'),
            ..
        }
    ));
    assert!(matches!(
        err("uuuu-MM-dd"),
        PatternError::RejectedBySpark {
            letter: Some('u'),
            ..
        }
    ));
    assert!(matches!(
        err("yyyyyyy"),
        PatternError::RejectedBySpark { .. }
    ));
    assert!(matches!(
        err("yyyy-MM-dd HHH"),
        PatternError::RejectedBySpark {
            letter: Some('H'),
            ..
        }
    ));
    assert!(matches!(
        err("yyyy-MM-dd bb"),
        PatternError::RejectedBySpark {
            letter: Some('b'),
            ..
        }
    ));
    assert!(matches!(
        err("yyyy-MM-dd SSSSSSSSSS"),
        PatternError::RejectedBySpark {
            letter: Some('S'),
            ..
        }
    ));
    assert!(matches!(
        err("yyyy-MM-dd VV"),
        PatternError::UnsupportedLetter {
            letter: 'V',
            count: 2
        }
    ));
    assert!(matches!(
        err("yyyy-DDD"),
        PatternError::UnsupportedLetter { letter: 'D', .. }
    ));
    assert!(matches!(
        err("yyyy-MM-dd HH:mm ZZZZ"),
        PatternError::UnsupportedLetter {
            letter: 'Z',
            count: 4
        }
    ));
    assert!(matches!(
        err("yyyy-MM-dd[ HH:mm]"),
        PatternError::UnsupportedFeature(_)
    ));
    assert!(matches!(
        err("yyyy-MM-dd HH hh"),
        PatternError::UnsupportedFeature(_)
    ));
    assert!(SparkPattern::compile("yyyy-MM-dd HH:mm:ss").is_ok());
    assert!(SparkPattern::compile("yyyy-MM-dd'T'HH:mm:ss.SSSXXX").is_ok());
}

fn pp(p: &str, s: &str) -> Parsed {
    SparkPattern::compile(p).unwrap().parse_ext(s.as_bytes())
}

#[test]
fn pattern_basic_and_widths() {
    let p = "yyyy-MM-dd HH:mm:ss";
    assert_eq!(pp(p, "2024-01-01 00:00:07"), m(19_723 * DAY + 7 * SEC));
    assert_eq!(pp(p, "2024-1-1 00:00:07"), Parsed::Null); // MM needs exactly 2 digits
    assert_eq!(pp(p, "2024-01-01 00:00:07 "), Parsed::Null); // trailing text
    assert_eq!(pp(p, " 2024-01-01 00:00:07"), Parsed::Null); // no trimming
    assert_eq!(
        pp(p, "2024-02-29 12:00:00"),
        m(ch(2024, 2, 29, 12, 0, 0, 0))
    );
    assert_eq!(pp(p, "2023-02-29 12:00:00"), Parsed::Null);
    assert_eq!(pp(p, "2024-01-01 24:00:00"), Parsed::Null);
    assert_eq!(pp(p, "12024-01-01 00:00:00"), Parsed::Null); // >4 digits need '+'
    assert_eq!(
        pp(p, "+12024-01-01 00:00:00"),
        m(ch(12024, 1, 1, 0, 0, 0, 0))
    );
    assert_eq!(
        pp(p, "-2024-01-01 00:00:00"),
        m(ch(-2024, 1, 1, 0, 0, 0, 0))
    );
    assert_eq!(pp("yyyy-MM-dd", "2024-01-01"), m(19_723 * DAY));
    assert_eq!(pp("yyyy-M-d", "2024-1-1"), m(19_723 * DAY));
    assert_eq!(pp("yyyy-M-d", "2024-001-01"), m(19_723 * DAY)); // 'M' = 1..19 digits
    assert_eq!(pp("yyyyMMdd", "20240101"), m(19_723 * DAY)); // adjacent value parsing
    assert_eq!(
        pp("yyyyMMddHHmmss", "20240101000007"),
        m(19_723 * DAY + 7 * SEC)
    );
    assert_eq!(pp("yyyyMMdd", "2024011"), Parsed::Null);
    assert_eq!(pp("yyMMdd", "240101"), m(19_723 * DAY)); // yy -> 2000..2099
    assert_eq!(pp("HH:mm:ss", "10:20:30"), m(10 * H + 20 * MIN + 30 * SEC)); // 1970-01-01
}

#[test]
fn pattern_literals_fraction_ampm() {
    let base = ch(2024, 6, 15, 10, 20, 30, 0);
    let p = "yyyy-MM-dd'T'HH:mm:ss.SSS";
    assert_eq!(pp(p, "2024-06-15T10:20:30.123"), m(base + 123_000));
    assert_eq!(pp(p, "2024-06-15t10:20:30.1"), m(base + 100_000)); // case-insensitive, 1..3 digits
    assert_eq!(pp(p, "2024-06-15T10:20:30.1234"), Parsed::Null);
    assert_eq!(pp(p, "2024-06-15T10:20:30"), Parsed::Null);
    assert_eq!(pp(p, "2024-06-15 10:20:30.123"), Parsed::Null);
    let p9 = "yyyy-MM-dd HH:mm:ss.SSSSSSSSS";
    assert_eq!(pp(p9, "2024-06-15 10:20:30.123456789"), m(base + 123_456)); // truncated to micros
    let pa = "dd/MM/yyyy hh:mm:ss a";
    assert_eq!(pp(pa, "15/06/2024 10:20:30 AM"), m(base));
    assert_eq!(pp(pa, "15/06/2024 10:20:30 pm"), m(base + 12 * H));
    assert_eq!(pp(pa, "15/06/2024 12:20:30 am"), m(base - 10 * H));
    assert_eq!(pp(pa, "15/06/2024 00:20:30 am"), Parsed::Null); // h is 1..12
    assert_eq!(
        pp("dd-MMM-yyyy", "15-jun-2024"),
        m(ch(2024, 6, 15, 0, 0, 0, 0))
    );
    assert_eq!(
        pp("MMMM d, yyyy", "June 15, 2024"),
        m(ch(2024, 6, 15, 0, 0, 0, 0))
    );
}

#[test]
fn pattern_offsets_and_overflow() {
    let base = ch(2024, 6, 15, 10, 20, 30, 0);
    let p = "yyyy-MM-dd'T'HH:mm:ssXXX";
    assert_eq!(pp(p, "2024-06-15T10:20:30Z"), m(base));
    assert_eq!(
        pp(p, "2024-06-15T10:20:30+05:30"),
        m(base - 5 * H - 30 * MIN)
    );
    assert_eq!(pp(p, "2024-06-15T10:20:30+0530"), Parsed::Null);
    assert_eq!(pp(p, "2024-06-15T10:20:30+19:00"), Parsed::Null);
    assert_eq!(
        pp("yyyy-MM-dd HH:mm:ssZ", "2024-06-15 10:20:30-0800"),
        m(base + 8 * H)
    );
    assert_eq!(
        pp("yyyy-MM-dd HH:mm:ssX", "2024-06-15 10:20:30+05"),
        m(base - 5 * H)
    );
    assert_eq!(
        pp("yyyy-MM-dd HH:mm:ssX", "2024-06-15 10:20:30+0530"),
        m(base - 5 * H - 30 * MIN)
    );
    assert_eq!(
        pp("yyyy-MM-dd HH:mm:ss x", "2024-06-15 10:20:30 +00"),
        m(base)
    );
    assert_eq!(
        pp("y-M-d", "300000-1-1"),
        Parsed::Fallback(Fallback::Overflow)
    ); // Spark: ArithmeticException
    assert_eq!(pp("y-M-d", "1000000000-1-1"), Parsed::Null); // beyond YEAR range: DateTimeException
    assert_eq!(
        SparkPattern::compile("yyyy").unwrap().parse(b"\xff\xfe"),
        None
    );
}
