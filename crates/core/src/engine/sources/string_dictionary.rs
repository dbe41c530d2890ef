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
    /// Open-addressing table: 0 for an empty slot, else the low 32 bits
    /// of the value's hash (its tag) above its key plus one.
    slots: Vec<u64>,
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
        let h = hash(s);
        let tag = h << 32;
        let mut slot = (h >> self.shift) as usize & mask;
        loop {
            match self.slots[slot] {
                0 => break,
                entry => {
                    if entry & TAG_MASK == tag {
                        let key = (entry & KEY_MASK) as usize - 1;
                        if same(self.value(key), s) {
                            self.keys.push(key as i32);
                            return Some(());
                        }
                    }
                    slot = (slot + 1) & mask;
                }
            }
        }
        let key = self.distinct();
        self.values.extend_from_slice(s);
        self.offsets.push(i32::try_from(self.values.len()).ok()?);
        self.slots[slot] = tag | u64::try_from(key + 1).ok()?;
        self.keys.push(i32::try_from(key).ok()?);
        if self.distinct() * 2 > self.slots.len() {
            self.grow();
        }
        Some(())
    }

    /// The distinct value with key `key`.
    #[inline]
    fn value(&self, key: usize) -> &[u8] {
        let (a, b) = (self.offsets[key] as usize, self.offsets[key + 1] as usize);
        &self.values[a..b]
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
            let h = hash(self.value(key));
            let mut slot = (h >> self.shift) as usize & mask;
            while self.slots[slot] != 0 {
                slot = (slot + 1) & mask;
            }
            self.slots[slot] = (h << 32) | (key as u64 + 1);
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
                values.extend_from_slice(self.value(k as usize));
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

/// The tag bits of a slot (see [`StringDictionary::push`]).
const TAG_MASK: u64 = 0xFFFF_FFFF_0000_0000;
/// The key bits of a slot.
const KEY_MASK: u64 = 0xFFFF_FFFF;

/// Bytes `i..i + 8` of `s` as a little-endian word (0 if out of range).
#[inline]
fn word(s: &[u8], i: usize) -> u64 {
    s.get(i..i + 8)
        .and_then(|w| <[u8; 8]>::try_from(w).ok())
        .map_or(0, u64::from_le_bytes)
}

/// Bytes `i..i + 4` of `s` as a little-endian word (0 if out of range).
#[inline]
fn half(s: &[u8], i: usize) -> u64 {
    s.get(i..i + 4)
        .and_then(|w| <[u8; 4]>::try_from(w).ok())
        .map_or(0, |w| u64::from(u32::from_le_bytes(w)))
}

/// The bytes of a string of up to 16 bytes as two words (which, with the
/// length, tell the string): short strings are read with two overlapping
/// loads instead of being copied out byte by byte.
#[inline]
fn short_words(s: &[u8]) -> (u64, u64) {
    let n = s.len();
    match n {
        0 => (0, 0),
        1..=3 => (
            u64::from(s[0]) | u64::from(s[n / 2]) << 8 | u64::from(s[n - 1]) << 16,
            0,
        ),
        4..=7 => (half(s, 0) | half(s, n - 4) << 32, 0),
        _ => (word(s, 0), word(s, n - 8)),
    }
}

/// Whether `a` and `b` hold the same bytes (short ones compared as words).
#[inline]
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len()
        && if a.len() <= 16 {
            short_words(a) == short_words(b)
        } else {
            a == b
        }
}

/// A 64-bit hash of `s` whose top bits are well mixed (multiplicative
/// hashing over 8-byte words).
#[inline]
fn hash(s: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mix = |h: u64, w: u64| (h.rotate_left(23) ^ w).wrapping_mul(K);
    let n = s.len();
    let mut h = (n as u64).wrapping_mul(K);
    if n <= 16 {
        let (a, b) = short_words(s);
        h = mix(mix(h, a), b);
    } else {
        let mut i = 0;
        while i + 8 <= n {
            h = mix(h, word(s, i));
            i += 8;
        }
        if i < n {
            h = mix(h, word(s, n - 8));
        }
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

    #[test]
    fn strings_differing_in_one_byte_are_different_values() {
        let mut d = StringDictionary::with_capacity(0);
        let mut want = Vec::new();
        for n in 0..40usize {
            let base: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
            want.push(String::from_utf8(base.clone()).expect("ascii"));
            for i in 0..n {
                let mut v = base.clone();
                v[i] = b'Z';
                assert!(!same(&v, &base), "{n} bytes, byte {i}");
                want.push(String::from_utf8(v).expect("ascii"));
            }
            assert!(same(&base, &base.clone()));
        }
        // Twice over: the second round finds every value.
        for v in want.iter().chain(&want) {
            d.push(v.as_bytes()).expect("push");
        }
        assert_eq!(d.distinct(), want.len());
        let dict = d.finish(None).expect("finish");
        let got = rows(&dict);
        let expected: Vec<Option<String>> = want.iter().chain(&want).cloned().map(Some).collect();
        assert_eq!(got, expected);
    }
}
