//! Seeded damage for the fuzz tests of files the engine reads back: a
//! xorshift generator (deterministic, no dependency) and the usual ways a
//! file gets damaged.

/// A seeded xorshift64 generator.
pub struct Damage(u64);

impl Damage {
    /// A generator; the same seed gives the same damage.
    pub fn new(seed: u64) -> Self {
        Damage(seed)
    }

    /// The next pseudo-random number.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.next() as usize % n
    }

    /// Overwrites 1 to 4 bytes of `bytes` (not empty) with bytes of `alphabet`.
    pub fn scribble(&mut self, bytes: &mut [u8], alphabet: &[u8]) {
        for _ in 0..1 + self.next() % 4 {
            let at = self.below(bytes.len());
            bytes[at] = alphabet[self.below(alphabet.len())];
        }
    }

    /// Cuts `bytes` to a random length (possibly all of it, possibly none).
    pub fn cut(&mut self, bytes: &mut Vec<u8>) {
        let keep = self.below(bytes.len() + 1);
        bytes.truncate(keep);
    }
}
