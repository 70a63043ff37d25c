//! The command line. Every flag has an environment-variable twin. The grammar is in `args`;
//! each verb in a file of its own: `run` (the operator), `check`, `simulate`, `test` (the
//! conformance suite, `conformance`), `push` and `keygen` (`oci`), `crd`, `explain` (a song's decisions
//! replayed from the cluster), and the internal
//! `compile-module` (`compile`). `simulate` and `test` run a module offline.

pub mod args;
pub mod check;
pub mod compile;
pub mod conformance;
pub mod crd;
pub mod explain;
pub mod grant;
pub mod oci;
pub mod run;
pub mod simulate;

use std::path::Path;

use anyhow::{Context, Result};

use crate::supply::sandbox::{RulesModule, SandboxEngine};

pub use args::*;
pub use check::check;
pub use compile::compile_module;
pub use conformance::test;
pub use crd::crd;
pub use grant::grant_reads;
pub use oci::{keygen, push, sign};
pub use run::run;

/// Read and load a module file, naming the file in any error.
pub fn load_module(engine: &SandboxEngine, path: &Path) -> Result<RulesModule> {
    let bytes = read_module_file(path, engine.limits().max_module_bytes)?;
    engine.load(&bytes).map_err(|e| rejected(path, e))
}

/// A module file's bytes, at most `cap` of them read (`--max-module-mib`): a file that is not
/// a regular one, or is bigger, is refused before it is buffered.
pub fn read_module_file(path: &Path, cap: usize) -> Result<Vec<u8>> {
    crate::supply::oci::given_files::read_within(path, cap as u64).with_context(|| format!("cannot read module {}", path.display()))
}

/// The one wording of a refused module: the file, the reason, the detail.
fn rejected(path: &Path, error: crate::supply::sandbox::GuestError) -> anyhow::Error {
    let detail = crate::text::printable(&error.to_string(), 1024);
    anyhow::anyhow!("module {} rejected ({}): {detail}", path.display(), error.reason())
}

/// `simulate`: the verb's files read and handed to [`simulate::simulate`] (kept here: that
/// file is the simulation itself).
pub fn simulate(args: &SimulateArgs, out: &mut dyn std::io::Write) -> Result<crate::cli::simulate::Song> {
    let engine = args.sandbox.cli_engine(args.cache_dir.as_deref())?;
    let module = load_module(&engine, &args.module)?;
    // As the API server takes a request: at most 3 MiB.
    let bytes = crate::supply::oci::given_files::read_within(&args.hikawa, 3 << 20)
        .with_context(|| format!("cannot read Hikawa manifest {}", args.hikawa.display()))?;
    let text = String::from_utf8(bytes).with_context(|| format!("Hikawa manifest {} is not UTF-8", args.hikawa.display()))?;
    let hikawa = crate::crd::parse_hikawa(&args.hikawa.display().to_string(), &text)?;
    let seed = args.seed.unwrap_or_else(rand::random);
    crate::cli::simulate::simulate(&module, &hikawa, seed, &args.sandbox.plan_limits(), args.max_decisions, out)
}

/// The log filter a verb runs with. `test` plays hundreds of songs, each twice (the determinism
/// check replays them): a rule set's own lines (`print`, `console.log`) would bury the report, so
/// with the default filter only its errors show (a trap's exception among them); name the
/// target (`--log info,guest=info`) to see every line.
pub fn log_filter(command: &Command, given: &str) -> String {
    match command {
        Command::Test(_) if given == DEFAULT_LOG_FILTER => format!("{given},guest=error"),
        _ => given.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn filter_for(argv: &[&str]) -> String {
        let cli = Cli::try_parse_from(argv).unwrap();
        log_filter(&cli.command, &cli.log_filter)
    }

    #[test]
    fn test_shows_a_rule_sets_own_lines_only_when_asked() {
        assert_eq!(filter_for(&["zundoko-operator", "test", "--module", "m.wasm"]), "info,guest=error");
        assert_eq!(filter_for(&["zundoko-operator", "--log", "info,guest=info", "test", "--module", "m.wasm"]), "info,guest=info");
        assert_eq!(filter_for(&["zundoko-operator", "simulate", "--module", "m.wasm", "--hikawa", "h.yaml"]), "info");
    }
}
