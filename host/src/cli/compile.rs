//! `compile-module` (internal): the clap plumbing of the compiler child, the process `run`
//! starts to compile a big module within --max-compile-mib. Both its ends, and the verb and
//! flags spelled here, are in `supply/sandbox/compiler_process.rs`.

use anyhow::Result;
use clap::Args;

use crate::supply::sandbox::compiler_process::{self, LIMITS_JSON, MAX_COMPILE_MIB};

/// The child's arguments, as the parent writes them (`CompilerProcess::compile_to`).
#[derive(Args, Debug)]
pub struct CompileModuleArgs {
    #[arg(long = MAX_COMPILE_MIB)]
    pub max_compile_mib: usize,
    /// The engine's limits, as the operator has them (the code must fit its engine).
    #[arg(long = LIMITS_JSON)]
    pub limits_json: String,
}

/// `compile-module`: the compiler process's whole life.
pub fn compile_module(args: &CompileModuleArgs) -> Result<()> {
    compiler_process::run_child(args.max_compile_mib, &args.limits_json)
}
