//! What readiness is made of: a module is loaded and, on the replica that reconciles, the
//! caches are synced (a standby replica is ready to take over). The module serving is asked
//! of a function given at start (plumbing knows nothing of the module supply above it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;


/// What readiness is made of.
pub struct Health {
    /// The digest of the module serving, if one is loaded.
    serving: Box<dyn Fn() -> Option<String> + Send + Sync>,
    reconciling: AtomicBool,
    caches_synced: AtomicBool,
    /// Shards held and their count (a replica holding none is a ready standby).
    shards: Mutex<(usize, u16)>,
    /// Why the API server could not be reached at start, while it cannot.
    api_unreachable: Mutex<Option<String>>,
    /// How instances are reset, as the self-check at start found (shown when ready).
    instance_reset: Mutex<Option<String>>,
    /// Why no module could be had at start (the registry of `--module-oci` cannot be asked, and
    /// why), said while none is loaded.
    no_module: Mutex<Option<String>>,
}

impl Health {
    /// `serving` gives the digest of the module serving, if one is loaded.
    pub fn new(serving: impl Fn() -> Option<String> + Send + Sync + 'static) -> Self {
        Health {
            serving: Box::new(serving),
            reconciling: AtomicBool::new(false),
            caches_synced: AtomicBool::new(false),
            shards: Mutex::new((0, 0)),
            api_unreachable: Mutex::default(),
            instance_reset: Mutex::default(),
            no_module: Mutex::default(),
        }
    }

    /// The controller started (true) or stopped (false) on this replica.
    pub fn set_reconciling(&self, on: bool) {
        // A new term starts with new caches; a stopped one has none.
        self.caches_synced.store(false, Ordering::SeqCst);
        self.reconciling.store(on, Ordering::SeqCst);
    }

    /// The API server does not answer yet (`Some(why)`), or does (`None`).
    pub fn set_api_unreachable(&self, why: Option<String>) {
        *self.api_unreachable.lock().unwrap_or_else(|e| e.into_inner()) = why;
    }

    /// What the fresh-instance self-check settled, as one line (`/readyz` shows it).
    pub fn set_instance_reset(&self, detail: String) {
        *self.instance_reset.lock().unwrap_or_else(|e| e.into_inner()) = Some(detail);
    }

    /// Why no module is loaded yet, said by `/readyz` until one is.
    pub fn set_no_module(&self, why: Option<String>) {
        *self.no_module.lock().unwrap_or_else(|e| e.into_inner()) = why;
    }

    pub fn set_shards(&self, held: usize, count: u16) {
        *self.shards.lock().unwrap_or_else(|e| e.into_inner()) = (held, count);
    }

    pub fn set_caches_synced(&self) {
        self.caches_synced.store(true, Ordering::SeqCst);
    }

    /// `Ok` when ready, else what is missing; either followed by how instances are reset.
    pub fn readiness(&self) -> Result<String, String> {
        let detail = |line: String| match self.instance_reset.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            Some(reset) => format!("{line}; {reset}"),
            None => line,
        };
        self.readiness_alone().map(detail).map_err(detail)
    }

    fn readiness_alone(&self) -> Result<String, String> {
        if let Some(why) = self.api_unreachable.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            return Err(format!("the API server does not answer yet: {why}"));
        }
        let Some(module) = (self.serving)() else {
            return Err(match self.no_module.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                Some(why) => format!("no rules module loaded yet: {why}"),
                None => "no rules module loaded yet".into(),
            });
        };
        match (self.reconciling.load(Ordering::SeqCst), self.caches_synced.load(Ordering::SeqCst)) {
            (true, true) => match *self.shards.lock().unwrap_or_else(|e| e.into_inner()) {
                (0, count) if count > 0 => Ok(format!("ok: standby with {module} (no shard of {count} held)")),
                (held, count) if held < count as usize => Ok(format!("ok: reconciling {held} of {count} shards with {module}")),
                _ => Ok(format!("ok: reconciling with {module}")),
            },
            (true, false) => Err("the caches of Zundokos and Kiyoshis are not synced yet".into()),
            (false, _) => Ok(format!("ok: standby with {module}")),
        }
    }
}
