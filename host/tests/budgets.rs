//! The budget a real Python or JavaScript module carries (`zundoko:budget`, written by
//! sdk/budget.py when `make guest-langs` builds it) is what the operator grants: exactly what it
//! asks for, within the operator's ceilings (a module asking for more is refused, naming the
//! flag), and less than the operator's defaults when it asks for less.
//!
//! The components come from `make guest-langs`; without them (no python3 or node on this
//! machine) the tests say so loudly and pass, except in CI (CI=true), where they fail.

mod common;

use std::path::PathBuf;

use common::compile_once::LoadOnce as _;
use common::langs::lang_module;
use zundoko_operator::supply::sandbox::budget::{self, Budget};
use zundoko_operator::supply::sandbox::{GuestError, SandboxEngine, SandboxLimits};
use zundoko_rules::{Observed, Said};

/// What sdk/budget.py writes for a rule set that asks for nothing: its language's default
/// (memory MiB, fuel, module MiB).
const ASKED: [(&str, u64, u64, u64); 2] = [("zundoko-classic-py", 48, 100_000_000, 24), ("zundoko-classic-js", 32, 100_000_000, 16)];

/// An engine with the operator's defaults but for `ceilings`, its compiled code shared with
/// host/tests/languages.rs (a CPython component takes tens of seconds to compile in a debug build).
fn engine(ceilings: SandboxLimits) -> SandboxEngine {
    let cache = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-compiled-cache");
    SandboxEngine::new(ceilings).unwrap().with_compiled_cache(&cache).unwrap()
}

/// A call at 1,000 children: the classic rules' most expensive (JavaScript: 26.2 M fuel, measured
/// with `each_language_module_is_granted_exactly_the_budget_it_carries`).
fn thousand_children() -> Observed {
    let mut observed = zundoko_rules::testing::new_hikawa(500, &[]);
    observed.now = 5_000_000;
    observed.zundokos = (1..=1000)
        .map(|i| Said { name: zundoko_rules::naming::zundoko_name("hikawa-sample", i), index: i, word: if i % 2 == 0 { "Zun" } else { "Doko" }.into(), said_at: Some(1_000_000) })
        .collect();
    observed
}

#[test]
fn each_language_module_is_granted_exactly_the_budget_it_carries() {
    let defaults = SandboxLimits::default();
    let engine = engine(defaults.clone());
    for (name, memory_mib, fuel, module_mib) in ASKED {
        let Some(bytes) = lang_module(name) else { continue };
        let carried = budget::read(&bytes).unwrap();
        assert_eq!(carried, Budget { memory_mib: Some(memory_mib), fuel: Some(fuel), module_mib: Some(module_mib) }, "{name}'s section");
        let module = engine.load_once(&bytes).unwrap_or_else(|e| panic!("{name} does not load: {e}"));
        let limits = module.limits();
        assert_eq!((limits.memory_bytes, limits.fuel, limits.module_bytes), ((memory_mib << 20) as usize, fuel, (module_mib << 20) as usize), "{name}");
        // The rest stays the operator's.
        let untouched = SandboxLimits { memory_bytes: limits.memory_bytes, fuel: limits.fuel, module_bytes: limits.module_bytes, ..defaults.clone() };
        assert_eq!(limits, &untouched, "{name}: only what it asked for changed");
        assert!(bytes.len() <= limits.module_bytes, "{name}: {} bytes, over the {module_mib} MiB it asks for", bytes.len());
        // The grant holds: the most expensive call of the classic rules fits it.
        module.reconcile(&thousand_children()).unwrap_or_else(|e| panic!("{name} at 1,000 children: {e}"));
    }
}

#[test]
fn a_module_asking_past_an_operators_ceiling_is_refused_naming_the_flag() {
    for (name, memory_mib, fuel, module_mib) in ASKED {
        let Some(bytes) = lang_module(name) else { continue };
        let just_under = [
            (SandboxLimits { max_memory_bytes: ((memory_mib - 1) << 20) as usize, ..SandboxLimits::default() }, "--max-memory-mib"),
            (SandboxLimits { max_fuel: fuel - 1, ..SandboxLimits::default() }, "--max-fuel"),
            (SandboxLimits { max_module_bytes: ((module_mib - 1) << 20) as usize, ..SandboxLimits::default() }, "module ceiling"),
        ];
        for (ceilings, flag) in just_under {
            // Refused from the section, before any compile (no cache: nothing to find there).
            let e = SandboxEngine::new(ceilings).unwrap().load(&bytes).err().unwrap_or_else(|| panic!("{name} loads past {flag}"));
            assert!(matches!(e, GuestError::OverCeiling { .. }), "{name}, {flag}: {e}");
            assert!(e.to_string().contains(flag), "{name}: {e}");
        }
        // At exactly what it asks for, granted.
        let exact = SandboxLimits { max_memory_bytes: (memory_mib << 20) as usize, max_fuel: fuel, max_module_bytes: (module_mib << 20) as usize, ..SandboxLimits::default() };
        let granted = budget::grant(budget::read(&bytes).unwrap(), &exact).unwrap_or_else(|e| panic!("{name} at its ceilings: {e}"));
        assert_eq!((granted.memory_bytes, granted.fuel), ((memory_mib << 20) as usize, fuel), "{name}");
    }
}

/// The JavaScript module rebuilt asking for less than the operator's defaults (32 MiB, 50 M
/// fuel) gets less, and its calls are held to it.
#[test]
fn a_module_asking_for_less_than_the_defaults_gets_less() {
    let Some(bytes) = lang_module("zundoko-classic-js") else { return };
    let defaults = SandboxLimits::default();
    let (memory_mib, fuel) = (16u64, 20_000_000u64);
    assert!(((memory_mib << 20) as usize) < defaults.memory_bytes && fuel < defaults.fuel);
    let thrifty = budget::with_section(&common::without_budget(&bytes), format!(r#"{{"memoryMiB":{memory_mib},"fuel":{fuel},"moduleMiB":16}}"#).as_bytes());
    let module = engine(defaults).load_once(&thrifty).unwrap_or_else(|e| panic!("the thrifty module does not load: {e}"));
    assert_eq!((module.limits().memory_bytes, module.limits().fuel), ((memory_mib << 20) as usize, fuel));
    // A small call fits; the call at 1,000 children (26.2 M fuel: 1.3 times the budget) is
    // stopped at 20 M.
    module.reconcile(&zundoko_rules::testing::new_hikawa(500, &[])).unwrap();
    match module.reconcile(&thousand_children()) {
        Err(GuestError::OutOfCpuBudget { budget }) => assert_eq!(budget, fuel),
        Err(e) => panic!("expected OutOfCpuBudget at {fuel} fuel, got {e}"),
        Ok(_) => panic!("a call needing about 26 M fuel passed with {fuel}"),
    }
}

