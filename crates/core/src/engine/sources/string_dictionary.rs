//! A string column built dictionary-encoded while it is decoded.
//!
//! Columns such as a user id, a service name or a log level repeat a few
//! values row after row. When the query takes such a column as
//! `Dictionary(Int32, Utf8)` (see `CompiledPlan::leaf_dictionary_columns`),
//! the JSON decoder stores each distinct value once and a key per row: the
//! filters, group keys and Parquet writer downstream then work on the small
//! dictionary instead of every row's string. [`StringDictionary::to_plain`]
//! gives the plain column back when a column turns out to have too many
//! distinct values for that to pay.

use std::sync::Arc;

use arrow::array::{ArrayRef, DictionaryArray, Int32Array, StringArray};
use arrow::buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::Int32Type;

/// The key stored for a null row until [`StringDictionary::finish`].
const NULL_KEY: i32 = -1;

/// Distinct strings, each stored once, and one key per row.
#[derive(Debug)]
pub(crate) struct StringDictionary {
    /// Per row, the index of its value (or [`NULL_KEY`]).
    keys: Vec<i32>,
    /// Offsets of the distinct values in `values` (starts with 0).
    offsets: Vec<i32>,
    values: Vec<u8>,
    /// Open-addressing table: 0 for an empty slot, else a key plus one.
    slots: Vec<u32>,
    /// `64 - log2(slots.len())`: a hash's top bits pick its slot.
    shift: u32,
}

impl StringDictionary {
    /// An empty column with room for `rows` rows.
    pub(crate) fn with_capacity(rows: usize) -> StringDictionary {
        let slots = 64usize;
        StringDictionary {
            keys: Vec::with_capacity(rows),
            offsets: vec![0],
            values: Vec::new(),
            slots: vec![0; slots],
            shift: 64 - slots.trailing_zeros(),
        }
    }

    /// Rows so far.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Distinct values so far.
    pub(crate) fn distinct(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Appends a row holding `s`; `None` when the values outgrow `i32`
    /// offsets.
    pub(crate) fn push(&mut self, s: &[u8]) -> Option<()> {
        let mask = self.slots.len() - 1;
        let mut slot = (hash(s) >> self.shift) as usize;
        loop {
            match self.slots[slot] {
                0 => break,
                k => {
                    let key = (k - 1) as usize;
                    let (a, b) = (self.offsets[key] as usize, self.offsets[key + 1] as usize);
                    if &self.values[a..b] == s {
                        self.keys.push(key as i32);
                        return Some(());
                    }
                    slot = (slot + 1) & mask;
                }
            }
        }
        let key = self.distinct();
        self.values.extend_from_slice(s);
        self.offsets.push(i32::try_from(self.values.len()).ok()?);
        self.slots[slot] = u32::try_from(key + 1).ok()?;
        self.keys.push(i32::try_from(key).ok()?);
        if self.distinct() * 2 > self.slots.len() {
            self.grow();
        }
        Some(())
    }

    /// Appends a null row.
    pub(crate) fn push_null(&mut self) {
        self.keys.push(NULL_KEY);
    }

    /// Doubles the table and places every value again.
    fn grow(&mut self) {
        let size = self.slots.len() * 2;
        self.slots = vec![0; size];
        self.shift = 64 - size.trailing_zeros();
        let mask = size - 1;
        for key in 0..self.distinct() {
            let (a, b) = (self.offsets[key] as usize, self.offsets[key + 1] as usize);
            let mut slot = (hash(&self.values[a..b]) >> self.shift) as usize;
            while self.slots[slot] != 0 {
                slot = (slot + 1) & mask;
            }
            self.slots[slot] = key as u32 + 1;
        }
    }

    /// The rows so far as a plain string column: offsets (starting at 0)
    /// and bytes; a null row is empty. `None` when the bytes outgrow `i32`
    /// offsets.
    pub(crate) fn to_plain(&self) -> Option<(Vec<i32>, Vec<u8>)> {
        let mut offsets = Vec::with_capacity(self.keys.len() + 1);
        offsets.push(0i32);
        let mut values = Vec::with_capacity(self.keys.len() * 8);
        for &k in &self.keys {
            if k != NULL_KEY {
                let k = k as usize;
                let (a, b) = (self.offsets[k] as usize, self.offsets[k + 1] as usize);
                values.extend_from_slice(&self.values[a..b]);
            }
            offsets.push(i32::try_from(values.len()).ok()?);
        }
        Some((offsets, values))
    }

    /// The column as `Dictionary(Int32, Utf8)` with `nulls` (which must
    /// mark exactly the null rows). A null row's key is 0, a valid index
    /// (an empty value is added when every row is null).
    pub(crate) fn finish(mut self, nulls: Option<NullBuffer>) -> Option<ArrayRef> {
        if self.distinct() == 0 {
            self.offsets.push(0);
        }
        for k in &mut self.keys {
            if *k == NULL_KEY {
                *k = 0;
            }
        }
        let keys = Int32Array::new(ScalarBuffer::from(self.keys), nulls);
        // The bytes are whole UTF-8 strings the decoder validated.
        let values = StringArray::try_new(
            OffsetBuffer::new(ScalarBuffer::from(self.offsets)),
            Buffer::from_vec(self.values),
            None,
        )
        .ok()?;
        let array = DictionaryArray::<Int32Type>::try_new(keys, Arc::new(values)).ok()?;
        Some(Arc::new(array))
    }
}

/// A 64-bit hash of `s` whose top bits are well mixed (multiplicative
/// hashing over 8-byte words).
#[inline]
fn hash(s: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = (s.len() as u64).wrapping_mul(K);
    let mut chunks = s.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h.rotate_left(23) ^ u64::from_le_bytes(w)).wrapping_mul(K);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = (h.rotate_left(23) ^ u64::from_le_bytes(w)).wrapping_mul(K);
    }
    h ^ (h >> 29)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::buffer::NullBuffer;
    use arrow::compute::cast;
    use arrow::datatypes::DataType;

    fn rows(column: &ArrayRef) -> Vec<Option<String>> {
        let plain = cast(column, &DataType::Utf8).expect("cast");
        plain
            .as_string::<i32>()
            .iter()
            .map(|v| v.map(str::to_string))
            .collect()
    }

    #[test]
    fn rows_round_trip() {
        let input: Vec<Option<String>> = (0..5000)
            .map(|i| (i % 7 != 3).then(|| format!("value-{}", (i * 31) % 517)))
            .collect();
        let mut d = StringDictionary::with_capacity(4);
        for v in &input {
            match v {
                Some(s) => d.push(s.as_bytes()).expect("push"),
                None => d.push_null(),
            }
        }
        assert_eq!(d.len(), 5000);
        let distinct: std::collections::BTreeSet<_> = input.iter().flatten().collect();
        assert_eq!(d.distinct(), distinct.len());
        let (offsets, values) = d.to_plain().expect("plain");
        let validity: Vec<bool> = input.iter().map(Option::is_some).collect();
        let plain = StringArray::try_new(
            OffsetBuffer::new(ScalarBuffer::from(offsets)),
            Buffer::from_vec(values),
            Some(NullBuffer::from(validity.clone())),
        )
        .expect("plain array");
        let plain: ArrayRef = Arc::new(plain);
        assert_eq!(rows(&plain), input);
        let dict = d.finish(Some(NullBuffer::from(validity))).expect("finish");
        assert_eq!(
            dict.data_type(),
            &crate::engine::exec::dictionary_ids::string_dictionary_type()
        );
        assert_eq!(rows(&dict), input);
    }

    #[test]
    fn all_null_column() {
        let mut d = StringDictionary::with_capacity(3);
        d.push_null();
        d.push_null();
        let dict = d
            .finish(Some(NullBuffer::from(vec![false, false])))
            .expect("finish");
        assert_eq!(rows(&dict), vec![None, None]);
        assert_eq!(dict.as_any_dictionary().values().len(), 1);
    }

    #[test]
    fn empty_and_colliding_values() {
        let mut d = StringDictionary::with_capacity(0);
        let values: Vec<String> = (0..300).map(|i| "x".repeat(i % 37)).collect();
        for v in &values {
            d.push(v.as_bytes()).expect("push");
        }
        assert_eq!(d.distinct(), 37);
        let dict = d.finish(None).expect("finish");
        let got: Vec<Option<String>> = rows(&dict);
        assert_eq!(got, values.into_iter().map(Some).collect::<Vec<_>>());
    }
}
