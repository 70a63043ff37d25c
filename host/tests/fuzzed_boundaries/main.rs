//! Property tests of what crosses from untrusted to trusted (issue 52, docs/operating.md
//! "Fuzzed boundaries"): the plan check on any plan, a guest's values as the host converts
//! them, a module's metadata and budget section, OCI references, manifests, signature payloads,
//! `WWW-Authenticate` headers, pull secrets, error bodies and capped bodies, the module's
//! decisions against the same rules' native ones on any observed state, and the on-disk
//! cache's readers on any file (cache.rs). The invariants are in
//! invariants.rs, shared with the cargo-fuzz targets (fuzz/, `make fuzz`), which search far
//! longer; here each property runs a fixed number of cases from a fixed seed (the same cases
//! on every machine, a few seconds each), and each finding of either is a regression test
//! below.

#[path = "../common/mod.rs"]
mod common;
mod cache;
mod cache_invariants;
mod draw;
mod invariants;

use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use draw::Draw;
use zundoko_operator::supply::contract::plan_check::{self, PlanLimits};
use zundoko_operator::supply::oci::{artifact, signature};
use zundoko_rules::naming::{kiyoshi_name, zundoko_name};
use zundoko_rules::{Action, ChildKind, Plan, Say, StatusUpdate};

/// Run `property` on `cases` inputs drawn from `strategy`, from a fixed seed; a failure is
/// shrunk (for at most 30 s) and reported with the smallest input found.
fn check<S: Strategy>(cases: u32, strategy: S, property: impl Fn(S::Value)) {
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_time: 30_000,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    if let Err(failure) = runner.run(&strategy, |value| {
        property(value);
        Ok(())
    }) {
        panic!("{failure}");
    }
}

/// Bytes for a [`Draw`]: enough for a plan of several actions with long texts.
fn bytes() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..600)
}

/// Any text: controls, bidi overrides, any plane.
fn any_text(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("(?s).{{0,{max}}}")).expect("a valid regex")
}

#[test]
fn the_plan_check_never_panics_and_what_it_accepts_keeps_the_invariants() {
    let accepted = AtomicUsize::new(0);
    let cases = 4_000;
    check(cases, bytes(), |bytes| {
        let mut d = Draw::new(&bytes);
        let (observed, limits) = (d.observed(), d.limits());
        let plan = d.plan(&observed);
        invariants::plan_check(&plan, &observed, &limits);
        if plan_check::check(&plan, &observed, &limits).is_ok() && !plan.actions.is_empty() {
            accepted.fetch_add(1, Ordering::Relaxed);
        }
    });
    // The draws are near real plans, so a fair share passes and what passes is checked.
    let accepted = accepted.into_inner();
    eprintln!("{accepted} of {cases} plans accepted");
    assert!(
        accepted >= cases as usize / 20,
        "only {accepted} of {cases} plans accepted: the invariants were hardly exercised"
    );
}

#[test]
fn every_plan_a_well_behaved_module_could_make_is_accepted() {
    // The check refuses no plan that keeps the contract (else the property above would pass
    // a check that refuses everything).
    check(2_000, bytes(), |bytes| {
        let mut d = Draw::new(&bytes);
        let observed = d.observed();
        let limits = PlanLimits::default();
        let hikawa = &observed.hikawa;
        let mut actions = Vec::new();
        let mut count = observed.zundokos.len() as u32;
        let room = limits
            .max_children
            .saturating_sub(count)
            .min(limits.max_actions as u32 - 3);
        let kiyoshi = observed.kiyoshi.is_some();
        if !kiyoshi {
            for _ in 0..d.below(u64::from(room) + 1) {
                count += 1;
                let word = d
                    .pick(&[
                        "Zun",
                        "Doko",
                        "ズン",
                        "ドコ",
                        "Zun Doko",
                        "Ki-yo-shi!",
                        "キ・ヨ・シ！",
                        "٣٣",
                    ])
                    .to_string();
                actions.push(Action::Say(Say {
                    kind: ChildKind::Zundoko,
                    namespace: hikawa.namespace.clone(),
                    name: zundoko_name(&hikawa.name, count),
                    index: count,
                    word,
                }));
            }
        }
        let said_kiyoshi = !kiyoshi && d.chance(100);
        if said_kiyoshi {
            actions.push(Action::Say(Say {
                kind: ChildKind::Kiyoshi,
                namespace: hikawa.namespace.clone(),
                name: kiyoshi_name(&hikawa.name),
                index: count + 1,
                word: "Ki-yo-shi!".into(),
            }));
        }
        if d.chance(128) {
            let message = d
                .pick(&["", "3 words", "ズンドコ 3", "½ done, \"quoted\""])
                .to_string();
            actions.push(Action::SetStatus(StatusUpdate {
                phase: "Singing".into(),
                num_zundokos_said: d.below(u64::from(count) + 1) as u32,
                kiyoshied: said_kiyoshi || kiyoshi,
                message,
            }));
        }
        if d.chance(128) {
            actions.push(Action::RequeueAfter(d.below(limits.max_requeue_ms + 1)));
        }
        let plan = Plan { actions };
        assert_eq!(
            plan_check::check(&plan, &observed, &limits),
            Ok(()),
            "{plan:?}"
        );
    });
}

#[test]
fn a_guests_values_are_converted_whole_and_its_errors_and_metadata_bounded() {
    check(1_500, bytes(), |bytes| {
        let mut d = Draw::new(&bytes);
        let observed = d.observed();
        invariants::guest_plan(draw::to_guest(&d.plan(&observed)));
    });
    check(800, (any::<u8>(), any_text(600)), |(kind, message)| {
        invariants::guest_rule_error(kind, &message)
    });
    let identifier =
        || proptest::string::string_regex("[a-zA-Z0-9._+ -]{0,70}").expect("a valid regex");
    let field = move || prop_oneof![identifier(), any_text(300)];
    check(
        1_000,
        (field(), field(), field()),
        |(name, version, description)| invariants::guest_module_info(&name, &version, &description),
    );
}

/// A budget section's JSON: the known keys with any numbers, sometimes a stranger.
fn budget_json() -> impl Strategy<Value = Vec<u8>> {
    let number = prop_oneof![
        Just("0".to_string()),
        Just("18446744073709551616".to_string()),
        Just("-1".to_string()),
        Just("1.5".to_string()),
        any::<u64>().prop_map(|n| n.to_string())
    ];
    // The known keys, misspelt ones, and any (an unknown key is quoted in the refusal).
    let key = prop_oneof![
        Just("memoryMiB".to_string()),
        Just("fuel".to_string()),
        Just("moduleMiB".to_string()),
        Just("memorymib".to_string()),
        any_text(8)
    ];
    vec((key, number), 0..4).prop_map(|entries| {
        let body = entries
            .iter()
            .map(|(k, n)| format!("{}: {n}", serde_json::Value::from(k.as_str())))
            .collect::<Vec<_>>()
            .join(", ");
        format!("{{{body}}}").into_bytes()
    })
}

#[test]
fn a_budget_section_is_read_from_any_bytes_and_granted_within_the_ceilings() {
    check(2_000, vec(any::<u8>(), 0..400), |bytes| {
        invariants::budget_section(&bytes)
    });
    // Bytes that are a component's header followed by anything.
    check(2_000, vec(any::<u8>(), 0..400), |rest| {
        invariants::budget_section(&[b"\0asm\x0d\0\x01\0".as_slice(), &rest].concat())
    });
    let section_name = prop_oneof![
        Just("zundoko:budget".to_string()),
        Just("zundoko:budge".to_string()),
        Just("name".to_string()),
        any_text(20)
    ];
    let sections = vec((section_name, vec(any::<u8>(), 0..40)), 0..3);
    // A good budget padded to either side of the section's 1 KiB bound.
    let padded = (1000usize..1050).prop_map(|n| {
        let mut payload = br#"{"fuel": 5}"#.to_vec();
        payload.resize(n, b' ');
        payload
    });
    let payload = prop_oneof![budget_json(), vec(any::<u8>(), 0..80), padded];
    check(2_000, (sections, payload), |(sections, payload)| {
        invariants::budget_round_trip(&sections, &payload)
    });
}

/// References near real ones: a host (maybe with a port), a path, a tag and a digest, each
/// sometimes missing or malformed.
fn reference_like() -> impl Strategy<Value = String> {
    let host = prop_oneof![
        Just("127.0.0.1:5000"),
        Just("ghcr.io"),
        Just("localhost"),
        Just("LOCALHOST"),
        Just("docker.io"),
        Just("index.docker.io"),
        Just("[::1]:5000"),
        Just("h:0"),
        Just("a..b"),
        Just("rules")
    ];
    let path = proptest::string::string_regex("[a-zA-Z0-9._/-]{0,30}").expect("a valid regex");
    let tag = proptest::option::of(
        proptest::string::string_regex("[a-zA-Z0-9._:-]{0,130}").expect("a valid regex"),
    );
    let hex = proptest::string::string_regex("[0-9a-fA-F]{62,66}").expect("a valid regex");
    let digest = proptest::option::of((
        prop_oneof![Just("sha256"), Just("sha512"), Just("SHA256")],
        hex,
    ));
    let space = prop_oneof![Just(""), Just(" "), Just("\n")];
    (space.clone(), host, path, tag, digest, space).prop_map(
        |(lead, host, path, tag, digest, trail)| {
            let mut s = format!("{lead}{host}/{path}");
            if let Some(tag) = tag {
                s = format!("{s}:{tag}");
            }
            if let Some((algorithm, hex)) = digest {
                s = format!("{s}@{algorithm}:{hex}");
            }
            s + trail
        },
    )
}

#[test]
fn an_oci_reference_parses_to_one_that_prints_back_to_itself_or_is_refused_safely() {
    check(2_000, reference_like(), |text| invariants::reference(&text));
    check(1_000, any_text(300), |text| invariants::reference(&text));
    check(50, any_text(1100), |text| invariants::reference(&text));
}

/// A manifest near a Wasm artifact's: its config and layers' media types, digests and sizes
/// chosen from the right, the wrong and the odd; an index now and then.
fn manifest_like() -> impl Strategy<Value = Vec<u8>> {
    let media = || {
        prop_oneof![
            Just(artifact::CONFIG_MEDIA_TYPE.to_string()),
            Just(artifact::LAYER_MEDIA_TYPE.to_string()),
            Just("application/vnd.oci.image.layer.v1.tar".to_string()),
            any_text(20)
        ]
    };
    let size = prop_oneof![
        Just(serde_json::json!(3)),
        Just(serde_json::json!(-1)),
        Just(serde_json::json!(1.5)),
        Just(serde_json::json!("3")),
        any::<i64>().prop_map(|n| serde_json::json!(n))
    ];
    let layer = (media(), any_text(10), size).prop_map(
        |(m, d, s)| serde_json::json!({"mediaType": m, "digest": format!("sha256:{d}"), "size": s}),
    );
    (media(), vec(layer, 0..4), any::<bool>(), any::<bool>()).prop_map(|(config, layers, index, schema)| {
        let mut value = serde_json::json!({"mediaType": "application/vnd.oci.image.manifest.v1+json", "config": {"mediaType": config, "digest": "sha256:bb", "size": 2}, "layers": layers});
        if schema {
            value["schemaVersion"] = serde_json::json!(2);
        }
        if index {
            value["manifests"] = serde_json::json!([]);
        }
        serde_json::to_vec(&value).expect("JSON serializes")
    })
}

#[test]
fn a_manifest_yields_its_one_component_layer_or_a_safe_refusal() {
    check(3_000, manifest_like(), |raw| invariants::manifest(&raw));
    check(1_000, vec(any::<u8>(), 0..300), |raw| {
        invariants::manifest(&raw)
    });
}

#[test]
fn a_signature_verifies_only_by_the_trusted_key_over_a_payload_naming_this_artifact() {
    const DIGEST: &str = "sha256:3075915c3075915c3075915c3075915c3075915c3075915c3075915c3075915c";
    const OTHER: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000001";
    let repository = prop_oneof![Just("127.0.0.1:5000/rules/ja"), Just("ghcr.io/team/rules")];
    let payload = prop_oneof![
        (repository.clone(), prop_oneof![Just(DIGEST), Just(OTHER)]).prop_map(|(r, d)| signature::payload(r, d)),
        vec(any::<u8>(), 0..200),
        any_text(100).prop_map(|t| format!(r#"{{"critical":{{"identity":{{"docker-reference":{t:?}}},"image":{{"docker-manifest-digest":"{DIGEST}"}},"type":"x"}}}}"#).into_bytes()),
    ];
    let identity = proptest::option::of(repository);
    check(
        300,
        (payload, any::<bool>(), any_text(120), identity),
        |(payload, signed, garbage, identity)| {
            invariants::signature(&payload, signed, &garbage, DIGEST, identity);
        },
    );
}

#[test]
fn a_challenge_header_parses_without_panic_and_back_to_what_was_written() {
    check(2_000, any_text(300), |header| {
        invariants::challenge(&header)
    });
    let scheme = proptest::string::string_regex("[A-Za-z]{1,10}").expect("a valid regex");
    let params = vec(
        (
            proptest::string::string_regex("[A-Za-z_]{1,10}").expect("a valid regex"),
            any_text(40),
        ),
        0..5,
    );
    check(1_500, (scheme, params), |(scheme, params)| {
        invariants::challenge_round_trip(&scheme, &params)
    });
}

#[test]
fn a_pull_secret_is_parsed_or_refused_without_saying_its_secret() {
    use base64::Engine as _;
    let secret = proptest::string::string_regex("[a-zA-Z0-9]{4,20}").expect("a valid regex");
    let registry = || {
        prop_oneof![
            Just("r.io"),
            Just("127.0.0.1:5000"),
            Just("https://r.io/v1/")
        ]
    };
    check(
        1_500,
        (any::<u8>(), secret, registry(), registry()),
        |(how, secret, key, asked)| {
            let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
            let entry = match how % 5 {
                0 => serde_json::json!({"auth": b64(&format!("user:{secret}"))}),
                1 => serde_json::json!({"auth": b64(&secret)}),
                2 => serde_json::json!({"auth": format!("{secret}!")}),
                3 => serde_json::json!({"username": "u", "password": secret}),
                _ => serde_json::json!({"auth": secret, "username": 7}),
            };
            let json = serde_json::to_vec(&serde_json::json!({"auths": {key: entry}}))
                .expect("JSON serializes");
            invariants::docker_config(&json, asked, &secret);
        },
    );
    check(
        1_500,
        (vec(any::<u8>(), 0..200), any_text(20)),
        |(json, registry)| invariants::docker_config(&json, &registry, ""),
    );
}

#[test]
fn an_error_body_gives_only_its_status_code_and_a_short_escaped_message() {
    let entry = (any_text(80), proptest::option::of(any_text(400))).prop_map(|(code, message)| {
        serde_json::to_vec(&serde_json::json!({"errors": [{"code": code, "message": message, "detail": "SECRET"}]})).expect("JSON serializes")
    });
    check(
        2_000,
        (100u16..1000, prop_oneof![entry, vec(any::<u8>(), 0..300)]),
        |(status, body)| invariants::error_body(status, &body),
    );
}

#[test]
fn a_capped_body_is_whole_exactly_when_it_fits() {
    let chunks = vec(vec(any::<u8>(), 0..60), 0..8);
    check(
        3_000,
        (chunks, 0u64..300, any::<bool>()),
        |(chunks, limit, known)| invariants::capped_body(&chunks, limit, known),
    );
}

/// `module` loaded in the sandbox beside `native`, the same rules linked into the host.
fn decisions_agree(module: &str, native: zundoko_rules::RuleSet, cases: u32) {
    use zundoko_operator::supply::contract::rules::NativeRules;
    use zundoko_operator::supply::sandbox::{SandboxEngine, SandboxLimits};
    let engine = SandboxEngine::new(SandboxLimits::default()).expect("an engine");
    let module = engine
        .load(&common::module_bytes(module))
        .expect("the shipped module loads");
    let native = NativeRules::new(native);
    let plans = AtomicUsize::new(0);
    check(cases, bytes(), |bytes| {
        if invariants::same_decision(&native, &module, &Draw::new(&bytes).any_observed()) {
            plans.fetch_add(1, Ordering::Relaxed);
        }
    });
    // Both ways of deciding were compared: plans, and rule errors (bad params, a song that
    // does not add up).
    let plans = plans.into_inner();
    assert!(
        plans >= cases as usize / 10 && plans <= cases as usize * 9 / 10,
        "{plans} plans of {cases} decisions"
    );
}

#[test]
fn the_classic_modules_decisions_are_the_native_rules_on_any_observed_state() {
    decisions_agree("zundoko-classic", zundoko_rules::classic(), 1_500);
}

#[test]
fn the_strict_japanese_modules_decisions_are_the_native_rules_on_any_observed_state() {
    decisions_agree("zundoko-strict-ja", zundoko_rules::strict_japanese(), 1_500);
}

/// Regressions: what the fuzz targets and the properties above found, kept as plain cases.
mod found {
    use super::*;

    fn observed() -> zundoko_rules::Observed {
        let mut observed = zundoko_rules::Observed::default();
        observed.hikawa.namespace = "ns".into();
        observed.hikawa.name = "h".into();
        observed
    }

    fn say(namespace: &str, name: &str) -> Action {
        Action::Say(Say {
            kind: ChildKind::Zundoko,
            namespace: namespace.into(),
            name: name.into(),
            index: 1,
            word: "Zun".into(),
        })
    }

    /// Found by the plan-check property: a refusal quoted the guest's namespace, name or
    /// phase whole, so a module returning a megabyte name made a megabyte error (logged, and
    /// carried to conditions and Events) on every call.
    #[test]
    fn a_refusal_quotes_a_guests_huge_name_namespace_or_phase_cut() {
        let huge = "\u{1b}x".repeat(1 << 18);
        let status = Action::SetStatus(StatusUpdate {
            phase: huge.clone(),
            num_zundokos_said: 0,
            kiyoshied: false,
            message: String::new(),
        });
        for plan in [
            vec![say(&huge, "h-zundoko-001")],
            vec![say("ns", &huge)],
            vec![status],
        ] {
            let rejection =
                plan_check::check(&Plan { actions: plan }, &observed(), &PlanLimits::default())
                    .expect_err("refused");
            invariants::tells_safely(&rejection.to_string());
        }
    }

    /// Found by `make fuzz` (budget_section, in seconds): a budget section with an unknown
    /// key made an error quoting the key as serde wrote it, a DEL (U+007F) and all, raw.
    #[test]
    fn a_budget_sections_unknown_key_is_quoted_escaped() {
        use zundoko_operator::supply::sandbox::budget;
        let bytes = budget::with_section(b"\0asm\x0d\0\x01\0", b"{\"mem\x7f\xe2\x80\xaerget{\": 1}");
        let error = budget::read(&bytes).expect_err("an unknown key is refused");
        invariants::tells_safely(&error.to_string());
        assert!(error.to_string().contains("unknown field `mem\\u{7f}\\u{202e}rget{`"), "{error}");
    }

    /// Found by the plan-check property: a status message with a bidirectional override
    /// (U+202E, which shows the text after it reversed) was accepted, only C0/C1 controls were
    /// refused; the module's description has refused both since the metadata check.
    #[test]
    fn a_status_message_with_a_bidirectional_override_is_refused() {
        for message in ["rev \u{202e}desrever", "iso \u{2066}x", "nl \n"] {
            let status = Action::SetStatus(StatusUpdate {
                phase: "Singing".into(),
                num_zundokos_said: 0,
                kiyoshied: false,
                message: message.into(),
            });
            let verdict = plan_check::check(
                &Plan {
                    actions: vec![status],
                },
                &observed(),
                &PlanLimits::default(),
            );
            assert!(
                matches!(
                    verdict,
                    Err(plan_check::PlanRejection::BadStatus {
                        field: "message",
                        ..
                    })
                ),
                "{message:?}: {verdict:?}"
            );
        }
    }
}
