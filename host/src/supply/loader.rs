//! Compiled modules by digest. Every source of rules (the default module's file and
//! ConfigMap, each ZundokoRules source and candidate) hands its bytes here: a module is
//! compiled, checked and smoke-tested once, and the one `Arc` is shared by whoever serves it.
//! The last few modules stay compiled after they stop serving, so swapping back is cheap.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};

use crate::supply::contract::rules::smoke_test;
use crate::supply::sandbox::{GuestError, RulesModule, SandboxEngine, WhoCompiles};
use crate::supply::contract::plan_check::PlanLimits;

/// Modules kept compiled after they stop serving.
const RECENT_MODULES: usize = 4;

pub struct ModuleLoader {
    engine: SandboxEngine,
    plan_limits: PlanLimits,
    /// Every module compiled and still alive somewhere, by digest.
    compiled: Mutex<HashMap<String, Weak<RulesModule>>>,
    /// The last few modules loaded, held so that they stay compiled.
    recent: Mutex<VecDeque<Arc<RulesModule>>>,
}

impl ModuleLoader {
    pub fn new(engine: SandboxEngine, plan_limits: PlanLimits) -> Self {
        ModuleLoader { engine, plan_limits, compiled: Mutex::default(), recent: Mutex::default() }
    }

    /// The engine the modules run on (its call turns, by tenant).
    pub fn engine(&self) -> &SandboxEngine {
        &self.engine
    }

    /// The operator's limits a module runs with unless its budget asks otherwise.
    pub fn limits(&self) -> &crate::supply::sandbox::SandboxLimits {
        self.engine.limits()
    }

    pub fn plan_limits(&self) -> &PlanLimits {
        &self.plan_limits
    }

    /// The module compiled from bytes with this digest, if one is alive.
    pub fn get(&self, digest: &str) -> Option<Arc<RulesModule>> {
        let module = self.compiled.lock().unwrap_or_else(|p| p.into_inner()).get(digest)?.upgrade()?;
        self.remember(module.clone());
        Some(module)
    }

    /// Whether the module compiled from bytes with this digest serves now (held by a rule set,
    /// the default module, a call in flight), not only kept warm here: what the cache's
    /// collection spares.
    pub fn serves(&self, digest: &str) -> bool {
        let Some(module) = self.compiled.lock().unwrap_or_else(|p| p.into_inner()).get(digest).and_then(Weak::upgrade) else {
            return false;
        };
        let warm = self.recent.lock().unwrap_or_else(|p| p.into_inner()).iter().any(|m| Arc::ptr_eq(m, &module));
        // Beside `module` itself and the warm list's own reference, someone holds it.
        Arc::strong_count(&module) > 1 + usize::from(warm)
    }

    /// The module for these bytes (`digest` is their `sha256:<hex>`): compiled, checked
    /// against the world and smoke-tested, or the one already alive. Blocking (compiling
    /// takes tens of milliseconds): call it off the async runtime.
    pub fn load(&self, bytes: &[u8], digest: &str) -> Result<Arc<RulesModule>, GuestError> {
        self.load_for(WhoCompiles::Unnamed, bytes, digest)
    }

    /// [`load`](Self::load) for `who`: its compile, if it needs one, waits its fair turn
    /// (the default module's first, then rule sets by their last turn: compile_queue.rs).
    pub fn load_for(&self, who: WhoCompiles, bytes: &[u8], digest: &str) -> Result<Arc<RulesModule>, GuestError> {
        if let Some(module) = self.get(digest) {
            return Ok(module);
        }
        // The smoke test's call too is the tenant's (turns.rs reads who loads on this thread).
        let module = who.around(|| -> Result<RulesModule, GuestError> {
            let module = self.engine.load(bytes)?;
            smoke_test(&module, &self.plan_limits)?;
            Ok(module)
        })?;
        let module = Arc::new(module);
        let mut compiled = self.compiled.lock().unwrap_or_else(|p| p.into_inner());
        compiled.retain(|_, m| m.strong_count() > 0);
        compiled.insert(module.identity().digest.clone(), Arc::downgrade(&module));
        drop(compiled);
        self.remember(module.clone());
        Ok(module)
    }

    /// Modules compiled and alive, and the bytes of their compiled code.
    pub fn footprint(&self) -> (usize, usize) {
        let compiled = self.compiled.lock().unwrap_or_else(|p| p.into_inner());
        compiled.values().filter_map(Weak::upgrade).fold((0, 0), |(n, bytes), m| (n + 1, bytes + m.code_bytes()))
    }

    fn remember(&self, module: Arc<RulesModule>) {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent.retain(|m| m.identity().digest != module.identity().digest);
        recent.push_front(module);
        recent.truncate(RECENT_MODULES);
    }
}
