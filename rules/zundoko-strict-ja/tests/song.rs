//! Native tests: whole songs on a virtual clock, no wasm (`cargo test -p zundoko-strict-ja`).

use zundoko_guest_sdk::testing::{new_hikawa, sing};

#[test]
fn every_song_ends_with_one_kiyoshi_right_after_the_call() {
    let rules = zundoko_strict_ja::rules();
    let call: Vec<String> = ["ズン", "ズン", "ズン", "ズン", "ドコ"].map(String::from).to_vec();
    for seed in 0..500 {
        let song = sing(&rules, new_hikawa(500, &[]), seed).unwrap();
        assert_eq!(song.kiyoshi.as_deref(), Some("キ・ヨ・シ！"), "seed {seed}: {:?}", song.words);
        assert!(song.words.ends_with(&call), "seed {seed}: {:?}", song.words);
        assert!(song.after_kiyoshi.is_empty(), "seed {seed}: said {:?} after the Kiyoshi", song.after_kiyoshi);
        assert!(song.words.iter().all(|w| w == "ズン" || w == "ドコ"), "seed {seed}: {:?}", song.words);
    }
}
