//! The Kafka source's options: the subscription (`subscribe`,
//! `subscribePattern`, `assign`), `startingOffsets`, and the check dry-run
//! runs over them.

use super::*;

/// Which partitions the source reads.
#[derive(Clone, Debug)]
pub enum Subscription {
    /// `subscribe`: every partition of these topics.
    Topics(Vec<String>),
    /// `subscribePattern`: every partition of the topics whose whole name matches.
    Pattern(regex::Regex),
    /// `assign`: exactly these partitions.
    Assign(BTreeSet<TopicPartition>),
}

/// Where a query starts reading (`startingOffsets`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartingOffsets {
    /// Each partition's earliest offset.
    Earliest,
    /// Each partition's end (only messages produced after the start).
    Latest,
    /// Per partition: an offset, -2 for earliest, -1 for latest; partitions
    /// not listed start at latest.
    Specific(PartitionOffsets),
}

/// Checks the Kafka source's options as opening the source parses them
/// (subscription, starting offsets, limits), without creating a consumer:
/// what dry-run runs. `${ENV}` references are left as written.
pub(crate) fn check_source_options(options: &Options) -> Result<()> {
    let what = "kafka source".to_string();
    let subscription = parse_subscription(options, &what)?;
    if let Some(v) = options.get("startingOffsets") {
        if let (StartingOffsets::Specific(map), Subscription::Assign(parts)) =
            (parse_starting_offsets(v, &what)?, &subscription)
        {
            if let Some(tp) = map.keys().find(|tp| !parts.contains(tp)) {
                return Err(Error::runtime_with_help(
                    format!(
                        "{what}: `startingOffsets` names {}-{}, which `assign` does not list",
                        tp.0, tp.1
                    ),
                    "give starting offsets only for assigned partitions",
                ));
            }
        }
    }
    if options.get("endingOffsets").is_some() {
        return Err(Error::runtime_with_help(
            format!("{what}: option `endingOffsets` is not supported for streaming reads"),
            "remove it: a streaming query reads until it is stopped (or, with `run`, what is there when it starts)",
        ));
    }
    options.positive("maxOffsetsPerTrigger")?;
    options.bool("failOnDataLoss", true)?;
    options.positive("kafkaConsumer.pollTimeoutMs")?;
    Ok(())
}

pub(super) fn parse_subscription(options: &Options, what: &str) -> Result<Subscription> {
    let given: Vec<&str> = ["subscribe", "subscribePattern", "assign"]
        .into_iter()
        .filter(|k| options.get(k).is_some())
        .collect();
    if given.len() != 1 {
        return Err(Error::runtime_with_help(
            format!(
                "{what}: needs exactly one of the options `subscribe`, `subscribePattern` or `assign`, got {}",
                if given.is_empty() {
                    "none".to_string()
                } else {
                    given.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(" and ")
                }
            ),
            ".option(\"subscribe\", \"events\")",
        ));
    }
    let value = options.get(given[0]).unwrap_or_default();
    match given[0] {
        "subscribe" => {
            let topics: Vec<String> = value
                .split(',')
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .collect();
            if topics.is_empty() {
                return Err(Error::runtime_with_help(
                    format!("{what}: option `subscribe` names no topic"),
                    ".option(\"subscribe\", \"topicA,topicB\")",
                ));
            }
            Ok(Subscription::Topics(topics))
        }
        "subscribePattern" => regex::Regex::new(&format!("^(?:{value})$"))
            .map(Subscription::Pattern)
            .map_err(|e| {
                Error::runtime_with_help(
                    format!(
                        "{what}: option `subscribePattern` is not a valid regular expression: {e}"
                    ),
                    ".option(\"subscribePattern\", \"events-.*\")",
                )
            }),
        _ => {
            let help = ".option(\"assign\", r#\"{\"topicA\": [0, 1], \"topicB\": [0]}\"#)";
            let parsed: serde_json::Value = serde_json::from_str(value).map_err(|e| {
                Error::runtime_with_help(
                    format!("{what}: option `assign` is not valid JSON: {e}"),
                    help,
                )
            })?;
            let mut parts = BTreeSet::new();
            let bad = || {
                Error::runtime_with_help(
                    format!("{what}: option `assign` must map topics to lists of partition numbers, got `{value}`"),
                    help,
                )
            };
            for (topic, list) in parsed.as_object().ok_or_else(bad)? {
                for p in list.as_array().ok_or_else(bad)? {
                    let p = p
                        .as_i64()
                        .and_then(|p| i32::try_from(p).ok())
                        .filter(|p| *p >= 0);
                    parts.insert((topic.clone(), p.ok_or_else(bad)?));
                }
            }
            if parts.is_empty() {
                return Err(bad());
            }
            Ok(Subscription::Assign(parts))
        }
    }
}

/// Parses `startingOffsets`: `earliest`, `latest` or per-partition JSON.
pub fn parse_starting_offsets(value: &str, what: &str) -> Result<StartingOffsets> {
    match value.trim().to_ascii_lowercase().as_str() {
        "earliest" => return Ok(StartingOffsets::Earliest),
        "latest" => return Ok(StartingOffsets::Latest),
        _ => {}
    }
    let help = "use `earliest`, `latest` or JSON such as {\"topicA\": {\"0\": 23, \"1\": -2}} (-2 earliest, -1 latest)";
    let parsed: serde_json::Value = serde_json::from_str(value).map_err(|_| {
        Error::runtime_with_help(
            format!(
                "{what}: option `startingOffsets` must be earliest, latest or JSON, got `{value}`"
            ),
            help,
        )
    })?;
    let map = offsets_from_json(&parsed).map_err(|m| {
        Error::runtime_with_help(format!("{what}: option `startingOffsets`: {m}"), help)
    })?;
    if let Some(((t, p), o)) = map.iter().find(|(_, o)| **o < EARLIEST) {
        return Err(Error::runtime_with_help(
            format!("{what}: option `startingOffsets` gives partition {t}-{p} the offset {o}; offsets are 0 or more, -2 (earliest) or -1 (latest)"),
            help,
        ));
    }
    Ok(StartingOffsets::Specific(map))
}
