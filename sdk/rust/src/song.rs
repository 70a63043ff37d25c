//! A configurable song engine: when to say the next word, which word, and when to say
//! Kiyoshi. Both shipped rule sets (`rules/zundoko-classic`, `rules/zundoko-strict-ja`) are
//! this engine with their own words and strictness; a new rule set may use it or write its
//! own `reconcile` from scratch (the scaffold does, see `sdk/rust/template`).

use crate::model::{Action, ChildKind, ModuleInfo, Observed, Plan, RuleError, Say, StatusUpdate};
use crate::naming::{kiyoshi_name, zundoko_name};

pub const PHASE_SINGING: &str = "Singing";
pub const PHASE_KIYOSHIED: &str = "Kiyoshied";

/// A rule set: fixed defaults that `spec.params` may override per Hikawa.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleSet {
    pub info: ModuleInfoStatic,
    pub words: Words,
    /// How many Zun must come before the Doko.
    pub zuns: usize,
    /// Strict: *exactly* `zuns` Zun before the Doko (one more Zun before them spoils it).
    /// Otherwise the last `zuns + 1` words decide, whatever came before.
    pub strict: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleInfoStatic {
    pub name: &'static str,
    pub version: &'static str,
    pub description: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Words {
    pub zun: String,
    pub doko: String,
    pub kiyoshi: String,
}

/// Parameters a Hikawa may set in `spec.params`; unknown keys are left for other rule sets.
pub const PARAM_ZUN: &str = "zun";
pub const PARAM_DOKO: &str = "doko";
pub const PARAM_KIYOSHI: &str = "kiyoshi";
pub const PARAM_ZUNS: &str = "zuns";
pub const MAX_ZUNS: usize = 16;

impl crate::Rules for RuleSet {
    fn info(&self) -> ModuleInfo {
        self.module_info()
    }

    fn reconcile(&self, observed: &Observed) -> Result<Plan, RuleError> {
        RuleSet::reconcile(self, observed)
    }
}

impl RuleSet {
    pub fn module_info(&self) -> ModuleInfo {
        ModuleInfo {
            name: self.info.name.into(),
            version: self.info.version.into(),
            description: self.info.description.into(),
        }
    }

    /// This rule set with the Hikawa's `spec.params` applied.
    pub fn with_params(&self, observed: &Observed) -> Result<RuleSet, RuleError> {
        let mut rules = self.clone();
        let hikawa = &observed.hikawa;
        for (key, slot) in [
            (PARAM_ZUN, &mut rules.words.zun),
            (PARAM_DOKO, &mut rules.words.doko),
            (PARAM_KIYOSHI, &mut rules.words.kiyoshi),
        ] {
            if let Some(word) = hikawa.param(key) {
                if word.trim().is_empty() {
                    return Err(RuleError::InvalidParams(format!(
                        "params.{key} must be a non-empty word"
                    )));
                }
                *slot = word.to_string();
            }
        }
        if rules.words.zun == rules.words.doko {
            return Err(RuleError::InvalidParams(format!(
                "params.zun and params.doko must differ (both are {:?})",
                rules.words.zun
            )));
        }
        if let Some(zuns) = hikawa.param(PARAM_ZUNS) {
            rules.zuns = zuns
                .parse()
                .ok()
                .filter(|n| (1..=MAX_ZUNS).contains(n))
                .ok_or_else(|| {
                    RuleError::InvalidParams(format!(
                        "params.zuns must be a whole number from 1 to {MAX_ZUNS}, found {zuns:?}"
                    ))
                })?;
        }
        Ok(rules)
    }

    /// Does the song so far end the way that calls for Kiyoshi?
    pub fn song_complete<'a>(&self, words: impl DoubleEndedIterator<Item = &'a str>) -> bool {
        let mut from_end = words.rev();
        if from_end.next() != Some(self.words.doko.as_str()) {
            return false;
        }
        for _ in 0..self.zuns {
            if from_end.next() != Some(self.words.zun.as_str()) {
                return false;
            }
        }
        !(self.strict && from_end.next() == Some(self.words.zun.as_str()))
    }

    /// The word for this entropy: Zun or Doko with equal chance.
    pub fn pick_word(&self, entropy: u64) -> &str {
        if mix(entropy) >> 63 == 0 {
            &self.words.zun
        } else {
            &self.words.doko
        }
    }

    /// One decision. See the WIT file for the contract; in short: one word per
    /// `intervalMillis` (measured from the previous word; the first at once), Kiyoshi one
    /// interval after the completing Doko, then nothing more.
    pub fn reconcile(&self, observed: &Observed) -> Result<Plan, RuleError> {
        let rules = self.with_params(observed)?;
        let hikawa = &observed.hikawa;
        for (position, said) in observed.zundokos.iter().enumerate() {
            let expected = position as u32 + 1;
            if said.index != expected {
                return Err(RuleError::InconsistentSong(format!(
                    "expected word {expected} but found {} ({}): a word is missing",
                    said.index, said.name
                )));
            }
        }
        let said = observed.zundokos.len() as u32;
        let mut plan = Plan::default();

        if observed.kiyoshi.is_some() {
            rules.set_status(&mut plan, observed, said, true, "the song is over".into());
            return Ok(plan);
        }

        let last = observed.zundokos.last();
        let due = match last.and_then(|l| l.said_at) {
            Some(at) => at.saturating_add(hikawa.interval_millis.min(i64::MAX as u64) as i64),
            // Nothing said yet, or no record of when: the next word may come at once.
            None => observed.now,
        };
        let wait = due.saturating_sub(observed.now);
        if wait > 0 {
            rules.set_status(&mut plan, observed, said, false, format!("{said} words said"));
            plan.actions.push(Action::RequeueAfter(wait as u64));
            return Ok(plan);
        }

        let complete = rules.song_complete(observed.zundokos.iter().map(|z| z.word.as_str()));
        if complete {
            plan.actions.push(Action::Say(Say {
                kind: ChildKind::Kiyoshi,
                namespace: hikawa.namespace.clone(),
                name: kiyoshi_name(&hikawa.name),
                index: said + 1,
                word: rules.words.kiyoshi.clone(),
            }));
            rules.set_status(&mut plan, observed, said, true, format!("{} after {said} words", rules.words.kiyoshi));
        } else {
            let index = said + 1;
            plan.actions.push(Action::Say(Say {
                kind: ChildKind::Zundoko,
                namespace: hikawa.namespace.clone(),
                name: zundoko_name(&hikawa.name, index),
                index,
                word: rules.pick_word(observed.entropy).to_string(),
            }));
            rules.set_status(&mut plan, observed, index, false, format!("{index} words said"));
            plan.actions.push(Action::RequeueAfter(hikawa.interval_millis));
        }
        Ok(plan)
    }

    /// Add a status update unless the observed status already says the same: writing an
    /// unchanged status would only wake this Hikawa's watch for nothing.
    fn set_status(&self, plan: &mut Plan, observed: &Observed, said: u32, kiyoshied: bool, message: String) {
        let phase = if kiyoshied { PHASE_KIYOSHIED } else { PHASE_SINGING };
        let status = &observed.hikawa.status;
        if status.num_zundokos_said == said
            && status.kiyoshied == kiyoshied
            && status.phase.as_deref() == Some(phase)
        {
            return;
        }
        plan.actions.push(Action::SetStatus(StatusUpdate {
            phase: phase.into(),
            num_zundokos_said: said,
            kiyoshied,
            message,
        }));
    }
}

/// SplitMix64's finaliser: spreads every input bit over the output, so consecutive entropy
/// values (seeds 0, 1, 2, ... in tests and replays) still give independent words.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
