//! Carrying out a checked plan: create the children (owned by the Hikawa), publish an Event
//! per word, and write the status through the status subresource when it changed.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use zundoko_rules::{ChildKind, Observed, Plan};

use crate::context::Context;
use crate::crd::{Hikawa, HikawaStatus, Kiyoshi, KiyoshiSpec, Zundoko, ZundokoSpec};
use crate::error::{Error, Result};
use crate::observe::SAID_AT;
use crate::sandbox::ModuleIdentity;
use crate::status;

/// Label on every child naming its Hikawa (for `kubectl get zundokos -l ...`).
pub const HIKAWA_LABEL: &str = "zundokokiyoshi.kaitoy.github.com/hikawa";

pub async fn apply(ctx: &Context, hikawa: &Hikawa, observed: &Observed, plan: &Plan, module: &ModuleIdentity) -> Result<()> {
    let ns = observed.hikawa.namespace.as_str();
    let owner = hikawa
        .controller_owner_ref(&())
        .ok_or_else(|| Error::MissingField(format!("Hikawa {ns}/{} has no uid", observed.hikawa.name)))?;
    let mut said_at = None;
    for say in plan.says() {
        let meta = ObjectMeta {
            name: Some(say.name.clone()),
            namespace: Some(ns.to_string()),
            owner_references: Some(vec![owner.clone()]),
            labels: Some(BTreeMap::from([(HIKAWA_LABEL.to_string(), observed.hikawa.name.clone())])),
            annotations: Some(BTreeMap::from([(SAID_AT.to_string(), status::rfc3339_millis(observed.now))])),
            ..ObjectMeta::default()
        };
        let created = match say.kind {
            ChildKind::Zundoko => {
                let child = Zundoko { metadata: meta, spec: ZundokoSpec { say: say.word.clone() } };
                create(&Api::namespaced(ctx.client.clone(), ns), &child).await?
            }
            ChildKind::Kiyoshi => {
                let child = Kiyoshi { metadata: meta, spec: KiyoshiSpec { say: say.word.clone() } };
                create(&Api::namespaced(ctx.client.clone(), ns), &child).await?
            }
        };
        if let Some(child) = created {
            said_at = Some(observed.now);
            // `related` names the child: it also keeps each word its own Event rather than a
            // count on the previous one (the recorder merges Events with equal keys).
            ctx.publish(hikawa, EventType::Normal, "Said", &say.word, "Say", Some(child)).await;
        }
    }
    let desired = status::after_plan(hikawa.status.as_ref(), observed.hikawa.generation, plan, said_at, module, observed.now);
    write_status(ctx, hikawa, desired).await
}

/// Create, treating "already exists" as done: a retried or restarted reconcile may find the
/// child it decided on before. Returns a reference to the child if this call created it.
async fn create<K>(api: &Api<K>, object: &K) -> Result<Option<ObjectReference>>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(created) => Ok(Some(created.object_ref(&()))),
        Err(kube::Error::Api(status)) if status.is_already_exists() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Merge-patch the status subresource, only if it changed: an unchanged write would wake
/// this Hikawa's watch for nothing.
pub async fn write_status(ctx: &Context, hikawa: &Hikawa, desired: HikawaStatus) -> Result<()> {
    if hikawa.status.as_ref() == Some(&desired) {
        return Ok(());
    }
    let api: Api<Hikawa> = Api::namespaced(ctx.client.clone(), &hikawa.namespace().unwrap_or_default());
    let patch = serde_json::json!({ "status": desired });
    api.patch_status(&hikawa.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

impl Context {
    /// Publish an Event on the Hikawa. Best effort: a lost Event must not fail the reconcile.
    pub async fn publish(&self, hikawa: &Hikawa, type_: EventType, reason: &str, note: &str, action: &str, related: Option<ObjectReference>) {
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note.chars().take(1024).collect()),
            action: action.into(),
            secondary: related,
        };
        if let Err(error) = self.recorder.publish(&event, &hikawa.object_ref(&())).await {
            tracing::warn!(hikawa = %hikawa.name_any(), %error, "could not publish an Event");
        }
    }
}
