//! `compile-module` (internal): the compiler process's whole life, the child `run` starts to
//! compile a big module within --max-compile-mib (`supply/sandbox/compiler_process.rs` is its
//! other end).

use anyhow::{Context, Result};

use crate::cli::args::CompileModuleArgs;
use crate::supply::sandbox::{SandboxEngine, SandboxLimits};

/// `compile-module`: the compiler process's whole life.
pub fn compile_module(args: &CompileModuleArgs) -> Result<()> {
    use std::io::Read as _;
    crate::supply::sandbox::compiler_process::limit_own_memory(args.max_compile_mib << 20)
        .context("cannot set the compiler process's memory limit")?;
    let limits: SandboxLimits = serde_json::from_str(&args.limits_json).context("--limits-json")?;
    let mut bytes = Vec::new();
    std::io::stdin().read_to_end(&mut bytes).context("reading the module from stdin")?;
    let engine = SandboxEngine::new(limits)?.with_compiled_cache(&args.cache_dir)?;
    let cache = engine.compiled_cache().expect("just set");
    cache.compile_into(engine.engine(), &bytes).map_err(|e| anyhow::anyhow!("{e:#}"))
}
