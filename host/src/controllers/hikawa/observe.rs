//! From Kubernetes objects to the rules' view of them (`zundoko_rules::Observed`).

use kube::ResourceExt;
use zundoko_rules::{Observed, TimestampMs};

use crate::crd::Hikawa;
use crate::controllers::hikawa::children::Owned;

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


/// The Hikawa and the children it owns, as the rules see them.
pub fn observe(hikawa: &Hikawa, children: Owned, now: TimestampMs, entropy: u64) -> Observed {
    Observed { hikawa: hikawa_view(hikawa), zundokos: children.zundokos, kiyoshi: children.kiyoshi, now, entropy }
}
