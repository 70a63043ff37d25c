//! Leader election through a coordination.k8s.io Lease (kube-lease-manager): of several
//! replicas only the holder reconciles; the others stand by and take over once the holder's
//! lease expires (or at once when it releases it on a graceful shutdown).

use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::sync::watch;
use tokio::task::JoinHandle;

#[derive(Clone, Debug)]
pub struct LeaderSettings {
    pub namespace: String,
    pub lease_name: String,
    /// This replica's name in the Lease's `holderIdentity`.
    pub identity: String,
    /// How long a lease lasts without renewal: the longest a dead leader blocks the others.
    pub duration_secs: u64,
    /// The holder renews this long before its lease would expire (also the clock skew tolerated).
    pub grace_secs: u64,
}

/// A running election: `leading` says whether this replica holds the lease now.
pub struct Election {
    pub leading: watch::Receiver<bool>,
    task: JoinHandle<kube_lease_manager::Result<LeaseManager>>,
}

impl Election {
    pub async fn start(client: Client, settings: &LeaderSettings) -> anyhow::Result<Election> {
        let manager = LeaseManagerBuilder::new(client, &settings.lease_name)
            .with_namespace(&settings.namespace)
            .with_identity(&settings.identity)
            .with_duration(settings.duration_secs)
            .with_grace(settings.grace_secs)
            .build()
            .await
            .map_err(|e| anyhow::anyhow!("cannot use the Lease {}/{}: {e}", settings.namespace, settings.lease_name))?;
        let (leading, task) = manager.watch().await;
        Ok(Election { leading, task })
    }

    /// Stop competing; the lease is released if held, so a standby takes over at once.
    pub async fn resign(self) {
        drop(self.leading);
        match tokio::time::timeout(std::time::Duration::from_secs(5), self.task).await {
            Ok(Ok(Ok(_))) => tracing::info!("released the leader Lease"),
            Ok(Ok(Err(error))) => tracing::warn!(%error, "could not release the leader Lease; it expires on its own"),
            Ok(Err(error)) => tracing::warn!(%error, "the Lease task failed"),
            Err(_) => tracing::warn!("releasing the leader Lease timed out; it expires on its own"),
        }
    }
}
