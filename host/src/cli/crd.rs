//! `crd`: print the CustomResourceDefinitions (Hikawa, Zundoko, Kiyoshi, ZundokoRules) as YAML.

use anyhow::Result;

/// Write every CRD, as `make deploy` applies them.
pub fn crd(out: &mut dyn std::io::Write) -> Result<()> {
    write!(out, "{}", crate::crd::all_yaml()?)?;
    Ok(())
}
