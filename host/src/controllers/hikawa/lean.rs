//! Lean decoding: the objects the Hikawa controller reads from its watches, with only the
//! fields it uses. The rest, `managedFields` above all (a third to a half
//! of a small object, and a tree of maps once decoded), is skipped by the JSON parser and never
//! allocated, instead of being decoded and then dropped.
//!
//! - A Hikawa ([`LeanHikawa`]) decodes to the same `Hikawa` the full decoder gives, less the
//!   metadata no decision, status or Event reads (managedFields, labels, annotations, owner
//!   references, finalizers): exactly what the Hikawa cache used to keep after dropping them.
//! - A child ([`LeanChild`]) keeps its name, namespace, uid, resourceVersion, owner references,
//!   the `said-at` annotation and its word.
//!
//! The answers to the writes are decoded lean too, in `controllers/writes/lean.rs`.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::crd::SAID_AT;
use crate::crd::{Hikawa, HikawaSpec, HikawaStatus};

/// The metadata a Hikawa decision reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HikawaMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
}

fn hikawa_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let m = HikawaMeta::deserialize(d)?;
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        generation: m.generation,
        creation_timestamp: m.creation_timestamp,
        deletion_timestamp: m.deletion_timestamp,
        ..ObjectMeta::default()
    })
}

/// The metadata the child index and the controller read of a child.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ChildMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    #[serde(default, deserialize_with = "said_at_only")]
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<OwnerReference>>,
}

fn child_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let m = ChildMeta::deserialize(d)?;
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        creation_timestamp: m.creation_timestamp,
        deletion_timestamp: m.deletion_timestamp,
        annotations: m.annotations,
        owner_references: m.owner_references,
        ..ObjectMeta::default()
    })
}

/// Of the annotations, only `said-at` (kubectl's last-applied-configuration alone may be 256 KiB).
fn said_at_only<'de, D: Deserializer<'de>>(d: D) -> Result<Option<BTreeMap<String, String>>, D::Error> {
    struct SaidAt;
    impl<'de> Visitor<'de> for SaidAt {
        type Value = Option<BTreeMap<String, String>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of annotations or null")
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(self)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut kept = BTreeMap::new();
            while let Some(IsSaidAt(said_at)) = map.next_key()? {
                if said_at {
                    kept.insert(SAID_AT.to_string(), map.next_value::<String>()?);
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(Some(kept))
        }
    }
    d.deserialize_option(SaidAt)
}

/// An annotation key, compared with `said-at` without being copied.
struct IsSaidAt(bool);

impl<'de> Deserialize<'de> for IsSaidAt {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Key;
        impl Visitor<'_> for Key {
            type Value = IsSaidAt;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an annotation key")
            }
            fn visit_str<E>(self, key: &str) -> Result<IsSaidAt, E> {
                Ok(IsSaidAt(key == SAID_AT))
            }
        }
        d.deserialize_str(Key)
    }
}

/// A Hikawa as its watch delivers it, decoded leanly; [`LeanHikawa::into_inner`] is the Hikawa.
#[derive(Clone, Debug, Deserialize)]
pub struct LeanHikawa {
    #[serde(deserialize_with = "hikawa_meta")]
    metadata: ObjectMeta,
    spec: HikawaSpec,
    #[serde(default)]
    status: Option<HikawaStatus>,
}

impl LeanHikawa {
    pub fn into_inner(self) -> Hikawa {
        Hikawa { metadata: self.metadata, spec: self.spec, status: self.status }
    }
}

impl Resource for LeanHikawa {
    type DynamicType = ();
    type Scope = <Hikawa as Resource>::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        Hikawa::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        Hikawa::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        Hikawa::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        Hikawa::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// A watch event of lean Hikawas as one of Hikawas.
pub fn hikawa_event(event: kube::runtime::watcher::Event<LeanHikawa>) -> kube::runtime::watcher::Event<Hikawa> {
    use kube::runtime::watcher::Event;
    match event {
        Event::Apply(h) => Event::Apply(h.into_inner()),
        Event::Delete(h) => Event::Delete(h.into_inner()),
        Event::Init => Event::Init,
        Event::InitApply(h) => Event::InitApply(h.into_inner()),
        Event::InitDone => Event::InitDone,
    }
}

/// A child's spec: its word.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct ChildSpec {
    #[serde(default)]
    pub say: String,
}

/// A child of kind `K` (Zundoko or Kiyoshi) as its watch delivers it, decoded leanly.
#[derive(Deserialize)]
#[serde(bound = "")]
pub struct LeanChild<K> {
    #[serde(deserialize_with = "child_meta")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ChildSpec,
    #[serde(skip)]
    kind: PhantomData<fn() -> K>,
}

impl<K> Clone for LeanChild<K> {
    fn clone(&self) -> Self {
        LeanChild { metadata: self.metadata.clone(), spec: self.spec.clone(), kind: PhantomData }
    }
}

impl<K> fmt::Debug for LeanChild<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeanChild").field("metadata", &self.metadata).field("spec", &self.spec).finish()
    }
}

impl<K: Resource<DynamicType = ()>> Resource for LeanChild<K> {
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::writes::lean::{Created, StatusOnly};
    use crate::crd::Zundoko;
    use kube::ResourceExt;

    /// A Hikawa as kube-apiserver returns it after a kubectl apply and a status write.
    const HIKAWA: &str = r#"{"apiVersion":"zundokokiyoshi.kaitoy.github.com/v1beta1","kind":"Hikawa",
      "metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"big\":\"x\"}\n"},
        "creationTimestamp":"2026-11-22T22:00:00Z","generation":2,"labels":{"team":"a"},
        "managedFields":[{"apiVersion":"zundokokiyoshi.kaitoy.github.com/v1beta1","fieldsType":"FieldsV1",
          "fieldsV1":{"f:spec":{".":{},"f:intervalMillis":{}}},"manager":"kubectl","operation":"Update","time":"2026-11-22T22:00:00Z"}],
        "name":"h","namespace":"ns","finalizers":["x/y"],
        "ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"o","uid":"u-o"}],
        "resourceVersion":"42","uid":"u-h"},
      "spec":{"intervalMillis":100,"params":{"zuns":"3"}},
      "status":{"numZundokosSaid":2,"kiyoshied":false,"phase":"Singing","message":"m","observedGeneration":2,
        "lastWordTime":"2026-11-22T22:00:01.500Z","module":{"name":"zundoko-classic","version":"1.0.0","digest":"sha256:ab"},
        "conditions":[{"type":"Ready","status":"True","reason":"Decided","message":"ok","observedGeneration":2,"lastTransitionTime":"2026-11-22T22:00:01Z"}]}}"#;

    #[test]
    fn a_lean_hikawa_gives_the_rules_status_and_events_what_the_full_one_gives() {
        let full: Hikawa = serde_json::from_str(HIKAWA).unwrap();
        let lean = serde_json::from_str::<LeanHikawa>(HIKAWA).unwrap().into_inner();
        let children = crate::controllers::hikawa::children::Owned::default();
        assert_eq!(
            crate::controllers::hikawa::observe::observe(&lean, children.clone(), 5, 7),
            crate::controllers::hikawa::observe::observe(&full, children, 5, 7),
            "the rules see the same Hikawa"
        );
        assert_eq!(lean.spec, full.spec);
        assert_eq!(lean.status, full.status, "status, conditions included");
        assert_eq!(lean.object_ref(&()), full.object_ref(&()), "Events regard the same object");
        assert_eq!(lean.controller_owner_ref(&()), full.controller_owner_ref(&()), "children are owned the same way");
        assert_eq!(lean.metadata.generation, Some(2));
        assert_eq!(lean.resource_version().as_deref(), Some("42"));
        assert_eq!(lean.metadata.creation_timestamp, full.metadata.creation_timestamp);
        // What it leaves out.
        assert!(lean.metadata.managed_fields.is_none() && lean.metadata.annotations.is_none() && lean.metadata.labels.is_none());
        assert!(lean.metadata.owner_references.is_none() && lean.metadata.finalizers.is_none());
        // Being deleted is seen.
        let deleting = HIKAWA.replace(r#""generation":2,"#, r#""generation":2,"deletionTimestamp":"2026-11-22T22:00:05Z","#);
        assert!(serde_json::from_str::<LeanHikawa>(&deleting).unwrap().into_inner().metadata.deletion_timestamp.is_some());
        // Without a status.
        let new: serde_json::Value = serde_json::json!({"apiVersion": "zundokokiyoshi.kaitoy.github.com/v1beta1", "kind": "Hikawa",
            "metadata": {"name": "n", "namespace": "ns", "uid": "u"}, "spec": {"intervalMillis": 0}});
        assert_eq!(serde_json::from_value::<LeanHikawa>(new).unwrap().into_inner().status, None);
    }

    #[test]
    fn a_lean_child_keeps_its_word_time_and_owner() {
        let json = r#"{"apiVersion":"zundokokiyoshi.kaitoy.github.com/v1beta1","kind":"Zundoko",
          "metadata":{"annotations":{"other":"x","zundokokiyoshi.kaitoy.github.com/said-at":"2026-11-22T22:00:00.123Z"},
            "creationTimestamp":"2026-11-22T22:00:00Z","generation":1,"labels":{"zundokokiyoshi.kaitoy.github.com/hikawa":"h"},
            "managedFields":[{"manager":"zundoko-operator","operation":"Update","fieldsV1":{"f:spec":{".":{},"f:say":{}}}}],
            "name":"h-zundoko-001","namespace":"ns",
            "ownerReferences":[{"apiVersion":"zundokokiyoshi.kaitoy.github.com/v1beta1","blockOwnerDeletion":true,"controller":true,"kind":"Hikawa","name":"h","uid":"u-h"}],
            "resourceVersion":"43","uid":"u-z"},
          "spec":{"say":"Zun"}}"#;
        let full: Zundoko = serde_json::from_str(json).unwrap();
        let lean: LeanChild<Zundoko> = serde_json::from_str(json).unwrap();
        assert_eq!(lean.spec.say, full.spec.say);
        assert_eq!(lean.metadata.owner_references, full.metadata.owner_references);
        assert_eq!(lean.annotations().len(), 1);
        assert_eq!(lean.annotations().get(SAID_AT), full.annotations().get(SAID_AT));
        assert_eq!((lean.name_any(), lean.namespace(), lean.resource_version()), (full.name_any(), full.namespace(), full.resource_version()));
        assert!(lean.metadata.managed_fields.is_none() && lean.metadata.labels.is_none());
        assert_eq!(LeanChild::<Zundoko>::url_path(&(), Some("ns")), Zundoko::url_path(&(), Some("ns")));
        assert_eq!(LeanChild::<Zundoko>::kind(&()), "Zundoko");
        // Annotations null, or absent.
        let bare: LeanChild<Zundoko> = serde_json::from_value(serde_json::json!({"metadata": {"name": "h-zundoko-002", "annotations": null}, "spec": {"say": "Doko"}})).unwrap();
        assert_eq!((bare.metadata.annotations, bare.spec.say.as_str()), (None, "Doko"));
        // A created object's reference is what object_ref gives.
        let created: Created = serde_json::from_str(json).unwrap();
        assert_eq!(created.object_ref::<Zundoko>(), full.object_ref(&()));
    }

    #[test]
    fn a_status_answer_keeps_the_status_and_the_resource_version() {
        let full: Hikawa = serde_json::from_str(HIKAWA).unwrap();
        let only: StatusOnly = serde_json::from_str(HIKAWA).unwrap();
        assert_eq!(only.status, full.status);
        assert_eq!(only.metadata.resource_version.as_deref(), Some("42"));
    }
}
