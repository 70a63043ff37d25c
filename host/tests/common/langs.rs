//! The Python and JavaScript classic rules as the host's language tests load them: the built
//! components in target/modules/, an engine roomy enough for an interpreter, and a Hikawa part
//! way through its song.

use std::path::PathBuf;

use super::compile_once::LoadOnce as _;
use zundoko_operator::supply::sandbox::{RulesModule, SandboxEngine, SandboxLimits};
use zundoko_rules::naming::zundoko_name;
use zundoko_rules::{Observed, Said};

/// A Python or JavaScript module, `target/modules/<name>.wasm`, or None (said loudly) when it
/// was not built and CI is not set.
pub fn lang_module(name: &str) -> Option<Vec<u8>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/modules").join(format!("{name}.wasm"));
    if path.exists() {
        return Some(std::fs::read(&path).unwrap());
    }
    super::ci::cannot_run(&format!(
        "{} is missing, so the {name} rules were not tested: build it with `make guest-langs` (needs python3 with venv, node and npm)",
        path.display()
    ));
    None
}

/// A Python or JavaScript test fixture, `target/fixtures/<name>.wasm`, or None (said loudly)
/// when it was not built and CI is not set.
pub fn lang_fixture(name: &str) -> Option<Vec<u8>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/fixtures").join(format!("{name}.wasm"));
    if path.exists() {
        return Some(std::fs::read(&path).unwrap());
    }
    super::ci::cannot_run(&format!("{} is missing: run `make fixtures-langs` (needs python3 with venv, node and npm)", path.display()));
    None
}

/// An interpreter in every call needs more than a 36 KB Rust module: roomy limits, so these
/// tests compare decisions (`measure_languages` reports what each call really uses). A Python
/// or JavaScript component takes tens of seconds to compile in a debug build: the tests share
/// a compiled-module cache in target/ (wasmtime checks every file it loads from it).
pub fn roomy_engine() -> SandboxEngine {
    let engine = SandboxEngine::new(SandboxLimits {
        fuel: 2_000_000_000,
        memory_bytes: 256 << 20,
        inline_fuel: 2_000_000_000,
        ..SandboxLimits::default()
    })
    .unwrap()
    .with_compiled_cache(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-compiled-cache"))
    .unwrap();
    engine.compiled_cache().expect("a cache was given").disk().set_max_bytes(super::compile_once::SUITE_CACHE_BYTES);
    engine
}

/// A Hikawa (`hikawa-sample`, interval 500 ms) with `children` words said, Doko and Zun in turn,
/// the last long ago: the rules say the next.
pub fn mid_song(children: u32) -> Observed {
    let mut observed = zundoko_rules::testing::new_hikawa(500, &[]);
    observed.now = 5_000_000;
    observed.zundokos = (1..=children)
        .map(|i| Said { name: zundoko_name("hikawa-sample", i), index: i, word: if i % 2 == 0 { "Zun" } else { "Doko" }.into(), said_at: Some(1_000_000) })
        .collect();
    observed
}

/// What one call of a module costs, in fuel, part way through a song: at 5 children, at 100, and
/// each child between them (`js_call_fuel.rs`, `py_call_fuel.rs`).
pub struct CallFuel {
    pub at_5: u64,
    pub at_100: u64,
    pub per_child: u64,
}

/// `target/modules/<name>.wasm` loaded in the engine and cache the language tests share (an
/// interpreter compiles once for all of them) and called at 5 and 100 children, each call saying
/// a word; None (said loudly) when it was not built and CI is not set.
pub fn call_fuel(name: &str) -> Option<CallFuel> {
    let module = roomy_engine().load_once(&lang_module(name)?).unwrap();
    let (at_5, at_100) = (word_fuel(&module, 5), word_fuel(&module, 100));
    Some(CallFuel { at_5, at_100, per_child: (at_100 - at_5) / 95 })
}

/// The fuel of one call at `children` children part way through a song ([`mid_song`]), which
/// must say a word.
pub fn word_fuel(module: &RulesModule, children: u32) -> u64 {
    let outcome = module.reconcile(&mid_song(children)).unwrap();
    assert!(outcome.value.says().next().is_some(), "at {children} children the rules say a word: {:?}", outcome.value);
    outcome.fuel_used
}
