//! `CAST(s AS TIMESTAMP)` / one-argument `to_timestamp(s)` with ANSI off and session
//! time zone UTC: a re-implementation of Spark's `SparkDateTimeUtils.parseTimestampString`
//! and `stringToTimestamp` (sql/api/.../catalyst/util/SparkDateTimeUtils.scala) and of the
//! zone-id handling it delegates to (`getZoneId` -> `java.time.ZoneId.of(id, SHORT_IDS)`).
//!
//! The fast path is a hand-structured recursive-descent byte scanner (no allocation, no
//! chrono). The integration tests' `timestamp_reference` is a literal, slow transcription of the Scala
//! state machine used to cross-check this one.

use super::civil::{days_from_civil, valid_date, MICROS_PER_SECOND, SECONDS_PER_DAY};
use super::{Fallback, Parsed};

/// `UTF8String.isWhitespaceOrISOControl(byte)`: `Character.isWhitespace(b) ||
/// Character.isISOControl(b)` on the *sign-extended* byte, so bytes >= 0x80 are never trimmed.
/// For ASCII that is 0x00..=0x20 and 0x7F.
#[inline(always)]
pub(crate) fn is_spark_trim(b: u8) -> bool {
    b <= 0x20 || b == 0x7F
}

/// Parsed zone of a cast string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Zone {
    /// Fixed offset in seconds east of UTC.
    Offset(i32),
    /// Syntactically valid region id (e.g. `America/Los_Angeles`, `PST`); needs a tz database.
    Region,
    /// `ZoneId.of` would throw -> Spark returns NULL.
    Invalid,
}

/// Spark `CAST(s AS TIMESTAMP)` (ANSI off, session zone UTC), three-way result.
///
/// * `Micros(v)` - Spark returns this value.
/// * `Null` - Spark returns NULL (definitely).
/// * `Fallback(TimeOnly)` - a valid time-only string (`12:00:00`, `T12:00+01:00`) with a
///   fixed-offset zone: Spark combines it with *today's* date in that zone
///   (`LocalDate.now(zoneId)`), so it is never NULL; use [`cast_timestamp_at`].
/// * `Fallback(RegionZone)` - date/time valid (or time-only), zone is a syntactically valid
///   region id that needs a tz database (Spark may still return NULL if the id is unknown).
#[inline]
pub fn cast_timestamp(s: &[u8]) -> Parsed {
    if let Some(v) = canonical_seconds(s) {
        return Parsed::Micros(v);
    }
    cast_impl(s, None, None)
}

/// The most common shape, `yyyy-mm-ddThh:mm:ss` (or a space for `T`),
/// exactly 19 bytes, no zone: straight from fixed positions. `None` for
/// anything else (including an impossible date or time), which the general
/// scanner then decides: this only ever agrees with it.
#[inline(always)]
fn canonical_seconds(s: &[u8]) -> Option<i64> {
    let b: &[u8; 19] = s.try_into().ok()?;
    if b[4] != b'-'
        || b[7] != b'-'
        || (b[10] != b'T' && b[10] != b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let year = d2(b[0], b[1])? * 100 + d2(b[2], b[3])?;
    let (month, day) = (d2(b[5], b[6])?, d2(b[8], b[9])?);
    let (hour, minute, second) = (d2(b[11], b[12])?, d2(b[14], b[15])?, d2(b[17], b[18])?);
    if hour > 23 || minute > 59 || second > 59 || !valid_date(year as i64, month, day) {
        return None;
    }
    let secs = days_from_civil(year as i64, month, day) * SECONDS_PER_DAY
        + (hour * 3600 + minute * 60 + second) as i64;
    Some(secs * MICROS_PER_SECOND)
}

/// [`cast_timestamp`]'s fixed-position shape for strings in time order:
/// after one `yyyy-mm-ddThh:mm:ss` string, the next one that shares its
/// first 17 bytes (date, hour and minute) is read from its two second
/// digits alone. Gives exactly what [`canonical_seconds`] gives, and `None`
/// where it would; sorted event times (a Parquet column chunk's
/// dictionary, a JSON file) mostly share their minute with the string
/// before.
#[derive(Debug, Default)]
pub(crate) struct CanonicalRun {
    /// The last canonical string's first 17 bytes and the micros of its
    /// minute.
    minute: Option<([u8; 17], i64)>,
}

impl CanonicalRun {
    /// `s` in micros when it has the canonical shape, else `None`.
    #[inline]
    pub(crate) fn seconds(&mut self, s: &[u8]) -> Option<i64> {
        let b: &[u8; 19] = s.try_into().ok()?;
        if let Some((prefix, minute)) = &self.minute {
            if b[..17] == prefix[..] {
                if let Some(second) = d2(b[17], b[18]).filter(|&x| x <= 59) {
                    return Some(minute + second as i64 * MICROS_PER_SECOND);
                }
            }
        }
        let v = canonical_seconds(s)?;
        let second = d2(b[17], b[18])? as i64;
        let mut prefix = [0u8; 17];
        prefix.copy_from_slice(&b[..17]);
        self.minute = Some((prefix, v - second * MICROS_PER_SECOND));
        Some(v)
    }
}

/// Like [`cast_timestamp`], but resolves time-only strings with fixed-offset zones against
/// the given "now" (micros since epoch), as Spark does with the wall clock.
pub fn cast_timestamp_at(s: &[u8], now_micros: i64) -> Parsed {
    cast_impl(s, Some(now_micros), None)
}

/// The offset in seconds east of UTC of a region zone id at a local
/// date-time (seconds since the epoch of the wall-clock time); `None` for
/// an unknown id.
pub(crate) type RegionOffset<'a> = &'a dyn Fn(&str, i64) -> Option<i32>;

/// [`cast_timestamp`] for every form: time-only strings against
/// `now_micros`, region zones through `region`. `None` is Spark's NULL.
pub(crate) fn cast_general(s: &[u8], now_micros: i64, region: RegionOffset<'_>) -> Option<i64> {
    cast_impl(s, Some(now_micros), Some(region)).micros()
}

/// Reads a run of ASCII digits starting at `p` (bounded by `e`). Returns
/// (value of the first up-to-7 digits, digit count, new position). Values of runs longer
/// than 7 digits are never used (every non-fraction segment allows at most 6 digits).
#[inline(always)]
fn digits(s: &[u8], mut p: usize, e: usize) -> (u32, usize, usize) {
    let start = p;
    let mut v: u32 = 0;
    while p < e {
        let d = s[p].wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        if p - start < 7 {
            v = v * 10 + d as u32;
        }
        p += 1;
    }
    (v, p - start, p)
}

#[inline(always)]
fn d2(a: u8, b: u8) -> Option<u32> {
    let (x, y) = (a.wrapping_sub(b'0'), b.wrapping_sub(b'0'));
    if x > 9 || y > 9 {
        None
    } else {
        Some((x * 10 + y) as u32)
    }
}

/// `yyyy-mm-dd` exactly (10 bytes) or `yyyy-mm-dd[ T]hh:mm:ss` followed by end, a
/// non-digit, or nothing (19+ bytes). Returns None when the general scanner must decide.
#[inline(always)]
fn fixed_layout(s: &[u8], j: usize, e: usize) -> Option<(u32, u32, u32, u32, u32, u32)> {
    let n = e - j;
    if n != 10 && n < 19 {
        return None;
    }
    let b = &s[j..e];
    if b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let y = d2(b[0], b[1])? * 100 + d2(b[2], b[3])?;
    let mo = d2(b[5], b[6])?;
    let d = d2(b[8], b[9])?;
    if n == 10 {
        return Some((y, mo, d, 0, 0, 0));
    }
    if (b[10] != b'T' && b[10] != b' ') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let h = d2(b[11], b[12])?;
    let mi = d2(b[14], b[15])?;
    let sec = d2(b[17], b[18])?;
    if n > 19 && b[19].is_ascii_digit() {
        return None; // 3+ digit seconds: let the general scanner reject it
    }
    Some((y, mo, d, h, mi, sec))
}

#[derive(Clone, Copy)]
struct Fields {
    hour: u32,
    minute: u32,
    second: u32,
    micros: u32,
    tz_start: usize, // == e when there is no zone part
}

/// Scans `[h]h:[m]m:[s]s[.fff...][zone]` (each later part optional) starting in the hour
/// state (Spark segment i == 3). If `hour_known`, the hour and its ':' were already consumed.
#[inline(always)]
fn scan_time(s: &[u8], mut p: usize, e: usize, f: &mut Fields, hour_known: bool) -> bool {
    if !hour_known {
        let (v, k, np) = digits(s, p, e);
        if k == 0 || k > 2 {
            return false;
        }
        f.hour = v;
        p = np;
        if p == e {
            return true;
        }
        if s[p] != b':' {
            return false;
        }
        p += 1;
    }
    // minute (segment 4): only ':' or end may follow
    let (v, k, np) = digits(s, p, e);
    if k == 0 || k > 2 {
        return false;
    }
    f.minute = v;
    p = np;
    if p == e {
        return true;
    }
    if s[p] != b':' {
        return false;
    }
    p += 1;
    // second (segment 5): end, '.', or anything else starts the zone id
    let (v, k, np) = digits(s, p, e);
    if k == 0 || k > 2 {
        return false;
    }
    f.second = v;
    scan_tail(s, np, e, f)
}

/// After the seconds digits: end, `.fraction`, and/or the zone id.
#[inline(always)]
fn scan_tail(s: &[u8], mut p: usize, e: usize, f: &mut Fields) -> bool {
    if p == e {
        return true;
    }
    if s[p] == b'.' {
        // fraction (segment 6): any number of digits (even 0); only the first 6 are kept
        // ("We will truncate the nanosecond part if there are more than 6 digits").
        p += 1;
        let start = p;
        let mut v: u32 = 0;
        while p < e {
            let d = s[p].wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            if p - start < 6 {
                v = v * 10 + d as u32;
            }
            p += 1;
        }
        let mut nd = p - start;
        while nd < 6 {
            v *= 10;
            nd += 1;
        }
        f.micros = v;
        if p == e {
            return true;
        }
    }
    // The zone id is the rest of the (trimmed) string, starting at this non-digit char.
    f.tz_start = p;
    true
}

#[inline(always)]
fn cast_impl(s: &[u8], now: Option<i64>, region: Option<RegionOffset<'_>>) -> Parsed {
    let n = s.len();
    let mut j = 0;
    while j < n && is_spark_trim(s[j]) {
        j += 1;
    }
    let mut e = n;
    while e > j && is_spark_trim(s[e - 1]) {
        e -= 1;
    }
    if j == e {
        return Parsed::Null;
    }
    let mut f = Fields {
        hour: 0,
        minute: 0,
        second: 0,
        micros: 0,
        tz_start: e,
    };
    let (mut year, mut month, mut day) = (1i64, 1u32, 1u32);
    // Shortcut for the canonical fixed layout `yyyy-mm-dd[( |T)hh:mm:ss...]`; anything else
    // goes through the general scanner below (which accepts a superset).
    if let Some((y, mo, d, h, mi, sec)) = fixed_layout(s, j, e) {
        let mut ok = true;
        if j + 10 < e {
            f.hour = h;
            f.minute = mi;
            f.second = sec;
            ok = scan_tail(s, j + 19, e, &mut f);
        }
        if ok {
            return finish(s, e, f, y as i64, mo, d, false, now, region);
        }
        return Parsed::Null;
    }
    let just_time;
    let mut p = j;
    let c0 = s[p];
    // `if (j == 0 && b == 'T')`: note j is the index in the *untrimmed* bytes, so " T12:00"
    // (leading whitespace) is NULL in Spark.
    if c0 == b'T' && p == 0 {
        just_time = true;
        if !scan_time(s, 1, e, &mut f, false) {
            return Parsed::Null;
        }
    } else {
        let mut signed = false;
        let mut neg = false;
        if c0 == b'-' || c0 == b'+' {
            signed = true;
            neg = c0 == b'-';
            p += 1;
        }
        let (v, k, np) = digits(s, p, e);
        p = np;
        if p == e {
            // `[+-]yyyy*`: 4 to 6 year digits
            if !(4..=6).contains(&k) {
                return Parsed::Null;
            }
            year = v as i64;
            just_time = false;
        } else if s[p] == b'-' {
            if !(4..=6).contains(&k) {
                return Parsed::Null;
            }
            year = v as i64;
            p += 1;
            let (v, k, np) = digits(s, p, e);
            if k == 0 || k > 2 {
                return Parsed::Null;
            }
            month = v;
            p = np;
            if p < e {
                if s[p] != b'-' {
                    return Parsed::Null;
                }
                p += 1;
                let (v, k, np) = digits(s, p, e);
                if k == 0 || k > 2 {
                    return Parsed::Null;
                }
                day = v;
                p = np;
                if p < e {
                    let sep = s[p];
                    if sep != b' ' && sep != b'T' {
                        return Parsed::Null;
                    }
                    if !scan_time(s, p + 1, e, &mut f, false) {
                        return Parsed::Null;
                    }
                }
            }
            just_time = false;
        } else if s[p] == b':' && !signed {
            // `[h]h:[m]m...` time only (`i == 0 && b == ':' && yearSign.isEmpty`)
            if k == 0 || k > 2 {
                return Parsed::Null;
            }
            f.hour = v;
            just_time = true;
            if !scan_time(s, p + 1, e, &mut f, true) {
                return Parsed::Null;
            }
        } else {
            return Parsed::Null;
        }
        if neg {
            year = -year;
        }
    }

    finish(s, e, f, year, month, day, just_time, now, region)
}

/// Spark: zone validity, `LocalTime.of`, `LocalDate.now`/`LocalDate.of`, instant -> micros.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn finish(
    s: &[u8],
    e: usize,
    f: Fields,
    year: i64,
    month: u32,
    day: u32,
    just_time: bool,
    now: Option<i64>,
    region: Option<RegionOffset<'_>>,
) -> Parsed {
    // Zone (validated inside parseTimestampString, before the date/time checks).
    let zone = if f.tz_start < e {
        parse_zone(&s[f.tz_start..e])
    } else {
        Zone::Offset(0)
    };
    let mut offset = match zone {
        Zone::Invalid => return Parsed::Null,
        Zone::Offset(o) => Some(o),
        Zone::Region => None,
    };
    if let (None, Some(resolve)) = (offset, region) {
        // The region's offset at this local date-time (today's, for a time only).
        let name = std::str::from_utf8(&s[f.tz_start..e]).unwrap_or("").trim();
        let sod = (f.hour.min(23) * 3600 + f.minute.min(59) * 60 + f.second.min(59)) as i64;
        let local_days = if just_time {
            now.unwrap_or(0)
                .div_euclid(MICROS_PER_SECOND)
                .div_euclid(SECONDS_PER_DAY)
        } else if valid_date(year, month, day) {
            days_from_civil(year, month, day)
        } else {
            return Parsed::Null;
        };
        match local_days
            .checked_mul(SECONDS_PER_DAY)
            .and_then(|d| d.checked_add(sod))
            .and_then(|local| resolve(name, local))
        {
            Some(o) => offset = Some(o),
            None => return Parsed::Null,
        }
    }
    // LocalTime.of(h, m, s, nanos)
    if f.hour > 23 || f.minute > 59 || f.second > 59 {
        return Parsed::Null;
    }
    let sod = (f.hour * 3600 + f.minute * 60 + f.second) as i64;
    if just_time {
        // LocalDate.now(zoneId)
        return match (now, offset) {
            (Some(now), Some(off)) => {
                let local_sec = now.div_euclid(MICROS_PER_SECOND) + off as i64;
                let days = local_sec.div_euclid(SECONDS_PER_DAY);
                to_micros(days, sod, off, f.micros)
            }
            (None, Some(_)) => Parsed::Fallback(Fallback::TimeOnly),
            (_, None) => Parsed::Fallback(Fallback::RegionZone),
        };
    }
    // LocalDate.of(y, m, d)
    if !valid_date(year, month, day) {
        return Parsed::Null;
    }
    match offset {
        None => Parsed::Fallback(Fallback::RegionZone),
        Some(off) => to_micros(days_from_civil(year, month, day), sod, off, f.micros),
    }
}

/// `instantToMicros(ZonedDateTime.of(...).toInstant)`: exact arithmetic; overflow is an
/// ArithmeticException, which `stringToTimestamp` turns into NULL (NonFatal).
#[inline(always)]
fn to_micros(days: i64, sod: i64, offset: i32, micros: u32) -> Parsed {
    // |days| <= ~3.7e8 for 6-digit years, so this cannot overflow i64.
    let secs = days * SECONDS_PER_DAY + sod - offset as i64;
    match secs
        .checked_mul(MICROS_PER_SECOND)
        .and_then(|x| x.checked_add(micros as i64))
    {
        Some(v) => Parsed::Micros(v),
        None => {
            // multiplyExact may overflow while the exact result still fits (only possible
            // when secs == floorDiv(Long.MinValue, 1e6)); Spark special-cases that value.
            let exact = secs as i128 * MICROS_PER_SECOND as i128 + micros as i128;
            if exact >= i64::MIN as i128 && exact <= i64::MAX as i128 {
                Parsed::Micros(exact as i64)
            } else {
                Parsed::Null
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Zone ids: SparkDateTimeUtils.getZoneId + java.time.ZoneId.of(id, ZoneId.SHORT_IDS)
// ---------------------------------------------------------------------------------------

/// `getZoneId(tz.trim)` where `raw` is the rest of the trimmed input from the first
/// non-digit after the seconds/fraction.
pub(crate) fn parse_zone(raw: &[u8]) -> Zone {
    // java.lang.String.trim(): strips chars <= ' '
    let mut a = 0;
    let mut b = raw.len();
    while a < b && raw[a] <= b' ' {
        a += 1;
    }
    while b > a && raw[b - 1] <= b' ' {
        b -= 1;
    }
    let t = &raw[a..b];
    // Every accepting path of ZoneId.of needs ASCII (digits/sign/colon for offsets, checkName
    // for regions, ASCII SHORT_IDS keys), and invalid UTF-8 decodes to U+FFFD.
    let mut i = 0;
    while i < t.len() {
        if t[i] >= 0x80 {
            return Zone::Invalid;
        }
        i += 1;
    }
    if t.len() > 24 {
        // Too long for any offset form; the two regex rewrites below only insert digits after
        // a sign, which changes neither the prefix classification nor checkName's verdict.
        return zone_id_of(t);
    }
    let mut buf = [0u8; 32];
    buf[..t.len()].copy_from_slice(t);
    let mut len = t.len();
    // singleHourTz = "(\+|\-)(\d):" , replaceFirst("$10$2:")  (first match anywhere)
    let mut k = 0;
    while k + 2 < len {
        if (buf[k] == b'+' || buf[k] == b'-') && buf[k + 1].is_ascii_digit() && buf[k + 2] == b':' {
            buf.copy_within(k + 1..len, k + 2);
            buf[k + 1] = b'0';
            len += 1;
            break;
        }
        k += 1;
    }
    // singleMinuteTz = "(\+|\-)(\d\d):(\d)$" , replaceFirst("$1$2:0$3")
    if len >= 5 {
        let q = len - 5;
        if (buf[q] == b'+' || buf[q] == b'-')
            && buf[q + 1].is_ascii_digit()
            && buf[q + 2].is_ascii_digit()
            && buf[q + 3] == b':'
            && buf[q + 4].is_ascii_digit()
        {
            buf[q + 5] = buf[q + 4];
            buf[q + 4] = b'0';
            len += 1;
        }
    }
    zone_id_of(&buf[..len])
}

/// `ZoneId.of(id, SHORT_IDS)` (JDK 17/21 semantics).
fn zone_id_of(id: &[u8]) -> Zone {
    match id {
        // SHORT_IDS entries that map to fixed offsets in JDK 17/21
        b"EST" => return Zone::Offset(-5 * 3600),
        b"MST" => return Zone::Offset(-7 * 3600),
        b"HST" => return Zone::Offset(-10 * 3600),
        // SHORT_IDS entries that map to region ids
        b"ACT" | b"AET" | b"AGT" | b"ART" | b"AST" | b"BET" | b"BST" | b"CAT" | b"CNT" | b"CST"
        | b"CTT" | b"EAT" | b"ECT" | b"IET" | b"IST" | b"JST" | b"MIT" | b"NET" | b"NST"
        | b"PLT" | b"PNT" | b"PRT" | b"PST" | b"SST" | b"VST" => return Zone::Region,
        _ => {}
    }
    if id.len() <= 1 || id[0] == b'+' || id[0] == b'-' {
        return zone_offset_of(id);
    }
    let prefix = if id.starts_with(b"UTC") || id.starts_with(b"GMT") {
        3
    } else if id.starts_with(b"UT") {
        2
    } else {
        0
    };
    if prefix > 0 {
        if id.len() == prefix {
            return Zone::Offset(0);
        }
        if id[prefix] != b'+' && id[prefix] != b'-' {
            return region(id);
        }
        return zone_offset_of(&id[prefix..]);
    }
    region(id)
}

/// `ZoneRegion.checkName`; existence in the tz database is left to the caller.
fn region(id: &[u8]) -> Zone {
    if id.len() < 2 {
        return Zone::Invalid;
    }
    for (i, &c) in id.iter().enumerate() {
        let ok = c.is_ascii_alphabetic()
            || (i != 0
                && (c.is_ascii_digit() || matches!(c, b'/' | b'~' | b'.' | b'_' | b'+' | b'-')));
        if !ok {
            return Zone::Invalid;
        }
    }
    Zone::Region
}

/// `java.time.ZoneOffset.of(String)`: "Z", +h, +hh, +hhmm, +hh:mm, +hhmmss, +hh:mm:ss.
pub(crate) fn zone_offset_of(id: &[u8]) -> Zone {
    if id == b"Z" {
        return Zone::Offset(0);
    }
    #[inline(always)]
    fn num(id: &[u8], pos: usize, colon: bool) -> Option<i32> {
        if colon && id[pos - 1] != b':' {
            return None;
        }
        let (a, b) = (id[pos], id[pos + 1]);
        if !a.is_ascii_digit() || !b.is_ascii_digit() {
            return None;
        }
        Some(((a - b'0') * 10 + (b - b'0')) as i32)
    }
    let (h, m, s) = match id.len() {
        2 => {
            // "+h" -> "+0h"
            let d = id[1];
            if !d.is_ascii_digit() {
                return Zone::Invalid;
            }
            (Some((d - b'0') as i32), Some(0), Some(0))
        }
        3 => (num(id, 1, false), Some(0), Some(0)),
        5 => (num(id, 1, false), num(id, 3, false), Some(0)),
        6 => (num(id, 1, false), num(id, 4, true), Some(0)),
        7 => (num(id, 1, false), num(id, 3, false), num(id, 5, false)),
        9 => (num(id, 1, false), num(id, 4, true), num(id, 7, true)),
        _ => return Zone::Invalid,
    };
    let (Some(h), Some(m), Some(s)) = (h, m, s) else {
        return Zone::Invalid;
    };
    let sign = match id[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return Zone::Invalid,
    };
    // ZoneOffset.validate: |h| <= 18, m, s <= 59, and +-18:00 exactly at the limit
    if h > 18 || m > 59 || s > 59 || (h == 18 && (m | s) != 0) {
        return Zone::Invalid;
    }
    Zone::Offset(sign * (h * 3600 + m * 60 + s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A string near `yyyy-mm-ddThh:mm:ss`: a random date and minute, and
    /// seconds, separators or lengths that are sometimes wrong.
    fn near_canonical() -> impl Strategy<Value = Vec<u8>> {
        (
            prop::sample::select(vec![
                "2024-01-01T00:00",
                "2024-02-29 23:59",
                "2023-02-29T10:10",
            ]),
            prop::sample::select(vec![":", ":", ":", "-"]),
            prop::sample::select(vec![
                "00", "07", "59", "60", "99", "5x", "x5", "7", "007", "59Z", "59.5",
            ]),
        )
            .prop_map(|(minute, sep, second)| format!("{minute}{sep}{second}").into_bytes())
    }

    proptest! {
        /// Over any sequence, a run gives what the fixed-position parse
        /// gives each string on its own.
        #[test]
        fn a_run_agrees_with_the_fixed_position_parse(
            strings in prop::collection::vec(near_canonical(), 1..40)
        ) {
            let mut run = CanonicalRun::default();
            for s in &strings {
                prop_assert_eq!(run.seconds(s), canonical_seconds(s), "{}", String::from_utf8_lossy(s));
            }
        }
    }

    #[test]
    fn a_run_reads_the_seconds_of_the_same_minute() {
        let mut run = CanonicalRun::default();
        assert_eq!(run.seconds(b"1970-01-01T00:01:00"), Some(60_000_000));
        assert_eq!(run.seconds(b"1970-01-01T00:01:59"), Some(119_000_000));
        assert_eq!(run.seconds(b"1970-01-01T00:01:60"), None);
        assert_eq!(run.seconds(b"1970-01-01T00:02:01"), Some(121_000_000));
        assert_eq!(run.seconds(b"1970-01-01 00:02:01"), Some(121_000_000));
        assert_eq!(run.seconds(b"1970-01-01T00:02:1"), None);
    }
}
