//! Misbehaviour on request, for the host's sandbox tests: `spec.params.hostile` picks one,
//! and the host's smoke test always traps.
//! Never built into a shipped module (feature `hostile`).

use crate::zundokokiyoshi::rules::log::{Level, log};
use std::hint::black_box;
use zundoko_rules::{Action, ChildKind, Observed, Plan, Say, StatusUpdate};

pub fn misbehave(observed: &Observed) -> Option<Plan> {
    let hikawa = &observed.hikawa;
    let say = |namespace: &str, name: &str| Plan {
        actions: vec![Action::Say(Say {
            kind: ChildKind::Zundoko,
            namespace: namespace.into(),
            name: name.into(),
            index: observed.zundokos.len() as u32 + 1,
            word: "Zun".into(),
        })],
    };
    // The host smoke-tests every module on a synthetic Hikawa named `smoke-test` before it
    // may serve: this fixture fails that test, so a swap to it must be refused.
    if hikawa.name == "smoke-test" {
        panic!("hostile guest fails the smoke test on purpose");
    }
    match observed.hikawa.param("hostile")? {
        "loop" => {
            let mut n = 0u64;
            loop {
                n = black_box(n.wrapping_add(1));
            }
        }
        "allocate" => {
            let mut hog: Vec<u8> = Vec::with_capacity(1 << 30);
            hog.resize(1 << 30, 1);
            black_box(&hog);
            None
        }
        "panic" => panic!("hostile guest panics on purpose"),
        "recurse" => {
            black_box(recurse(black_box(0)));
            None
        }
        "huge-plan" => Some(Plan {
            actions: vec![Action::RequeueAfter(1); 1_000_000],
        }),
        "log-flood" => {
            for i in 0..10_000 {
                log(Level::Info, &format!("flood line {i}"));
            }
            None
        }
        // Operator-level containment (SPEC 4b): plans that are valid one by one but would
        // make the operator loop if it acted on every one of them.
        "churn-status" => Some(Plan {
            actions: vec![Action::SetStatus(StatusUpdate {
                phase: "Singing".into(),
                num_zundokos_said: observed.zundokos.len() as u32,
                kiyoshied: false,
                message: format!("it is now {}", observed.now),
            })],
        }),
        "requeue-zero" => Some(Plan { actions: vec![Action::RequeueAfter(0)] }),
        "foreign-namespace" => Some(say("kube-system", &zundoko_rules::naming::zundoko_name(&hikawa.name, 1))),
        "foreign-name" => Some(say(&hikawa.namespace, "someone-else-zundoko-001")),
        _ => None,
    }
}

#[allow(unconditional_recursion)] // on purpose: the host must stop it
fn recurse(depth: u64) -> u64 {
    let frame = black_box([depth; 64]);
    recurse(depth + 1).wrapping_add(frame[(depth % 64) as usize])
}
