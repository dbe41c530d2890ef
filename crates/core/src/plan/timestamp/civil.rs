//! Proleptic Gregorian calendar arithmetic (ISO-8601 year numbering, year 0 = 1 BC),
//! the calendar `java.time.LocalDate` uses. Pure integer code, no chrono.

pub(crate) const MICROS_PER_SECOND: i64 = 1_000_000;
pub(crate) const SECONDS_PER_DAY: i64 = 86_400;

#[inline(always)]
pub(crate) fn is_leap(y: i64) -> bool {
    (y & 3) == 0 && (y % 100 != 0 || y % 400 == 0)
}

#[inline(always)]
pub(crate) fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 => {
            if is_leap(y) {
                29
            } else {
                28
            }
        }
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `LocalDate.of(y, m, d)` validity: month 1..=12, day 1..=length of month.
#[inline(always)]
pub(crate) fn valid_date(y: i64, m: u32, d: u32) -> bool {
    (1..=12).contains(&m) && d >= 1 && d <= days_in_month(y, m)
}

/// Days since 1970-01-01 (H. Hinnant's `days_from_civil`); valid for |y| < 2^40.
/// Caller guarantees a valid date.
#[inline(always)]
pub(crate) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400; // [0, 399]
    let mp = if m > 2 { m - 3 } else { m + 9 } as i64; // March = 0
    let doy = (153 * mp + 2) / 5 + d as i64 - 1; // [0, 365]
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; // [0, 146096]
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian (year, month, day) of `days` since 1970-01-01
/// (the inverse of [`days_from_civil`]).
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn known_days() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        assert_eq!(days_from_civil(0, 1, 1), -719_528);
        assert_eq!(days_from_civil(2024, 2, 29), 19_782);
        assert!(valid_date(2024, 2, 29));
        assert!(!valid_date(2023, 2, 29));
        assert!(valid_date(0, 2, 29)); // year 0 is a leap year in ISO
        assert!(!valid_date(1900, 2, 29));
        assert!(valid_date(-4, 2, 29));
    }
}
