//! Carrying out a checked plan: create the children (controlled by the Hikawa, through
//! `controllers/writes/create.rs`), publish an Event per word, and write the status through the
//! status subresource when it changed.
//! A refusal stops the plan where it is and is returned, for the caller to record.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{ObjectMeta, Patch};
use kube::{Resource, ResourceExt};
use sha2::{Digest, Sha256};
use zundoko_rules::{ChildKind, Observed, Plan, Said};

use crate::controllers::error::{Error, Result};
use crate::controllers::hikawa::children::Owned;
use crate::controllers::hikawa::context::{Context, Writer};
use crate::controllers::hikawa::provenance::{DECISION, Provenance};
use crate::controllers::hikawa::status;
use crate::controllers::writes::create::create;
use crate::controllers::writes::events::EventType;
use crate::controllers::writes::lean;
use crate::controllers::writes::status::{changed_patch, rfc3339_millis};
use crate::crd::SAID_AT;
use crate::crd::{Hikawa, HikawaStatus, Kiyoshi, KiyoshiSpec, Zundoko, ZundokoSpec};
use crate::process::leader::assign::SHARD_LABEL;
use crate::supply::sandbox::ModuleIdentity;

/// Label on every child naming its Hikawa (for `kubectl get zundokos -l ...`); its value is
/// [`label_value`] of the Hikawa's name.
pub const HIKAWA_LABEL: &str = "zundokokiyoshi.kaitoy.github.com/hikawa";

/// A label value may have at most 63 characters, a Hikawa's name up to 240: a longer name is
/// cut to 52 characters and followed by `-` and 10 hex digits of its sha256, so every Hikawa
/// the CRD admits gets a valid, distinct label value.
pub fn label_value(hikawa: &str) -> String {
    if hikawa.len() <= 63 {
        return hikawa.to_string();
    }
    let hash = hex::encode(Sha256::digest(hikawa.as_bytes()));
    format!("{}-{}", &hikawa[..52], &hash[..10])
}

/// What applying a plan did.
#[derive(Debug)]
pub struct Applied {
    /// Zundokos the plan said (created now, or found already there and ours).
    pub zundokos: u32,
    pub kiyoshi: bool,
    /// Children this call created.
    pub created: u32,
    /// The status as the API server now holds it.
    pub status: HikawaStatus,
    /// The Hikawa's resourceVersion after the status write; `None` if the status was unchanged
    /// (not written).
    pub resource_version: Option<String>,
    /// The children this call created, as the rules see them.
    pub said: Vec<(ChildKind, Said)>,
    /// The status write was refused (409) because the Hikawa changed since the decision: the
    /// status is the one the decision saw, and the next decision writes it from the change.
    pub status_outdated: bool,
}

/// Said Events a Hikawa is owed: words said whose Event could not be published yet (kept by
/// the pacing), and, after a start or a shard just taken, the latest word's and the Kiyoshi's
/// again (their sender may have died between the child and its Event). Published by the apply
/// step beside the new word's writes, or on their own when the reconcile decides nothing.
#[derive(Debug, Default)]
pub struct Owed(Vec<(String, ObjectReference)>);

/// How long after its word a Said Event may still be missing because its sender died between
/// the child and its Event (a kill, a lost shard): a new holder sends it again.
const RESAY_WITHIN_MS: i64 = 5 * 60 * 1000;

impl Owed {
    /// What this Hikawa is owed now: the Events refused before (taken from the pacing), and if
    /// `said_elsewhere` gives its children (this process did not see itself say its latest
    /// words), the latest word's and the Kiyoshi's if said recently. Their names make a copy
    /// impossible (the API server answers that they exist); one whose sender died before
    /// sending it is published now.
    pub fn take(ctx: &Context, hikawa: &Hikawa, uid: &str, said_elsewhere: Option<&Owned>, now: i64) -> Owed {
        let mut owed = ctx.pace.unsaid.take(uid);
        if let Some(children) = said_elsewhere {
            let ns = hikawa.namespace().unwrap_or_default();
            let reference = |kind: &str, name: &str| ObjectReference {
                api_version: Some(Zundoko::api_version(&()).to_string()),
                kind: Some(kind.into()),
                name: Some(name.into()),
                namespace: Some(ns.clone()),
                ..ObjectReference::default()
            };
            let latest = children.zundokos.last().map(|z| (z, "Zundoko")).into_iter().chain(children.kiyoshi.as_ref().map(|k| (k, "Kiyoshi")));
            let recent = latest.filter(|(said, _)| said.said_at.is_some_and(|at| now.saturating_sub(at) < RESAY_WITHIN_MS));
            owed.extend(recent.map(|(said, kind)| (said.word.clone(), reference(kind, &said.name))));
        }
        Owed(owed)
    }

    /// Publish them (those that still find no connection are owed again).
    pub async fn publish(self, ctx: &Context, w: &Writer, hikawa: &Hikawa, uid: &str) {
        if !self.0.is_empty() {
            futures::future::join_all(self.0.into_iter().map(|(word, child)| say(ctx, w, hikawa, uid, word, child))).await;
        }
    }
}

/// Carry out `plan`: create the children it says, then each new word's Said Event and the
/// Events `owed` (together), then the status. A refused create stops the plan there and is
/// returned; the Events of the words said before it and those owed are published all the same.
pub async fn apply(ctx: &Context, w: &Writer, hikawa: &Hikawa, observed: &Observed, plan: &Plan, module: &ModuleIdentity, owed: Owed) -> Result<Applied> {
    let ns = observed.hikawa.namespace.as_str();
    let uid = observed.hikawa.uid.as_str();
    let Some(owner) = hikawa.controller_owner_ref(&()) else {
        owed.publish(ctx, w, hikawa, uid).await;
        return Err(Error::MissingField(format!("Hikawa {ns}/{} has no uid", observed.hikawa.name)));
    };
    let mut applied = Applied { zundokos: 0, kiyoshi: false, created: 0, status: HikawaStatus::default(), resource_version: None, said: Vec::new(), status_outdated: false };
    let mut said_at = None;
    // `related` names the child: each word is its own Event.
    let Owed(mut events) = owed;
    let mut refused = None;
    // One record per decision, formed only when it says a word (most decisions say none).
    let decision = plan.says().next().map(|_| Provenance::of(observed, &module.digest, &ctx.shards.identity));
    let annotations = BTreeMap::from_iter(
        [(SAID_AT.to_string(), rfc3339_millis(observed.now))].into_iter().chain(decision.as_ref().map(|d| (DECISION.to_string(), d.to_string()))),
    );
    for say in plan.says() {
        let meta = ObjectMeta {
            name: Some(say.name.clone()),
            namespace: Some(ns.to_string()),
            owner_references: Some(vec![owner.clone()]),
            labels: Some(BTreeMap::from([
                (HIKAWA_LABEL.to_string(), label_value(&observed.hikawa.name)),
                (SHARD_LABEL.to_string(), w.shard_label.clone()),
            ])),
            annotations: Some(annotations.clone()),
            ..ObjectMeta::default()
        };
        let created = match say.kind {
            ChildKind::Zundoko => create(&w.client, ns, &Zundoko { metadata: meta, spec: ZundokoSpec { say: say.word.clone() } }, &owner.uid).await,
            ChildKind::Kiyoshi => create(&w.client, ns, &Kiyoshi { metadata: meta, spec: KiyoshiSpec { say: say.word.clone() } }, &owner.uid).await,
        };
        let created = match created {
            Ok(created) => created,
            Err(error) => {
                refused = Some(error);
                break;
            }
        };
        match say.kind {
            ChildKind::Zundoko => applied.zundokos += 1,
            ChildKind::Kiyoshi => applied.kiyoshi = true,
        }
        if let Some(child) = created {
            applied.created += 1;
            said_at = Some(observed.now);
            ctx.metrics.said(say.kind);
            events.push((said_note(&say.word, module, decision.as_ref()), child));
            applied.said.push((say.kind, Said { name: say.name.clone(), index: say.index, word: say.word.clone(), said_at: Some(observed.now) }));
        }
    }
    let publish = Owed(events).publish(ctx, w, hikawa, uid);
    if let Some(error) = refused {
        publish.await;
        return Err(error);
    }
    let desired = status::after_plan(hikawa.status.as_ref(), observed.hikawa.generation, plan, said_at, module, observed.now);
    // The Events first, the status after they were answered (or left owed): the status that
    // counts a word is written only once its Event is there, and is the word's last write. A
    // crash between them loses nothing (the next reconcile finds the child and writes the
    // status; an Event sent again finds itself there), and a reconcile keeps one request at
    // the server at a time (owed Events aside), as a client writing in turn does: sent
    // together they were two, which on a busy server makes every request wait longer (issue 55).
    publish.await;
    match write_status(ctx, w, hikawa, desired).await {
        Ok(written) => (applied.status, applied.resource_version) = written,
        // The Hikawa changed since the decision (a user's edit of its spec mid-word, most
        // often): its precondition refused the status, as it must. Not a failure: the words
        // and Events are written, the change comes through the watch, and the next decision
        // writes the status from what it shows (a reconcile error here backed the song off
        // and told of a failure for every edit that met a word in flight).
        Err(Error::Kube(kube::Error::Api(status))) if status.code == 409 => {
            applied.status = hikawa.status.clone().unwrap_or_default();
            applied.status_outdated = true;
        }
        Err(error) => return Err(error),
    }
    Ok(applied)
}

/// Hex digits of a module's digest, and of its decision's input digest, that a Said Event's
/// note carries: enough for a person to tell modules and decisions apart; the whole of both
/// is on the child (its decision annotation) and the module's in the Hikawa's status.
const NOTE_DIGEST_HEX: usize = 12;
const NOTE_INPUT_HEX: usize = 8;

/// A Said Event's note: the word (what `kubectl get events` shows first), then the module that
/// said it (name, version, a digest prefix) and the decision (`i=`, a prefix of its input
/// digest, as in the decision annotation of the child the Event's `related` names, which holds
/// the rest: entropy, time, status seen, replica). Short, as every word's Event is written to
/// and stored by the API server (issue 55): after the word, 68 bytes for the classic module
/// where the whole digest, the entropy and 16 hex of the input made 166.
fn said_note(word: &str, module: &ModuleIdentity, decision: Option<&Provenance>) -> String {
    let Some(d) = decision else { return word.to_string() };
    // The module's name and version are its own text: escaped.
    let name = crate::text::printable(&format!("{} {}", module.info.name, module.info.version), 256);
    let digest = match module.digest.strip_prefix("sha256:") {
        Some(hex) => format!("sha256:{}", hex.get(..NOTE_DIGEST_HEX).unwrap_or(hex)),
        // `native:<name>`: short already.
        None => module.digest.clone(),
    };
    format!("{word} · {name} ({digest}), decision i={}", d.input.get(..NOTE_INPUT_HEX).unwrap_or(&d.input))
}

/// A word's Said Event; if no connection carries it, it waits for the Hikawa's next reconcile.
async fn say(ctx: &Context, w: &Writer, hikawa: &Hikawa, uid: &str, word: String, child: ObjectReference) {
    if !w.events.publish(hikawa, EventType::Normal, "Said", &word, "Say", Some(child.clone())).await {
        ctx.pace.unsaid.push(uid, word, child);
    }
}

/// Merge-patch the status subresource, only if it changed (an unchanged write would wake
/// this Hikawa's watch for nothing). Fields the new status drops are sent as null, so the
/// stored status is exactly `desired`. Returns the status as stored, and the resourceVersion
/// it was stored at (`None` if nothing was written).
///
/// The patch carries the resourceVersion the decision was made from: a status computed from
/// an older Hikawa is refused (409) rather than written over a newer one, so a write that
/// lands late (a replica that lost its shard, a request held in the network) can never undo
/// what the shard's next holder wrote.
pub async fn write_status(ctx: &Context, w: &Writer, hikawa: &Hikawa, mut desired: HikawaStatus) -> Result<(HikawaStatus, Option<String>)> {
    desired.decided_by = Some(ctx.shards.identity.clone());
    if hikawa.status.as_ref() == Some(&desired) {
        return Ok((desired, None));
    }
    let patch = status_patch(hikawa, &desired);
    // Of the answer (the whole Hikawa) only the status and the resourceVersion are decoded.
    let written: lean::StatusOnly =
        lean::patch_status::<Hikawa, _, _>(&w.client, &hikawa.namespace().unwrap_or_default(), &hikawa.name_any(), &Patch::Merge(&patch)).await?;
    Ok((written.status.unwrap_or(desired), written.metadata.resource_version))
}

/// The status merge patch from `hikawa` (as the decision saw it) to `desired`, on the
/// condition that the Hikawa is still at the resourceVersion the decision saw. Only what
/// changed: the precondition makes the status it is applied to the one it was computed from.
fn status_patch(hikawa: &Hikawa, desired: &HikawaStatus) -> serde_json::Value {
    serde_json::json!({
        "metadata": { "resourceVersion": hikawa.resource_version() },
        "status": changed_patch(hikawa.status.as_ref(), desired),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_valid_for_every_admitted_name() {
        assert_eq!(label_value("hikawa-sample"), "hikawa-sample");
        let at_limit = "a".repeat(63);
        assert_eq!(label_value(&at_limit), at_limit);
        for name in ["b".repeat(64), format!("{}.x-y", "c".repeat(200)), "d".repeat(240)] {
            let value = label_value(&name);
            assert_eq!(value.len(), 63, "{value}");
            assert!(value.starts_with(&name[..52]));
            assert!(value.chars().last().unwrap().is_ascii_alphanumeric());
        }
        assert_ne!(label_value(&format!("{}1", "e".repeat(70))), label_value(&format!("{}2", "e".repeat(70))), "distinct");
    }

    #[test]
    fn a_said_note_names_the_word_the_module_and_the_decision_in_few_bytes() {
        let module = ModuleIdentity {
            info: zundoko_rules::ModuleInfo { name: "zundoko-classic".into(), version: "0.1.0".into(), description: String::new() },
            digest: format!("sha256:{}", "9f2c".repeat(16)),
            size: 1,
        };
        let decision = Provenance {
            module: module.digest.clone(),
            contract: "0.1.0".into(),
            entropy: u64::MAX,
            now: 1_500,
            generation: 1,
            status: Default::default(),
            replica: "r".into(),
            input: "5be0".repeat(16),
        };
        let note = said_note("Zun", &module, Some(&decision));
        assert_eq!(note, "Zun · zundoko-classic 0.1.0 (sha256:9f2c9f2c9f2c), decision i=5be05be0");
        assert_eq!(note.split(" · ").next(), Some("Zun"), "the word first, as readers split it");
        assert!(note.len() <= 3 + 75, "{} bytes", note.len());
        // Rules linked into the host: their digest is their name.
        let native = ModuleIdentity { digest: "native:classic".into(), ..module };
        assert_eq!(said_note("Doko", &native, Some(&decision)), "Doko · zundoko-classic 0.1.0 (native:classic), decision i=5be05be0");
        // An Event sent again by another sender knows no decision: the word alone.
        assert_eq!(said_note("Zun", &native, None), "Zun");
    }

    #[test]
    fn a_status_is_written_only_over_the_hikawa_it_was_decided_from() {
        let mut hikawa = Hikawa::new("h", crate::crd::HikawaSpec::default());
        hikawa.metadata.resource_version = Some("41".into());
        hikawa.status = Some(HikawaStatus { num_zundokos_said: 3, ..HikawaStatus::default() });
        let patch = status_patch(&hikawa, &HikawaStatus { num_zundokos_said: 4, ..HikawaStatus::default() });
        assert_eq!(patch["metadata"]["resourceVersion"], "41", "a precondition: a late or stale write is refused (409)");
        assert_eq!(patch["status"]["numZundokosSaid"], 4);
        assert_eq!(patch["status"].as_object().map(|s| s.len()), Some(1), "only what changed: {patch}");
    }
}
