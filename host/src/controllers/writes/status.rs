//! Conditions and status patches, as both controllers write them: times in RFC 3339 with
//! milliseconds, a condition set in its place (its lastTransitionTime moving only when its
//! status does), and a status as a merge patch that drops what the new status lacks (the
//! Hikawa's: only what changed).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde::Serialize;
use zundoko_rules::TimestampMs;

pub fn timestamp(ms: TimestampMs) -> jiff::Timestamp {
    jiff::Timestamp::from_millisecond(ms).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

/// RFC 3339 with milliseconds, in UTC.
pub fn rfc3339_millis(ms: TimestampMs) -> String {
    format!("{:.3}", timestamp(ms))
}

/// Set a condition, in its place in the list; its lastTransitionTime moves only when its
/// status does.
pub fn set_condition(conditions: &mut Vec<Condition>, type_: &str, value: &str, reason: &str, message: &str, generation: i64, now: TimestampMs) {
    let transition = conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == value)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or(Time(timestamp(now - now.rem_euclid(1000))));
    let condition = Condition {
        type_: type_.into(),
        status: value.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: Some(generation),
        last_transition_time: transition,
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => *existing = condition,
        None => conditions.push(condition),
    }
}

/// `desired` as a merge patch over `current`: fields `current` has and `desired` lacks become null.
pub fn replacing_patch<T: Serialize>(current: Option<&T>, desired: &T) -> serde_json::Value {
    let mut patch = serde_json::to_value(desired).expect("a status serializes");
    if let (Some(current), Some(fields)) = (current.map(serde_json::to_value), patch.as_object_mut())
        && let Ok(serde_json::Value::Object(current)) = current
    {
        for key in current.keys() {
            fields.entry(key.clone()).or_insert(serde_json::Value::Null);
        }
    }
    patch
}

/// `desired` as the smallest merge patch over `current` (RFC 7386): only the fields that
/// differ, objects compared field by field, a field `desired` lacks as null, a list (the
/// conditions) whole and only when it changed. For a status written on every word, where only
/// the count, the word's time and the message move, a tenth of the bytes of the whole status.
pub fn changed_patch<T: Serialize>(current: Option<&T>, desired: &T) -> serde_json::Value {
    let desired = serde_json::to_value(desired).expect("a status serializes");
    match current.map(serde_json::to_value) {
        Some(Ok(current)) => merge_diff(&current, &desired).unwrap_or_else(|| serde_json::json!({})),
        _ => desired,
    }
}

/// The merge patch that takes `current` to `desired`; `None` if they are equal.
fn merge_diff(current: &serde_json::Value, desired: &serde_json::Value) -> Option<serde_json::Value> {
    use serde_json::Value;
    match (current, desired) {
        (Value::Object(current), Value::Object(desired)) => {
            let mut patch = serde_json::Map::new();
            for (key, value) in desired {
                let changed = match current.get(key) {
                    Some(before) => merge_diff(before, value),
                    None => Some(value.clone()),
                };
                if let Some(changed) = changed {
                    patch.insert(key.clone(), changed);
                }
            }
            for key in current.keys().filter(|key| !desired.contains_key(*key)) {
                patch.insert(key.clone(), Value::Null);
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        (current, desired) if current == desired => None,
        (_, desired) => Some(desired.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::HikawaStatus;

    /// RFC 7386's apply, for checking patches.
    fn merge(target: &mut serde_json::Value, patch: &serde_json::Value) {
        match (target.as_object_mut(), patch.as_object()) {
            (Some(target), Some(patch)) => {
                for (key, value) in patch {
                    if value.is_null() {
                        target.remove(key);
                    } else {
                        merge(target.entry(key.clone()).or_insert(serde_json::Value::Null), value);
                    }
                }
            }
            _ => *target = patch.clone(),
        }
    }

    #[test]
    fn a_changed_patch_carries_only_what_changed_and_takes_current_to_desired() {
        let mut current = HikawaStatus { num_zundokos_said: 3, message: Some("failed".into()), phase: Some("Failed".into()), ..HikawaStatus::default() };
        set_condition(&mut current.conditions, "Ready", "True", "Decided", "m decided", 1, 1_000);
        current.module = Some(crate::crd::ModuleStatus { name: "m".into(), version: "1".into(), digest: "sha256:a".into(), reference: Some("r".into()), resolved_from: None });
        let mut desired = current.clone();
        desired.num_zundokos_said = 4;
        desired.message = None;
        desired.module.as_mut().unwrap().reference = None;
        let patch = changed_patch(Some(&current), &desired);
        assert_eq!(patch["numZundokosSaid"], 4);
        assert_eq!(patch["message"], serde_json::Value::Null, "a dropped field is patched to null");
        assert_eq!(patch["module"], serde_json::json!({"reference": null}), "an object field by field");
        assert!(patch.get("conditions").is_none() && patch.get("phase").is_none(), "unchanged fields are not sent: {patch}");
        let mut applied = serde_json::to_value(&current).unwrap();
        merge(&mut applied, &patch);
        assert_eq!(applied, serde_json::to_value(&desired).unwrap());
        // Conditions, when they change, go whole (a merge patch replaces a list).
        set_condition(&mut desired.conditions, "Ready", "False", "Trapped", "trap", 1, 2_000);
        assert_eq!(changed_patch(Some(&current), &desired)["conditions"], serde_json::to_value(&desired.conditions).unwrap());
        assert_eq!(changed_patch(None, &desired), serde_json::to_value(&desired).unwrap(), "no status yet: all of it");
        assert_eq!(changed_patch(Some(&desired), &desired), serde_json::json!({}));
    }

    #[test]
    fn a_dropped_status_field_is_patched_to_null() {
        let current = HikawaStatus { message: Some("failed".into()), phase: Some("Failed".into()), ..HikawaStatus::default() };
        let desired = HikawaStatus { phase: Some("Singing".into()), ..HikawaStatus::default() };
        let patch = replacing_patch(Some(&current), &desired);
        assert_eq!(patch["message"], serde_json::Value::Null);
        assert_eq!(patch["phase"], "Singing");
        assert_eq!(replacing_patch(None, &desired).get("message"), None);
    }
}
