//! From Kubernetes objects to the rules' view of them (`zundoko_rules::Observed`).

use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use zundoko_rules::naming::{kiyoshi_name, zundoko_name};
use zundoko_rules::{Observed, Said, TimestampMs};

use crate::crd::{Hikawa, Kiyoshi, Zundoko};

/// The Hikawa as the rules see it.
pub fn hikawa_view(hikawa: &Hikawa) -> zundoko_rules::Hikawa {
    let status = hikawa.status.clone().unwrap_or_default();
    zundoko_rules::Hikawa {
        namespace: hikawa.namespace().unwrap_or_default(),
        name: hikawa.name_any(),
        uid: hikawa.uid().unwrap_or_default(),
        generation: hikawa.metadata.generation.unwrap_or(0),
        created_at: hikawa.metadata.creation_timestamp.as_ref().map(|t| t.0.as_millisecond()),
        interval_millis: hikawa.spec.interval_millis,
        // BTreeMap: already sorted by key, as the contract promises.
        params: hikawa.spec.params.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        status: zundoko_rules::HikawaStatus {
            num_zundokos_said: status.num_zundokos_said,
            kiyoshied: status.kiyoshied,
            phase: status.phase,
        },
    }
}


/// Annotation the host puts on every child: when it was said, to the millisecond.
/// (`creationTimestamp` has one-second resolution: too coarse for `intervalMillis`.)
pub const SAID_AT: &str = "zundokokiyoshi.kaitoy.github.com/said-at";

/// A child's time: the annotation, else its creationTimestamp.
fn said_at(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<TimestampMs> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(SAID_AT))
        .and_then(|s| s.parse::<jiff::Timestamp>().ok())
        .or_else(|| meta.creation_timestamp.as_ref().map(|t| t.0))
        .map(|t| t.as_millisecond())
}

/// Is this child controlled by this Hikawa (and not by an earlier one of the same name)?
fn owned_by(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, uid: &str) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && r.uid == uid)
}

/// The Hikawa and its children as the reflector caches hold them. Children are looked up by
/// their deterministic names (index order comes from the name, never from timestamps), up to
/// one past what the status claims, so a gap left by a deleted child is seen, not skipped.
pub fn observe(
    hikawa: &Hikawa,
    zundokos: &Store<Zundoko>,
    kiyoshis: &Store<Kiyoshi>,
    now: TimestampMs,
    entropy: u64,
) -> Observed {
    let view = hikawa_view(hikawa);
    let ns = view.namespace.as_str();
    let mut said = Vec::new();
    let claimed = view.status.num_zundokos_said;
    let mut index = 1u32;
    loop {
        let name = zundoko_name(&view.name, index);
        match zundokos.get(&ObjectRef::new(&name).within(ns)).filter(|z| owned_by(&z.metadata, &view.uid)) {
            Some(z) => said.push(Said { name, index, word: z.spec.say.clone(), said_at: said_at(&z.metadata) }),
            None if index > claimed => break,
            None => {}
        }
        index += 1;
    }
    let kiyoshi_name = kiyoshi_name(&view.name);
    let kiyoshi = kiyoshis
        .get(&ObjectRef::new(&kiyoshi_name).within(ns))
        .filter(|k| owned_by(&k.metadata, &view.uid))
        .map(|k| Said {
            name: kiyoshi_name,
            index: said.len() as u32 + 1,
            word: k.spec.say.clone(),
            said_at: said_at(&k.metadata),
        });
    Observed { hikawa: view, zundokos: said, kiyoshi, now, entropy }
}
