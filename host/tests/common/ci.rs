//! How every test reads CI, in one place (apiserver/tests/conformance includes this file too):
//! `CI=true`, which `.ci/run` exports, or `CI=1`, as the Makefile reads it. Under CI a test that
//! needs a tool or a built artifact fails when it is missing; elsewhere it says so loudly and
//! skips, so a developer without the tool can still run the rest.

/// Whether this run is CI's.
pub fn ci() -> bool {
    matches!(std::env::var("CI").as_deref(), Ok("true" | "1"))
}

/// A test cannot run here (`why`: what is missing and how to get it): a failure under CI,
/// otherwise said loudly. The caller then returns without asserting anything.
pub fn cannot_run(why: &str) {
    assert!(!ci(), "CI is set, so this test must run: {why}");
    eprintln!("\n*** SKIPPED: {why}\n");
}
