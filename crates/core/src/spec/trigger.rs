//! Flow triggers: when a streaming flow runs its micro-batches.

use std::fmt;
use std::time::Duration;

use crate::duration::{format_interval, parse_interval};
use crate::error::PlanError;

/// Spark's smallest checkpoint interval for the real-time trigger.
pub const MIN_REAL_TIME_CHECKPOINT_INTERVAL: Duration = Duration::from_secs(5);

pub use crate::conf::{TRIGGER_CONF_KEY, TRIGGER_INTERVAL_CONF_KEY};

/// When a streaming flow runs, mirroring Spark's `Trigger`.
///
/// In the spec a trigger is written as `default`, `available_now`, `once`,
/// `{ processing_time: 1 minute }` or
/// `{ real_time: { checkpoint_interval: 5 minutes } }`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// The next micro-batch starts as soon as the previous one ends.
    #[default]
    Default,
    /// Micro-batches start on a fixed interval.
    ProcessingTime(Duration),
    /// Processes everything available when the query starts, possibly in
    /// several batches, then stops.
    AvailableNow,
    /// Processes everything available in one batch, then stops.
    Once,
    /// Real-time mode: records flow through continuously with low latency and
    /// progress is checkpointed on the given interval (at least 5 seconds).
    RealTime {
        /// How often progress is checkpointed.
        checkpoint_interval: Duration,
    },
}

/// The trigger kinds, parsed leniently from `available_now`, `AvailableNow`,
/// `availableNow`, `available-now`, ...
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TriggerKind {
    Default,
    ProcessingTime,
    AvailableNow,
    Once,
    RealTime,
}

impl TriggerKind {
    /// Parses a trigger name, ignoring case, `_`, `-` and spaces.
    pub(crate) fn parse(text: &str) -> Option<TriggerKind> {
        let norm: String = text
            .chars()
            .filter(|c| !matches!(c, '_' | '-' | ' '))
            .flat_map(char::to_lowercase)
            .collect();
        Some(match norm.as_str() {
            "default" => TriggerKind::Default,
            "processingtime" => TriggerKind::ProcessingTime,
            "availablenow" => TriggerKind::AvailableNow,
            "once" => TriggerKind::Once,
            "realtime" => TriggerKind::RealTime,
            _ => return None,
        })
    }

    /// The name used with `pipelines.trigger`.
    pub(crate) fn conf_name(self) -> &'static str {
        match self {
            TriggerKind::Default => "Default",
            TriggerKind::ProcessingTime => "ProcessingTime",
            TriggerKind::AvailableNow => "AvailableNow",
            TriggerKind::Once => "Once",
            TriggerKind::RealTime => "RealTime",
        }
    }
}

/// Checks Spark's minimum real-time checkpoint interval; `written` is the
/// interval as the user wrote it.
pub(crate) fn check_real_time_interval(interval: Duration, written: &str) -> Result<(), PlanError> {
    if interval < MIN_REAL_TIME_CHECKPOINT_INTERVAL {
        return Err(PlanError::with_help(
            format!(
                "real-time checkpoint interval `{}` is below Spark's minimum of {}",
                written.trim(),
                format_interval(MIN_REAL_TIME_CHECKPOINT_INTERVAL)
            ),
            format!(
                "use a checkpoint interval of at least {}",
                format_interval(MIN_REAL_TIME_CHECKPOINT_INTERVAL)
            ),
        ));
    }
    Ok(())
}

impl Trigger {
    /// A real-time trigger, checking Spark's 5-second minimum.
    pub fn real_time(checkpoint_interval: Duration) -> Result<Trigger, PlanError> {
        check_real_time_interval(checkpoint_interval, &format_interval(checkpoint_interval))?;
        Ok(Trigger::RealTime {
            checkpoint_interval,
        })
    }

    /// True for the triggers that stop once the available input is processed
    /// ([`Trigger::AvailableNow`] and [`Trigger::Once`]).
    pub fn stops_when_caught_up(&self) -> bool {
        matches!(self, Trigger::AvailableNow | Trigger::Once)
    }

    /// A short human description, e.g. `"processing time, every 1 minute"`.
    pub fn describe(&self) -> String {
        match self {
            Trigger::Default => {
                "default (each micro-batch starts when the previous one ends)".to_string()
            }
            Trigger::ProcessingTime(d) => format!("processing time, every {}", format_interval(*d)),
            Trigger::AvailableNow => {
                "available now (process the available input, then stop)".to_string()
            }
            Trigger::Once => "once (one batch of the available input, then stop)".to_string(),
            Trigger::RealTime {
                checkpoint_interval,
            } => format!(
                "real-time (checkpoint every {})",
                format_interval(*checkpoint_interval)
            ),
        }
    }

    /// Reads a trigger from Databricks-style per-flow configuration:
    /// `pipelines.trigger` (`RealTime`, `AvailableNow`, `Once`,
    /// `ProcessingTime`, case-insensitive) and `pipelines.trigger.interval`
    /// (e.g. `"5 minutes"`). An interval alone means `ProcessingTime`.
    ///
    /// Returns `Ok(None)` when neither key is set. Any other key starting with
    /// `pipelines.trigger.` is an error, as are bad names and intervals, a
    /// missing interval for `ProcessingTime`/`RealTime`, an interval given to
    /// `AvailableNow`/`Once`, and a real-time interval below 5 seconds.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use std::time::Duration;
    /// use pipelines_core::spec::Trigger;
    /// let conf = BTreeMap::from([
    ///     ("pipelines.trigger".to_string(), "RealTime".to_string()),
    ///     ("pipelines.trigger.interval".to_string(), "5 minutes".to_string()),
    /// ]);
    /// assert_eq!(
    ///     Trigger::from_conf(&conf).unwrap(),
    ///     Some(Trigger::RealTime { checkpoint_interval: Duration::from_secs(300) })
    /// );
    /// ```
    pub fn from_conf<'a, K, V>(
        conf: impl IntoIterator<Item = (&'a K, &'a V)>,
    ) -> Result<Option<Trigger>, PlanError>
    where
        K: AsRef<str> + ?Sized + 'a,
        V: AsRef<str> + ?Sized + 'a,
    {
        let mut kind_text: Option<&str> = None;
        let mut interval_text: Option<&str> = None;
        for (key, value) in conf {
            let (key, value) = (key.as_ref(), value.as_ref());
            if key == TRIGGER_CONF_KEY {
                kind_text = Some(value);
            } else if key == TRIGGER_INTERVAL_CONF_KEY {
                interval_text = Some(value);
            } else if key.starts_with("pipelines.trigger.") {
                return Err(PlanError::with_help(
                    format!("unknown trigger configuration key `{key}`"),
                    format!("use `{TRIGGER_CONF_KEY}` and `{TRIGGER_INTERVAL_CONF_KEY}`"),
                ));
            }
        }
        let interval = |text: &str| {
            parse_interval(text).map_err(|e| PlanError {
                message: format!("`{TRIGGER_INTERVAL_CONF_KEY}`: {}", e.message),
                help: e.help,
            })
        };
        let Some(kind_text) = kind_text else {
            return match interval_text {
                None => Ok(None),
                Some(text) => Ok(Some(Trigger::ProcessingTime(interval(text)?))),
            };
        };
        let Some(kind) = TriggerKind::parse(kind_text) else {
            return Err(PlanError::with_help(
                format!("invalid `{TRIGGER_CONF_KEY}` value `{kind_text}`"),
                "use one of `ProcessingTime`, `AvailableNow`, `Once` or `RealTime` \
                 (ProcessingTime and RealTime also need `pipelines.trigger.interval`)",
            ));
        };
        let needs_interval = || {
            PlanError::with_help(
                format!(
                    "`{TRIGGER_CONF_KEY}` is `{}` but `{TRIGGER_INTERVAL_CONF_KEY}` is not set",
                    kind.conf_name()
                ),
                format!("set `{TRIGGER_INTERVAL_CONF_KEY}`, e.g. to \"5 minutes\""),
            )
        };
        match kind {
            TriggerKind::ProcessingTime => {
                let text = interval_text.ok_or_else(needs_interval)?;
                Ok(Some(Trigger::ProcessingTime(interval(text)?)))
            }
            TriggerKind::RealTime => {
                let text = interval_text.ok_or_else(needs_interval)?;
                let checkpoint_interval = interval(text)?;
                check_real_time_interval(checkpoint_interval, text)?;
                Ok(Some(Trigger::RealTime {
                    checkpoint_interval,
                }))
            }
            TriggerKind::AvailableNow | TriggerKind::Once | TriggerKind::Default => {
                if interval_text.is_some() {
                    return Err(PlanError::with_help(
                        format!(
                            "`{TRIGGER_INTERVAL_CONF_KEY}` does not apply to the `{}` trigger",
                            kind.conf_name()
                        ),
                        format!(
                            "remove `{TRIGGER_INTERVAL_CONF_KEY}`, or use `ProcessingTime` or `RealTime`"
                        ),
                    ));
                }
                Ok(Some(match kind {
                    TriggerKind::AvailableNow => Trigger::AvailableNow,
                    TriggerKind::Once => Trigger::Once,
                    _ => Trigger::Default,
                }))
            }
        }
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}
