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
        .map(|(tp, u)| {
            let begin = from.get(tp).copied().unwrap_or(*u);
            (tp, u.saturating_sub(begin).max(0))
        })
        .collect();
    let total: u128 = sizes.values().map(|s| *s as u128).sum();
    let mut out = PartitionOffsets::new();
    for (tp, u) in until {
        let begin = from.get(tp).copied().unwrap_or(*u);
        let end = match limit {
            Some(limit) if total > limit as u128 => {
                // The share `limit * size / total`, exactly: below one
                // message rounded up, otherwise down.
                let scaled = limit as u128 * sizes[tp] as u128;
                let share = scaled / total;
                let share = if share == 0 && scaled > 0 { 1 } else { share };
                let take = i64::try_from(share).unwrap_or(i64::MAX);
                begin.saturating_add(take).min(*u).max(begin)
            }
            _ => (*u).max(begin),
        };
        out.insert(tp.clone(), end);
    }
    out
}

#[cfg(test)]
mod fuzz {
    use super::*;

    /// A seeded xorshift64 generator.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        /// An offset: small, huge, or at the ends of the range.
        fn offset(&mut self) -> i64 {
            match self.next() % 4 {
                0 => (self.next() % 100) as i64,
                1 => (self.next() >> 1) as i64,
                2 => i64::MAX - (self.next() % 3) as i64,
                _ => -((self.next() % 3) as i64),
            }
        }
    }

    /// Damaged checkpoint offsets are positions or an error (never a
    /// panic), and `maxOffsetsPerTrigger` over any offsets stays within
    /// each partition's range and the limit (plus one per partition, the
    /// rounding up); 2000 seeded cases.
    #[test]
    fn damaged_offsets_and_any_ranges_never_panic() {
        let mut rng = Rng(0x94D0_49BB_1331_11EB);
        let valid = r#"{"events":{"0":42,"1":7},"other":{"3":1000000}}"#.as_bytes();
        let alphabet = b"{}[]\":,0123456789-.eE ";
        let (mut errors, mut parsed) = (0, 0);
        for case in 0..2000 {
            let mut text = valid.to_vec();
            for _ in 0..1 + rng.next() % 4 {
                let at = (rng.next() as usize) % text.len();
                text[at] = alphabet[(rng.next() as usize) % alphabet.len()];
            }
            if let Ok(value) = serde_json::from_slice::<serde_json::Value>(&text) {
                match checkpoint_offsets_from_json(&value) {
                    Ok(o) => {
                        parsed += 1;
                        assert!(o.values().all(|v| *v >= 0), "case {case}: {o:?}");
                    }
                    Err(_) => errors += 1,
                }
            } else {
                errors += 1;
            }
            let n = 1 + rng.next() % 5;
            let (mut from, mut until) = (PartitionOffsets::new(), PartitionOffsets::new());
            for p in 0..n as i32 {
                if !rng.next().is_multiple_of(4) {
                    from.insert(("t".to_string(), p), rng.offset());
                }
                until.insert(("t".to_string(), p), rng.offset());
            }
            let limit = match rng.next() % 3 {
                0 => None,
                1 => Some(rng.next() % 50),
                _ => Some(rng.next()),
            };
            let ends = rate_limit(&from, &until, limit);
            let mut taken: u128 = 0;
            for (tp, end) in &ends {
                let u = until[tp];
                let begin = from.get(tp).copied().unwrap_or(u);
                assert!(
                    *end >= begin,
                    "case {case}: {tp:?} ends at {end} before {begin}"
                );
                assert!(*end <= u.max(begin), "case {case}: {tp:?} ends past {u}");
                taken += (*end as i128 - begin as i128) as u128;
            }
            if let Some(limit) = limit {
                let total: u128 = until
                    .iter()
                    .map(|(tp, u)| {
                        (*u as i128 - from.get(tp).copied().unwrap_or(*u) as i128).max(0) as u128
                    })
                    .sum();
                if total > limit as u128 {
                    assert!(
                        taken <= limit as u128 + n as u128,
                        "case {case}: took {taken} of {limit}"
                    );
                }
            }
        }
        assert!(
            errors > 500 && parsed > 100,
            "{errors} errors, {parsed} parsed"
        );
    }
}
