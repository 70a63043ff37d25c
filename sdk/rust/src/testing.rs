//! Whole songs played natively on a virtual clock, for a rule set's own `cargo test`:
//! the same loop the host's `simulate` and `test` run, without wasm.

use crate::song::mix;
use crate::{ChildKind, Hikawa, NextCall, Observed, Rules, RuleError};

/// When every test song starts (virtual milliseconds since the epoch).
pub const T0: i64 = 1_000_000;
/// Decisions after which a song that has not ended is given up.
pub const MAX_DECISIONS: usize = 100_000;

/// A brand-new Hikawa `default/hikawa-sample` with this interval and these `spec.params`.
pub fn new_hikawa(interval_millis: u64, params: &[(&str, &str)]) -> Observed {
    let mut params: Vec<(String, String)> = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    params.sort();
    Observed {
        hikawa: Hikawa {
            namespace: "default".into(),
            name: "hikawa-sample".into(),
            uid: "uid-1".into(),
            generation: 1,
            created_at: Some(T0),
            interval_millis,
            params,
            status: Default::default(),
        },
        now: T0,
        ..Observed::default()
    }
}

/// How a song went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Song {
    /// The Zundoko words, in order.
    pub words: Vec<String>,
    /// The Kiyoshi's word, if it was said.
    pub kiyoshi: Option<String>,
    /// Words the rules tried to say once the Kiyoshi was there (a valid song has none).
    pub after_kiyoshi: Vec<String>,
    /// Virtual time of each word, Kiyoshi included.
    pub times: Vec<i64>,
    pub decisions: usize,
    /// The Hikawa and its children at the end.
    pub final_state: Observed,
}

/// Play a song: each decision's requeue advances the clock, each plan is applied as the
/// cluster would; the song ends when the rules wait for nothing. Entropy comes from `seed`,
/// so a seed replays a song exactly. Stops at the first rule error.
pub fn sing(rules: &impl Rules, mut observed: Observed, seed: u64) -> Result<Song, RuleError> {
    let mut song = Song { words: Vec::new(), kiyoshi: None, after_kiyoshi: Vec::new(), times: Vec::new(), decisions: 0, final_state: Observed::default() };
    while song.decisions < MAX_DECISIONS {
        observed.entropy = mix(seed.wrapping_mul(1_000_003).wrapping_add(song.decisions as u64));
        let plan = rules.reconcile(&observed)?;
        song.decisions += 1;
        for say in plan.says() {
            if observed.kiyoshi.is_some() || song.kiyoshi.is_some() {
                song.after_kiyoshi.push(say.word.clone());
                continue;
            }
            song.times.push(observed.now);
            match say.kind {
                ChildKind::Zundoko => song.words.push(say.word.clone()),
                ChildKind::Kiyoshi => song.kiyoshi = Some(say.word.clone()),
            }
        }
        if !song.after_kiyoshi.is_empty() {
            break;
        }
        let next = plan.next_call(&observed);
        observed.apply(&plan);
        match next {
            NextCall::After(ms) => observed.now = observed.now.saturating_add(ms as i64),
            NextCall::WhenSomethingChanges => break,
        }
    }
    song.final_state = observed;
    Ok(song)
}
