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
    let engine = SandboxEngine::new(limits)?;
    let code = engine.engine().precompile_component(&bytes).map_err(|e| anyhow::anyhow!("{e:#}"))?;
    // The code goes back to the operator on stdout: the child never sees the cache (nor its key).
    let mut stdout = std::io::stdout().lock();
    std::io::Write::write_all(&mut stdout, &code).and_then(|()| std::io::Write::flush(&mut stdout)).context("handing the code back on stdout")
}
