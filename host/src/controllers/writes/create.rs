//! Creating a child under its owner: the child is created with an owner reference; one
//! already there and controlled by the same owner (a retried or restarted reconcile, a cache
//! that lags) is done; one held by anything else is refused.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::core::NamespaceResourceScope;
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::controllers::error::{Error, Result};
use crate::controllers::writes::lean;

/// Create a child. Already there and controlled by this Hikawa (a retried or restarted
/// reconcile, or a cache that lags) is done; held by anything else is [`Error::ChildNameTaken`].
/// Returns a reference to the child if this call created it.
pub async fn create<K>(client: &Client, ns: &str, object: &K, owner_uid: &str) -> Result<Option<ObjectReference>>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    // Of the answer only what a reference to the child needs is decoded.
    let error = match lean::create::<K, lean::Created>(client, ns, object).await {
        Ok(created) => return Ok(Some(created.object_ref::<K>())),
        Err(kube::Error::Api(status)) if status.is_already_exists() => status,
        Err(e) => return Err(e.into()),
    };
    let name = object.name_any();
    let existing = Api::<K>::namespaced(client.clone(), ns).get(&name).await?;
    let controller = existing.owner_references().iter().find(|r| r.controller == Some(true));
    if controller.is_some_and(|r| r.uid == owner_uid) {
        return Ok(None);
    }
    let holder = match controller {
        Some(r) => format!("it is controlled by {} {} (uid {})", r.kind, r.name, r.uid),
        None => "it has no controller".to_string(),
    };
    tracing::debug!(%error, "child name taken");
    Err(Error::ChildNameTaken { child: format!("{} {}/{}", K::kind(&()), object.namespace().unwrap_or_default(), name), holder })
}

