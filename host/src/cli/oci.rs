//! The registry verbs: `push` (check, sign if asked, publish), `keygen` (a signing key pair),
//! `sign` (a module file's signature, for `--require-signatures`), and the fetch `check` uses
//! for a module file or a registry reference.

use anyhow::{Context, Result};
use oci_client::secrets::RegistryAuth;

use crate::cli::args::{KeygenArgs, PushArgs, RegistryArgs, SignArgs};
use crate::cli::rejected;
use crate::supply::fetch::{Checks, Source, fetch_module};
use crate::supply::sandbox::SandboxEngine;

/// A module from a file or a registry (`fetch_module`: a registry's checked against its digest
/// and signature): its bytes, and the lines that say where it came from.
pub(crate) async fn fetch(source: Source<'_>, registry: &RegistryArgs) -> Result<(Vec<u8>, Vec<String>)> {
    let Source::Oci { reference, .. } = source else {
        // A file: no registry asked, so its flags are not read either, unless it must be signed.
        let keys = match registry.require_signatures {
            true => Some(crate::supply::oci::Registry::new(registry.settings()?).map_err(anyhow::Error::msg)?),
            false => None,
        };
        let fetched = fetch_module(source, &RegistryAuth::Anonymous, &[], keys.as_deref(), &Checks::default())
            .await
            .map_err(|p| anyhow::anyhow!("refused ({}): {}", p.reason, p.message))?;
        let lines = fetched.signed_by.iter().map(|signer| format!("signed by:   {signer}")).collect();
        return Ok((fetched.bytes, lines));
    };
    let settings = registry.settings()?;
    let auth = registry.auth(reference)?;
    let client = crate::supply::oci::Registry::new(settings).map_err(anyhow::Error::msg)?;
    let fetched = fetch_module(source, &auth, &[], Some(&client), &Checks::default())
        .await
        .map_err(|p| anyhow::anyhow!("{reference} refused ({}): {}", p.reason, p.message))?;
    let pinned = fetched.pinned.as_ref().expect("a registry's module is pinned");
    let mut lines = vec![format!("reference:   {reference}"), format!("pinned:      {pinned}")];
    // With trusted keys a module is fetched only if one verified: no signer means no keys.
    lines.push(match &fetched.signed_by {
        Some(signer) => format!("signed by:   {signer}"),
        None => "signature:   not checked (no --trusted-keys)".into(),
    });
    if fetched.from_cache {
        lines.push("from:        the cache (--cache-dir)".into());
    }
    Ok((fetched.bytes, lines))
}

/// `push`: check the module as `check` does, then publish it (and its signature).
pub async fn push(args: &PushArgs, out: &mut dyn std::io::Write) -> Result<()> {
    let engine = SandboxEngine::new(args.sandbox.sandbox_limits())?;
    let bytes = crate::cli::read_module_file(&args.module, engine.limits().max_module_bytes)?;
    let module = engine.load(&bytes).map_err(|e| rejected(&args.module, e))?;
    crate::supply::contract::rules::smoke_test(&module, &args.sandbox.plan_limits()).map_err(|e| rejected(&args.module, e))?;
    let sign = match &args.sign {
        Some(path) => Some(crate::supply::oci::SignKey::load(path).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let settings = args.registry.settings()?;
    let auth = args.registry.auth(&args.reference)?;
    let registry = crate::supply::oci::Registry::new(settings).map_err(anyhow::Error::msg)?;
    let info = &module.identity().info;
    let digest = registry
        .push(&args.reference, &bytes, &info.name, &info.version, sign.as_ref(), &auth)
        .await
        .map_err(|e| anyhow::anyhow!("cannot push to {} ({}): {e}", args.reference, e.reason()))?;
    let safe = |s: &str| crate::text::printable(s, 512);
    writeln!(out, "pushed:      {} {} ({} bytes, module {})", safe(&info.name), safe(&info.version), bytes.len(), module.identity().digest)?;
    writeln!(out, "reference:   {}", args.reference)?;
    writeln!(out, "pinned:      {}", args.reference.pinned(&digest))?;
    if let Some(key) = &sign {
        writeln!(out, "signed:      {}", key.trusted(&args.sign.as_ref().expect("a key was given").display().to_string()).name)?;
    }
    Ok(())
}

/// `keygen`: a new signing key pair, never overwriting one.
pub fn keygen(args: &KeygenArgs, out: &mut dyn std::io::Write) -> Result<()> {
    let key = crate::supply::oci::SignKey::generate();
    let (private, public) = (args.out.with_extension("key"), args.out.with_extension("pub"));
    for path in [&private, &public] {
        anyhow::ensure!(!path.exists(), "{} exists: not overwriting a key", path.display());
    }
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&private).with_context(|| format!("cannot write {}", private.display()))?;
    file.write_all(key.private_pem().as_bytes())?;
    std::fs::write(&public, key.public_pem()).with_context(|| format!("cannot write {}", public.display()))?;
    writeln!(out, "private key: {} (sign with: zundoko-operator push --sign {} ...)", private.display(), private.display())?;
    writeln!(out, "public key:  {} (trust it: --trusted-keys, or a Secret mounted there)", public.display())?;
    writeln!(out, "fingerprint: {}", key.trusted("key").fingerprint())?;
    Ok(())
}

/// `sign`: a module file's signature over its SHA-256, written beside it (MODULE.sig, what a
/// mounted ConfigMap's MODULE.sig entry is) and printed as the ConfigMap annotation.
pub fn sign(args: &SignArgs, out: &mut dyn std::io::Write) -> Result<()> {
    let key = crate::supply::oci::SignKey::load(&args.key).map_err(anyhow::Error::msg)?;
    let bytes = crate::cli::read_module_file(&args.module, crate::supply::sandbox::SandboxLimits::default().max_module_bytes)?;
    let digest = crate::supply::digest(&bytes);
    let signature = crate::supply::oci::signature::sign_digest(&key, &digest).map_err(anyhow::Error::msg)?;
    let sidecar = crate::supply::fetch::signature_beside(&args.module);
    std::fs::write(&sidecar, format!("{signature}\n")).with_context(|| format!("cannot write {}", sidecar.display()))?;
    let key_name = args.module.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    writeln!(out, "module:      {} ({digest})", args.module.display())?;
    writeln!(out, "signed by:   {}", key.trusted(&args.key.display().to_string()).name)?;
    writeln!(out, "signature:   {} (beside the module: mount it with it)", sidecar.display())?;
    writeln!(out, "annotation:  {}{key_name}={signature}", crate::supply::fetch::SIGNATURE_ANNOTATION_PREFIX)?;
    Ok(())
}
