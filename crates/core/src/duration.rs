//! Spark-style interval strings: `"10 minutes"`, `"5 seconds"`, `"1 hour 30 minutes"`.
//!
//! Used by watermarks, windows and triggers. Accepts an optional leading
//! `INTERVAL`, then one or more `<number> <unit>` pairs; units are
//! millisecond(s)/ms, second(s)/sec(s)/s, minute(s)/min(s), hour(s)/h, day(s)/d
//! and week(s), case-insensitive.

use std::time::Duration;

use crate::error::PlanError;

/// Parses an interval string such as `"10 minutes"` into a [`Duration`].
///
/// ```
/// use std::time::Duration;
/// use pipelines_core::duration::parse_interval;
/// assert_eq!(parse_interval("10 minutes").unwrap(), Duration::from_secs(600));
/// assert_eq!(parse_interval("1 hour 30 minutes").unwrap(), Duration::from_secs(5400));
/// assert!(parse_interval("ten minutes").is_err());
/// ```
pub fn parse_interval(text: &str) -> Result<Duration, PlanError> {
    let bad = |why: &str| {
        PlanError::with_help(
            format!("invalid interval `{text}`: {why}"),
            "write an interval such as \"10 minutes\", \"5 seconds\" or \"1 hour 30 minutes\"",
        )
    };
    let mut words: Vec<&str> = text.split_whitespace().collect();
    if words
        .first()
        .is_some_and(|w| w.eq_ignore_ascii_case("interval"))
    {
        words.remove(0);
    }
    // Allow "5minutes" / "10s" written without a space.
    let mut tokens: Vec<String> = Vec::new();
    for w in words {
        let split = w.find(|c: char| !(c.is_ascii_digit() || c == '.'));
        match split {
            Some(i) if i > 0 => {
                tokens.push(w[..i].to_string());
                tokens.push(w[i..].to_string());
            }
            _ => tokens.push(w.to_string()),
        }
    }
    if tokens.is_empty() {
        return Err(bad("it is empty"));
    }
    if !tokens.len().is_multiple_of(2) {
        return Err(bad("expected pairs of a number and a unit"));
    }
    let mut total = Duration::ZERO;
    for pair in tokens.chunks(2) {
        let n: f64 = pair[0]
            .parse()
            .map_err(|_| bad(&format!("`{}` is not a number", pair[0])))?;
        if !n.is_finite() || n < 0.0 {
            return Err(bad("intervals cannot be negative"));
        }
        let unit_ms: f64 = match pair[1].to_ascii_lowercase().as_str() {
            "ms" | "millisecond" | "milliseconds" | "msec" | "msecs" => 1.0,
            "s" | "sec" | "secs" | "second" | "seconds" => 1_000.0,
            "m" | "min" | "mins" | "minute" | "minutes" => 60_000.0,
            "h" | "hour" | "hours" => 3_600_000.0,
            "d" | "day" | "days" => 86_400_000.0,
            "w" | "week" | "weeks" => 604_800_000.0,
            other => return Err(bad(&format!("unknown unit `{other}`"))),
        };
        total += Duration::from_micros((n * unit_ms * 1_000.0).round() as u64);
    }
    Ok(total)
}

/// Formats a duration the way a user would write it: `"10 minutes"`, `"1 hour 30 minutes"`.
pub fn format_interval(d: Duration) -> String {
    let mut ms = d.as_millis();
    if ms == 0 {
        return "0 seconds".to_string();
    }
    let units = [
        (86_400_000u128, "day"),
        (3_600_000, "hour"),
        (60_000, "minute"),
        (1_000, "second"),
        (1, "millisecond"),
    ];
    let mut parts = Vec::new();
    for (size, name) in units {
        let n = ms / size;
        if n > 0 {
            parts.push(format!("{n} {name}{}", if n == 1 { "" } else { "s" }));
            ms -= n * size;
        }
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_interval("5 seconds").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_interval("1 minute").unwrap(), Duration::from_secs(60));
        assert_eq!(
            parse_interval("INTERVAL 2 HOURS").unwrap(),
            Duration::from_secs(7200)
        );
        assert_eq!(
            parse_interval("500 ms").unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(parse_interval("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(
            parse_interval("1.5 minutes").unwrap(),
            Duration::from_secs(90)
        );
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(
            parse_interval("10 parsecs").unwrap_err().message,
            "invalid interval `10 parsecs`: unknown unit `parsecs`"
        );
        assert_eq!(
            parse_interval("").unwrap_err().message,
            "invalid interval ``: it is empty"
        );
        assert_eq!(
            parse_interval("minutes").unwrap_err().message,
            "invalid interval `minutes`: expected pairs of a number and a unit"
        );
    }

    #[test]
    fn formats_round_trip() {
        assert_eq!(
            format_interval(Duration::from_secs(5400)),
            "1 hour 30 minutes"
        );
        assert_eq!(format_interval(Duration::from_secs(60)), "1 minute");
    }
}
