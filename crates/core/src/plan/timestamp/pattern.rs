//! Two-argument `to_timestamp(s, fmt)` with `spark.sql.legacy.timeParserPolicy=CORRECTED`
//! (the Spark 4 default), ANSI off, session time zone UTC.
//!
//! Spark builds a `java.time.format.DateTimeFormatter` (`Iso8601TimestampFormatter`,
//! `DateTimeFormatterHelper.getOrCreateFormatter`):
//! * `convertIncompatiblePattern`: rejects week-based / some letters, rewrites `y` -> `u`;
//! * `createBuilderWithVarLengthSecondFraction` when the pattern contains `S`: every `S..S`
//!   run becomes `appendFraction(NANO_OF_SECOND, 1, n, false)`;
//! * `parseCaseInsensitive()`, strict parsing, `ResolverStyle.STRICT`, `IsoChronology`, `Locale.US`;
//! * `formatter.parse(s)` must consume the whole string;
//! * `toZonedDateTime` defaults missing fields (year 1970, month 1, day 1, time 0) and uses
//!   the parsed offset or the session zone; `extractMicros` = `multiplyExact(epochSecond,
//!   1e6) + micro-of-second` (so nanos are truncated to micros).
//!
//! This module re-implements the subset of `DateTimeFormatterBuilder` printer-parsers needed
//! for the supported letters, including java.time's "adjacent value parsing" (e.g.
//! `yyyyMMdd`). Everything else yields a [`PatternError`].

use super::civil::{days_from_civil, valid_date, MICROS_PER_SECOND, SECONDS_PER_DAY};
use super::{Fallback, Parsed};

/// Why a pattern was not compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// Valid for Spark, but this letter (with this count) is not implemented here.
    #[error("the pattern letter `{letter}` ({count} in a row) is not supported yet; dates and times are read with y, M, d, H, h, k, K, a, m, s, S and the offsets X, x, Z")]
    UnsupportedLetter {
        /// The letter.
        letter: char,
        /// How many times it is repeated.
        count: usize,
    },
    /// Valid for Spark, but a pattern feature not implemented here (optional sections,
    /// non-ASCII literals, several hour fields, `a` without `h`/`K`, ...).
    #[error("{0} is not supported yet")]
    UnsupportedFeature(String),
    /// Spark (or java.time) rejects this pattern: `to_timestamp` raises an error in Spark.
    #[error("Spark rejects this pattern{}: {reason}", letter.map(|c| format!(" at `{c}`")).unwrap_or_default())]
    RejectedBySpark {
        /// The letter Spark stops at, when it names one.
        letter: Option<char>,
        /// Spark's reason.
        reason: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Field {
    Year = 0,      // ChronoField.YEAR ('u', Spark's rewrite of 'y')
    Month,         // MONTH_OF_YEAR (M, L)
    Day,           // DAY_OF_MONTH (d)
    HourOfDay,     // H
    ClockHourDay,  // k
    HourOfAmPm,    // K
    ClockHourAmPm, // h
    Minute,        // m
    Second,        // s
    Nano,          // S (fraction)
    AmPm,          // a
    Offset,        // X x Z
}
const NFIELDS: usize = 12;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SignStyle {
    Normal,
    NotNegative,
    ExceedsPad,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TextKind {
    AmPm,
    MonthShort,
    MonthFull,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Elem {
    /// NumberPrinterParser / ReducedPrinterParser (`reduced`: 2-digit year, base 2000).
    Num {
        field: Field,
        min: u8,
        max: u8,
        sign: SignStyle,
        sub: i32,
        reduced: bool,
    },
    /// Fraction of second into NANO_OF_SECOND, `min..=max` digits.
    Frac {
        min: u8,
        max: u8,
    },
    /// Case-insensitive ASCII literal.
    Lit(u8),
    Text(TextKind),
    /// OffsetIdPrinterParser: `ptype` indexes PATTERNS ("+HH", "+HHmm", "+HH:mm", "+HHMM",
    /// "+HH:MM", "+HHMMss", "+HH:MM:ss", ...), `no_offset` is the zero text.
    Offset {
        ptype: u8,
        no_offset: &'static [u8],
    },
}

impl Elem {
    fn is_fixed_not_negative(&self) -> Option<u8> {
        match *self {
            Elem::Num {
                min,
                max,
                sign: SignStyle::NotNegative,
                ..
            } if min == max => Some(max),
            Elem::Frac { min, max } if min == max => Some(max),
            _ => None,
        }
    }
}

/// A compiled Spark datetime pattern for parsing.
#[derive(Debug, Clone)]
pub struct SparkPattern {
    elems: Vec<Elem>,
    /// Some literal or text element could match a non-ASCII char case-insensitively.
    fold_risky: bool,
    pattern: String,
}

const MONTHS_SHORT: [&[u8]; 12] = [
    b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov", b"dec",
];
const MONTHS_FULL: [&[u8]; 12] = [
    b"january",
    b"february",
    b"march",
    b"april",
    b"may",
    b"june",
    b"july",
    b"august",
    b"september",
    b"october",
    b"november",
    b"december",
];

struct Builder {
    elems: Vec<Elem>,
    active: Option<usize>,
}

impl Builder {
    /// `appendInternal`: any non-value parser resets adjacent value parsing.
    fn internal(&mut self, e: Elem) {
        self.elems.push(e);
        self.active = None;
    }

    /// `appendValue(NumberPrinterParser)`, with java.time's adjacent value parsing.
    fn value(&mut self, e: Elem) {
        if let Some(a) = self.active {
            if let Some(w) = e.is_fixed_not_negative() {
                if let Elem::Num { sub, .. } = &mut self.elems[a] {
                    *sub = sub.saturating_add(w as i32); // withSubsequentWidth
                }
                let e = match e {
                    Elem::Num {
                        field,
                        min,
                        max,
                        sign,
                        reduced,
                        ..
                    } => Elem::Num {
                        field,
                        min,
                        max,
                        sign,
                        sub: -1,
                        reduced,
                    },
                    other => other,
                };
                self.elems.push(e); // withFixedWidth; active parser retained
            } else {
                if let Elem::Num { sub, .. } = &mut self.elems[a] {
                    *sub = -1; // withFixedWidth
                }
                self.elems.push(e);
                self.active = Some(self.elems.len() - 1);
            }
        } else {
            self.elems.push(e);
            self.active = Some(self.elems.len() - 1);
        }
    }

    fn literal_str(&mut self, s: &str) -> Result<(), PatternError> {
        for c in s.chars() {
            self.literal(c)?;
        }
        Ok(())
    }

    fn literal(&mut self, c: char) -> Result<(), PatternError> {
        if !c.is_ascii() {
            return Err(PatternError::UnsupportedFeature(format!(
                "non-ASCII literal {c:?}"
            )));
        }
        self.internal(Elem::Lit(c as u8));
        Ok(())
    }

    fn fraction(&mut self, min: usize, max: usize) -> Result<(), PatternError> {
        if max > 9 {
            return Err(PatternError::RejectedBySpark {
                letter: Some('S'),
                reason: format!("fraction width {max} > 9"),
            });
        }
        let e = Elem::Frac {
            min: min as u8,
            max: max as u8,
        };
        if min == max {
            self.value(e);
        } else {
            self.internal(e);
        }
        Ok(())
    }

    /// `DateTimeFormatterBuilder.appendPattern` (`parsePattern` + `parseField`).
    fn append_pattern(&mut self, pat: &str) -> Result<(), PatternError> {
        let chars: Vec<char> = pat.chars().collect();
        let mut pos = 0;
        while pos < chars.len() {
            let cur = chars[pos];
            if cur.is_ascii_alphabetic() {
                let start = pos;
                while pos < chars.len() && chars[pos] == cur {
                    pos += 1;
                }
                let count = pos - start;
                self.field(cur, count)?;
                continue;
            }
            if cur == '\'' {
                let start = pos;
                pos += 1;
                while pos < chars.len() {
                    if chars[pos] == '\'' {
                        if pos + 1 < chars.len() && chars[pos + 1] == '\'' {
                            pos += 1;
                        } else {
                            break;
                        }
                    }
                    pos += 1;
                }
                if pos >= chars.len() {
                    return Err(PatternError::RejectedBySpark {
                        letter: None,
                        reason: "pattern ends with an incomplete string literal".into(),
                    });
                }
                let s: String = chars[start + 1..pos].iter().collect();
                if s.is_empty() {
                    self.literal('\'')?;
                } else {
                    self.literal_str(&s.replace("''", "'"))?;
                }
                pos += 1;
                continue;
            }
            match cur {
                '[' => {
                    return Err(PatternError::UnsupportedFeature(
                        "optional section '['".into(),
                    ))
                }
                ']' => {
                    return Err(PatternError::RejectedBySpark {
                        letter: None,
                        reason: "']' without previous '['".into(),
                    })
                }
                '{' | '}' | '#' => {
                    return Err(PatternError::RejectedBySpark {
                        letter: None,
                        reason: format!("reserved character '{cur}'"),
                    })
                }
                _ => self.literal(cur)?,
            }
            pos += 1;
        }
        Ok(())
    }

    fn field(&mut self, cur: char, count: usize) -> Result<(), PatternError> {
        let too_many = || PatternError::RejectedBySpark {
            letter: Some(cur),
            reason: format!("too many pattern letters ({count})"),
        };
        let unsupported = || PatternError::UnsupportedLetter { letter: cur, count };
        let num = |field, min: usize, max: usize, sign| Elem::Num {
            field,
            min: min as u8,
            max: max as u8,
            sign,
            sub: 0,
            reduced: false,
        };
        match cur {
            'u' => {
                if count == 2 {
                    self.value(Elem::Num {
                        field: Field::Year,
                        min: 2,
                        max: 2,
                        sign: SignStyle::NotNegative,
                        sub: 0,
                        reduced: true,
                    });
                } else if count < 4 {
                    self.value(num(Field::Year, count, 19, SignStyle::Normal));
                } else if count <= 19 {
                    self.value(num(Field::Year, count, 19, SignStyle::ExceedsPad));
                } else {
                    return Err(too_many());
                }
            }
            'M' | 'L' => match count {
                1 => self.value(num(Field::Month, 1, 19, SignStyle::Normal)),
                2 => self.value(num(Field::Month, 2, 2, SignStyle::NotNegative)),
                3 if cur == 'M' => self.internal(Elem::Text(TextKind::MonthShort)),
                4 if cur == 'M' => self.internal(Elem::Text(TextKind::MonthFull)),
                3..=5 => return Err(unsupported()),
                _ => return Err(too_many()),
            },
            'd' | 'h' | 'H' | 'k' | 'K' | 'm' | 's' => {
                let field = match cur {
                    'd' => Field::Day,
                    'h' => Field::ClockHourAmPm,
                    'H' => Field::HourOfDay,
                    'k' => Field::ClockHourDay,
                    'K' => Field::HourOfAmPm,
                    'm' => Field::Minute,
                    _ => Field::Second,
                };
                match count {
                    1 => self.value(num(field, 1, 19, SignStyle::Normal)),
                    2 => self.value(num(field, 2, 2, SignStyle::NotNegative)),
                    _ => return Err(too_many()),
                }
            }
            'a' => {
                if count == 1 {
                    self.internal(Elem::Text(TextKind::AmPm));
                } else {
                    return Err(too_many());
                }
            }
            'X' | 'x' => {
                if count > 5 {
                    return Err(too_many());
                }
                // PATTERNS[count + (count == 1 ? 0 : 1)]
                let ptype = (count + if count == 1 { 0 } else { 1 }) as u8;
                let no_offset: &'static [u8] = if cur == 'X' {
                    b"Z"
                } else if count == 1 {
                    b"+00"
                } else if count.is_multiple_of(2) {
                    b"+0000"
                } else {
                    b"+00:00"
                };
                self.internal(Elem::Offset { ptype, no_offset });
            }
            'Z' => match count {
                1..=3 => self.internal(Elem::Offset {
                    ptype: 3,
                    no_offset: b"+0000",
                }),
                4 => return Err(unsupported()), // localized offset "GMT+08:00"
                5 => self.internal(Elem::Offset {
                    ptype: 6,
                    no_offset: b"Z",
                }),
                _ => return Err(too_many()),
            },
            // 'S' runs are always handled by the variable-length fraction builder.
            'S' => self.fraction(1, count)?,
            // Known to java.time (and not rejected by Spark) but not implemented here.
            'G' | 'D' | 'V' | 'z' | 'O' | 'v' | 'g' | 'y' => return Err(unsupported()),
            _ => {
                return Err(PatternError::RejectedBySpark {
                    letter: Some(cur),
                    reason: "unknown pattern letter".into(),
                })
            }
        }
        Ok(())
    }
}

/// Java `String.split("'")`: trailing empty strings are removed.
fn java_split_quote(s: &str) -> Vec<&str> {
    let mut parts: Vec<&str> = s.split('\'').collect();
    while parts.last() == Some(&"") {
        parts.pop();
    }
    if parts.is_empty() && !s.contains('\'') {
        parts.push(s);
    }
    parts
}

/// `DateTimeFormatterHelper.convertIncompatiblePattern(pattern, isParsing = true)`.
fn convert_incompatible_pattern(pattern: &str) -> Result<String, PatternError> {
    let era = java_split_quote(pattern)
        .iter()
        .enumerate()
        .any(|(i, p)| i % 2 == 0 && p.contains('G'));
    let padded = format!("{pattern} ");
    let mut out: Vec<String> = Vec::new();
    for (i, part) in java_split_quote(&padded).into_iter().enumerate() {
        if i % 2 == 0 {
            for c in part.chars() {
                if matches!(c, 'Y' | 'W' | 'w' | 'u' | 'e' | 'c') {
                    return Err(PatternError::RejectedBySpark {
                        letter: Some(c),
                        reason: "week-based pattern letter (DATETIME_WEEK_BASED_PATTERN)".into(),
                    });
                }
            }
            for c in part.chars() {
                if matches!(c, 'A' | 'B' | 'n' | 'N' | 'p' | 'E' | 'F' | 'q' | 'Q') {
                    return Err(PatternError::RejectedBySpark {
                        letter: Some(c),
                        reason: "illegal pattern character for parsing".into(),
                    });
                }
            }
            for style in [
                "GGGGG", "MMMMM", "LLLLL", "EEEEE", "QQQQQ", "qqqqq", "yyyyyyy",
            ] {
                if part.contains(style) {
                    return Err(PatternError::RejectedBySpark {
                        letter: style.chars().next(),
                        reason: format!("unsupported pattern length {style}"),
                    });
                }
            }
            out.push(if era {
                part.to_string()
            } else {
                part.replace('y', "u")
            });
        } else {
            out.push(part.to_string());
        }
    }
    let joined = out.join("'");
    Ok(joined
        .strip_suffix(' ')
        .map(str::to_string)
        .unwrap_or(joined))
}

impl SparkPattern {
    /// Compiles a Spark datetime pattern (as given to `to_timestamp(s, fmt)`).
    pub fn compile(pattern: &str) -> Result<SparkPattern, PatternError> {
        if pattern.contains(['\n', '\r']) {
            return Err(PatternError::UnsupportedFeature(
                "line terminator in pattern".into(),
            ));
        }
        let new_pattern = convert_incompatible_pattern(pattern)?;
        let mut b = Builder {
            elems: Vec::new(),
            active: None,
        };
        if new_pattern.contains('S') {
            // createBuilderWithVarLengthSecondFraction
            for (idx, part) in java_split_quote(&new_pattern).into_iter().enumerate() {
                if part.is_empty() && idx != 0 {
                    b.literal('\'')?;
                } else if idx % 2 == 0 {
                    // extractor = "^([^S]*)(S*)(.*)$"
                    let mut rest = part;
                    while !rest.is_empty() {
                        let p_end = rest.find('S').unwrap_or(rest.len());
                        let (prefix, tail) = rest.split_at(p_end);
                        let s_end = tail.find(|c| c != 'S').unwrap_or(tail.len());
                        let (frac, suffix) = tail.split_at(s_end);
                        b.append_pattern(prefix)?;
                        if !frac.is_empty() {
                            b.fraction(1, frac.len())?;
                        }
                        rest = suffix;
                    }
                } else {
                    b.literal_str(part)?;
                }
            }
        } else {
            b.append_pattern(&new_pattern)?;
        }
        let elems = b.elems;
        // Field combinations whose java.time resolution (cross-checks, conflicts) is not
        // modelled here.
        let count = |f: Field| {
            elems
                .iter()
                .filter(|e| match e {
                    Elem::Num { field, .. } => *field == f,
                    Elem::Text(TextKind::AmPm) => f == Field::AmPm,
                    _ => false,
                })
                .count()
        };
        let hour_kinds = [
            Field::HourOfDay,
            Field::ClockHourDay,
            Field::HourOfAmPm,
            Field::ClockHourAmPm,
        ]
        .iter()
        .filter(|&&f| count(f) > 0)
        .count();
        if hour_kinds > 1 {
            return Err(PatternError::UnsupportedFeature(
                "more than one kind of hour field".into(),
            ));
        }
        if count(Field::AmPm) > 0
            && count(Field::ClockHourAmPm) == 0
            && count(Field::HourOfAmPm) == 0
        {
            return Err(PatternError::UnsupportedFeature(
                "'a' without 'h' or 'K'".into(),
            ));
        }
        let fold_risky = elems.iter().any(|e| match e {
            Elem::Lit(c) => matches!(c.to_ascii_lowercase(), b'i' | b's' | b'k'),
            Elem::Text(TextKind::MonthShort | TextKind::MonthFull) => true,
            _ => false,
        });
        Ok(SparkPattern {
            elems,
            fold_risky,
            pattern: pattern.to_string(),
        })
    }

    /// The pattern string this was compiled from.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// `to_timestamp(s, fmt)`: `Some(micros)` or `None` for Spark NULL. Also `None` for the
    /// rare [`Fallback`] cases; use [`SparkPattern::parse_ext`] to tell them apart.
    #[inline]
    pub fn parse(&self, s: &[u8]) -> Option<i64> {
        self.parse_ext(s).micros()
    }

    /// Three-way `to_timestamp(s, fmt)`.
    pub fn parse_ext(&self, s: &[u8]) -> Parsed {
        let mut vals: [i64; NFIELDS] = [0; NFIELDS];
        let mut have: u32 = 0;
        let len = s.len();
        let mut pos = 0usize;
        // Digits, signs, offsets and all supported literals are ASCII; a non-ASCII char can only
        // ever be consumed through java.time's case-insensitive char comparison.
        if s.iter().any(|&b| b >= 0x80) {
            return if self.fold_risky {
                Parsed::Fallback(Fallback::NonAscii)
            } else {
                Parsed::Null
            };
        }
        macro_rules! set {
            ($f:expr, $v:expr) => {{
                let f = $f as usize;
                let v: i64 = $v;
                if have & (1 << f) != 0 {
                    if vals[f] != v {
                        return Parsed::Null; // setParsedField conflict
                    }
                } else {
                    have |= 1 << f;
                    vals[f] = v;
                }
            }};
        }
        for e in &self.elems {
            match *e {
                Elem::Lit(c) => {
                    if pos >= len || !s[pos].eq_ignore_ascii_case(&c) {
                        return Parsed::Null;
                    }
                    pos += 1;
                }
                Elem::Num {
                    field,
                    min,
                    max,
                    sign,
                    sub,
                    reduced,
                } => {
                    let Some((v, np)) = parse_number(s, pos, min as usize, max as usize, sign, sub)
                    else {
                        return Parsed::Null;
                    };
                    let v = if reduced && v >= 0 && np - pos == 2 {
                        2000 + v
                    } else {
                        v
                    };
                    set!(field, v);
                    pos = np;
                }
                Elem::Frac { min, max } => {
                    let Some((v, np)) = parse_fraction(s, pos, min as usize, max as usize) else {
                        return Parsed::Null;
                    };
                    set!(Field::Nano, v);
                    pos = np;
                }
                Elem::Text(kind) => {
                    let rest = &s[pos..];
                    let found = match kind {
                        TextKind::AmPm => {
                            if rest.len() >= 2 && rest[1].eq_ignore_ascii_case(&b'm') {
                                match rest[0].to_ascii_lowercase() {
                                    b'a' => Some((0, 2)),
                                    b'p' => Some((1, 2)),
                                    _ => None,
                                }
                            } else {
                                None
                            }
                        }
                        TextKind::MonthShort | TextKind::MonthFull => {
                            let names = if kind == TextKind::MonthShort {
                                &MONTHS_SHORT
                            } else {
                                &MONTHS_FULL
                            };
                            names.iter().enumerate().find_map(|(i, n)| {
                                (rest.len() >= n.len() && rest[..n.len()].eq_ignore_ascii_case(n))
                                    .then_some((i as i64 + 1, n.len()))
                            })
                        }
                    };
                    let Some((v, n)) = found else {
                        return Parsed::Null;
                    };
                    set!(
                        if kind == TextKind::AmPm {
                            Field::AmPm
                        } else {
                            Field::Month
                        },
                        v
                    );
                    pos += n;
                }
                Elem::Offset { ptype, no_offset } => {
                    let Some((v, np)) = parse_offset(s, pos, ptype, no_offset) else {
                        return Parsed::Null;
                    };
                    set!(Field::Offset, v);
                    pos = np;
                }
            }
        }
        if pos != len {
            return Parsed::Null; // "unparsed text found"
        }
        let get = |f: Field| {
            if have & (1 << f as usize) != 0 {
                Some(vals[f as usize])
            } else {
                None
            }
        };
        // ---- resolution: ResolverStyle.STRICT + Spark's toLocalDate / toLocalTime ----
        let year = get(Field::Year).unwrap_or(1970);
        if !(-999_999_999..=999_999_999).contains(&year) {
            return Parsed::Null;
        }
        let month = get(Field::Month).unwrap_or(1);
        let day = get(Field::Day).unwrap_or(1);
        if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
            return Parsed::Null;
        }
        if !valid_date(year, month as u32, day as u32) {
            return Parsed::Null;
        }
        let in_range = |v: Option<i64>, lo: i64, hi: i64| v.is_none_or(|v| (lo..=hi).contains(&v));
        let ampm = get(Field::AmPm);
        let hour = if let Some(h) = get(Field::HourOfDay) {
            if !(0..=23).contains(&h) {
                return Parsed::Null;
            }
            h
        } else if let Some(k) = get(Field::ClockHourDay) {
            if !(1..=24).contains(&k) {
                return Parsed::Null;
            }
            k % 24
        } else {
            let hap = if let Some(h) = get(Field::ClockHourAmPm) {
                if !(1..=12).contains(&h) {
                    return Parsed::Null;
                }
                Some(h % 12)
            } else if let Some(k) = get(Field::HourOfAmPm) {
                if !(0..=11).contains(&k) {
                    return Parsed::Null;
                }
                Some(k)
            } else {
                None
            };
            match (hap, ampm) {
                (Some(h), Some(ap)) => ap * 12 + h,
                (Some(h), None) => h,
                (None, Some(ap)) => ap * 12,
                (None, None) => 0,
            }
        };
        let minute = get(Field::Minute);
        let second = get(Field::Second);
        if !in_range(minute, 0, 59) || !in_range(second, 0, 59) {
            return Parsed::Null;
        }
        let nano = get(Field::Nano).unwrap_or(0);
        let offset = get(Field::Offset).unwrap_or(0);
        if !(-64_800..=64_800).contains(&offset) {
            return Parsed::Null; // ZoneOffset.ofTotalSeconds
        }
        let sod = hour * 3600 + minute.unwrap_or(0) * 60 + second.unwrap_or(0);
        let epoch_seconds =
            days_from_civil(year, month as u32, day as u32) * SECONDS_PER_DAY + sod - offset;
        // Math.addExact(Math.multiplyExact(epochSeconds, MICROS_PER_SECOND), microsOfSecond)
        match epoch_seconds
            .checked_mul(MICROS_PER_SECOND)
            .and_then(|v| v.checked_add(nano / 1000))
        {
            Some(v) => Parsed::Micros(v),
            None => Parsed::Fallback(Fallback::Overflow),
        }
    }
}

/// `SignStyle.parse(positive, strict = true, fixedWidth)`.
#[inline(always)]
fn sign_ok(style: SignStyle, positive: bool) -> bool {
    match style {
        SignStyle::Normal => !positive,
        SignStyle::ExceedsPad => true,
        SignStyle::NotNegative => false,
    }
}

/// `NumberPrinterParser.parse` in strict mode. Returns (value, new position).
#[inline(always)]
fn parse_number(
    s: &[u8],
    pos: usize,
    min: usize,
    max: usize,
    sign: SignStyle,
    sub: i32,
) -> Option<(i64, usize)> {
    let len = s.len();
    if pos >= len {
        return None;
    }
    let mut position = pos;
    let (mut negative, mut positive) = (false, false);
    match s[pos] {
        b'+' => {
            if !sign_ok(sign, true) {
                return None;
            }
            positive = true;
            position += 1;
        }
        b'-' => {
            if !sign_ok(sign, false) {
                return None;
            }
            negative = true;
            position += 1;
        }
        _ => {}
    }
    let min_end = position + min;
    if min_end > len {
        return None;
    }
    let mut eff_max = max + sub.max(0) as usize;
    let mut total: u128 = 0;
    let mut p = position;
    for pass in 0..2 {
        let max_end = (p + eff_max).min(len);
        while p < max_end {
            let d = s[p].wrapping_sub(b'0');
            if d > 9 {
                if p < min_end {
                    return None;
                }
                break;
            }
            p += 1;
            total = total.wrapping_mul(10).wrapping_add(d as u128);
        }
        if sub > 0 && pass == 0 {
            let parse_len = (p - position) as i64;
            eff_max = (min as i64).max(parse_len - sub as i64) as usize;
            p = position;
            total = 0;
        } else {
            break;
        }
    }
    if negative {
        if total == 0 {
            return None; // minus zero not allowed
        }
    } else if sign == SignStyle::ExceedsPad {
        let parse_len = p - position;
        if positive {
            if parse_len <= min {
                return None;
            }
        } else if parse_len > min {
            return None;
        }
    }
    // BigInteger.bitLength() > 63: parse one digit less
    let limit: u128 = if negative {
        1u128 << 63
    } else {
        (1u128 << 63) - 1
    };
    if total > limit {
        total /= 10;
        p -= 1;
    }
    let v = if negative {
        (-(total as i128)) as i64
    } else {
        total as i64
    };
    Some((v, p))
}

/// NANO_OF_SECOND fraction parser (no decimal point), strict.
#[inline(always)]
fn parse_fraction(s: &[u8], pos: usize, min: usize, max: usize) -> Option<(i64, usize)> {
    let len = s.len();
    if pos >= len {
        return if min > 0 { None } else { Some((0, pos)) };
    }
    let min_end = pos + min;
    if min_end > len {
        return None;
    }
    let max_end = (pos + max).min(len);
    let mut total: i64 = 0;
    let mut p = pos;
    while p < max_end {
        let d = s[p].wrapping_sub(b'0');
        if d > 9 {
            if p < min_end {
                return None;
            }
            break;
        }
        p += 1;
        total = total * 10 + d as i64;
    }
    for _ in 0..(9 - (p - pos)) {
        total *= 10;
    }
    Some((total, p))
}

/// `OffsetIdPrinterParser.parse` in strict mode for the padded-hour types 0..=10.
fn parse_offset(s: &[u8], pos: usize, ptype: u8, no_offset: &[u8]) -> Option<(i64, usize)> {
    let len = s.len();
    if pos >= len {
        return None;
    }
    let nol = no_offset.len();
    if len - pos >= nol && s[pos..pos + nol].eq_ignore_ascii_case(no_offset) {
        return Some((0, pos + nol));
    }
    let sign = s[pos];
    if sign != b'+' && sign != b'-' {
        return None;
    }
    let style = ptype % 11;
    let colon = style > 0 && style.is_multiple_of(2);
    // array = [position, hours, minutes, seconds]; a negative position marks failure.
    let mut at: isize = pos as isize + 1;
    let mut hms = [0i64; 3];
    // parseDigits
    let mut digits = |at: &mut isize, idx: usize, colon: bool| -> bool {
        if *at < 0 {
            return true;
        }
        let mut p = *at as usize;
        if colon && idx != 0 {
            if p + 1 > len || s[p] != b':' {
                return false;
            }
            p += 1;
        }
        if p + 2 > len {
            return false;
        }
        let (a, b) = (s[p], s[p + 1]);
        if !a.is_ascii_digit() || !b.is_ascii_digit() {
            return false;
        }
        let v = ((a - b'0') * 10 + (b - b'0')) as i64;
        if v > 59 {
            return false;
        }
        hms[idx] = v;
        *at = (p + 2) as isize;
        true
    };
    // parseHour (padded): two digits, mandatory
    if !digits(&mut at, 0, false) {
        at = !at;
    }
    let (minute_mandatory, second) = match ptype {
        0 => (None, None),
        1 | 2 => (Some(false), None),
        3 | 4 => (Some(true), None),
        5 | 6 => (Some(true), Some(false)),
        7 | 8 => (Some(true), Some(true)),
        _ => return None, // +HHmmss style types are not produced by the supported letters
    };
    if let Some(mandatory) = minute_mandatory {
        if !digits(&mut at, 1, colon) && mandatory {
            at = !at;
        }
    }
    if let Some(mandatory) = second {
        if !digits(&mut at, 2, colon) && mandatory {
            at = !at;
        }
    }
    if at > 0 {
        if hms[0] > 23 {
            return None; // DateTimeException("Value out of range")
        }
        let secs = hms[0] * 3600 + hms[1] * 60 + hms[2];
        return Some((if sign == b'-' { -secs } else { secs }, at as usize));
    }
    None
}
