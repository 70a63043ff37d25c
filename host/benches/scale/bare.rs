//! The bare client: the three writes of a word as a client that is not the operator makes
//! them (issue 55's measure on a real kube-apiserver), one after the other: create the child,
//! create its Said Event (its word as the note), merge-patch the Hikawa's status with what the
//! rules said (numZundokosSaid, kiyoshied, phase). Against it the operator's words/s show
//! what its own writes cost the server beyond the words' (bigger status and Event, managedFields,
//! watches, Leases).

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use zundoko_operator::crd::{Kiyoshi, KiyoshiSpec, Zundoko, ZundokoSpec};
use zundoko_rules::{ChildKind, Plan};

use super::*;

/// One word's writes, in turn. Returns the children created and whether the song is over.
pub(crate) async fn bare_word(client: &Client, hikawa: &Hikawa, plan: &Plan) -> (u64, bool) {
    let ns = hikawa.namespace().unwrap_or_default();
    let owner = hikawa.controller_owner_ref(&()).expect("a Hikawa as created, with its uid");
    let mut created = 0;
    let mut kiyoshi = false;
    for say in plan.says() {
        let meta = ObjectMeta {
            name: Some(say.name.clone()),
            namespace: Some(ns.clone()),
            owner_references: Some(vec![owner.clone()]),
            labels: Some([(zundoko_operator::controllers::hikawa::apply::HIKAWA_LABEL.to_string(), hikawa.name_any())].into()),
            ..ObjectMeta::default()
        };
        let child = match say.kind {
            ChildKind::Zundoko => {
                let z = Zundoko { metadata: meta, spec: ZundokoSpec { say: say.word.clone() } };
                Api::<Zundoko>::namespaced(client.clone(), &ns).create(&PostParams::default(), &z).await.map(|c| c.object_ref(&()))
            }
            ChildKind::Kiyoshi => {
                kiyoshi = true;
                let k = Kiyoshi { metadata: meta, spec: KiyoshiSpec { say: say.word.clone() } };
                Api::<Kiyoshi>::namespaced(client.clone(), &ns).create(&PostParams::default(), &k).await.map(|c| c.object_ref(&()))
            }
        }
        .expect("the API server takes the child");
        created += 1;
        let now = jiff::Timestamp::now();
        let event = Event {
            metadata: ObjectMeta { name: Some(format!("{}.{:x}", say.name, now.as_nanosecond())), namespace: Some(ns.clone()), ..ObjectMeta::default() },
            action: Some("Say".into()),
            reason: Some("Said".into()),
            note: Some(say.word.clone()),
            event_time: Some(MicroTime(now)),
            regarding: Some(hikawa.object_ref(&())),
            related: Some(child),
            reporting_controller: Some("zundokokiyoshi.kaitoy.github.com/bare".into()),
            reporting_instance: Some("bench-bare".into()),
            type_: Some("Normal".into()),
            ..Event::default()
        };
        Api::<Event>::namespaced(client.clone(), &ns).create(&PostParams::default(), &event).await.expect("the API server takes the Event");
    }
    if let Some(status) = plan.status() {
        let patch = serde_json::json!({"status": {"numZundokosSaid": status.num_zundokos_said, "kiyoshied": status.kiyoshied, "phase": status.phase}});
        Api::<Hikawa>::namespaced(client.clone(), &ns)
            .patch_status(&hikawa.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("the API server takes the status");
    }
    (created, kiyoshi)
}
