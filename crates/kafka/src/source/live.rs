//! Real-time reading: the consumer stays assigned and returns what arrived
//! after each step's start.

use super::*;

impl KafkaSource {
    /// Assigns the consumer to `partitions`, each from its offset in `from`
    /// (a partition `from` does not know was added later: from its start).
    pub(super) fn assign_live(
        &mut self,
        partitions: &BTreeSet<TopicPartition>,
        from: &PartitionOffsets,
    ) -> Result<()> {
        let positions: PartitionOffsets = partitions
            .iter()
            .map(|tp| (tp.clone(), from.get(tp).copied().unwrap_or(0)))
            .collect();
        self.assign_at(&positions)?;
        self.live = Some(LiveAssignment {
            positions,
            listed: Instant::now(),
        });
        Ok(())
    }

    /// Real-time reads: (re)assigns the consumer when it does not stand at
    /// `start` or the partitions are due to be listed again, then returns
    /// what arrives within `timeout` (everything already fetched, without
    /// waiting, once one message is there).
    pub(super) fn read_live(
        &mut self,
        start: Option<&Offset>,
        timeout: Duration,
    ) -> Result<Option<(Offset, ReadBatch)>> {
        if !self.live_config {
            // A fetch that finds nothing new waits at most 1 ms at the
            // broker, so a message is fetched soon after it is written.
            self.config.set("fetch.wait.max.ms", "1");
            self.consumer = create_consumer(&self.config, &self.what)?;
            self.live_config = true;
            self.live = None;
        }
        let from = self.start_offsets(start)?;
        let stands = self.live.as_ref().is_some_and(|l| {
            l.listed.elapsed() < RELIST_EVERY
                && from.iter().all(|(tp, o)| l.positions.get(tp) == Some(o))
        });
        if !stands {
            let partitions = self.partitions()?;
            // Listed again and nothing changed: the assignment stands (assigning
            // again would restart every fetch, a latency spike).
            if let Some(live) = self.live.as_mut().filter(|l| {
                l.positions.len() == partitions.len()
                    && partitions.iter().all(|tp| l.positions.contains_key(tp))
                    && from.iter().all(|(tp, o)| l.positions.get(tp) == Some(o))
            }) {
                live.listed = Instant::now();
            } else {
                self.assign_live(&partitions, &from)?;
            }
        }
        let deadline = Instant::now() + timeout;
        let mut out = RowBuilder::new(self.schema.clone());
        let mut bytes = 0u64;
        loop {
            let wait = if out.len() > 0 {
                Duration::ZERO
            } else {
                deadline.saturating_duration_since(Instant::now())
            };
            let polled = self.consumer.poll(wait);
            let Some(live) = self.live.as_mut() else {
                break;
            };
            match polled {
                None => break,
                Some(Ok(msg)) => {
                    let tp = (msg.topic().to_string(), msg.partition());
                    let Some(pos) = live.positions.get_mut(&tp) else {
                        continue;
                    };
                    if msg.offset() < *pos {
                        continue; // fetched before a re-assignment
                    }
                    *pos = msg.offset() + 1;
                    bytes += out.push(&msg);
                    if out.len() >= ROWS_PER_BATCH {
                        break;
                    }
                }
                Some(Err(KafkaError::PartitionEOF(_))) => {
                    if out.len() > 0 || Instant::now() >= deadline {
                        break;
                    }
                }
                Some(Err(KafkaError::MessageConsumption(
                    RDKafkaErrorCode::OffsetOutOfRange | RDKafkaErrorCode::AutoOffsetReset,
                ))) => {
                    // Deleted before it was read: count (or fail) and go on
                    // from the earliest offset left.
                    let mut positions = live.positions.clone();
                    for (tp, pos) in positions.iter_mut() {
                        let (low, _) = self.watermarks(tp)?;
                        if low > *pos {
                            self.data_loss(
                                format!(
                                    "messages {pos}..{low} of partition {}-{} were deleted before they were read",
                                    tp.0, tp.1
                                ),
                                (low - *pos) as u64,
                            )?;
                            *pos = low;
                        }
                    }
                    self.assign_at(&positions)?;
                    if let Some(live) = self.live.as_mut() {
                        live.positions = positions;
                    }
                }
                Some(Err(e)) if is_transient(&e) => {
                    if Instant::now() >= deadline {
                        break;
                    }
                }
                Some(Err(e)) => {
                    self.live = None;
                    let _ = self.consumer.unassign();
                    return Err(self.broker_error("could not read messages", &e));
                }
            }
        }
        let Some(live) = self.live.as_ref() else {
            return Ok(None);
        };
        if out.len() == 0 {
            return Ok(None);
        }
        let end = offsets_to_json(&live.positions);
        Ok(Some((
            end,
            ReadBatch {
                batches: vec![out.finish()?],
                bytes,
                malformed_dropped: 0,
                corrupt_files_skipped: 0,
                rows_filtered: 0,
            },
        )))
    }

    /// Assigns the consumer to `positions` (each partition at its offset).
    pub(super) fn assign_at(&mut self, positions: &PartitionOffsets) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        for (tp, o) in positions {
            tpl.add_partition_offset(&tp.0, tp.1, KafkaOffset::Offset(*o))
                .map_err(|e| self.broker_error("could not assign partitions", &e))?;
        }
        self.consumer
            .assign(&tpl)
            .map_err(|e| self.broker_error("could not assign partitions", &e))
    }
}
