//! What a module may ask for beyond the operator's defaults. An interpreter needs far more
//! memory and fuel per call than a 36 KB Rust module, so a module may carry a budget in a
//! custom section named `zundoko:budget` (JSON: `{"memoryMiB": 96, "fuel": 400000000}`, either
//! key optional), which travels with its bytes from every source (file, ConfigMap, registry,
//! `check`, `test`, `simulate`). The operator grants it up to its ceilings (`--max-memory-mib`,
//! `--max-fuel`); a module asking for more is refused with the reason, never clamped: a module
//! that was tested with 96 MiB and silently ran with 64 would fail in ways nobody tested.

use serde::Deserialize;

use super::error::GuestError;
use super::limits::SandboxLimits;
use crate::text::printable;

/// The custom section's name.
pub const SECTION: &str = "zundoko:budget";
/// A budget section is a few dozen bytes; a bigger one is not a budget.
const MAX_SECTION_BYTES: usize = 1024;

/// What a module asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Budget {
    #[serde(rename = "memoryMiB")]
    pub memory_mib: Option<u64>,
    pub fuel: Option<u64>,
    /// The size the module may be (what `test`'s size check holds it to), in MiB.
    #[serde(rename = "moduleMiB")]
    pub module_mib: Option<u64>,
}

/// The budget a component's bytes carry (the default if none): only top-level custom
/// sections count, not those of the core modules inside.
pub fn read(bytes: &[u8]) -> Result<Budget, GuestError> {
    let bad = |why: String| GuestError::BadModuleMetadata {
        field: "budget",
        why,
        value: String::new(),
    };
    let Some(payload) = top_level_custom_section(bytes, SECTION) else {
        return Ok(Budget::default());
    };
    if payload.len() > MAX_SECTION_BYTES {
        return Err(bad(format!(
            "the {SECTION} section is {} bytes, more than {MAX_SECTION_BYTES}",
            payload.len()
        )));
    }
    // serde's message quotes an unknown key as it is (control characters too): escaped.
    serde_json::from_slice(payload).map_err(|e| {
        bad(format!(
            "the {SECTION} section is not JSON like {{\"memoryMiB\": 96, \"fuel\": 400000000}}: {}",
            printable(&e.to_string(), MAX_SECTION_BYTES / 4)
        ))
    })
}

/// The limits a module with this budget runs under, or why it may not run.
pub fn grant(budget: Budget, defaults: &SandboxLimits) -> Result<SandboxLimits, GuestError> {
    let mut limits = defaults.clone();
    if let Some(mib) = budget.memory_mib {
        let ceiling = defaults.max_memory_bytes >> 20;
        if mib > ceiling as u64 || mib == 0 {
            return Err(GuestError::OverCeiling {
                what: "MiB of memory per call",
                asked: mib,
                ceiling: ceiling as u64,
                flag: "--max-memory-mib",
            });
        }
        limits.memory_bytes = (mib as usize) << 20;
    }
    if let Some(fuel) = budget.fuel {
        if fuel > defaults.max_fuel || fuel == 0 {
            return Err(GuestError::OverCeiling {
                what: "fuel per call",
                asked: fuel,
                ceiling: defaults.max_fuel,
                flag: "--max-fuel",
            });
        }
        limits.fuel = fuel;
    }
    if let Some(mib) = budget.module_mib {
        let ceiling = (defaults.max_module_bytes >> 20) as u64;
        if mib > ceiling || mib == 0 {
            return Err(GuestError::OverCeiling { what: "MiB of module size", asked: mib, ceiling, flag: "the sandbox's module ceiling" });
        }
        limits.module_bytes = (mib as usize) << 20;
    }
    Ok(limits)
}

/// The payload of the first top-level custom section called `name`, walking the
/// component's sections without descending into the modules inside.
fn top_level_custom_section<'a>(bytes: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let mut at = 8; // magic and version/layer
    while at < bytes.len() {
        let id = bytes[at];
        at += 1;
        let size = leb128(bytes, &mut at)? as usize;
        let section = bytes.get(at..at.checked_add(size)?)?;
        at += size;
        if id == 0 {
            let mut inner = 0;
            let name_len = leb128(section, &mut inner)? as usize;
            let section_name = section.get(inner..inner.checked_add(name_len)?)?;
            if section_name == name.as_bytes() {
                return section.get(inner + name_len..);
            }
        }
    }
    None
}

fn leb128(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..35).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// `bytes` with a budget section appended (what `scripts/set-budget.py` does): for tests.
pub fn with_section(bytes: &[u8], payload: &[u8]) -> Vec<u8> {
    append_custom_section(bytes.to_vec(), SECTION, payload)
}

/// `bytes` with a top-level custom section `name` holding `payload` appended: the same
/// component to the engine, other bytes (tests and benchmarks make distinct digests with it).
pub fn append_custom_section(mut bytes: Vec<u8>, name: &str, payload: &[u8]) -> Vec<u8> {
    fn leb(mut v: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            out.push(if v == 0 { byte } else { byte | 0x80 });
            if v == 0 {
                break;
            }
        }
    }
    let mut content = Vec::new();
    leb(name.len(), &mut content);
    content.extend_from_slice(name.as_bytes());
    content.extend_from_slice(payload);
    bytes.push(0);
    leb(content.len(), &mut bytes);
    bytes.extend_from_slice(&content);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";

    #[test]
    fn a_budget_is_read_from_its_section_and_granted_up_to_the_ceilings() {
        assert_eq!(read(EMPTY_COMPONENT).unwrap(), Budget::default());
        let asked = with_section(EMPTY_COMPONENT, br#"{"memoryMiB": 96, "fuel": 400000000}"#);
        let budget = read(&asked).unwrap();
        assert_eq!(budget, Budget { memory_mib: Some(96), fuel: Some(400_000_000), module_mib: None });
        let limits = grant(budget, &SandboxLimits::default()).unwrap();
        assert_eq!((limits.memory_bytes, limits.fuel), (96 << 20, 400_000_000));
        let too_much = grant(Budget { memory_mib: Some(4096), ..Budget::default() }, &SandboxLimits::default()).unwrap_err();
        assert!(too_much.to_string().contains("--max-memory-mib") && too_much.to_string().contains("4096"), "{too_much}");
        let fuel = grant(Budget { fuel: Some(u64::MAX), ..Budget::default() }, &SandboxLimits::default()).unwrap_err();
        assert_eq!(fuel.reason(), "BudgetOverCeiling");
        let size = grant(Budget { module_mib: Some(24), ..Budget::default() }, &SandboxLimits::default()).unwrap();
        assert_eq!(size.module_bytes, 24 << 20);
        for bad in [&br#"{"memoryMiB": "lots"}"#[..], br#"{"cpu": 1}"#, b"not json"] {
            let error = read(&with_section(EMPTY_COMPONENT, bad)).unwrap_err();
            assert_eq!(error.reason(), "BadModuleMetadata", "{error}");
        }
        let truncated = &asked[..asked.len() - 3];
        assert_eq!(read(truncated).unwrap(), Budget::default(), "a cut section is not read");
    }
}
