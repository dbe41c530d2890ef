//! Kafka offsets: partitions and their offsets, Spark's JSON form in the
//! checkpoint (`{"topic":{"0":42}}`), and `maxOffsetsPerTrigger` split over
//! partitions by their backlog.

use super::*;

/// A topic partition.
pub type TopicPartition = (String, i32);

/// Per partition, the next offset to read.
pub type PartitionOffsets = BTreeMap<TopicPartition, i64>;

pub(super) const EARLIEST: i64 = -2;
pub(super) const LATEST: i64 = -1;

/// Reads `{"topic": {"0": 42}}`.
pub fn offsets_from_json(
    value: &serde_json::Value,
) -> std::result::Result<PartitionOffsets, String> {
    let mut out = PartitionOffsets::new();
    let topics = value
        .as_object()
        .ok_or_else(|| format!("expected an object of topics, got `{value}`"))?;
    for (topic, parts) in topics {
        let parts = parts.as_object().ok_or_else(|| {
            format!("topic `{topic}`: expected an object of partitions, got `{parts}`")
        })?;
        for (p, o) in parts {
            let p: i32 = p
                .parse()
                .ok()
                .filter(|p| *p >= 0)
                .ok_or_else(|| format!("topic `{topic}`: `{p}` is not a partition number"))?;
            let o = o
                .as_i64()
                .ok_or_else(|| format!("topic `{topic}` partition {p}: `{o}` is not an offset"))?;
            out.insert((topic.clone(), p), o);
        }
    }
    Ok(out)
}

/// Offsets read back from the checkpoint: [`offsets_from_json`], where
/// every offset must be a position (0 or more). The special values -2
/// (earliest) and -1 (latest) belong to `startingOffsets`; in a checkpoint
/// they would make librdkafka move to the log's start or end.
pub(crate) fn checkpoint_offsets_from_json(
    value: &serde_json::Value,
) -> std::result::Result<PartitionOffsets, String> {
    let offsets = offsets_from_json(value)?;
    if let Some(((topic, p), o)) = offsets.iter().find(|(_, o)| **o < 0) {
        return Err(format!(
            "topic `{topic}` partition {p}: offset {o} is negative; a checkpoint holds positions, 0 or more"
        ));
    }
    Ok(offsets)
}

/// Writes `{"topic": {"0": 42}}`.
pub fn offsets_to_json(offsets: &PartitionOffsets) -> serde_json::Value {
    let mut topics = serde_json::Map::new();
    for ((t, p), o) in offsets {
        let entry = topics
            .entry(t.clone())
            .or_insert_with(|| serde_json::Value::Object(Default::default()));
        if let Some(m) = entry.as_object_mut() {
            m.insert(p.to_string(), serde_json::Value::from(*o));
        }
    }
    serde_json::Value::Object(topics)
}

/// The end offsets of the next batch: every partition's `from` moved
/// towards its `until`, at most `limit` messages in all, split over the
/// partitions in proportion to their backlog (Spark's rule: a share below
/// one message is rounded up, others down).
pub fn rate_limit(
    from: &PartitionOffsets,
    until: &PartitionOffsets,
    limit: Option<u64>,
) -> PartitionOffsets {
    let sizes: BTreeMap<&TopicPartition, i64> = until
        .iter()
        .map(|(tp, u)| (tp, (u - from.get(tp).copied().unwrap_or(*u)).max(0)))
        .collect();
    let total: i64 = sizes.values().sum();
    let mut out = PartitionOffsets::new();
    for (tp, u) in until {
        let begin = from.get(tp).copied().unwrap_or(*u);
        let end = match limit {
            Some(limit) if total as u64 > limit && total > 0 => {
                let size = sizes[tp];
                let share = limit as f64 * size as f64 / total as f64;
                let take = if share < 1.0 {
                    share.ceil()
                } else {
                    share.floor()
                } as i64;
                (begin + take).min(*u).max(begin)
            }
            _ => (*u).max(begin),
        };
        out.insert(tp.clone(), end);
    }
    out
}
