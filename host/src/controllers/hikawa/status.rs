//! The Hikawa's status after a decision: the rules' part from the plan, the host's part
//! (observedGeneration, module, last word time, the Ready condition) from the decision.
//! Pure, so it is computed once and written only when it differs. Conditions and times are
//! written as both controllers write them (`controllers/writes/status.rs`).

use zundoko_rules::{Plan, TimestampMs};

use crate::crd::{HikawaStatus, ModuleStatus};
use crate::controllers::writes::status::{rfc3339_millis, set_condition};
use crate::supply::sandbox::ModuleIdentity;

pub const CONDITION_READY: &str = "Ready";
pub const PHASE_FAILED: &str = "Failed";
/// kube-apiserver bounds a condition's message at 32 KiB; a screenful is enough here.
const MAX_MESSAGE_BYTES: usize = 1024;

fn module_status(module: &ModuleIdentity) -> ModuleStatus {
    ModuleStatus { name: module.info.name.clone(), version: module.info.version.clone(), digest: module.digest.clone(), reference: None, resolved_from: None }
}

/// Status after a plan was applied. `said_at` is the time of a word created by this plan.
pub fn after_plan(
    current: Option<&HikawaStatus>,
    generation: i64,
    plan: &Plan,
    said_at: Option<TimestampMs>,
    module: &ModuleIdentity,
    now: TimestampMs,
) -> HikawaStatus {
    let mut status = current.cloned().unwrap_or_default();
    if let Some(update) = plan.status() {
        status.num_zundokos_said = update.num_zundokos_said;
        status.kiyoshied = update.kiyoshied;
        status.phase = Some(update.phase.clone());
        status.message = Some(update.message.clone());
    } else if status.phase.as_deref() == Some(PHASE_FAILED) {
        // The rules recovered but found nothing to say about it: clear the failure.
        status.phase = None;
        status.message = None;
    }
    if let Some(at) = said_at {
        status.last_word_time = Some(rfc3339_millis(at));
    }
    status.observed_generation = Some(generation);
    status.module = Some(module_status(module));
    let message = format!("{} {} decided", module.info.name, module.info.version);
    set_condition(&mut status.conditions, CONDITION_READY, "True", "Decided", &message, generation, now);
    status
}

/// Status after a failure: the rules failed, their plan was rejected, or the API server
/// refused what the plan asked (nothing more of it was applied). `module` is the module that
/// decided, if it came that far.
pub fn after_failure(
    current: Option<&HikawaStatus>,
    generation: i64,
    reason: &str,
    message: &str,
    module: Option<&ModuleIdentity>,
    now: TimestampMs,
) -> HikawaStatus {
    let mut status = current.cloned().unwrap_or_default();
    let message = crate::text::printable(message, MAX_MESSAGE_BYTES);
    status.phase = Some(PHASE_FAILED.into());
    status.message = Some(message.clone());
    status.observed_generation = Some(generation);
    if let Some(module) = module {
        status.module = Some(module_status(module));
    }
    set_condition(&mut status.conditions, CONDITION_READY, "False", reason, &message, generation, now);
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use zundoko_rules::{Action, ModuleInfo, StatusUpdate};

    fn module() -> ModuleIdentity {
        ModuleIdentity {
            info: ModuleInfo { name: "m".into(), version: "1.0.0".into(), description: String::new() },
            digest: "sha256:ab".into(),
            size: 1,
        }
    }

    fn plan(said: u32) -> Plan {
        Plan {
            actions: vec![Action::SetStatus(StatusUpdate { phase: "Singing".into(), num_zundokos_said: said, kiyoshied: false, message: "m".into() })],
        }
    }

    #[test]
    fn an_unchanged_decision_gives_an_equal_status() {
        let first = after_plan(None, 1, &plan(1), Some(1_500), &module(), 2_000);
        assert_eq!(first.last_word_time.as_deref(), Some("1970-01-01T00:00:01.500Z"));
        assert_eq!(first.module.as_ref().unwrap().digest, "sha256:ab");
        // Later, nothing new: equal, so nothing is written.
        let again = after_plan(Some(&first), 1, &Plan::default(), None, &module(), 9_000);
        assert_eq!(again, first);
    }

    #[test]
    fn failure_flips_ready_and_recovery_flips_it_back() {
        let ok = after_plan(None, 1, &plan(1), None, &module(), 1_000);
        let failed = after_failure(Some(&ok), 1, "StackOverflow", "the guest overflowed its stack", Some(&module()), 5_000);
        let ready = &failed.conditions[0];
        assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "StackOverflow"));
        assert_eq!(ready.last_transition_time.0.as_millisecond(), 5_000);
        assert_eq!(failed.phase.as_deref(), Some(PHASE_FAILED));
        // Failing again does not move the transition time.
        let still = after_failure(Some(&failed), 1, "StackOverflow", "the guest overflowed its stack", Some(&module()), 9_000);
        assert_eq!(still, failed);
        let recovered = after_plan(Some(&failed), 1, &Plan::default(), None, &module(), 12_000);
        assert_eq!(recovered.conditions[0].status, "True");
        assert_eq!(recovered.phase, None);
        assert_eq!(recovered.conditions.len(), 1);
    }
}
