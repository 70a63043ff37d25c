//! `zundoko_rules` types <-> the host's WIT bindings. Field for field; the one rule is that
//! a rule error's message, which reaches logs, conditions and Events, is bounded and escaped.

use super::bindings::zundokokiyoshi::rules::types as wit;
use crate::text::printable;
use zundoko_rules as rules;

pub fn observed(o: &rules::Observed) -> wit::Observed {
    let h = &o.hikawa;
    wit::Observed {
        hikawa: wit::Hikawa {
            namespace: h.namespace.clone(),
            name: h.name.clone(),
            uid: h.uid.clone(),
            generation: h.generation,
            created_at: h.created_at,
            interval_millis: h.interval_millis,
            params: h.params.clone(),
            status: wit::HikawaStatus {
                num_zundokos_said: h.status.num_zundokos_said,
                kiyoshied: h.status.kiyoshied,
                phase: h.status.phase.clone(),
            },
        },
        zundokos: o.zundokos.iter().map(said).collect(),
        kiyoshi: o.kiyoshi.as_ref().map(said),
        now: o.now,
        entropy: o.entropy,
    }
}

fn said(s: &rules::Said) -> wit::Said {
    wit::Said {
        name: s.name.clone(),
        index: s.index,
        word: s.word.clone(),
        said_at: s.said_at,
    }
}

pub fn plan(p: wit::Plan) -> rules::Plan {
    rules::Plan {
        actions: p.actions.into_iter().map(action).collect(),
    }
}

fn action(a: wit::Action) -> rules::Action {
    match a {
        wit::Action::Say(s) => rules::Action::Say(rules::Say {
            kind: match s.kind {
                wit::ChildKind::Zundoko => rules::ChildKind::Zundoko,
                wit::ChildKind::Kiyoshi => rules::ChildKind::Kiyoshi,
            },
            namespace: s.namespace,
            name: s.name,
            index: s.index,
            word: s.word,
        }),
        wit::Action::SetStatus(s) => rules::Action::SetStatus(rules::StatusUpdate {
            phase: s.phase,
            num_zundokos_said: s.num_zundokos_said,
            kiyoshied: s.kiyoshied,
            message: s.message,
        }),
        wit::Action::RequeueAfter(ms) => rules::Action::RequeueAfter(ms),
    }
}

/// Longest rule-error message kept, in bytes (as long as a status message may be).
pub const MAX_RULE_ERROR_BYTES: usize = 256;

pub fn rule_error(e: wit::RuleError) -> rules::RuleError {
    let safe = |m: String| printable(&m, MAX_RULE_ERROR_BYTES);
    match e {
        wit::RuleError::InvalidParams(m) => rules::RuleError::InvalidParams(safe(m)),
        wit::RuleError::InconsistentSong(m) => rules::RuleError::InconsistentSong(safe(m)),
        wit::RuleError::Internal(m) => rules::RuleError::Internal(safe(m)),
    }
}

pub fn module_info(i: wit::ModuleInfo) -> rules::ModuleInfo {
    rules::ModuleInfo {
        name: i.name,
        version: i.version,
        description: i.description,
    }
}
