//! Every plan is checked before anything is applied: a plan that fails any check is not
//! applied at all. The checks keep a module, however hostile, inside its own Hikawa.

use crate::text::is_unsafe;
use zundoko_rules::naming::{kiyoshi_name, zundoko_name};
use zundoko_rules::{Action, ChildKind, Observed, Plan};

/// The highest child cap that can be configured: child names have at most four digits of
/// index, which is what the Hikawa CRD's name length limit leaves room for.
pub const MAX_CHILDREN_LIMIT: u32 = 9_999;

/// Bounds on what one plan may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanLimits {
    /// Actions in one plan.
    pub max_actions: usize,
    /// Bytes in one word.
    pub max_word_bytes: usize,
    /// Zundoko children one Hikawa may have.
    pub max_children: u32,
    /// Longest requeue delay, in milliseconds.
    pub max_requeue_ms: u64,
    /// Bytes in the status phase and message.
    pub max_phase_bytes: usize,
    pub max_message_bytes: usize,
}

impl Default for PlanLimits {
    fn default() -> Self {
        PlanLimits {
            max_actions: 16,
            max_word_bytes: 64,
            max_children: 1000,
            max_requeue_ms: 24 * 60 * 60 * 1000,
            max_phase_bytes: 32,
            max_message_bytes: 256,
        }
    }
}

/// Why a plan was refused: defined beside the guest's other failures
/// (`supply/sandbox/error.rs`), which carry it, so the sandbox imports nothing from here.
pub use crate::supply::sandbox::PlanRejection;

/// Check a whole plan against the observed state it was made from.
pub fn check(plan: &Plan, observed: &Observed, limits: &PlanLimits) -> Result<(), PlanRejection> {
    if plan.actions.len() > limits.max_actions {
        return Err(PlanRejection::TooManyActions {
            actions: plan.actions.len(),
            limit: limits.max_actions,
        });
    }
    let hikawa = &observed.hikawa;
    let mut zundokos = observed.zundokos.len() as u32;
    let mut kiyoshi = observed.kiyoshi.is_some();
    let (mut status_seen, mut requeue_seen) = (false, false);
    for (i, action) in plan.actions.iter().enumerate() {
        let action_no = i + 1;
        match action {
            Action::Say(say) => {
                if say.namespace != hikawa.namespace {
                    return Err(PlanRejection::ForeignNamespace {
                        action: action_no,
                        expected: hikawa.namespace.clone(),
                        found: quoted(&say.namespace),
                    });
                }
                if kiyoshi {
                    return Err(PlanRejection::AfterKiyoshi { action: action_no });
                }
                let expected_name = match say.kind {
                    ChildKind::Zundoko => zundoko_name(&hikawa.name, zundokos + 1),
                    ChildKind::Kiyoshi => kiyoshi_name(&hikawa.name),
                };
                if say.name != expected_name {
                    return Err(PlanRejection::ForeignName {
                        action: action_no,
                        expected: expected_name,
                        found: quoted(&say.name),
                    });
                }
                if say.index != zundokos + 1 {
                    return Err(PlanRejection::WrongIndex {
                        action: action_no,
                        expected: zundokos + 1,
                        found: say.index,
                    });
                }
                check_word(action_no, &say.word, limits)?;
                match say.kind {
                    ChildKind::Zundoko => {
                        zundokos += 1;
                        if zundokos > limits.max_children {
                            return Err(PlanRejection::TooManyChildren {
                                action: action_no,
                                children: zundokos,
                                limit: limits.max_children,
                            });
                        }
                    }
                    ChildKind::Kiyoshi => kiyoshi = true,
                }
            }
            Action::SetStatus(status) => {
                if std::mem::replace(&mut status_seen, true) {
                    return Err(PlanRejection::Duplicate { action: action_no, what: "set-status" });
                }
                let bad = |field, why: String| PlanRejection::BadStatus { action: action_no, field, why };
                if status.phase.is_empty()
                    || status.phase.len() > limits.max_phase_bytes
                    || !status.phase.bytes().all(|b| b.is_ascii_alphanumeric())
                {
                    return Err(bad(
                        "phase",
                        format!(
                            "{:?} must be 1 to {} ASCII letters or digits",
                            quoted(&status.phase),
                            limits.max_phase_bytes
                        ),
                    ));
                }
                // Shown by kubectl as it is: neither a control character nor a bidirectional
                // override (which reorders the text around it) may be in it.
                if status.message.len() > limits.max_message_bytes
                    || status.message.chars().any(is_unsafe)
                {
                    return Err(bad(
                        "message",
                        format!(
                            "must be at most {} bytes without control characters or bidirectional overrides",
                            limits.max_message_bytes
                        ),
                    ));
                }
                // The count is the rules' summary of the children the plan leaves behind;
                // it may not claim words that do not exist.
                if status.num_zundokos_said > zundokos {
                    return Err(bad(
                        "numZundokosSaid",
                        format!("{} is more than the {zundokos} Zundokos there will be", status.num_zundokos_said),
                    ));
                }
                if status.kiyoshied && !kiyoshi {
                    return Err(bad("kiyoshied", "true, but there is no Kiyoshi".into()));
                }
            }
            Action::RequeueAfter(ms) => {
                if std::mem::replace(&mut requeue_seen, true) {
                    return Err(PlanRejection::Duplicate { action: action_no, what: "requeue-after" });
                }
                if *ms > limits.max_requeue_ms {
                    return Err(PlanRejection::RequeueTooLong {
                        action: action_no,
                        ms: *ms,
                        limit: limits.max_requeue_ms,
                    });
                }
            }
        }
    }
    Ok(())
}

/// Words end up in object specs, Events and logs: short, printable, no markup.
fn check_word(action: usize, word: &str, limits: &PlanLimits) -> Result<(), PlanRejection> {
    let bad = |why: String| PlanRejection::BadWord { action, word: quoted(word), why };
    if word.is_empty() || word.len() > limits.max_word_bytes {
        return Err(bad(format!("must be 1 to {} bytes", limits.max_word_bytes)));
    }
    if word.starts_with(' ') || word.ends_with(' ') {
        return Err(bad("must not start or end with a space".into()));
    }
    if let Some(c) = word.chars().find(|c| !allowed_in_word(*c)) {
        return Err(bad(format!("{c:?} is not a letter, digit, space or one of - ! ' . , ・ ！ ー ～")));
    }
    Ok(())
}

/// What a refusal quotes of a value the guest chose: its start only, so that a module returning
/// a megabyte name does not make a megabyte error (the rejection quotes it escaped, `{:?}`).
fn quoted(value: &str) -> String {
    value.chars().take(80).collect()
}

fn allowed_in_word(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, ' ' | '-' | '!' | '\'' | '.' | ',' | '・' | '！' | 'ー' | '～')
}

#[cfg(test)]
mod tests {
    use super::*;
    use zundoko_rules::{Said, Say, StatusUpdate};

    fn observed(words: u32) -> Observed {
        let mut o = Observed::default();
        o.hikawa.namespace = "ns".into();
        o.hikawa.name = "h".into();
        for i in 1..=words {
            o.zundokos.push(Said { name: zundoko_name("h", i), index: i, word: "Zun".into(), said_at: Some(0) });
        }
        o
    }

    fn say(kind: ChildKind, ns: &str, name: &str, index: u32, word: &str) -> Action {
        Action::Say(Say { kind, namespace: ns.into(), name: name.into(), index, word: word.into() })
    }

    fn plan(actions: Vec<Action>) -> Plan {
        Plan { actions }
    }

    #[test]
    fn a_good_plan_passes() {
        let p = plan(vec![
            say(ChildKind::Zundoko, "ns", "h-zundoko-003", 3, "Doko"),
            Action::SetStatus(StatusUpdate { phase: "Singing".into(), num_zundokos_said: 3, kiyoshied: false, message: "3 words".into() }),
            Action::RequeueAfter(500),
        ]);
        assert_eq!(check(&p, &observed(2), &PlanLimits::default()), Ok(()));
        let k = plan(vec![say(ChildKind::Kiyoshi, "ns", "h-kiyoshi", 3, "キ・ヨ・シ！")]);
        assert_eq!(check(&k, &observed(2), &PlanLimits::default()), Ok(()));
    }

    #[test]
    fn every_breach_names_its_action() {
        let limits = PlanLimits::default();
        let cases: Vec<(Vec<Action>, &str)> = vec![
            (vec![say(ChildKind::Zundoko, "kube-system", "h-zundoko-003", 3, "Zun")], "namespace \"kube-system\""),
            (vec![say(ChildKind::Zundoko, "ns", "other-zundoko-003", 3, "Zun")], "name \"other-zundoko-003\""),
            (vec![say(ChildKind::Zundoko, "ns", "h-zundoko-005", 5, "Zun")], "name \"h-zundoko-005\""),
            (vec![say(ChildKind::Zundoko, "ns", "h-zundoko-003", 4, "Zun")], "next word is 3"),
            (vec![say(ChildKind::Zundoko, "ns", "h-zundoko-003", 3, "")], "1 to 64 bytes"),
            (vec![say(ChildKind::Zundoko, "ns", "h-zundoko-003", 3, "<script>")], "'<'"),
            (vec![say(ChildKind::Zundoko, "ns", "h-zundoko-003", 3, &"Zun".repeat(30))], "1 to 64 bytes"),
            (vec![Action::RequeueAfter(1), Action::RequeueAfter(2)], "only one requeue-after"),
            (vec![Action::RequeueAfter(u64::MAX)], "longer than the limit"),
            (
                vec![Action::SetStatus(StatusUpdate { phase: "Singing".into(), num_zundokos_said: 9, kiyoshied: false, message: String::new() })],
                "numZundokosSaid",
            ),
            (
                vec![Action::SetStatus(StatusUpdate { phase: "Sing ing".into(), num_zundokos_said: 0, kiyoshied: false, message: String::new() })],
                "phase",
            ),
            (
                vec![Action::SetStatus(StatusUpdate { phase: "Done".into(), num_zundokos_said: 2, kiyoshied: true, message: String::new() })],
                "no Kiyoshi",
            ),
        ];
        for (actions, needle) in cases {
            let err = check(&plan(actions.clone()), &observed(2), &limits).expect_err(needle);
            let text = err.to_string();
            assert!(text.contains(needle), "{text:?} should mention {needle:?}");
            assert!(text.starts_with("action ") || text.starts_with("the plan"), "{text}");
        }
    }

    #[test]
    fn nothing_after_kiyoshi_and_child_cap_holds() {
        let mut done = observed(5);
        done.kiyoshi = Some(Said { name: "h-kiyoshi".into(), index: 6, word: "Ki-yo-shi!".into(), said_at: None });
        let p = plan(vec![say(ChildKind::Zundoko, "ns", "h-zundoko-006", 6, "Zun")]);
        assert_eq!(check(&p, &done, &PlanLimits::default()), Err(PlanRejection::AfterKiyoshi { action: 1 }));

        let limits = PlanLimits { max_children: 2, ..PlanLimits::default() };
        let p = plan(vec![say(ChildKind::Zundoko, "ns", "h-zundoko-003", 3, "Zun")]);
        assert!(matches!(check(&p, &observed(2), &limits), Err(PlanRejection::TooManyChildren { children: 3, limit: 2, .. })));

        let huge = plan(vec![Action::RequeueAfter(1); 1_000_000]);
        assert_eq!(
            check(&huge, &observed(0), &PlanLimits::default()),
            Err(PlanRejection::TooManyActions { actions: 1_000_000, limit: 16 })
        );
    }
}
