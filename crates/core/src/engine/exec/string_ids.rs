//! Group ids of a string key column through a small cache in front of
//! DataFusion's group values.
//!
//! Interning a string column with DataFusion's `GroupValues` hashes every
//! row's bytes with a general hash and probes a hash table; for the keys a
//! window is usually paired with (a service, a level: a handful of short
//! values) that was a fifth of a windowed count's CPU. Here each value of
//! up to 16 bytes is read as one zero-padded 16-byte word, and looked up in a
//! direct-mapped table of the values seen so far (a multiply of the word
//! picks the slot; the word and the length are compared exactly). The
//! first misses of a batch are interned as they are met; later ones (and
//! longer values, nulls) go to the group values in one call at the end of
//! the batch, and then fill the table. After a batch of which most rows
//! missed (many distinct values), later batches are interned directly.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, StringArray, UInt32Array};
use datafusion::physical_plan::aggregates::group_values::GroupValues;

/// Slots in the table (a power of two).
const SLOTS: usize = 1024;

/// A value of up to 16 bytes: its bytes as one little-endian word, zero
/// past its length, and the length.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Short {
    word: u128,
    len: u32,
}

#[derive(Clone, Copy)]
struct Slot {
    key: Short,
    /// The group id; `u32::MAX` for an empty slot.
    id: u32,
}

const EMPTY: Slot = Slot {
    key: Short { word: 0, len: 0 },
    id: u32::MAX,
};

/// A cache from short string values to group ids, valid for one
/// `GroupValues`.
pub(crate) struct StringIds {
    slots: Vec<Slot>,
    misses: Vec<u32>,
    /// Set when the cache missed most rows of a batch: intern directly.
    direct: bool,
}

/// Misses per batch interned one by one as they are met (the rest go to
/// the group values together at the end of the batch).
const EAGER_MISSES: usize = 64;

/// A batch of at least this many rows of which more than half missed turns
/// the cache off.
const MIN_ROWS_TO_TURN_OFF: usize = 1024;

impl StringIds {
    /// An empty cache.
    pub(crate) fn new() -> StringIds {
        StringIds {
            slots: vec![EMPTY; SLOTS],
            misses: Vec::new(),
            direct: false,
        }
    }

    /// Sets `ids` to the group id of each row of `column` in `groups`
    /// (interning the values not seen before): the same grouping as
    /// `groups.intern`, though new values may be numbered in another order.
    pub(crate) fn intern(
        &mut self,
        column: &StringArray,
        groups: &mut dyn GroupValues,
        ids: &mut Vec<usize>,
    ) -> datafusion::error::Result<()> {
        ids.clear();
        if self.direct {
            let column: ArrayRef = Arc::new(column.clone());
            return groups.intern(&[column], ids);
        }
        ids.resize(column.len(), usize::MAX);
        self.misses.clear();
        let offsets = column.value_offsets();
        let values = column.value_data();
        let nulls = column.nulls().filter(|n| n.null_count() > 0);
        let mut eager_left = EAGER_MISSES;
        let mut single = Vec::with_capacity(1);
        for (i, (id, w)) in ids.iter_mut().zip(offsets.windows(2)).enumerate() {
            // Nulls and long values are never cached.
            let key = match nulls.is_some_and(|n| n.is_null(i)) {
                true => None,
                false => short(values, w[0] as usize, w[1] as usize),
            };
            let Some(key) = key else {
                self.misses.push(i as u32);
                continue;
            };
            let slot = self.slots[slot_of(&key)];
            if slot.id != u32::MAX && slot.key == key {
                *id = slot.id as usize;
            } else if eager_left > 0 {
                // The first misses of a batch are interned at once, so a
                // cold cache warms up within the batch.
                eager_left -= 1;
                let one: ArrayRef = Arc::new(column.slice(i, 1));
                groups.intern(&[one], &mut single)?;
                *id = single[0];
                self.remember(key, single[0]);
            } else {
                self.misses.push(i as u32);
            }
        }
        if self.misses.is_empty() {
            return Ok(());
        }
        if column.len() >= MIN_ROWS_TO_TURN_OFF && self.misses.len() * 2 > column.len() {
            self.direct = true;
        }
        let rows = UInt32Array::from_iter_values(self.misses.iter().copied());
        let missed: ArrayRef = arrow::compute::take(column, &rows, None)?;
        let mut missed_ids = Vec::with_capacity(rows.len());
        groups.intern(&[missed], &mut missed_ids)?;
        for (&row, &g) in rows.values().iter().zip(&missed_ids) {
            let row = row as usize;
            ids[row] = g;
            if column.is_null(row) {
                continue;
            }
            if let Some(key) = short(values, offsets[row] as usize, offsets[row + 1] as usize) {
                self.remember(key, g);
            }
        }
        Ok(())
    }

    fn remember(&mut self, key: Short, id: usize) {
        if let Ok(id) = u32::try_from(id) {
            if id != u32::MAX {
                self.slots[slot_of(&key)] = Slot { key, id };
            }
        }
    }
}

/// The value `values[start..end]` as a [`Short`], or None when it is longer
/// than 16 bytes (or out of bounds).
#[inline]
fn short(values: &[u8], start: usize, end: usize) -> Option<Short> {
    let len = end.checked_sub(start)?;
    if len > 16 {
        return None;
    }
    // Read 16 bytes at once and clear the bytes past the value; near the
    // end of the buffer, copy the value alone.
    let word = match values
        .get(start..start + 16)
        .and_then(|b| <[u8; 16]>::try_from(b).ok())
    {
        Some(b) => u128::from_le_bytes(b) & low_bytes(len),
        None => {
            let mut buf = [0u8; 16];
            buf[..len].copy_from_slice(values.get(start..end)?);
            u128::from_le_bytes(buf)
        }
    };
    Some(Short {
        word,
        len: len as u32,
    })
}

/// A mask of the low `n` bytes of a 16-byte word (all of it from 16).
#[inline]
fn low_bytes(n: usize) -> u128 {
    if n >= 16 {
        u128::MAX
    } else {
        (1u128 << (n * 8)).wrapping_sub(1)
    }
}

#[inline]
fn slot_of(key: &Short) -> usize {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let folded = (key.word as u64) ^ ((key.word >> 64) as u64).rotate_left(29);
    let h = (folded ^ u64::from(key.len)).wrapping_mul(K);
    (h >> (64 - SLOTS.trailing_zeros())) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::physical_plan::aggregates::group_values::new_group_values;
    use datafusion::physical_plan::aggregates::order::GroupOrdering;

    fn group_values() -> Box<dyn GroupValues> {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Utf8, true)]));
        new_group_values(schema, &GroupOrdering::None).expect("group values")
    }

    /// The ids group the rows exactly as interning every row directly does,
    /// batch after batch, for few values, many values (the cache turns itself off after
    /// the first batch), nulls, and values that differ only past their
    /// first 8 bytes.
    #[test]
    fn ids_match_interning_every_row() {
        let few: Vec<Option<String>> = (0..5000)
            .map(|i| Some(["checkout", "search", "auth", ""][i % 4].to_string()))
            .collect();
        let many: Vec<Option<String>> = (0..5000)
            .map(|i| Some(format!("user-{:06}", (i * 7919) % 3000)))
            .collect();
        let mixed: Vec<Option<String>> = (0..5000)
            .map(|i| match i % 7 {
                0 => None,
                1 => Some("a-long-prefix-value-1".into()),
                2 => Some("a-long-prefix-value-2".into()),
                _ => Some(format!("x{}", i % 3)),
            })
            .collect();
        for data in [few, many, mixed] {
            let mut cached = group_values();
            let mut direct = group_values();
            let mut cache = StringIds::new();
            let mut to_direct = std::collections::HashMap::new();
            let mut to_cached = std::collections::HashMap::new();
            for chunk in data.chunks(1700) {
                let col = StringArray::from(chunk.to_vec());
                let mut a = Vec::new();
                cache.intern(&col, cached.as_mut(), &mut a).expect("cached");
                let mut b = Vec::new();
                direct
                    .intern(&[Arc::new(col.clone()) as ArrayRef], &mut b)
                    .expect("direct");
                // The same rows share a group on both sides (the ids may
                // be numbered differently).
                assert_eq!(a.len(), b.len());
                for (&x, &y) in a.iter().zip(&b) {
                    assert_eq!(*to_direct.entry(x).or_insert(y), y);
                    assert_eq!(*to_cached.entry(y).or_insert(x), x);
                }
            }
            assert_eq!(cached.len(), direct.len());
            assert_eq!(
                cache.direct,
                cached.len() > 100,
                "only many values turn it off"
            );
        }
    }

    #[test]
    fn values_near_the_end_of_the_buffer_and_long_values() {
        let mut groups = group_values();
        let mut cache = StringIds::new();
        let long = "a-value-longer-than-sixteen-bytes";
        let col = StringArray::from(vec!["ab", long, "ab", long, "abc", "a"]);
        let mut ids = Vec::new();
        for _ in 0..2 {
            cache.intern(&col, groups.as_mut(), &mut ids).expect("ids");
            // Short values are interned as met, the long one (never cached)
            // at the end of the batch.
            assert_eq!(ids, vec![0, 3, 0, 3, 1, 2]);
        }
        // Zero padding cannot make values equal: "a" vs "a\0".
        let col = StringArray::from(vec!["a", "a\0", "", "\0"]);
        cache.intern(&col, groups.as_mut(), &mut ids).expect("ids");
        assert_eq!(ids, vec![2, 4, 5, 6]);
    }
}
