//! The operator's trusted keys (`--trusted-keys`), as they are now: read at start, read again
//! as the files change (every [`KEYS_POLL`], by a task of their own that the operator and the
//! rule set controller start, once per process), so a key removed stops verifying without a
//! restart: for rule sets and for the default module alike, on a standby replica too. Unreadable (a key file gone bad, none left):
//! nothing verifies until they are readable again; removing keys never switches signatures off.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use super::signature::TrustedKey;

/// How often `--trusted-keys` is read again.
pub const KEYS_POLL: Duration = Duration::from_secs(1);

pub struct OperatorKeys {
    /// Where they are read from; none: they are fixed.
    paths: Vec<PathBuf>,
    keys: RwLock<Arc<Vec<TrustedKey>>>,
    /// Why they cannot be read now, if they cannot.
    unreadable: RwLock<Option<String>>,
    /// Counts the changes, for those who verify again when they change.
    changed: tokio::sync::watch::Sender<u64>,
    /// Whether the task reading them again runs.
    watching: AtomicBool,
}

impl OperatorKeys {
    pub fn new(keys: Vec<TrustedKey>, paths: Vec<PathBuf>) -> Self {
        OperatorKeys { paths, keys: RwLock::new(Arc::new(keys)), unreadable: RwLock::default(), changed: tokio::sync::watch::channel(0).0, watching: AtomicBool::new(false) }
    }

    /// Read the paths again every [`KEYS_POLL`] from now on, until the keys are dropped
    /// (once, however many ask; nothing to do if the keys are fixed). Within a tokio runtime.
    pub fn keep_current(self: &Arc<Self>) {
        if self.paths.is_empty() || self.watching.swap(true, Ordering::SeqCst) {
            return;
        }
        let keys = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(KEYS_POLL).await;
                let Some(keys) = keys.upgrade() else { return };
                if keys.reload() {
                    tracing::info!(keys = ?keys.current().iter().map(|k| k.name.clone()).collect::<Vec<_>>(), unreadable = ?keys.unreadable(), "--trusted-keys changed: what they verified is verified again");
                }
            }
        });
    }

    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    pub fn current(&self) -> Arc<Vec<TrustedKey>> {
        self.keys.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Why nothing verifies now, if the keys cannot be read.
    pub fn unreadable(&self) -> Option<String> {
        self.unreadable.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Trust `keys` from now on; whether that changed anything.
    pub fn set(&self, keys: Vec<TrustedKey>) -> bool {
        let moved = {
            let mut now = self.keys.write().unwrap_or_else(|p| p.into_inner());
            let moved = **now != keys;
            if moved {
                *now = Arc::new(keys);
            }
            moved
        };
        let was_unreadable = self.unreadable.write().unwrap_or_else(|p| p.into_inner()).take().is_some();
        let changed = moved || was_unreadable;
        if changed {
            self.changed.send_modify(|n| *n += 1);
        }
        changed
    }

    /// Read the paths again; whether what is trusted changed.
    pub fn reload(&self) -> bool {
        self.reload_with(TrustedKey::load)
    }

    /// [`reload`](Self::reload), each path read by `load`. A read that fails is tried once more
    /// before the keys are called unreadable: a mounted Secret read while the kubelet swaps its
    /// `..data` link (a key listed from the old version, gone in the new) fails once, and
    /// calling every key unreadable then would flap every rule set and the default module.
    fn reload_with(&self, mut load: impl FnMut(&Path) -> Result<Vec<TrustedKey>, String>) -> bool {
        let mut read_all = || -> Result<Vec<TrustedKey>, String> {
            let mut keys = Vec::new();
            for path in &self.paths {
                keys.extend(load(path)?);
            }
            Ok(keys)
        };
        match read_all().or_else(|_| read_all()) {
            Ok(keys) => self.set(keys),
            Err(why) => self.fail(why),
        }
    }

    fn fail(&self, why: String) -> bool {
        let was = self.unreadable.write().unwrap_or_else(|p| p.into_inner()).replace(why.clone());
        if was.as_ref() == Some(&why) {
            return false;
        }
        tracing::warn!(error = %why, "--trusted-keys cannot be read: no module from a registry verifies until it can");
        self.changed.send_modify(|n| *n += 1);
        true
    }

    /// The keys a module with a rule set's own `extra` keys must verify with now, as one
    /// fingerprint (`None`: no key, nothing is verified): a verdict made under another one
    /// no longer holds.
    pub fn trust(&self, extra: &[TrustedKey]) -> Option<String> {
        if let Some(why) = self.unreadable() {
            return Some(format!("unreadable: {why}"));
        }
        let operator = self.current();
        if operator.is_empty() && extra.is_empty() {
            return None;
        }
        let set = |keys: &[TrustedKey]| {
            let mut prints: Vec<String> = keys.iter().map(TrustedKey::fingerprint).collect();
            prints.sort();
            prints.dedup();
            prints.join(",")
        };
        Some(format!("operator[{}] own[{}]", set(&operator), set(extra)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supply::oci::SignKey;

    #[test]
    fn keys_read_again_change_the_trust_and_unreadable_keys_verify_nothing() {
        let dir = std::env::temp_dir().join(format!("zundoko-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (SignKey::generate(), SignKey::generate());
        std::fs::write(dir.join("a.pub"), a.public_pem()).unwrap();
        let keys = OperatorKeys::new(TrustedKey::load(&dir).unwrap(), vec![dir.clone()]);
        let changed = keys.subscribe();
        let with_a = keys.trust(&[]);
        assert!(!keys.reload(), "nothing changed");
        assert!(!changed.has_changed().unwrap());
        std::fs::remove_file(dir.join("a.pub")).unwrap();
        std::fs::write(dir.join("b.pub"), b.public_pem()).unwrap();
        assert!(keys.reload());
        assert!(changed.has_changed().unwrap());
        assert_ne!(keys.trust(&[]), with_a, "another key: another trust");
        std::fs::remove_file(dir.join("b.pub")).unwrap();
        assert!(keys.reload(), "no key left");
        assert!(keys.unreadable().is_some_and(|why| why.contains("no trusted key")), "{:?}", keys.unreadable());
        assert!(keys.trust(&[]).is_some_and(|t| t.starts_with("unreadable")), "never `None` (no keys: nothing checked)");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_key_read_that_fails_once_is_tried_again_before_the_keys_are_unreadable() {
        let key = SignKey::generate();
        let good = || Ok(vec![key.trusted("a.pub")]);
        let keys = OperatorKeys::new(Vec::new(), vec![PathBuf::from("/keys/a.pub"), PathBuf::from("/keys/b.pub")]);
        // The second path fails once, as a key listed before the kubelet's `..data` swap and
        // read after it does: the next read finds the new version whole.
        let mut reads = 0;
        let swapping = |_: &Path| {
            reads += 1;
            if reads == 2 { Err("cannot read trusted key /keys/b.pub: No such file or directory".to_string()) } else { good() }
        };
        assert!(keys.reload_with(swapping), "the keys read");
        assert_eq!((keys.unreadable(), keys.current().len()), (None, 2), "one failed read is not an unreadable key");
        // A key that stays unreadable is: nothing verifies.
        let gone = |_: &Path| -> Result<Vec<TrustedKey>, String> { Err("cannot read trusted key /keys/a.pub: gone".into()) };
        assert!(keys.reload_with(gone));
        assert!(keys.unreadable().is_some_and(|why| why.contains("gone")), "{:?}", keys.unreadable());
    }
}
