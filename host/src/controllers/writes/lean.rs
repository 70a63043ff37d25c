//! Lean answers to the operator's writes: of a create's answer only what a reference to the new
//! object needs ([`Created`]), of a status write's only the status and the resourceVersion
//! ([`StatusOnly`]); the rest is skipped by the JSON parser and never allocated. The requests
//! are what `Api::create` and `Api::patch_status` send.

use std::fmt;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::crd::HikawaStatus;

/// The answer to a create, as far as a reference to the new object needs it.
#[derive(Debug, Deserialize)]
pub struct Created {
    metadata: CreatedMeta,
}

#[derive(Debug, Deserialize)]
struct CreatedMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
}

impl Created {
    /// What `Resource::object_ref` gives for the created object of kind `K`.
    pub fn object_ref<K: Resource<DynamicType = ()>>(self) -> ObjectReference {
        ObjectReference {
            name: self.metadata.name,
            namespace: self.metadata.namespace,
            uid: self.metadata.uid,
            api_version: Some(K::api_version(&()).to_string()),
            kind: Some(K::kind(&()).to_string()),
            ..ObjectReference::default()
        }
    }
}

/// The answer to a status write, as far as the status and the resourceVersion it was stored at
/// (the precondition of the next write decided from it).
#[derive(Debug, Deserialize)]
pub struct StatusOnly {
    #[serde(default)]
    pub metadata: VersionOnly,
    #[serde(default)]
    pub status: Option<HikawaStatus>,
}

/// Of an object's metadata, only its resourceVersion.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionOnly {
    pub resource_version: Option<String>,
}

/// Create `object` in `namespace`; the answer decoded as `T` (say [`Created`], or
/// `serde::de::IgnoredAny` when nothing of it is needed). What `Api::create` sends.
pub async fn create<K, T>(client: &Client, namespace: &str, object: &K) -> kube::Result<T>
where
    K: Resource<DynamicType = ()> + Serialize,
    T: DeserializeOwned,
{
    let body = serde_json::to_vec(object).map_err(kube::Error::SerdeError)?;
    let mut request = kube::core::Request::new(K::url_path(&(), Some(namespace)))
        .create(&PostParams::default(), body)
        .map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert("create");
    client.request::<T>(request).await
}

/// Patch the status subresource of the `K` named `name` in `namespace`; the answer decoded as
/// `T` (say [`StatusOnly`]). What `Api::patch_status` sends.
pub async fn patch_status<K, P, T>(client: &Client, namespace: &str, name: &str, patch: &Patch<P>) -> kube::Result<T>
where
    K: Resource<DynamicType = ()>,
    P: Serialize + fmt::Debug,
    T: DeserializeOwned,
{
    let mut request = kube::core::Request::new(K::url_path(&(), Some(namespace)))
        .patch_subresource("status", name, &PatchParams::default(), patch)
        .map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert("patch_status");
    client.request::<T>(request).await
}

