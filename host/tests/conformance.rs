//! `zundoko-operator test`, the conformance suite: it passes the shipped modules and fails
//! the fixtures, each for its own reason, naming it.

mod common;

use std::process::Command;

use common::{fixture_bytes, fixture_path, module_bytes, module_path};
use zundoko_operator::cli::conformance::{Report, Status, run};
use zundoko_operator::modules::sandbox::{SandboxEngine, SandboxLimits};
use zundoko_operator::reconcile::plan_check::PlanLimits;

fn suite(bytes: &[u8], seeds: u64) -> Report {
    let engine = SandboxEngine::new(SandboxLimits::default()).unwrap();
    run(&engine, bytes, "module.wasm", seeds, &PlanLimits::default())
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
        let fuel = &report.checks.iter().find(|c| c.name == "fuel").unwrap().numbers;
        assert!(fuel["p50"] > 0 && fuel["p50"] <= fuel["p99"] && fuel["p99"] <= fuel["max"] && fuel["max"] <= fuel["budget"], "{fuel:?}");
    }
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
    assert_eq!(status(&report, "words"), (Status::Fail, "never said a Kiyoshi; words: \"Zun\""));

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
