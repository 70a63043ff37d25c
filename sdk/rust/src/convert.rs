//! WIT bindings <-> the model's plain types. Field for field; no logic.

use crate as rules;
use crate::bindings::zundokokiyoshi::rules::types as wit;

pub fn observed(o: wit::Observed) -> rules::Observed {
    rules::Observed {
        hikawa: hikawa(o.hikawa),
        zundokos: o.zundokos.into_iter().map(said).collect(),
        kiyoshi: o.kiyoshi.map(said),
        now: o.now,
        entropy: o.entropy,
    }
}

fn hikawa(h: wit::Hikawa) -> rules::Hikawa {
    rules::Hikawa {
        namespace: h.namespace,
        name: h.name,
        uid: h.uid,
        generation: h.generation,
        created_at: h.created_at,
        interval_millis: h.interval_millis,
        params: h.params,
        status: rules::HikawaStatus {
            num_zundokos_said: h.status.num_zundokos_said,
            kiyoshied: h.status.kiyoshied,
            phase: h.status.phase,
        },
    }
}

fn said(s: wit::Said) -> rules::Said {
    rules::Said {
        name: s.name,
        index: s.index,
        word: s.word,
        said_at: s.said_at,
    }
}

pub fn plan(p: rules::Plan) -> wit::Plan {
    wit::Plan {
        actions: p.actions.into_iter().map(action).collect(),
    }
}

fn action(a: rules::Action) -> wit::Action {
    match a {
        rules::Action::Say(s) => wit::Action::Say(wit::Say {
            kind: match s.kind {
                rules::ChildKind::Zundoko => wit::ChildKind::Zundoko,
                rules::ChildKind::Kiyoshi => wit::ChildKind::Kiyoshi,
            },
            namespace: s.namespace,
            name: s.name,
            index: s.index,
            word: s.word,
        }),
        rules::Action::SetStatus(s) => wit::Action::SetStatus(wit::StatusUpdate {
            phase: s.phase,
            num_zundokos_said: s.num_zundokos_said,
            kiyoshied: s.kiyoshied,
            message: s.message,
        }),
        rules::Action::RequeueAfter(ms) => wit::Action::RequeueAfter(ms),
    }
}

pub fn rule_error(e: rules::RuleError) -> wit::RuleError {
    match e {
        rules::RuleError::InvalidParams(m) => wit::RuleError::InvalidParams(m),
        rules::RuleError::InconsistentSong(m) => wit::RuleError::InconsistentSong(m),
        rules::RuleError::Internal(m) => wit::RuleError::Internal(m),
    }
}

pub fn module_info(i: rules::ModuleInfo) -> wit::ModuleInfo {
    wit::ModuleInfo {
        name: i.name,
        version: i.version,
        description: i.description,
    }
}
