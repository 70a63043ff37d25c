//! A Python module's calls import only what was imported when its component was built: the
//! operator preopens no files, so CPython finds no standard library when a call runs. What a
//! rule set does natively without a thought (an import inside a function, `datetime.strptime`,
//! `str.encode("shift_jis")`) traps a call unless the build made that import. The kit makes it
//! (`sdk/python/zundoko_kit/snapshot_imports.py`): it reads the rule set's sources for what its
//! calls import, and imports what the standard library imports at first use. An import whose
//! name only the call knows is still missed: the trap then says what to do.
//!
//! The fixture is `target/fixtures/zundoko-py-imports.wasm` (`make fixtures-langs`); without it
//! the tests say so loudly and pass, except in CI, where they fail.

mod common;

use common::compile_once::LoadOnce as _;
use common::langs::{lang_fixture, roomy_engine};
use common::{observed_with, status_message};
use zundoko_operator::supply::sandbox::{GuestError, RulesModule};

const FIXTURE: &str = "zundoko-py-imports";

fn module() -> Option<RulesModule> {
    let bytes = lang_fixture(FIXTURE)?;
    Some(roomy_engine().load_once(&bytes).unwrap_or_else(|e| panic!("{FIXTURE} loads: {e}")))
}

/// The guest's last word on a call that trapped.
fn trapped_saying(module: &RulesModule, params: &[(&str, &str)]) -> String {
    match module.reconcile(&observed_with(params)) {
        Err(GuestError::Trap { guest_message: Some(said), .. }) => said,
        other => panic!("expected a trap with the guest's message for {params:?}, got {other:?}"),
    }
}

#[test]
fn what_a_call_imports_was_imported_when_the_component_was_built() {
    let Some(module) = module() else { return };
    let plan = module.reconcile(&observed_with(&[])).unwrap_or_else(|e| {
        panic!("a call importing inside a function, parsing a time and encoding Japanese fails: {e} (does the kit still import what calls would: snapshot_imports.import_for_calls in sdk/python/zundoko_kit/component.py?)")
    });
    // What CPython gives natively for the same code.
    assert_eq!(
        status_message(&plan.value),
        "mean 2, half 1/2, parsed 2026-11-27T10:00:00, sjis 82b882f182c782b1, eucjp a4ada4e8a4b7, utf16 5a0075006e00, hex 446f6b6f"
    );
}

#[test]
fn an_import_by_a_name_only_the_call_knows_fails_saying_what_to_do() {
    let Some(module) = module() else { return };
    // In the standard library, but nothing names it where the build could read it.
    assert_eq!(
        trapped_saying(&module, &[("use", "module difflib")]),
        "ModuleNotFoundError: No module named 'difflib' (a call can import only what was imported when the component was built: import difflib at the top of a module of the rule set)"
    );
    assert_eq!(
        trapped_saying(&module, &[("use", "codec koi8-r")]),
        "LookupError: unknown encoding: koi8-r (a codec is there only if imported when the component was built: import encodings.koi8_r at the top of a module of the rule set)"
    );
    // What the build imported is there whatever names it at call time: `statistics` (imported
    // inside a function of the fixture's own module) and a codec of the kit's list.
    let plan = module.reconcile(&observed_with(&[("use", "module statistics")])).unwrap();
    assert_eq!(status_message(&plan.value), "imported statistics");
    let plan = module.reconcile(&observed_with(&[("use", "codec cp1252")])).unwrap();
    assert_eq!(status_message(&plan.value), "encoded 78");
}
