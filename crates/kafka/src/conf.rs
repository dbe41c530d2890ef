//! Client configuration shared by the Kafka source and sink.
//!
//! As in Spark, every option whose name starts with `kafka.` is handed to
//! the Kafka client (librdkafka) without the prefix:
//! `kafka.bootstrap.servers` becomes `bootstrap.servers`,
//! `kafka.security.protocol` becomes `security.protocol`. The options the
//! engine manages itself (offsets, commits, serialisation) are refused with
//! the option to use instead. `${ENV}` references in values are substituted
//! from the process environment (a flow's code may write
//! `.option("kafka.bootstrap.servers", "${KAFKA_BROKERS}")`).

use std::collections::BTreeMap;

use rdkafka::config::ClientConfig;

use pipelines_core::error::{Error, Result};

/// The option prefix handed to the Kafka client.
pub const KAFKA_PREFIX: &str = "kafka.";

/// Which side of Kafka a configuration is for (the options each refuses differ).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientRole {
    /// The source: a consumer that assigns partitions itself.
    Consumer,
    /// The sink: an idempotent producer.
    Producer,
}

/// Options the engine sets itself, refused as `kafka.*` options, with the fix.
fn managed(role: ClientRole, key: &str) -> Option<&'static str> {
    match (role, key) {
        (ClientRole::Consumer, "auto.offset.reset") => Some(
            "remove it and set the source option `startingOffsets` (earliest, latest or per-partition JSON) instead",
        ),
        (ClientRole::Consumer, "enable.auto.commit") | (ClientRole::Consumer, "auto.commit.enable") => Some(
            "remove it: offsets are kept in the flow's checkpoint, never committed to Kafka",
        ),
        (ClientRole::Consumer, "enable.partition.eof") => Some("remove it: the source sets it"),
        (_, "key.deserializer" | "value.deserializer" | "key.serializer" | "value.serializer") => Some(
            "remove it: keys and values are bytes; cast them in the query, e.g. `CAST(value AS STRING)`",
        ),
        (ClientRole::Producer, "enable.idempotence") => Some(
            "remove it: the sink always uses the idempotent producer (at-least-once, no duplicates from retries)",
        ),
        (ClientRole::Producer, "transactional.id") => Some(
            "remove it: the sink writes at least once with the idempotent producer, without transactions",
        ),
        _ => None,
    }
}

/// Builds the client configuration from the `kafka.*` options of `options`
/// (keys compared case-insensitively), after `defaults` (librdkafka
/// properties the engine sets unless the user does). `what` names the
/// source or sink in messages, e.g. "flow `f`: kafka source" or "sink `out`".
///
/// Fails when `kafka.bootstrap.servers` is missing or empty, when an option
/// is one the engine manages, or when a `${ENV}` reference is unset.
pub fn client_config(
    options: &BTreeMap<String, String>,
    role: ClientRole,
    what: &str,
    defaults: &[(&str, &str)],
) -> Result<ClientConfig> {
    let mut config = ClientConfig::new();
    for (k, v) in defaults {
        config.set(*k, *v);
    }
    let mut servers = None;
    for (key, value) in options {
        let lower = key.to_ascii_lowercase();
        let Some(property) = lower.strip_prefix(KAFKA_PREFIX) else {
            continue;
        };
        if let Some(fix) = managed(role, property) {
            return Err(Error::runtime_with_help(
                format!("{what}: option `{key}` is not supported"),
                fix,
            ));
        }
        let value = substitute_env(value, what, key)?;
        if property == "bootstrap.servers" {
            servers = Some(value.clone());
        }
        config.set(property, value);
    }
    match servers {
        Some(s) if !s.trim().is_empty() => Ok(config),
        Some(_) => Err(Error::runtime_with_help(
            format!("{what}: option `kafka.bootstrap.servers` is empty"),
            "set it to the brokers' host:port list, e.g. \"127.0.0.1:9092\"",
        )),
        None => Err(Error::runtime_with_help(
            format!("{what}: needs the option `kafka.bootstrap.servers`"),
            "set it to the brokers' host:port list, e.g. \"127.0.0.1:9092\"",
        )),
    }
}

/// `value` of option `key` with `${NAME}` / `${NAME:-default}` substituted
/// from the process environment; an unset variable is an error naming the option.
pub fn substitute_env(value: &str, what: &str, key: &str) -> Result<String> {
    pipelines_core::spec::env::substitute(value, &|name| std::env::var(name).ok()).map_err(|problems| {
        match problems.into_iter().next() {
            Some(pipelines_core::spec::env::Problem::Unset(name)) => Error::runtime_with_help(
                format!(
                    "{what}: option `{key}` uses the environment variable `{name}`, which is not set"
                ),
                format!("set it, e.g. `export {name}=...`, or write the value itself"),
            ),
            Some(pipelines_core::spec::env::Problem::Malformed(text)) => Error::runtime_with_help(
                format!("{what}: option `{key}`: {text}"),
                "write `${NAME}` or `${NAME:-default}`, or `$${` for a literal `${`",
            ),
            None => Error::runtime(format!("{what}: option `{key}` has a bad `${{...}}` reference")),
        }
    })
}

/// A Kafka client error as text for messages: librdkafka's description.
pub fn describe_error(e: &rdkafka::error::KafkaError) -> String {
    e.to_string()
}

/// The error for a client that could not be created (usually an unknown or
/// invalid `kafka.*` property), naming the property when librdkafka does.
pub fn creation_error(what: &str, e: rdkafka::error::KafkaError) -> Error {
    Error::external_with_help(
        format!("{what}: could not create the Kafka client"),
        "check the `kafka.*` options: each is passed to librdkafka without the `kafka.` prefix \
         (see librdkafka's CONFIGURATION.md for the property names)",
        e,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn kafka_options_pass_through_without_prefix() {
        let c = client_config(
            &opts(&[
                ("kafka.bootstrap.servers", "h:1"),
                ("Kafka.Client.Id", "me"),
                ("subscribe", "t"),
            ]),
            ClientRole::Consumer,
            "flow `f`: kafka source",
            &[("client.id", "default"), ("socket.timeout.ms", "1000")],
        )
        .unwrap();
        assert_eq!(c.get("bootstrap.servers"), Some("h:1"));
        assert_eq!(c.get("client.id"), Some("me"));
        assert_eq!(c.get("socket.timeout.ms"), Some("1000"));
        assert_eq!(c.get("subscribe"), None);
    }

    #[test]
    fn missing_servers_and_managed_options_are_refused() {
        let e = client_config(&opts(&[]), ClientRole::Producer, "sink `out`", &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "sink `out`: needs the option `kafka.bootstrap.servers`\n  help: set it to the brokers' host:port list, e.g. \"127.0.0.1:9092\""
        );
        let e = client_config(
            &opts(&[
                ("kafka.bootstrap.servers", "h:1"),
                ("kafka.auto.offset.reset", "earliest"),
            ]),
            ClientRole::Consumer,
            "flow `f`: kafka source",
            &[],
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "flow `f`: kafka source: option `kafka.auto.offset.reset` is not supported\n  help: remove it and set the source option `startingOffsets` (earliest, latest or per-partition JSON) instead"
        );
    }

    #[test]
    fn env_references_are_substituted() {
        std::env::set_var("PIPELINES_KAFKA_CONF_TEST", "b:9");
        let c = client_config(
            &opts(&[("kafka.bootstrap.servers", "${PIPELINES_KAFKA_CONF_TEST}")]),
            ClientRole::Consumer,
            "x",
            &[],
        )
        .unwrap();
        assert_eq!(c.get("bootstrap.servers"), Some("b:9"));
        let e = client_config(
            &opts(&[("kafka.bootstrap.servers", "${PIPELINES_KAFKA_CONF_UNSET}")]),
            ClientRole::Consumer,
            "flow `f`: kafka source",
            &[],
        )
        .unwrap_err();
        assert!(e
            .to_string()
            .starts_with("flow `f`: kafka source: option `kafka.bootstrap.servers` uses the environment variable `PIPELINES_KAFKA_CONF_UNSET`, which is not set"));
    }
}
