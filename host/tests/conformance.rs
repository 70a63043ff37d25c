//! `zundoko-operator test`, the conformance suite: it passes the shipped modules and fails
//! the fixtures, each for its own reason, naming it.

mod common;

use std::process::Command;

use common::{fixture_bytes, fixture_path, module_bytes, module_path};
use zundoko_operator::cli::conformance::{Report, Status, run};
use zundoko_operator::supply::sandbox::{SandboxEngine, SandboxLimits};
use zundoko_operator::supply::contract::plan_check::PlanLimits;

fn suite(bytes: &[u8], seeds: u64) -> Report {
    suite_with_fuel(bytes, seeds, SandboxLimits::default().fuel)
}

fn suite_with_fuel(bytes: &[u8], seeds: u64, fuel: u64) -> Report {
    let engine = SandboxEngine::new(SandboxLimits { fuel, ..SandboxLimits::default() }).unwrap();
    run(&engine, bytes, "module.wasm", seeds, &PlanLimits::default())
}

fn numbers<'a>(report: &'a Report, name: &str) -> &'a std::collections::BTreeMap<&'static str, u64> {
    &report.checks.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no check {name}")).numbers
}

fn status<'a>(report: &'a Report, name: &str) -> (Status, &'a str) {
    let check = report.checks.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no check {name}"));
    (check.status, &check.detail)
}

fn text(report: &Report) -> String {
    let mut out = Vec::new();
    report.write_text(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn the_shipped_modules_pass_every_check() {
    for (name, kiyoshi) in [("zundoko-classic", "\"Ki-yo-shi!\""), ("zundoko-strict-ja", "\"キ・ヨ・シ！\"")] {
        let report = suite(&module_bytes(name), 60);
        assert!(report.passed, "{name}:\n{}", text(&report));
        assert!(report.checks.iter().all(|c| c.status == Status::Pass), "{name}:\n{}", text(&report));
        assert!(status(&report, "songs").1.starts_with(&format!("60/60 end with exactly one {kiyoshi}")), "{}", text(&report));
        let fuel = numbers(&report, "fuel");
        assert!(fuel["p50"] > 0 && fuel["p50"] <= fuel["p99"] && fuel["p99"] <= fuel["max"], "{fuel:?}");
        // The call at the child cap reads the longest history: the costliest call.
        assert!(fuel["at_cap"] > fuel["p99"] && fuel["at_cap"] == fuel["max"], "{fuel:?}");
        assert_eq!(fuel["out_of_fuel"], 0);
    }
}

#[test]
fn a_module_that_runs_out_of_fuel_or_comes_near_the_budget_fails_naming_fuel() {
    let classic = module_bytes("zundoko-classic");
    let at_cap = numbers(&suite(&classic, 20), "fuel")["at_cap"];
    // Exactly half the budget at worst passes; one unit more fails, as a longer song or
    // another entropy may run out.
    let report = suite_with_fuel(&classic, 20, 2 * at_cap);
    assert_eq!(status(&report, "fuel").0, Status::Pass, "{}", text(&report));
    let report = suite_with_fuel(&classic, 20, 2 * at_cap - 1);
    assert!(!report.passed);
    let (fuel, detail) = status(&report, "fuel");
    assert_eq!(fuel, Status::Fail, "{}", text(&report));
    assert!(detail.contains(&format!("a call needs {at_cap} fuel, more than 1/2 of the budget")), "{detail}");

    // Every song the suite sings fits the budget, but the child cap's history does not: the
    // module would run out of fuel on a longer song. The calls pass; fuel fails, naming it.
    let report = suite_with_fuel(&classic, 20, at_cap - 1);
    assert_eq!(status(&report, "calls").0, Status::Pass, "{}", text(&report));
    let (fuel, detail) = status(&report, "fuel");
    assert_eq!(fuel, Status::Fail, "{}", text(&report));
    assert!(detail.starts_with("1 calls ran out of fuel") && detail.contains("the call at the cap of 1000 children"), "{detail}");
    assert_eq!(numbers(&report, "fuel")["max"], at_cap - 1, "a call out of fuel counts as the whole budget");

    // Out of fuel within the songs: the failed calls' fuel is counted, the songs fail.
    let p99 = numbers(&suite(&classic, 20), "fuel")["p99"];
    let report = suite_with_fuel(&classic, 20, p99 / 2);
    assert!(!report.passed);
    let (fuel, detail) = status(&report, "fuel");
    assert_eq!(fuel, Status::Fail, "{}", text(&report));
    let out = numbers(&report, "fuel")["out_of_fuel"];
    assert!(out >= 2 && detail.contains("calls ran out of fuel") && detail.contains("first: seed "), "{detail}");
    assert_eq!(numbers(&report, "fuel")["max"], p99 / 2);
    assert_eq!(status(&report, "calls").0, Status::Fail);
    assert!(status(&report, "calls").1.contains("OutOfCpuBudget"), "{}", text(&report));
}

#[test]
fn the_hostile_fixture_fails_its_smoke_test() {
    let report = suite(&fixture_bytes("zundoko-hostile"), 5);
    assert!(!report.passed);
    let (status, detail) = status(&report, "smoke test");
    assert_eq!(status, Status::Fail, "{}", text(&report));
    assert!(detail.contains("hostile guest fails the smoke test on purpose") && detail.contains("a swap would refuse"), "{detail}");
}

#[test]
fn broken_songs_fail_naming_why() {
    // Never a Kiyoshi: the child cap stops the song, and the plan check says so.
    let report = suite(&fixture_bytes("zundoko-never-kiyoshi"), 3);
    assert!(!report.passed);
    let (status_songs, songs) = status(&report, "songs");
    assert_eq!(status_songs, Status::Fail);
    assert!(songs.starts_with("0/3 valid") && songs.contains("more than the cap of 1000"), "{songs}");
    assert_eq!(status(&report, "plan check").0, Status::Fail);
    let (status_words, words) = status(&report, "words");
    assert_eq!(status_words, Status::Fail);
    assert!(words.starts_with("never said a Kiyoshi; words: \"Zun\" (every call starts from the module as it was built"), "{words}");

    // A module failing every song is reported once three have failed, not after every seed.
    let report = suite(&fixture_bytes("zundoko-never-kiyoshi"), 10);
    let (status_songs, songs) = status(&report, "songs");
    assert_eq!(status_songs, Status::Fail);
    assert!(songs.starts_with("0/3 played valid, then no more (7 seeds not played: 3 songs failed); first failure: seed 0"), "{songs}");
    assert_eq!((numbers(&report, "songs")["played"], numbers(&report, "songs")["valid"]), (3, 0));

    // Words after the Kiyoshi.
    let report = suite(&fixture_bytes("zundoko-after-kiyoshi"), 20);
    assert!(!report.passed);
    let (status_songs, songs) = status(&report, "songs");
    assert_eq!(status_songs, Status::Fail);
    assert!(songs.contains("after its Kiyoshi"), "{songs}");
    assert!(text(&report).contains("FAIL: "), "{}", text(&report));
}

#[test]
fn bad_metadata_fails_and_the_rest_is_skipped() {
    for fixture in ["zundoko-huge-name", "zundoko-escape-name"] {
        let report = suite(&fixture_bytes(fixture), 5);
        assert_eq!(status(&report, "loads").0, Status::Pass);
        let (metadata, detail) = status(&report, "metadata");
        assert_eq!(metadata, Status::Fail, "{fixture}");
        assert!(detail.contains("info() name is refused") && detail.len() < 300, "{fixture}: {detail}");
        assert_eq!(status(&report, "songs").0, Status::Skip);
        assert!(!text(&report).contains('\x1b'), "{fixture}: raw escape in the report");
    }
}

#[test]
fn the_command_exits_non_zero_on_failure_and_speaks_json() {
    let test = |path: std::path::PathBuf, extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_zundoko-operator"))
            .args(["test", "--module", path.to_str().unwrap(), "--seeds", "10"])
            .args(extra)
            .env("RUST_LOG", "off")
            .env_remove("RUST_BACKTRACE")
            .output()
            .unwrap()
    };
    let pass = test(module_path("zundoko-classic"), &[]);
    let out = String::from_utf8_lossy(&pass.stdout);
    assert!(pass.status.success(), "{out}");
    assert!(out.contains("PASS  songs") && out.contains("PASS: all 10 checks passed"), "{out}");

    let fail = test(fixture_path("zundoko-after-kiyoshi"), &["--format", "json"]);
    assert!(!fail.status.success());
    let json: serde_json::Value = serde_json::from_slice(&fail.stdout).expect("one JSON object");
    assert_eq!(json["passed"], false);
    let songs = json["checks"].as_array().unwrap().iter().find(|c| c["name"] == "songs").unwrap();
    assert_eq!(songs["status"], "fail");
    let err = String::from_utf8_lossy(&fail.stderr);
    assert!(err.contains("failed") && err.contains("conformance checks"), "{err}");
}

#[test]
fn a_big_module_without_a_budget_is_told_where_an_interpreters_budget_comes_from() {
    use zundoko_operator::supply::sandbox::budget::append_custom_section;
    // As a Python or JavaScript component built by componentize-py or jco alone: over the
    // product's 64 KiB, and no `zundoko:budget` section.
    let big = append_custom_section(module_bytes("zundoko-classic"), "padding", &vec![0u8; 100 << 10]);
    let report = suite(&big, 3);
    let (size, detail) = status(&report, "size");
    assert_eq!(size, Status::Fail, "{}", text(&report));
    assert!(detail.contains("carries no zundoko:budget section") && detail.contains("sdk/budget.py"), "{detail}");
    // With a budget that asks for the room, the size passes, and nothing is hinted.
    let budgeted = append_custom_section(big, "zundoko:budget", br#"{"moduleMiB": 1}"#);
    let report = suite(&budgeted, 3);
    let (size, detail) = status(&report, "size");
    assert_eq!(size, Status::Pass, "{detail}");
    assert!(!detail.contains("zundoko:budget"), "{detail}");
}
