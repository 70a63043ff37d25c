//! The data of the WIT contract (`wit/zundoko-rules.wit`, interface `types`) as plain Rust.
//!
//! The guest adapter converts the WIT bindings to and from these types; the host uses them as
//! its own view of a plan, so the rules, the host's checks and the native benchmark all speak
//! one language. Field meanings are documented once, in the WIT file.

/// Milliseconds since the Unix epoch (UTC).
pub type TimestampMs = i64;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hikawa {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub generation: i64,
    pub created_at: Option<TimestampMs>,
    pub interval_millis: u64,
    /// Sorted by key.
    pub params: Vec<(String, String)>,
    pub status: HikawaStatus,
}

impl Hikawa {
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HikawaStatus {
    pub num_zundokos_said: u32,
    pub kiyoshied: bool,
    pub phase: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Said {
    pub name: String,
    pub index: u32,
    pub word: String,
    pub said_at: Option<TimestampMs>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    pub hikawa: Hikawa,
    /// Ordered by index.
    pub zundokos: Vec<Said>,
    pub kiyoshi: Option<Said>,
    pub now: TimestampMs,
    pub entropy: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChildKind {
    Zundoko,
    Kiyoshi,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Say {
    pub kind: ChildKind,
    pub namespace: String,
    pub name: String,
    pub index: u32,
    pub word: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusUpdate {
    pub phase: String,
    pub num_zundokos_said: u32,
    pub kiyoshied: bool,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Say(Say),
    SetStatus(StatusUpdate),
    RequeueAfter(u64),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub actions: Vec<Action>,
}

impl Plan {
    pub fn says(&self) -> impl Iterator<Item = &Say> {
        self.actions.iter().filter_map(|a| match a {
            Action::Say(say) => Some(say),
            _ => None,
        })
    }

    pub fn status(&self) -> Option<&StatusUpdate> {
        self.actions.iter().find_map(|a| match a {
            Action::SetStatus(status) => Some(status),
            _ => None,
        })
    }

    pub fn requeue_after(&self) -> Option<u64> {
        self.actions.iter().find_map(|a| match a {
            Action::RequeueAfter(ms) => Some(*ms),
            _ => None,
        })
    }

    /// Whether carrying out this plan changes what the rules observe: a child not there yet,
    /// or a status whose phase, count or kiyoshied differs from the observed one (the rules do
    /// not see the status message, so a message alone changes nothing they observe).
    pub fn changes(&self, observed: &Observed) -> bool {
        self.actions.iter().any(|action| match action {
            Action::Say(say) => match say.kind {
                ChildKind::Zundoko => !observed.zundokos.iter().any(|z| z.name == say.name),
                ChildKind::Kiyoshi => observed.kiyoshi.is_none(),
            },
            Action::SetStatus(status) => {
                let seen = &observed.hikawa.status;
                seen.num_zundokos_said != status.num_zundokos_said
                    || seen.kiyoshied != status.kiyoshied
                    || seen.phase.as_deref() != Some(status.phase.as_str())
            }
            Action::RequeueAfter(_) => false,
        })
    }

    /// When the host calls the rules again after this plan, decided from `observed` (the one
    /// definition `run`, `simulate`, `test` and [`crate::testing`] share; the WIT file says it
    /// in the same words): after `requeue-after` if the plan asks for it; else at once if the
    /// plan changed what the rules observe ([`Plan::changes`]: said a word, or changed the
    /// status); else only when something else changes.
    pub fn next_call(&self, observed: &Observed) -> NextCall {
        match self.requeue_after() {
            Some(ms) => NextCall::After(ms),
            None if self.changes(observed) => NextCall::After(0),
            None => NextCall::WhenSomethingChanges,
        }
    }
}

/// When the rules are called again after a plan ([`Plan::next_call`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextCall {
    /// After this many milliseconds (0: at once, after the plan's own writes).
    After(u64),
    /// Only when something the plan did not do changes: the Hikawa (a spec edit), its
    /// children, the module.
    WhenSomethingChanges,
}

/// One line: `say #3 Doko, status Singing(3), requeue 500 ms` (or `nothing to do`).
impl std::fmt::Display for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.actions.is_empty() {
            return f.write_str("nothing to do");
        }
        for (i, action) in self.actions.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match action {
                Action::Say(say) if say.kind == ChildKind::Kiyoshi => write!(f, "say {}", say.word)?,
                Action::Say(say) => write!(f, "say #{} {}", say.index, say.word)?,
                Action::SetStatus(s) => write!(f, "status {}({})", s.phase, s.num_zundokos_said)?,
                Action::RequeueAfter(ms) => write!(f, "requeue {ms} ms")?,
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleError {
    InvalidParams(String),
    InconsistentSong(String),
    Internal(String),
}

impl RuleError {
    /// A stable CamelCase reason, used for conditions and metric labels.
    pub fn reason(&self) -> &'static str {
        match self {
            RuleError::InvalidParams(_) => "InvalidParams",
            RuleError::InconsistentSong(_) => "InconsistentSong",
            RuleError::Internal(_) => "RulesInternalError",
        }
    }

    pub fn message(&self) -> &str {
        match self {
            RuleError::InvalidParams(m) | RuleError::InconsistentSong(m) | RuleError::Internal(m) => m,
        }
    }
}

impl std::fmt::Display for RuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason(), self.message())
    }
}

impl std::error::Error for RuleError {}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleInfo {
    pub name: String,
    pub version: String,
    pub description: String,
}

impl Observed {
    /// Carry out an already-checked plan on this in-memory view, the way the cluster would:
    /// children appear (a create of an existing index is a no-op), the status is replaced.
    /// Used by `simulate` and by tests that play whole songs without a cluster.
    pub fn apply(&mut self, plan: &Plan) {
        for action in &plan.actions {
            match action {
                Action::Say(say) => {
                    let said = Said {
                        name: say.name.clone(),
                        index: say.index,
                        word: say.word.clone(),
                        said_at: Some(self.now),
                    };
                    match say.kind {
                        ChildKind::Zundoko => {
                            if !self.zundokos.iter().any(|z| z.name == said.name) {
                                self.zundokos.push(said);
                                self.zundokos.sort_by_key(|z| z.index);
                            }
                        }
                        ChildKind::Kiyoshi => {
                            self.kiyoshi.get_or_insert(said);
                        }
                    }
                }
                Action::SetStatus(status) => {
                    self.hikawa.status = HikawaStatus {
                        num_zundokos_said: status.num_zundokos_said,
                        kiyoshied: status.kiyoshied,
                        phase: Some(status.phase.clone()),
                    };
                }
                Action::RequeueAfter(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn say(index: u32) -> Action {
        Action::Say(Say { kind: ChildKind::Zundoko, namespace: "default".into(), name: format!("h-zundoko-{index:03}"), index, word: "Zun".into() })
    }

    fn status(phase: &str, message: &str) -> Action {
        Action::SetStatus(StatusUpdate { phase: phase.into(), num_zundokos_said: 0, kiyoshied: false, message: message.into() })
    }

    #[test]
    fn the_rules_are_called_again_after_their_callback_or_what_they_changed() {
        let mut observed = Observed::default();
        let plan = |actions: Vec<Action>| Plan { actions };
        assert_eq!(plan(vec![say(1), Action::RequeueAfter(500)]).next_call(&observed), NextCall::After(500));
        assert_eq!(plan(vec![say(1)]).next_call(&observed), NextCall::After(0), "a word wakes them");
        assert_eq!(plan(vec![status("Singing", "")]).next_call(&observed), NextCall::After(0), "a status they observe wakes them");
        observed.apply(&plan(vec![status("Singing", "")]));
        assert_eq!(plan(vec![status("Singing", "a new message")]).next_call(&observed), NextCall::WhenSomethingChanges, "the message is not observed");
        assert_eq!(plan(vec![]).next_call(&observed), NextCall::WhenSomethingChanges);
        observed.apply(&plan(vec![say(1)]));
        assert_eq!(plan(vec![say(1)]).next_call(&observed), NextCall::WhenSomethingChanges, "a word already said changes nothing");
        let kiyoshi = Action::Say(Say { kind: ChildKind::Kiyoshi, namespace: "default".into(), name: "h-kiyoshi".into(), index: 2, word: "Ki-yo-shi!".into() });
        assert_eq!(plan(vec![kiyoshi.clone()]).next_call(&observed), NextCall::After(0));
        observed.apply(&plan(vec![kiyoshi.clone()]));
        assert_eq!(plan(vec![kiyoshi]).next_call(&observed), NextCall::WhenSomethingChanges);
    }
}
