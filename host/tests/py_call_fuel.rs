//! What a Python call costs, in fuel: wasm instructions, so the same on any machine however
//! loaded (time is the benches' to print). What the Python kit does for it, with a bound here
//! that fails without it (the classic rules; fuel at 5 children, and per child from 5 to 100):
//!
//! - It has componentize-py lift a call's input straight into the kit's own classes
//!   (`lift_into_model` in `sdk/python/zundoko_kit/component.py`): the runtime finds each
//!   record's class by name in the bindings when the component is built, so the kit names its own
//!   there, and a call no longer copies the Hikawa and every child a second time. Without it: 354k
//!   at 5 children and 18.8k per child; with it, 310k and 13.7k.
//! - Its song engine copies only the words that decide whether the song is complete (the last
//!   `zuns + 2`: `RuleSet.reconcile` in `sdk/python/zundoko_kit/song.py`), not every word of the
//!   song at every call. Without it: 13.7k per child; with it, 13.2k.
//!
//! - It freezes the snapshot's objects (`gc.freeze()`), so a collection during a call walks only
//!   what the call made, not the whole heap (a fixture that keeps 2,500 containers: 3.38M fuel
//!   collecting without, 0.74M with).
//!
//! - It runs the rule set's own `reconcile` on sample calls while the component is built, on
//!   copies of the rule set as built (`sdk/python/zundoko_kit/warm_up.py`), so a call starts with
//!   the rules' bytecode specialised and `re`'s cache filled (a rule set written from the docs,
//!   the fixture `from-docs`, at 5 children: 752k fuel without, 447k with). That it leaves none
//!   of their state behind is `fresh.rs`'s.
//!
//! (Its other levers, the warm-up of its own code and `random` seeded at a call's first draw,
//! are shown by simulate's figures in docs/benchmarks.md and by sdk/tests/test_lazy_seed.py.)
//!
//! The module is `target/modules/zundoko-classic-py.wasm` (`make guest-langs`, which needs
//! python3); without it the test says so loudly and passes, except in CI, where it fails.

mod common;

use common::compile_once::LoadOnce as _;
use common::langs::{call_fuel, CallFuel};

const MODULE: &str = "zundoko-classic-py";

/// 312k with the input lifted into the kit's classes; 354k copying it.
const MOST_FUEL_AT_5: u64 = 330_000;
/// 13.2k lifted into the kit's classes, with only the song's last words copied; 13.7k copying
/// every word; 18.8k copying each child.
const MOST_FUEL_PER_CHILD: u64 = 13_500;

#[test]
fn a_python_call_lifts_its_input_into_the_kits_own_classes() {
    let Some(CallFuel { at_5, at_100, per_child }) = call_fuel(MODULE) else { return };
    println!("classic Python rules: {at_5} fuel at 5 children, {at_100} at 100: {per_child} per child");
    assert!(
        at_5 <= MOST_FUEL_AT_5,
        "a call at 5 children took {at_5} fuel (at most {MOST_FUEL_AT_5}): does componentize-py still lift the input into the kit's classes (lift_into_model, sdk/python/zundoko_kit/component.py)?"
    );
    assert!(
        per_child <= MOST_FUEL_PER_CHILD,
        "each child took {per_child} fuel (at most {MOST_FUEL_PER_CHILD}): is every child copied a second time (lift_into_model, sdk/python/zundoko_kit/component.py), or every word at every call (RuleSet.reconcile, sdk/python/zundoko_kit/song.py)?"
    );
}

/// The fixture that keeps as many small containers alive as asked, with the collector on or off.
const ALLOCATING: &str = "zundoko-py-allocating";
/// Containers a call keeps: past the cyclic collector's threshold, as a rule set building a model
/// of its own may.
const KEPT: &str = "2500";
/// What the collector may cost such a call. With the snapshot's objects frozen (`gc.freeze()` as
/// the kit builds the component) a collection walks only what the call made: 0.74M. Without, a
/// collection walked the whole heap of the snapshot, CPython's and the module's: 3.38M (and a rule
/// set that crossed the threshold paid it on every call: 3.4M fuel a word instead of 0.7M).
const MOST_FUEL_COLLECTING: u64 = 1_500_000;

#[test]
fn a_collection_during_a_call_walks_only_what_the_call_made() {
    let Some(bytes) = common::langs::lang_fixture(ALLOCATING) else { return };
    let module = common::langs::roomy_engine().load_once(&bytes).unwrap();
    let fuel = |objects: &str, collector: &str| {
        let outcome = module.reconcile(&common::observed_with(&[("objects", objects), ("collector", collector)])).unwrap();
        let said = outcome.value.status().map(|status| status.message.clone());
        assert_eq!(said.as_deref(), Some(format!("kept {objects}").as_str()));
        outcome.fuel_used
    };
    let (with, without, none) = (fuel(KEPT, "on"), fuel(KEPT, "off"), fuel("0", "on"));
    let collecting = with.saturating_sub(without);
    println!("{KEPT} containers kept: {with} fuel with the collector, {without} without ({collecting} collecting); {none} keeping none");
    assert!(without > none, "keeping {KEPT} containers costs something: {without} fuel against {none} keeping none");
    assert!(
        collecting <= MOST_FUEL_COLLECTING,
        "collecting cost a call {collecting} fuel (at most {MOST_FUEL_COLLECTING}): are the snapshot's objects still frozen (gc.freeze, sdk/python/zundoko_kit/component.py)?"
    );
}

/// A rule set written from the docs by someone outside the project (its own engine, a dataclass
/// of params checked with `re.fullmatch` in every call).
const FROM_DOCS: &str = "zundoko-py-from-docs";
/// What a call of it may cost at 5 children. With its `reconcile` run while the component is
/// built (warm_up.py), 447k; cold, as every call was a fresh instance's first, 752k.
const MOST_FUEL_FROM_DOCS: u64 = 560_000;

#[test]
fn a_rule_sets_own_code_starts_each_call_warm() {
    let Some(bytes) = common::langs::lang_fixture(FROM_DOCS) else { return };
    let fuel = common::langs::word_fuel(&common::langs::roomy_engine().load_once(&bytes).unwrap(), 5);
    println!("a rule set written from the docs: {fuel} fuel at 5 children");
    assert!(
        fuel <= MOST_FUEL_FROM_DOCS,
        "a call took {fuel} fuel (at most {MOST_FUEL_FROM_DOCS}): does the kit still run the rules' reconcile while the component is built (warm_up.py, sdk/python/zundoko_kit/)?"
    );
}
