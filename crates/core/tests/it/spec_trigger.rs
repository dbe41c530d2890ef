//! `Trigger::from_conf` (Databricks-style per-flow keys) and descriptions.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use pipelines_core::spec::Trigger;

fn conf(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn from(pairs: &[(&str, &str)]) -> Result<Option<Trigger>, String> {
    Trigger::from_conf(&conf(pairs)).map_err(|e| match e.help {
        Some(h) => format!("{}\nhelp: {h}", e.message),
        None => e.message,
    })
}

#[test]
fn absent_keys_mean_no_trigger() {
    assert_eq!(from(&[]), Ok(None));
    assert_eq!(from(&[("maxOffsetsPerTrigger", "10")]), Ok(None));
}

#[test]
fn trigger_names_are_case_insensitive() {
    assert_eq!(
        from(&[("pipelines.trigger", "availablenow")]),
        Ok(Some(Trigger::AvailableNow))
    );
    assert_eq!(
        from(&[("pipelines.trigger", "ONCE")]),
        Ok(Some(Trigger::Once))
    );
    assert_eq!(
        from(&[
            ("pipelines.trigger", "processingTime"),
            ("pipelines.trigger.interval", "30 seconds")
        ]),
        Ok(Some(Trigger::ProcessingTime(Duration::from_secs(30))))
    );
    assert_eq!(
        from(&[
            ("pipelines.trigger", "RealTime"),
            ("pipelines.trigger.interval", "5 minutes")
        ]),
        Ok(Some(Trigger::RealTime {
            checkpoint_interval: Duration::from_secs(300)
        }))
    );
}

#[test]
fn an_interval_alone_means_processing_time() {
    assert_eq!(
        from(&[("pipelines.trigger.interval", "1 minute")]),
        Ok(Some(Trigger::ProcessingTime(Duration::from_secs(60))))
    );
}

#[test]
fn works_with_hash_maps_too() {
    let map: HashMap<String, String> =
        HashMap::from([("pipelines.trigger".to_string(), "Once".to_string())]);
    assert_eq!(Trigger::from_conf(&map).unwrap(), Some(Trigger::Once));
}

#[test]
fn bad_values_are_errors() {
    assert_eq!(
        from(&[("pipelines.trigger", "Continuous")]),
        Err(
            "invalid `pipelines.trigger` value `Continuous`\nhelp: use one of \
             `ProcessingTime`, `AvailableNow`, `Once` or `RealTime` (ProcessingTime and \
             RealTime also need `pipelines.trigger.interval`)"
                .to_string()
        )
    );
    assert_eq!(
        from(&[("pipelines.trigger", "RealTime")]),
        Err(
            "`pipelines.trigger` is `RealTime` but `pipelines.trigger.interval` is not \
             set\nhelp: set `pipelines.trigger.interval`, e.g. to \"5 minutes\""
                .to_string()
        )
    );
    assert_eq!(
        from(&[("pipelines.trigger", "ProcessingTime")]),
        Err(
            "`pipelines.trigger` is `ProcessingTime` but `pipelines.trigger.interval` is \
             not set\nhelp: set `pipelines.trigger.interval`, e.g. to \"5 minutes\""
                .to_string()
        )
    );
    assert_eq!(
        from(&[
            ("pipelines.trigger", "AvailableNow"),
            ("pipelines.trigger.interval", "1 minute")
        ]),
        Err(
            "`pipelines.trigger.interval` does not apply to the `AvailableNow` trigger\n\
             help: remove `pipelines.trigger.interval`, or use `ProcessingTime` or `RealTime`"
                .to_string()
        )
    );
    assert_eq!(
        from(&[("pipelines.trigger.interval", "soon")]),
        Err(
            "`pipelines.trigger.interval`: invalid interval `soon`: expected pairs of a \
             number and a unit\nhelp: write an interval such as \"10 minutes\", \
             \"5 seconds\" or \"1 hour 30 minutes\""
                .to_string()
        )
    );
    assert_eq!(
        from(&[("pipelines.trigger.intervall", "1 minute")]),
        Err(
            "unknown trigger configuration key `pipelines.trigger.intervall`\nhelp: use \
             `pipelines.trigger` and `pipelines.trigger.interval`"
                .to_string()
        )
    );
}

#[test]
fn real_time_below_five_seconds_is_an_error() {
    assert_eq!(
        from(&[
            ("pipelines.trigger", "realtime"),
            ("pipelines.trigger.interval", "1 second")
        ]),
        Err(
            "real-time checkpoint interval `1 second` is below Spark's minimum of 5 \
             seconds\nhelp: use a checkpoint interval of at least 5 seconds"
                .to_string()
        )
    );
    assert!(Trigger::real_time(Duration::from_secs(4)).is_err());
    assert_eq!(
        Trigger::real_time(Duration::from_secs(5)).unwrap(),
        Trigger::RealTime {
            checkpoint_interval: Duration::from_secs(5)
        }
    );
}

#[test]
fn describe() {
    assert_eq!(
        Trigger::ProcessingTime(Duration::from_secs(90)).describe(),
        "processing time, every 1 minute 30 seconds"
    );
    assert_eq!(
        Trigger::RealTime {
            checkpoint_interval: Duration::from_secs(300)
        }
        .to_string(),
        "real-time (checkpoint every 5 minutes)"
    );
    assert_eq!(
        Trigger::AvailableNow.describe(),
        "available now (process the available input, then stop)"
    );
    assert_eq!(
        Trigger::Once.describe(),
        "once (one batch of the available input, then stop)"
    );
    assert_eq!(
        Trigger::default().describe(),
        "default (each micro-batch starts when the previous one ends)"
    );
    assert!(Trigger::Once.stops_when_caught_up());
    assert!(!Trigger::Default.stops_when_caught_up());
}
