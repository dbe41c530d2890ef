//! Strings to timestamps exactly as Spark reads them (ANSI mode off,
//! session time zone UTC), as microseconds since the Unix epoch.
//!
//! - [`cast_timestamp`]: `CAST(s AS TIMESTAMP)` and one-argument
//!   `to_timestamp(s)` (Spark's `SparkDateTimeUtils.stringToTimestamp`):
//!   `yyyy`, `yyyy-[m]m`, `yyyy-[m]m-[d]d`, then `T` or a space and
//!   `[h]h:[m]m:[s]s[.fraction]` (each part optional from the minutes on;
//!   up to 6 fraction digits kept, more truncated), an optional zone (`Z`,
//!   `+05:30`, `-0800`, `UTC+1`, a region such as `Europe/Paris`),
//!   surrounding ASCII whitespace and control characters trimmed; anything
//!   else, or an impossible date, is NULL.
//! - [`SparkPattern`]: two-argument `to_timestamp(s, 'yyyy-MM-dd HH:mm:ss')`
//!   with Spark's datetime patterns (the `java.time` formatter behind
//!   Spark's default `CORRECTED` parser policy: exact field widths, the
//!   whole input consumed, case-insensitive literals).
//! - [`udf`]: the `to_timestamp` SQL function built on them.
//!
//! The common shapes go through an allocation-free byte scanner; a region
//! zone id is resolved through the time-zone database (chrono-tz, as
//! Arrow uses), and a time-only string takes today's date, as in Spark.
//!
//! ```
//! use pipelines_core::plan::timestamp::{cast_timestamp_with_zones, SparkPattern};
//! assert_eq!(cast_timestamp_with_zones(b"1970-01-01T00:00:01.5Z"), Some(1_500_000));
//! assert_eq!(cast_timestamp_with_zones(b"2023-02-29 00:00:00"), None);
//! let p = SparkPattern::compile("dd/MM/yyyy HH:mm").unwrap();
//! assert_eq!(p.parse(b"02/01/1970 00:00"), Some(86_400_000_000));
//! ```

mod cast;
mod civil;
mod pattern;
pub mod udf;

pub use cast::{cast_timestamp, cast_timestamp_at};
pub use pattern::{PatternError, SparkPattern};

/// What a parse of one string gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Parsed {
    /// The timestamp, in microseconds since 1970-01-01T00:00:00Z.
    Micros(i64),
    /// Not a timestamp: Spark's NULL.
    Null,
    /// Needs what the byte scanner does not have; see [`Fallback`].
    Fallback(Fallback),
}

impl Parsed {
    /// `Some` for [`Parsed::Micros`], `None` otherwise.
    #[inline]
    pub fn micros(self) -> Option<i64> {
        match self {
            Parsed::Micros(v) => Some(v),
            _ => None,
        }
    }
}

/// Why the byte scanner could not decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fallback {
    /// A time-only string (`12:00:00`, `T12:00`): Spark takes today's date.
    TimeOnly,
    /// The zone is a region id (`America/Los_Angeles`, `PST`) that needs
    /// the time-zone database.
    RegionZone,
    /// A pattern's year overflows Spark's arithmetic (an error in Spark).
    Overflow,
    /// Non-ASCII input where the pattern's case-insensitive matching could
    /// accept a non-ASCII letter.
    NonAscii,
}

/// `CAST(s AS TIMESTAMP)` with every form Spark accepts: the byte scanner,
/// then today's date for a time-only string and the time-zone database
/// for a region zone. `None` is Spark's NULL.
pub fn cast_timestamp_with_zones(s: &[u8]) -> Option<i64> {
    match cast_timestamp(s) {
        Parsed::Micros(v) => Some(v),
        Parsed::Null => None,
        Parsed::Fallback(_) => cast::cast_general(s, now_micros(), &region_offset),
    }
}

/// [`cast_timestamp_with_zones`] over strings in time order: the
/// canonical shape read through `run` (see [`cast::CanonicalRun`]), every
/// other string as [`cast_timestamp_with_zones`] reads it.
pub(crate) fn cast_timestamp_in_run(s: &[u8], run: &mut cast::CanonicalRun) -> Option<i64> {
    match run.seconds(s) {
        Some(v) => Some(v),
        None => cast_timestamp_with_zones(s),
    }
}

fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// The last year the time-zone database lists transitions for; later
/// years follow the zone's recurring rules, as `java.time` extrapolates.
const LAST_LISTED_YEAR: i64 = 2037;

/// `local_secs` moved, for a year after [`LAST_LISTED_YEAR`], to the same
/// month, day and time of a listed year with the same calendar (leap or
/// not, same weekday on 1 January): daylight-saving rules are written in
/// weekdays of months ("second Sunday of March"), so the offset is the one
/// the zone's current rules give that date, as in Java.
fn rules_era(local_secs: i64) -> i64 {
    use civil::{civil_from_days, days_from_civil, is_leap, SECONDS_PER_DAY};
    let days = local_secs.div_euclid(SECONDS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    if year <= LAST_LISTED_YEAR {
        return local_secs;
    }
    let weekday = |y: i64| days_from_civil(y, 1, 1).rem_euclid(7);
    let Some(same) = (LAST_LISTED_YEAR - 27..=LAST_LISTED_YEAR)
        .rev()
        .find(|&y| is_leap(y) == is_leap(year) && weekday(y) == weekday(year))
    else {
        return local_secs;
    };
    days_from_civil(same, month, day) * SECONDS_PER_DAY + local_secs.rem_euclid(SECONDS_PER_DAY)
}

/// Java's `ZoneId.SHORT_IDS` that name regions (the fixed ones, `EST`,
/// `MST`, `HST`, are offsets and handled by the scanner).
const SHORT_IDS: &[(&str, &str)] = &[
    ("ACT", "Australia/Darwin"),
    ("AET", "Australia/Sydney"),
    ("AGT", "America/Argentina/Buenos_Aires"),
    ("ART", "Africa/Cairo"),
    ("AST", "America/Anchorage"),
    ("BET", "America/Sao_Paulo"),
    ("BST", "Asia/Dhaka"),
    ("CAT", "Africa/Harare"),
    ("CNT", "America/St_Johns"),
    ("CST", "America/Chicago"),
    ("CTT", "Asia/Shanghai"),
    ("EAT", "Africa/Addis_Ababa"),
    ("ECT", "Europe/Paris"),
    ("IET", "America/Indiana/Indianapolis"),
    ("IST", "Asia/Kolkata"),
    ("JST", "Asia/Tokyo"),
    ("MIT", "Pacific/Apia"),
    ("NET", "Asia/Yerevan"),
    ("NST", "Pacific/Auckland"),
    ("PLT", "Asia/Karachi"),
    ("PNT", "America/Phoenix"),
    ("PRT", "America/Puerto_Rico"),
    ("PST", "America/Los_Angeles"),
    ("SST", "Pacific/Guadalcanal"),
    ("VST", "Asia/Ho_Chi_Minh"),
];

/// The offset (seconds east of UTC) of region `zone` at the local time
/// `local_secs` (seconds since the epoch of the local date-time), as
/// `java.time.ZonedDateTime.of` picks it: the earlier offset in an overlap,
/// the offset before the transition in a gap. `None` for an unknown zone.
fn region_offset(zone: &str, local_secs: i64) -> Option<i32> {
    use chrono::{LocalResult, Offset, TimeZone};
    let name = SHORT_IDS
        .iter()
        .find(|(k, _)| *k == zone)
        .map(|(_, v)| *v)
        .unwrap_or(zone);
    let tz: chrono_tz::Tz = name.parse().ok()?;
    let local = chrono::DateTime::from_timestamp(rules_era(local_secs), 0)?.naive_utc();
    match tz.offset_from_local_datetime(&local) {
        LocalResult::Single(o) => Some(o.fix().local_minus_utc()),
        LocalResult::Ambiguous(earlier, _) => Some(earlier.fix().local_minus_utc()),
        LocalResult::None => {
            let before = local.checked_sub_signed(chrono::TimeDelta::days(1))?;
            Some(tz.offset_from_utc_datetime(&before).fix().local_minus_utc())
        }
    }
}
