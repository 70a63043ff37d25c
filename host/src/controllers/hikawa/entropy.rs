//! Where each decision's entropy comes from (SPEC 3: the host draws it and logs it, so any
//! decision replays exactly). Normally fresh randomness; with a seed (`run --entropy-seed`, for
//! tests and for reproducing a song on a real API server), every Hikawa draws from a generator
//! of its own seeded with it, so its n-th decision gets exactly the n-th entropy
//! `simulate --seed` gives its n-th decision: the same module sings the same song in both.

use std::collections::HashMap;
use std::sync::Mutex;

use rand::{RngCore, SeedableRng, rngs::StdRng};

pub enum Entropy {
    Random,
    /// One generator per Hikawa uid, each seeded with the same seed.
    Seeded { seed: u64, streams: Mutex<HashMap<String, StdRng>> },
}

impl Entropy {
    pub fn new(seed: Option<u64>) -> Self {
        match seed {
            None => Entropy::Random,
            Some(seed) => Entropy::Seeded { seed, streams: Mutex::default() },
        }
    }

    /// The entropy for the next decision for the Hikawa with this uid.
    pub fn draw(&self, uid: &str) -> u64 {
        match self {
            Entropy::Random => rand::random(),
            Entropy::Seeded { seed, streams } => {
                let mut streams = streams.lock().unwrap_or_else(|p| p.into_inner());
                streams.entry(uid.to_string()).or_insert_with(|| StdRng::seed_from_u64(*seed)).next_u64()
            }
        }
    }

    /// The Hikawa is gone: a new one of the same name starts from the seed again.
    pub fn forget(&self, uid: &str) {
        if let Entropy::Seeded { streams, .. } = self {
            streams.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_every_hikawa_the_sequence_simulate_gives() {
        let entropy = Entropy::new(Some(3));
        let mut simulate = StdRng::seed_from_u64(3);
        let expected: Vec<u64> = (0..4).map(|_| simulate.next_u64()).collect();
        let a: Vec<u64> = (0..2).map(|_| entropy.draw("a")).collect();
        let b: Vec<u64> = (0..4).map(|_| entropy.draw("b")).collect();
        let a_rest: Vec<u64> = (0..2).map(|_| entropy.draw("a")).collect();
        assert_eq!([a, a_rest].concat(), expected, "interleaved with another Hikawa's draws");
        assert_eq!(b, expected);
        entropy.forget("a");
        assert_eq!(entropy.draw("a"), expected[0]);
        let random = Entropy::new(None);
        assert_ne!((random.draw("a"), random.draw("a")), (expected[0], expected[1]));
    }
}
