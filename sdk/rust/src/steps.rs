//! Building blocks for a `reconcile` written from scratch (the scaffold's rules use them):
//! the plans a song is made of, with the names, indexes and status the host expects.

use crate::naming::{kiyoshi_name, zundoko_name};
use crate::song::{PHASE_KIYOSHIED, PHASE_SINGING};
use crate::{Action, ChildKind, Observed, Plan, Say, StatusUpdate};

impl Observed {
    /// The words said so far, in order (the Kiyoshi not included).
    pub fn words(&self) -> impl DoubleEndedIterator<Item = &str> {
        self.zundokos.iter().map(|z| z.word.as_str())
    }

    /// Milliseconds until the next word is due: `intervalMillis` after the last word; 0 for
    /// the first word or when the last word's time is unknown.
    pub fn wait_millis(&self) -> u64 {
        let Some(last) = self.zundokos.last().and_then(|z| z.said_at) else { return 0 };
        let due = last.saturating_add(self.hikawa.interval_millis.min(i64::MAX as u64) as i64);
        due.saturating_sub(self.now).max(0) as u64
    }
}

/// Come back when the next word is due.
pub fn wait(observed: &Observed) -> Plan {
    Plan { actions: vec![Action::RequeueAfter(observed.wait_millis())] }
}

/// Say the next word (a Zundoko child), count it in the status, and come back one interval later.
pub fn say_word(observed: &Observed, word: &str) -> Plan {
    let hikawa = &observed.hikawa;
    let index = observed.zundokos.len() as u32 + 1;
    Plan {
        actions: vec![
            Action::Say(Say {
                kind: ChildKind::Zundoko,
                namespace: hikawa.namespace.clone(),
                name: zundoko_name(&hikawa.name, index),
                index,
                word: word.into(),
            }),
            status(index, false, format!("{index} words said")),
            Action::RequeueAfter(hikawa.interval_millis),
        ],
    }
}

/// Say the Kiyoshi: the song's last word. Nothing may be said after it.
pub fn say_kiyoshi(observed: &Observed, word: &str) -> Plan {
    let hikawa = &observed.hikawa;
    let said = observed.zundokos.len() as u32;
    Plan {
        actions: vec![
            Action::Say(Say {
                kind: ChildKind::Kiyoshi,
                namespace: hikawa.namespace.clone(),
                name: kiyoshi_name(&hikawa.name),
                index: said + 1,
                word: word.into(),
            }),
            status(said, true, format!("{word} after {said} words")),
        ],
    }
}

/// After the Kiyoshi: nothing, except bringing a stale status up to date once.
pub fn song_over(observed: &Observed) -> Plan {
    let said = observed.zundokos.len() as u32;
    let current = &observed.hikawa.status;
    if current.kiyoshied && current.num_zundokos_said == said && current.phase.as_deref() == Some(PHASE_KIYOSHIED) {
        return Plan::default();
    }
    Plan { actions: vec![status(said, true, "the song is over".into())] }
}

fn status(said: u32, kiyoshied: bool, message: String) -> Action {
    Action::SetStatus(StatusUpdate {
        phase: if kiyoshied { PHASE_KIYOSHIED } else { PHASE_SINGING }.into(),
        num_zundokos_said: said,
        kiyoshied,
        message,
    })
}
