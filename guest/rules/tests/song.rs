//! The rules, natively: whole songs over thousands of seeds, timing, variants and params.

use zundoko_rules::naming::{kiyoshi_name, zundoko_name};
use zundoko_rules::song::mix;
use zundoko_rules::*;
// The Hikawa every rule set's own tests start from (sorted params, as the host passes them).
use zundoko_guest_sdk::testing::{T0, new_hikawa};

const INTERVAL: u64 = 500;

/// Play a whole song on a virtual clock: each decision's requeue advances the clock.
struct Played {
    words: Vec<String>,
    kiyoshi: Option<(u32, String, i64)>,
    times: Vec<i64>,
    final_state: Observed,
}

fn play(rules: &RuleSet, mut observed: Observed, seed: u64) -> Played {
    let mut times = Vec::new();
    for step in 0..100_000u64 {
        observed.entropy = mix(seed.wrapping_mul(1_000_003).wrapping_add(step));
        let plan = rules.reconcile(&observed).expect("the rules decide");
        for say in plan.says() {
            assert_eq!(say.namespace, observed.hikawa.namespace);
            match say.kind {
                ChildKind::Zundoko => assert_eq!(say.name, zundoko_name(&observed.hikawa.name, say.index)),
                ChildKind::Kiyoshi => assert_eq!(say.name, kiyoshi_name(&observed.hikawa.name)),
            }
            times.push(observed.now);
        }
        observed.apply(&plan);
        match plan.requeue_after() {
            Some(ms) => observed.now += ms as i64,
            None if plan.says().next().is_some() => {}
            None => break,
        }
    }
    Played {
        words: observed.zundokos.iter().map(|z| z.word.clone()).collect(),
        kiyoshi: observed.kiyoshi.as_ref().map(|k| (k.index, k.word.clone(), k.said_at.unwrap())),
        times,
        final_state: observed,
    }
}

fn ends_with_call(words: &[String], zun: &str, doko: &str, zuns: usize, strict: bool) -> bool {
    let n = words.len();
    if n < zuns + 1 || words[n - 1] != doko || !words[n - 1 - zuns..n - 1].iter().all(|w| w == zun) {
        return false;
    }
    !(strict && n > zuns + 1 && words[n - 2 - zuns] == zun)
}

/// Every prefix shorter than the whole song must not end with the call.
fn assert_valid_song(played: &Played, zun: &str, doko: &str, kiyoshi: &str, zuns: usize, strict: bool, seed: u64) {
    let words = &played.words;
    let (index, word, _) = played.kiyoshi.as_ref().unwrap_or_else(|| panic!("seed {seed}: no Kiyoshi"));
    assert_eq!(word, kiyoshi, "seed {seed}");
    assert_eq!(*index as usize, words.len() + 1, "seed {seed}: Kiyoshi's index follows the last word");
    assert!(ends_with_call(words, zun, doko, zuns, strict), "seed {seed}: Kiyoshi without the call: {words:?}");
    for end in 1..words.len() {
        assert!(!ends_with_call(&words[..end], zun, doko, zuns, strict), "seed {seed}: the call came at word {end} but the song went on");
    }
    assert!(words.iter().all(|w| w == zun || w == doko), "seed {seed}: {words:?}");
    for (i, z) in played.final_state.zundokos.iter().enumerate() {
        assert_eq!(z.index as usize, i + 1, "seed {seed}: indexes without gaps");
    }
    let status = &played.final_state.hikawa.status;
    assert!(status.kiyoshied && status.num_zundokos_said as usize == words.len(), "seed {seed}: {status:?}");
}

#[test]
fn classic_songs_are_valid_over_thousands_of_seeds() {
    let rules = classic();
    let mut lengths = Vec::new();
    for seed in 0..3000 {
        let played = play(&rules, new_hikawa(INTERVAL, &[]), seed);
        assert_valid_song(&played, "Zun", "Doko", "Ki-yo-shi!", 4, false, seed);
        // Timing: the first word at once, then exactly one interval between words, and the
        // Kiyoshi one interval after the Doko.
        for (i, t) in played.times.iter().enumerate() {
            assert_eq!(*t, T0 + i as i64 * INTERVAL as i64, "seed {seed}: word {}", i + 1);
        }
        lengths.push(played.words.len());
    }
    // The expected wait for Zun Zun Zun Zun Doko is 32 words; the mean of 3000 songs is
    // well inside 25..45 unless the words are not fair coin flips.
    let mean = lengths.iter().sum::<usize>() as f64 / lengths.len() as f64;
    assert!((25.0..45.0).contains(&mean), "mean song length {mean}");
    assert!(lengths.contains(&5), "some songs are the shortest possible");
}

#[test]
fn strict_japanese_songs_are_valid_and_strict() {
    let rules = strict_japanese();
    let mut saw_five_zuns_pass = false;
    for seed in 0..3000 {
        let played = play(&rules, new_hikawa(0, &[]), seed);
        assert_valid_song(&played, "ズン", "ドコ", "キ・ヨ・シ！", 4, true, seed);
        // The strict rule at work: somewhere a fifth Zun before the Doko did not end the song.
        saw_five_zuns_pass |= played.words.windows(6).any(|w| w[..5].iter().all(|x| x == "ズン") && w[5] == "ドコ");
    }
    assert!(saw_five_zuns_pass, "no song ever went past Zun x5 Doko");
}

#[test]
fn the_variants_differ_exactly_where_they_should() {
    let words = |list: &[&str]| -> Vec<String> { list.iter().map(|s| s.to_string()).collect() };
    let classic = classic();
    let strict = strict_japanese();
    let five = words(&["Zun", "Zun", "Zun", "Zun", "Zun", "Doko"]);
    let four = words(&["Doko", "Zun", "Zun", "Zun", "Zun", "Doko"]);
    assert!(classic.song_complete(five.iter().map(String::as_str)));
    assert!(classic.song_complete(four.iter().map(String::as_str)));
    let ja = |w: &[String]| -> Vec<String> { w.iter().map(|x| if x == "Zun" { "ズン".into() } else { "ドコ".into() }).collect() };
    assert!(!strict.song_complete(ja(&five).iter().map(String::as_str)), "strict: five Zun spoil it");
    assert!(strict.song_complete(ja(&four).iter().map(String::as_str)));
    assert!(strict.song_complete(ja(&five[1..]).iter().map(String::as_str)), "strict: four Zun at the very start count");
    assert_ne!(classic.module_info().name, strict.module_info().name);
}

fn observed_with(words: &[&str], last_at: i64, now: i64, interval: u64) -> Observed {
    let mut o = new_hikawa(interval, &[]);
    for (i, w) in words.iter().enumerate() {
        let index = i as u32 + 1;
        o.zundokos.push(Said {
            name: zundoko_name("hikawa-sample", index),
            index,
            word: w.to_string(),
            said_at: Some(last_at - (words.len() - 1 - i) as i64 * interval as i64),
        });
    }
    o.hikawa.status = HikawaStatus { num_zundokos_said: words.len() as u32, kiyoshied: false, phase: Some("Singing".into()) };
    o.now = now;
    o
}

#[test]
fn waiting_is_a_requeue_for_the_rest_of_the_interval() {
    let rules = classic();
    let plan = rules.reconcile(&observed_with(&["Zun"], T0, T0 + 100, 500)).unwrap();
    assert_eq!(plan.actions, vec![Action::RequeueAfter(400)]);
    // Due exactly now: speak.
    let plan = rules.reconcile(&observed_with(&["Zun"], T0, T0 + 500, 500)).unwrap();
    assert_eq!(plan.says().count(), 1);
    assert_eq!(plan.requeue_after(), Some(500));
    // Late (the operator was down): speak at once, then a full interval.
    let plan = rules.reconcile(&observed_with(&["Zun"], T0, T0 + 60_000, 500)).unwrap();
    assert_eq!(plan.says().next().unwrap().index, 2);
    // The interval is edited mid-song: the new one counts from the last word.
    let plan = rules.reconcile(&observed_with(&["Zun", "Doko"], T0, T0 + 100, 2000)).unwrap();
    assert_eq!(plan.actions, vec![Action::RequeueAfter(1900)]);
    // No record of when the last word was said: the next may come at once.
    let mut o = observed_with(&["Zun"], T0, T0, 500);
    o.zundokos[0].said_at = None;
    assert_eq!(rules.reconcile(&o).unwrap().says().count(), 1);
}

#[test]
fn kiyoshi_comes_one_interval_after_the_doko_and_then_nothing() {
    let rules = classic();
    let call = ["Doko", "Zun", "Zun", "Zun", "Zun", "Doko"];
    let plan = rules.reconcile(&observed_with(&call, T0, T0 + 10, 500)).unwrap();
    assert_eq!(plan.actions, vec![Action::RequeueAfter(490)]);
    let plan = rules.reconcile(&observed_with(&call, T0, T0 + 500, 500)).unwrap();
    let say = plan.says().next().unwrap();
    assert_eq!((say.kind, say.index, say.word.as_str(), say.name.as_str()), (ChildKind::Kiyoshi, 7, "Ki-yo-shi!", "hikawa-sample-kiyoshi"));
    assert_eq!(plan.requeue_after(), None);
    assert!(plan.status().unwrap().kiyoshied);

    // With the Kiyoshi there, whatever the time: only the status is brought up to date.
    let mut done = observed_with(&call, T0, T0 + 10_000, 500);
    done.kiyoshi = Some(Said { name: "hikawa-sample-kiyoshi".into(), index: 7, word: "Ki-yo-shi!".into(), said_at: Some(T0 + 500) });
    let plan = rules.reconcile(&done).unwrap();
    assert_eq!(plan.says().count(), 0);
    assert_eq!(plan.requeue_after(), None);
    let status = plan.status().expect("the stale status is corrected");
    assert!(status.kiyoshied && status.num_zundokos_said == 6);
    // ... and once the status says so, nothing at all.
    done.apply(&plan);
    assert_eq!(rules.reconcile(&done).unwrap(), Plan::default());
}

#[test]
fn a_gap_in_the_song_is_an_error_naming_the_missing_word() {
    let mut o = observed_with(&["Zun", "Doko", "Zun"], T0, T0 + 1000, 500);
    o.zundokos.remove(1);
    let err = classic().reconcile(&o).unwrap_err();
    assert_eq!(err.reason(), "InconsistentSong");
    assert!(err.message().contains("expected word 2") && err.message().contains("hikawa-sample-zundoko-003"), "{err}");
}

#[test]
fn decisions_are_a_pure_function_of_the_input() {
    let rules = classic();
    let mut zun = 0;
    for entropy in 0..10_000u64 {
        let mut o = new_hikawa(500, &[]);
        o.entropy = entropy;
        let a = rules.reconcile(&o).unwrap();
        assert_eq!(a, rules.reconcile(&o.clone()).unwrap());
        zun += (a.says().next().unwrap().word == "Zun") as u32;
    }
    assert!((4500..5500).contains(&zun), "Zun {zun} times in 10000");
}

#[test]
fn params_change_the_words_and_the_call() {
    let rules = classic();
    let hikawa = new_hikawa(0, &[("zuns", "2"), ("zun", "ずん"), ("doko", "どこ"), ("kiyoshi", "きよし！"), ("other-rules-param", "x")]);
    for seed in 0..500 {
        let played = play(&rules, hikawa.clone(), seed);
        assert_valid_song(&played, "ずん", "どこ", "きよし！", 2, false, seed);
    }
    for (params, needle) in [
        (vec![("zuns", "0")], "params.zuns"),
        (vec![("zuns", "seventeen")], "params.zuns"),
        (vec![("zuns", "17")], "1 to 16"),
        (vec![("zun", " ")], "params.zun"),
        (vec![("zun", "Doko")], "must differ"),
    ] {
        let err = rules.reconcile(&new_hikawa(0, &params)).unwrap_err();
        assert_eq!(err.reason(), "InvalidParams");
        assert!(err.message().contains(needle), "{err} should mention {needle}");
    }
}

#[test]
fn applying_a_plan_twice_changes_nothing_the_second_time() {
    let rules = classic();
    let mut o = new_hikawa(0, &[]);
    let plan = rules.reconcile(&o).unwrap();
    o.apply(&plan);
    let once = o.clone();
    o.apply(&plan);
    assert_eq!(o, once, "an existing child is not created twice");
}
