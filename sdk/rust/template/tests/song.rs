//! Native tests: whole songs on a virtual clock, no wasm (`cargo test -p __NAME__`).

use __CRATE__::{CALL, KIYOSHI, MyRules};
use zundoko_guest_sdk::testing::{new_hikawa, sing};

#[test]
fn every_song_ends_with_one_kiyoshi_right_after_the_call() {
    for seed in 0..500 {
        let song = sing(&MyRules, new_hikawa(500, &[]), seed).unwrap();
        assert_eq!(song.kiyoshi.as_deref(), Some(KIYOSHI), "seed {seed}: {:?}", song.words);
        assert!(song.words.ends_with(&CALL.map(String::from)), "seed {seed}: {:?}", song.words);
        assert!(song.after_kiyoshi.is_empty(), "seed {seed}: said {:?} after the Kiyoshi", song.after_kiyoshi);
    }
}

#[test]
fn words_come_one_interval_apart() {
    let song = sing(&MyRules, new_hikawa(500, &[]), 7).unwrap();
    for pair in song.times.windows(2) {
        assert_eq!(pair[1] - pair[0], 500, "{:?}", song.times);
    }
}
