//! `check`: validate a module, from a file or a registry, and print its metadata, digest and
//! world, or why it is rejected.

use std::path::Path;

use anyhow::Result;

use crate::cli::args::CheckArgs;
use crate::cli::oci::fetch;
use crate::cli::rejected;
use crate::supply::fetch::Source;
use crate::supply::sandbox::WORLD;

pub async fn check(args: &CheckArgs, out: &mut dyn std::io::Write) -> Result<()> {
    let engine = args.sandbox.cli_engine(args.registry.cache_dir.as_deref())?;
    let (name, source) = match (&args.module, &args.reference) {
        (Some(path), _) => (path.display().to_string(), Source::File(path)),
        (None, Some(reference)) => (reference.to_string(), Source::Oci { reference, digest: None, retry: true, identity: false }),
        (None, None) => anyhow::bail!("give a module: --module FILE or a registry REF"),
    };
    let (bytes, lines) = fetch(source, &args.registry).await?;
    let module = engine.load(&bytes).map_err(|e| rejected(Path::new(&name), e))?;
    let id = module.identity();
    // Within bounds since `load` checked them; escaped all the same, as all module text is.
    let safe = |s: &str| crate::text::printable(s, 512);
    writeln!(out, "module:      {}", safe(&name))?;
    for line in lines {
        writeln!(out, "{}", safe(&line))?;
    }
    writeln!(out, "name:        {}", safe(&id.info.name))?;
    writeln!(out, "version:     {}", safe(&id.info.version))?;
    writeln!(out, "description: {}", safe(&id.info.description))?;
    writeln!(out, "world:       {WORLD}")?;
    writeln!(out, "digest:      {}", id.digest)?;
    writeln!(out, "size:        {} bytes", id.size)?;
    let limits = module.limits();
    writeln!(out, "budget:      {} fuel, {} MiB of memory per call", limits.fuel, limits.memory_bytes >> 20)?;
    let imports = if module.uses_wasi() { "the log, and WASI (served by the virtual WASI: no capabilities)" } else { "the log only" };
    writeln!(out, "imports:     {imports}")?;
    let decision = crate::supply::contract::rules::smoke_test(&module, &args.sandbox.plan_limits()).map_err(|e| rejected(Path::new(&name), e))?;
    writeln!(
        out,
        "smoke test:  ok ({} for a new Hikawa, {} fuel, {:?})",
        safe(&decision.outcome.as_ref().expect("smoke test passed").to_string()),
        decision.fuel_used.unwrap_or(0),
        decision.elapsed
    )?;
    Ok(())
}
