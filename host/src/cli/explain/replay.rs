//! Each word's decision, rebuilt from the cluster and replayed: the children before it, the
//! Hikawa as it is (its spec must be at the recorded generation) with the recorded status, time
//! and entropy make the input; its digest must be the recorded one (else the rebuilt input is not
//! what the rules saw, and nothing is replayed); then the module is called in the sandbox, as the
//! operator calls it, and the words it says are compared with the children written.

use serde::Serialize;
use zundoko_rules::{ChildKind, NextCall, Observed, Said};

use crate::cli::explain::module::Modules;
use crate::cli::explain::read::Child;
use crate::controllers::hikawa::observe::hikawa_view;
use crate::controllers::hikawa::provenance::{CONTRACT, Provenance, input_digest};
use crate::crd::Hikawa;
use crate::supply::contract::plan_check::PlanLimits;
use crate::supply::contract::rules::decide;

/// How one word's replay went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Replayed to the same plan: the recorded module said this word from this input.
    Matches,
    /// No decision annotation: not written by the operator (or by one before issue 54).
    NoProvenance,
    /// The annotation cannot be read.
    UnreadableProvenance,
    /// Controlled by something other than the Hikawa: the operator never saw it as its word.
    NotOwned,
    /// The Hikawa's spec changed since (another generation): its old spec is not in the cluster.
    SpecChanged,
    /// The rebuilt input's digest is not the recorded one (an annotation or a child altered).
    InputDiffers,
    /// The module cannot be had by its digest.
    ModuleUnavailable,
    /// The replay's plan does not say this word (another module, or not deterministic).
    PlanDiffers,
    /// The replay failed (a trap, a rejected plan).
    ReplayFailed,
}

/// One word, explained.
#[derive(Clone, Debug, Serialize)]
pub struct Word {
    /// 1 for the first word; the Kiyoshi follows the last Zundoko.
    pub position: u32,
    pub kind: &'static str,
    pub name: String,
    pub word: String,
    pub verdict: Verdict,
    /// Why, in words (empty when it matches).
    pub reason: String,
    /// The decision as recorded, if it could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// sha256 of the rebuilt input (when it was rebuilt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rebuilt_input: Option<String>,
    /// The replay's plan and the guest's log lines (when replayed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub logs: Vec<String>,
    /// When the replayed plan has the rules called again ([`zundoko_rules::Plan::next_call`], as the
    /// operator paces it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_call: Option<Next>,
}

/// A plan's next call, for output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Next {
    /// This many milliseconds after the decision's `now`.
    AfterMs(u64),
    /// Only when something the plan did not do changes (the Hikawa, its children, the module).
    WhenSomethingChanges,
}

/// A recorded decision, for output.
#[derive(Clone, Debug, Serialize)]
pub struct Decision {
    pub module: String,
    pub contract: String,
    pub entropy: String,
    pub now: i64,
    pub generation: i64,
    pub replica: String,
    pub input: String,
}

impl From<&Provenance> for Decision {
    fn from(p: &Provenance) -> Self {
        Decision {
            module: p.module.clone(),
            contract: p.contract.clone(),
            entropy: format!("{:#018x}", p.entropy),
            now: p.now,
            generation: p.generation,
            replica: p.replica.clone(),
            input: p.input.clone(),
        }
    }
}

/// The children as the rules saw them just before the decision that made `children[at]`: the
/// Hikawa's own Zundokos before it (all of them for the Kiyoshi), as the operator's index gives
/// them.
fn observed_before(hikawa: &Hikawa, children: &[Child], at: usize, recorded: &Provenance) -> Observed {
    let uid = hikawa.metadata.uid.as_deref();
    let first = &children[at];
    let zundokos: Vec<Said> = children
        .iter()
        .filter(|c| !c.kiyoshi && c.controller.as_deref() == uid && (first.kiyoshi || c.index < first.index))
        .map(|c| Said { name: c.name.clone(), index: c.index, word: c.word.clone(), said_at: c.said_at })
        .collect();
    let mut view = hikawa_view(hikawa);
    view.generation = recorded.generation;
    view.status = recorded.status.clone();
    Observed { hikawa: view, zundokos, kiyoshi: None, now: recorded.now, entropy: recorded.entropy }
}

/// Explain `children[at]` (and the other children its decision made, which follow it).
pub async fn replay(hikawa: &Hikawa, children: &[Child], at: usize, modules: &mut Modules<'_>, limits: &PlanLimits) -> Word {
    let child = &children[at];
    let mut word = Word {
        position: child.index,
        kind: if child.kiyoshi { "Kiyoshi" } else { "Zundoko" },
        name: child.name.clone(),
        word: child.word.clone(),
        verdict: Verdict::Matches,
        reason: String::new(),
        decision: None,
        rebuilt_input: None,
        plan: None,
        logs: Vec::new(),
        next_call: None,
    };
    let fail = |word: &mut Word, verdict, reason: String| {
        word.verdict = verdict;
        word.reason = reason;
    };
    if child.controller.as_deref() != hikawa.metadata.uid.as_deref() {
        let holder = child.controller.as_deref().map_or("no controller".to_string(), |uid| format!("the controller uid {uid}"));
        fail(&mut word, Verdict::NotOwned, format!("{} has {holder}, not this Hikawa: the operator does not count it as its word", child.name));
        return word;
    }
    let Some(annotation) = &child.decision else {
        fail(&mut word, Verdict::NoProvenance, format!("{} carries no decision annotation: written by someone else, not by the operator", child.name));
        return word;
    };
    let recorded = match Provenance::parse(annotation) {
        Ok(recorded) => recorded,
        Err(error) => {
            fail(&mut word, Verdict::UnreadableProvenance, format!("{}: {error}", child.name));
            return word;
        }
    };
    word.decision = Some(Decision::from(&recorded));
    let generation = hikawa.metadata.generation.unwrap_or(0);
    // The words one decision said carry the same annotation: its input is what came before the first.
    let first = (0..=at).rev().take_while(|&j| children[j].decision == child.decision).last().unwrap_or(at);
    let observed = observed_before(hikawa, children, first, &recorded);
    let rebuilt = input_digest(&observed);
    word.rebuilt_input = Some(rebuilt.clone());
    if rebuilt != recorded.input {
        if generation != recorded.generation {
            fail(&mut word, Verdict::SpecChanged, format!("decided at generation {}, the Hikawa is at {generation} now: its spec then is not in the cluster any more", recorded.generation));
        } else {
            fail(
                &mut word,
                Verdict::InputDiffers,
                format!("the input rebuilt from the cluster has digest {rebuilt}, the recorded one is {}: the annotation or a child before it was changed since", recorded.input),
            );
        }
        return word;
    }
    if recorded.contract != CONTRACT {
        fail(&mut word, Verdict::ModuleUnavailable, format!("decided under contract {}; this host speaks {CONTRACT}", recorded.contract));
        return word;
    }
    let module = match modules.get(&recorded.module).await {
        Ok(module) => module,
        Err(reason) => {
            fail(&mut word, Verdict::ModuleUnavailable, reason);
            return word;
        }
    };
    let decision = decide(module.as_ref(), &observed, limits);
    word.logs = decision.logs.iter().map(|l| format!("{:?} {}", l.level, l.message)).collect();
    let plan = match decision.outcome {
        Ok(plan) => plan,
        Err(error) => {
            fail(&mut word, Verdict::ReplayFailed, format!("the replay failed ({}): {error}", error.reason()));
            return word;
        }
    };
    word.plan = Some(plan.to_string());
    word.next_call = Some(match plan.next_call(&observed) {
        NextCall::After(ms) => Next::AfterMs(ms),
        NextCall::WhenSomethingChanges => Next::WhenSomethingChanges,
    });
    let kind = if child.kiyoshi { ChildKind::Kiyoshi } else { ChildKind::Zundoko };
    let said = plan.says().any(|s| s.kind == kind && s.name == child.name && s.word == child.word);
    if !said {
        fail(&mut word, Verdict::PlanDiffers, format!("the replay by {} does not say {:?} as {}", recorded.module, child.word, child.name));
    }
    word
}
