//! Slow reference implementation of Spark's string -> timestamp cast, used by the tests to
//! cross-check the fast path of `pipelines_core::plan::timestamp`. It is a deliberately literal transcription
//! of the Scala state machine in `SparkDateTimeUtils.parseTimestampString` (segments array,
//! `isValidDigits`, Java `int` wrap-around), the zone handling is done on `String`s the way
//! `getZoneId` does it (regex rewrites + `ZoneId.of`), and calendar validity / epoch
//! arithmetic come from chrono (`NaiveDate::from_ymd_opt`, `NaiveTime::from_hms_micro_opt`).
//! Not for production use.

use chrono::{NaiveDate, NaiveTime};
use pipelines_core::plan::timestamp::{Fallback, Parsed};

#[derive(Debug, Clone, PartialEq, Eq)]
enum RefZone {
    Fixed(i64),
    Region,
    Invalid,
}

/// Result of the literal transcription of `parseTimestampString`.
struct Segments {
    seg: [i32; 9],
    tz: Option<String>,
    just_time: bool,
}

fn is_valid_digits(segment: usize, digits: i32) -> bool {
    // A Long is able to represent a timestamp within [+-]200 thousand years
    let max_digits_year = 6;
    // For the nanosecond part, more than 6 digits is allowed, but will be truncated.
    segment == 6
        || (segment == 0 && digits >= 4 && digits <= max_digits_year)
        // For the zoneId segment(7), it's could be zero digits when it's a region-based zone ID
        || (segment == 7 && digits <= 2)
        || (segment != 0 && segment != 6 && segment != 7 && digits > 0 && digits <= 2)
}

fn is_whitespace_or_iso_control(b: u8) -> bool {
    // Character.isWhitespace(int) || Character.isISOControl(int) on a sign-extended byte.
    let cp = b as i8 as i32;
    let ws = matches!(cp, 0x09..=0x0D | 0x1C..=0x1F | 0x20);
    let ctl = (0..=0x1F).contains(&cp) || (0x7F..=0x9F).contains(&cp);
    ws || ctl
}

fn parse_timestamp_string(bytes: &[u8]) -> Option<Segments> {
    let mut tz: Option<String> = None;
    let mut segments: [i32; 9] = [1, 1, 1, 0, 0, 0, 0, 0, 0];
    let mut i: usize = 0;
    let mut current_segment_value: i32 = 0;
    let mut current_segment_digits: i32 = 0;
    // getTrimmedStart / getTrimmedEnd
    let mut j: usize = 0;
    while j < bytes.len() && is_whitespace_or_iso_control(bytes[j]) {
        j += 1;
    }
    let str_end_trimmed = {
        let mut end = bytes.len() as isize - 1;
        while end > j as isize && is_whitespace_or_iso_control(bytes[end as usize]) {
            end -= 1;
        }
        (end + 1) as usize
    };
    if j == str_end_trimmed {
        return None;
    }
    let mut digits_milli = 0;
    let mut just_time = false;
    let mut year_sign: Option<i32> = None;
    if bytes[j] == b'-' || bytes[j] == b'+' {
        year_sign = Some(if bytes[j] == b'-' { -1 } else { 1 });
        j += 1;
    }
    while j < str_end_trimmed {
        let b = bytes[j];
        let parsed_value = (b as i8 as i32) - ('0' as i32);
        if !(0..=9).contains(&parsed_value) {
            if j == 0 && b == b'T' {
                just_time = true;
                i += 3;
            } else if i < 2 {
                if b == b'-' {
                    if !is_valid_digits(i, current_segment_digits) {
                        return None;
                    }
                    segments[i] = current_segment_value;
                    current_segment_value = 0;
                    current_segment_digits = 0;
                    i += 1;
                } else if i == 0 && b == b':' && year_sign.is_none() {
                    just_time = true;
                    if !is_valid_digits(3, current_segment_digits) {
                        return None;
                    }
                    segments[3] = current_segment_value;
                    current_segment_value = 0;
                    current_segment_digits = 0;
                    i = 4;
                } else {
                    return None;
                }
            } else if i == 2 {
                if b == b' ' || b == b'T' {
                    if !is_valid_digits(i, current_segment_digits) {
                        return None;
                    }
                    segments[i] = current_segment_value;
                    current_segment_value = 0;
                    current_segment_digits = 0;
                    i += 1;
                } else {
                    return None;
                }
            } else if i == 3 || i == 4 {
                if b == b':' {
                    if !is_valid_digits(i, current_segment_digits) {
                        return None;
                    }
                    segments[i] = current_segment_value;
                    current_segment_value = 0;
                    current_segment_digits = 0;
                    i += 1;
                } else {
                    return None;
                }
            } else if i == 5 || i == 6 {
                if b == b'.' && i == 5 {
                    if !is_valid_digits(i, current_segment_digits) {
                        return None;
                    }
                    segments[i] = current_segment_value;
                    current_segment_value = 0;
                    current_segment_digits = 0;
                    i += 1;
                } else {
                    if !is_valid_digits(i, current_segment_digits) {
                        return None;
                    }
                    segments[i] = current_segment_value;
                    current_segment_value = 0;
                    current_segment_digits = 0;
                    i += 1;
                    // new String(bytes, j, strEndTrimmed - j) with the UTF-8 charset
                    tz = Some(String::from_utf8_lossy(&bytes[j..str_end_trimmed]).into_owned());
                    j = str_end_trimmed - 1;
                }
                if i == 6 && b != b'.' {
                    i += 1;
                }
            } else if i < segments.len() && (b == b':' || b == b' ') {
                if !is_valid_digits(i, current_segment_digits) {
                    return None;
                }
                segments[i] = current_segment_value;
                current_segment_value = 0;
                current_segment_digits = 0;
                i += 1;
            } else {
                return None;
            }
        } else {
            if i == 6 {
                digits_milli += 1;
            }
            if i != 6 || current_segment_digits < 6 {
                current_segment_value = current_segment_value
                    .wrapping_mul(10)
                    .wrapping_add(parsed_value);
            }
            current_segment_digits += 1;
        }
        j += 1;
    }
    if !is_valid_digits(i, current_segment_digits) {
        return None;
    }
    segments[i] = current_segment_value;
    while digits_milli < 6 {
        segments[6] = segments[6].wrapping_mul(10);
        digits_milli += 1;
    }
    segments[0] = segments[0].wrapping_mul(year_sign.unwrap_or(1));
    Some(Segments {
        seg: segments,
        tz,
        just_time,
    })
}

/// Java `String.trim()`.
fn java_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

/// `getZoneId(tz)`: the two pre-Spark-3.0 compatibility regex rewrites, then
/// `ZoneId.of(id, ZoneId.SHORT_IDS)`.
fn get_zone_id(tz: &str) -> RefZone {
    let chars: Vec<char> = tz.chars().collect();
    // singleHourTz "(\+|\-)(\d):" -> "$10$2:" (first match)
    let mut out: Vec<char> = chars.clone();
    for k in 0..chars.len().saturating_sub(2) {
        if (chars[k] == '+' || chars[k] == '-')
            && chars[k + 1].is_ascii_digit()
            && chars[k + 2] == ':'
        {
            out = chars[..k + 1].to_vec();
            out.push('0');
            out.extend_from_slice(&chars[k + 1..]);
            break;
        }
    }
    // singleMinuteTz "(\+|\-)(\d\d):(\d)$" -> "$1$2:0$3"
    let n = out.len();
    if n >= 5 {
        let w = &out[n - 5..];
        if (w[0] == '+' || w[0] == '-')
            && w[1].is_ascii_digit()
            && w[2].is_ascii_digit()
            && w[3] == ':'
            && w[4].is_ascii_digit()
        {
            let last = out[n - 1];
            out.truncate(n - 1);
            out.push('0');
            out.push(last);
        }
    }
    let id: String = out.into_iter().collect();
    zone_id_of_short_ids(&id)
}

fn zone_id_of_short_ids(id: &str) -> RefZone {
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
        ("EST", "-05:00"),
        ("MST", "-07:00"),
        ("HST", "-10:00"),
    ];
    let id = SHORT_IDS
        .iter()
        .find(|(k, _)| *k == id)
        .map(|(_, v)| *v)
        .unwrap_or(id);
    zone_id_of(id)
}

fn zone_id_of(id: &str) -> RefZone {
    if id.chars().count() <= 1 || id.starts_with('+') || id.starts_with('-') {
        return zone_offset_of(id);
    }
    if id.starts_with("UTC") || id.starts_with("GMT") {
        return of_with_prefix(id, 3);
    }
    if id.starts_with("UT") {
        return of_with_prefix(id, 2);
    }
    zone_region_of_id(id)
}

fn of_with_prefix(id: &str, prefix_len: usize) -> RefZone {
    if id.len() == prefix_len {
        return RefZone::Fixed(0);
    }
    let c = id[prefix_len..].chars().next().unwrap();
    if c != '+' && c != '-' {
        return zone_region_of_id(id);
    }
    zone_offset_of(&id[prefix_len..])
}

fn zone_region_of_id(id: &str) -> RefZone {
    let chars: Vec<char> = id.chars().collect();
    if chars.len() < 2 {
        return RefZone::Invalid;
    }
    for (i, &c) in chars.iter().enumerate() {
        let ok = c.is_ascii_lowercase()
            || c.is_ascii_uppercase()
            || (c == '/' && i != 0)
            || (c.is_ascii_digit() && i != 0)
            || (c == '~' && i != 0)
            || (c == '.' && i != 0)
            || (c == '_' && i != 0)
            || (c == '+' && i != 0)
            || (c == '-' && i != 0);
        if !ok {
            return RefZone::Invalid;
        }
    }
    // ZoneRulesProvider lookup needs the tz database: not decided here.
    RefZone::Region
}

fn zone_offset_of(offset_id: &str) -> RefZone {
    if offset_id == "Z" {
        return RefZone::Fixed(0);
    }
    let mut c: Vec<char> = offset_id.chars().collect();
    let parse_number = |c: &[char], pos: usize, preceded_by_colon: bool| -> Option<i64> {
        if preceded_by_colon && c[pos - 1] != ':' {
            return None;
        }
        let (a, b) = (c[pos], c[pos + 1]);
        if !a.is_ascii_digit() || !b.is_ascii_digit() {
            return None;
        }
        Some((a as i64 - 48) * 10 + (b as i64 - 48))
    };
    let hms = match c.len() {
        2 | 3 => {
            if c.len() == 2 {
                c = vec![c[0], '0', c[1]];
            }
            parse_number(&c, 1, false).map(|h| (h, 0, 0))
        }
        5 => parse_number(&c, 1, false)
            .zip(parse_number(&c, 3, false))
            .map(|(h, m)| (h, m, 0)),
        6 => parse_number(&c, 1, false)
            .zip(parse_number(&c, 4, true))
            .map(|(h, m)| (h, m, 0)),
        7 => parse_number(&c, 1, false)
            .zip(parse_number(&c, 3, false))
            .zip(parse_number(&c, 5, false))
            .map(|((h, m), s)| (h, m, s)),
        9 => parse_number(&c, 1, false)
            .zip(parse_number(&c, 4, true))
            .zip(parse_number(&c, 7, true))
            .map(|((h, m), s)| (h, m, s)),
        _ => None,
    };
    let Some((h, m, s)) = hms else {
        return RefZone::Invalid;
    };
    let first = c[0];
    if first != '+' && first != '-' {
        return RefZone::Invalid;
    }
    let (h, m, s) = if first == '-' {
        (-h, -m, -s)
    } else {
        (h, m, s)
    };
    // ZoneOffset.ofHoursMinutesSeconds -> validate
    if !(-18..=18).contains(&h) || !(-59..=59).contains(&m) || !(-59..=59).contains(&s) {
        return RefZone::Invalid;
    }
    if h.abs() == 18 && (m | s) != 0 {
        return RefZone::Invalid;
    }
    RefZone::Fixed(h * 3600 + m * 60 + s)
}

/// Days since epoch for a proleptic Gregorian date using chrono; years outside chrono's
/// range are shifted by whole 400-year cycles (146097 days each), which preserves validity.
fn chrono_epoch_days(y: i64, m: u32, d: u32) -> Option<i64> {
    let k = y.div_euclid(400);
    let y0 = y - 400 * k + 2000; // in [2000, 2400)
    let date = NaiveDate::from_ymd_opt(y0 as i32, m, d)?;
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
    let days0 = date.signed_duration_since(epoch).num_days();
    Some(days0 - 2000 / 400 * 146_097 + k * 146_097)
}

/// Reference `stringToTimestamp(s, UTC)`.
pub fn cast_reference(s: &[u8]) -> Parsed {
    let Some(segs) = parse_timestamp_string(s) else {
        return Parsed::Null;
    };
    let zone = match &segs.tz {
        None => RefZone::Fixed(0),
        Some(tz) => get_zone_id(java_trim(tz)),
    };
    if zone == RefZone::Invalid {
        return Parsed::Null;
    }
    let g = segs.seg;
    // LocalTime.of(h, m, s, nanos)
    if !(0..24).contains(&g[3]) || !(0..60).contains(&g[4]) || !(0..60).contains(&g[5]) {
        return Parsed::Null;
    }
    let Some(time) =
        NaiveTime::from_hms_micro_opt(g[3] as u32, g[4] as u32, g[5] as u32, g[6] as u32)
    else {
        return Parsed::Null;
    };
    if segs.just_time {
        return Parsed::Fallback(if zone == RefZone::Region {
            Fallback::RegionZone
        } else {
            Fallback::TimeOnly
        });
    }
    if g[1] < 1 || g[2] < 1 {
        return Parsed::Null;
    }
    let Some(days) = chrono_epoch_days(g[0] as i64, g[1] as u32, g[2] as u32) else {
        return Parsed::Null;
    };
    let off = match zone {
        RefZone::Fixed(o) => o,
        RefZone::Region => return Parsed::Fallback(Fallback::RegionZone),
        RefZone::Invalid => unreachable!(),
    };
    let sod = time
        .signed_duration_since(NaiveTime::MIN)
        .num_microseconds()
        .unwrap() as i128;
    let micros = (days as i128 * 86_400 - off as i128) * 1_000_000 + sod;
    if micros < i64::MIN as i128 || micros > i64::MAX as i128 {
        Parsed::Null
    } else {
        Parsed::Micros(micros as i64)
    }
}
