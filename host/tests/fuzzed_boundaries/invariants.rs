//! What must hold of every input that crosses from untrusted to trusted, one function per
//! boundary: each runs the operator's own code on the input and panics, saying what broke,
//! when an invariant fails (a panic inside the operator's code is a finding too). Shared by the
//! property tests (host/tests/fuzzed_boundaries/, in `make test`) and the cargo-fuzz targets
//! (fuzz/fuzz_targets/, `make fuzz`), which include this file by path: one statement of each
//! invariant, two ways of choosing inputs.

use std::collections::HashSet;

use zundoko_operator::supply::contract::plan_check::{self, PlanLimits};
use zundoko_operator::supply::contract::rules::Rules;
use zundoko_operator::supply::oci::wire::{self, Capped};
use zundoko_operator::supply::oci::{ModuleRef, SignKey, artifact, auth, signature};
use zundoko_operator::supply::sandbox::bindings::zundokokiyoshi::rules::types as wit;
use zundoko_operator::supply::sandbox::{GuestError, SandboxLimits, budget, convert, metadata};
use zundoko_operator::text::{is_unsafe, printable};
use zundoko_rules::naming::{kiyoshi_name, zundoko_index};
use zundoko_rules::{Action, ChildKind, Observed, Plan};

/// Longest message an error about an untrusted input may carry (it reaches logs, conditions
/// and Events): what it quotes is cut, not the whole input.
pub const MAX_ERROR_BYTES: usize = 2048;

/// An error text fit for a log line: bounded, and nothing in it a terminal would act on.
#[track_caller]
pub fn tells_safely(text: &str) {
    assert!(
        text.len() <= MAX_ERROR_BYTES,
        "an error of {} bytes: {}…",
        text.len(),
        printable(text, 300)
    );
    assert!(
        !text.chars().any(is_unsafe),
        "an error with a control character or bidi override: {text:?}"
    );
}

/// The plan check never panics, and every plan it accepts keeps the naming, index and size
/// invariants, restated here from the contract (SPEC 4) rather than from the check's code.
pub fn plan_check(plan: &Plan, observed: &Observed, limits: &PlanLimits) {
    if let Err(rejection) = plan_check::check(plan, observed, limits) {
        let text = rejection.to_string();
        assert!(
            text.starts_with("action ") || text.starts_with("the plan"),
            "{text}"
        );
        tells_safely(&text);
        return;
    }
    let hikawa = &observed.hikawa;
    assert!(
        plan.actions.len() <= limits.max_actions,
        "{} actions accepted",
        plan.actions.len()
    );
    let mut names: HashSet<String> = observed
        .zundokos
        .iter()
        .chain(&observed.kiyoshi)
        .map(|s| s.name.clone())
        .collect();
    let mut zundokos = observed.zundokos.len() as u32;
    let mut kiyoshi = observed.kiyoshi.is_some();
    let (mut statuses, mut requeues) = (0, 0);
    for (i, action) in plan.actions.iter().enumerate() {
        match action {
            Action::Say(say) => {
                assert_eq!(
                    say.namespace, hikawa.namespace,
                    "action {i}: a child outside the Hikawa's namespace"
                );
                assert!(!kiyoshi, "action {i}: a word after the Kiyoshi");
                assert_eq!(say.index, zundokos + 1, "action {i}: not the next index");
                match say.kind {
                    ChildKind::Zundoko => {
                        assert_eq!(
                            zundoko_index(&hikawa.name, &say.name),
                            Some(say.index),
                            "action {i}: {:?} is not this Hikawa's child {}",
                            say.name,
                            say.index
                        );
                        zundokos += 1;
                        assert!(
                            zundokos <= limits.max_children,
                            "action {i}: {zundokos} children, over the cap {}",
                            limits.max_children
                        );
                    }
                    ChildKind::Kiyoshi => {
                        assert_eq!(say.name, kiyoshi_name(&hikawa.name), "action {i}");
                        kiyoshi = true;
                    }
                }
                assert!(
                    names.insert(say.name.clone()),
                    "action {i}: {:?} names a child that exists",
                    say.name
                );
                let word = &say.word;
                assert!(
                    !word.is_empty() && word.len() <= limits.max_word_bytes,
                    "action {i}: a word of {} bytes",
                    word.len()
                );
                assert!(
                    !word.starts_with(' ') && !word.ends_with(' '),
                    "action {i}: {word:?}"
                );
                assert!(
                    !word.chars().any(is_unsafe),
                    "action {i}: {word:?} has a control character or bidi override"
                );
                assert!(
                    !word.chars().any(|c| "<>&\"/\\:;{}".contains(c)),
                    "action {i}: {word:?} has markup or a separator"
                );
            }
            Action::SetStatus(status) => {
                statuses += 1;
                assert!(
                    !status.phase.is_empty() && status.phase.len() <= limits.max_phase_bytes,
                    "action {i}: phase {:?}",
                    status.phase
                );
                assert!(
                    status.phase.bytes().all(|b| b.is_ascii_alphanumeric()),
                    "action {i}: phase {:?}",
                    status.phase
                );
                assert!(
                    status.message.len() <= limits.max_message_bytes,
                    "action {i}: a message of {} bytes",
                    status.message.len()
                );
                assert!(
                    !status.message.chars().any(is_unsafe),
                    "action {i}: message {:?}",
                    status.message
                );
                assert!(
                    status.num_zundokos_said <= zundokos,
                    "action {i}: claims {} words of {zundokos}",
                    status.num_zundokos_said
                );
                assert!(
                    !status.kiyoshied || kiyoshi,
                    "action {i}: kiyoshied without a Kiyoshi"
                );
            }
            Action::RequeueAfter(ms) => {
                requeues += 1;
                assert!(
                    *ms <= limits.max_requeue_ms,
                    "action {i}: requeue after {ms} ms"
                );
            }
        }
    }
    assert!(
        statuses <= 1 && requeues <= 1,
        "{statuses} statuses, {requeues} requeues in one plan"
    );
}

/// A guest's plan, lifted into the host's bindings, converted field for field: nothing lost,
/// nothing invented (the check then sees exactly what the guest said).
pub fn guest_plan(guest: wit::Plan) {
    let host = convert::plan(guest.clone());
    assert_eq!(host.actions.len(), guest.actions.len());
    for (h, g) in host.actions.iter().zip(&guest.actions) {
        let same = match (h, g) {
            (Action::Say(h), wit::Action::Say(g)) => {
                let kind = matches!(
                    (h.kind, g.kind),
                    (ChildKind::Zundoko, wit::ChildKind::Zundoko)
                        | (ChildKind::Kiyoshi, wit::ChildKind::Kiyoshi)
                );
                kind && (h.namespace == g.namespace)
                    && (h.name == g.name)
                    && (h.index == g.index)
                    && (h.word == g.word)
            }
            (Action::SetStatus(h), wit::Action::SetStatus(g)) => {
                h.phase == g.phase
                    && h.num_zundokos_said == g.num_zundokos_said
                    && h.kiyoshied == g.kiyoshied
                    && h.message == g.message
            }
            (Action::RequeueAfter(h), wit::Action::RequeueAfter(g)) => h == g,
            _ => false,
        };
        assert!(same, "{g:?} converted to {h:?}");
    }
}

/// A guest's rule error reaches logs, conditions and Events bounded and escaped, its kind
/// kept; a message that is already short and safe is kept as it is.
pub fn guest_rule_error(kind: u8, message: &str) {
    let guest = match kind % 3 {
        0 => wit::RuleError::InvalidParams(message.into()),
        1 => wit::RuleError::InconsistentSong(message.into()),
        _ => wit::RuleError::Internal(message.into()),
    };
    let host = convert::rule_error(guest);
    let (zundoko_rules::RuleError::InvalidParams(kept)
    | zundoko_rules::RuleError::InconsistentSong(kept)
    | zundoko_rules::RuleError::Internal(kept)) = &host;
    assert!(
        kept.len() <= convert::MAX_RULE_ERROR_BYTES,
        "{} bytes kept",
        kept.len()
    );
    assert!(!kept.chars().any(is_unsafe), "{kept:?}");
    if message.len() + '…'.len_utf8() <= convert::MAX_RULE_ERROR_BYTES
        && !message.chars().any(is_unsafe)
    {
        assert_eq!(kept, message);
    }
    tells_safely(&GuestError::Rules(host).to_string());
}

/// A module's `info()`: accepted only within its bounds; a refusal quotes it escaped and short.
pub fn guest_module_info(name: &str, version: &str, description: &str) {
    let info = convert::module_info(wit::ModuleInfo {
        name: name.into(),
        version: version.into(),
        description: description.into(),
    });
    assert_eq!(
        (
            info.name.as_str(),
            info.version.as_str(),
            info.description.as_str()
        ),
        (name, version, description)
    );
    match metadata::check(&info) {
        Ok(()) => {
            let identifier = |s: &str, extra: &str| {
                s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
            };
            assert!(
                !name.is_empty()
                    && name.len() <= metadata::MAX_NAME_BYTES
                    && identifier(name, "-_."),
                "name {name:?}"
            );
            assert!(
                !version.is_empty()
                    && version.len() <= metadata::MAX_VERSION_BYTES
                    && identifier(version, ".-+"),
                "version {version:?}"
            );
            assert!(
                description.len() <= metadata::MAX_DESCRIPTION_BYTES
                    && !description.chars().any(is_unsafe),
                "description {description:?}"
            );
        }
        Err(error) => {
            assert_eq!(error.reason(), "BadModuleMetadata");
            tells_safely(&error.to_string());
        }
    }
}

/// The budget section of any bytes: read without panicking; a refusal says why, safely; a
/// budget read is one the bytes carry; what is granted stays under the operator's ceilings.
pub fn budget_section(bytes: &[u8]) {
    match budget::read(bytes) {
        Ok(asked) => {
            if asked != budget::Budget::default() {
                assert!(
                    bytes
                        .windows(budget::SECTION.len())
                        .any(|w| w == budget::SECTION.as_bytes()),
                    "a budget from bytes without the section"
                );
            }
            granted_within_ceilings(asked);
        }
        Err(error) => tells_safely(&error.to_string()),
    }
}

/// A budget section appended to a component (after any custom sections): read back as the
/// JSON it holds says, or refused exactly when that JSON is no budget or too big.
pub fn budget_round_trip(other_sections: &[(String, Vec<u8>)], payload: &[u8]) {
    let mut component = b"\0asm\x0d\0\x01\0".to_vec();
    for (name, content) in other_sections {
        component = budget::append_custom_section(component, name, content);
    }
    let with = budget::with_section(&component, payload);
    let expected = if other_sections
        .iter()
        .any(|(name, _)| name == budget::SECTION)
    {
        None // the first section of that name is the one read
    } else if payload.len() > 1024 {
        Some(None)
    } else {
        Some(serde_json::from_slice::<budget::Budget>(payload).ok())
    };
    let read = budget::read(&with);
    if let Some(expected) = expected {
        assert_eq!(
            read.as_ref().ok().copied(),
            expected,
            "payload {:?}",
            String::from_utf8_lossy(payload)
        );
    }
    budget_section(&with);
}

fn granted_within_ceilings(asked: budget::Budget) {
    let defaults = SandboxLimits::default();
    if let Ok(limits) = budget::grant(asked, &defaults) {
        assert!(limits.memory_bytes <= defaults.max_memory_bytes && limits.memory_bytes > 0);
        assert!(limits.fuel <= defaults.max_fuel && limits.fuel > 0);
        assert!(limits.module_bytes <= defaults.max_module_bytes && limits.module_bytes > 0);
    }
}

/// An OCI reference as a user or a rule set writes it: parsed or refused without panicking;
/// one parsed names its registry, a sha256 digest if any, and prints back to itself.
pub fn reference(text: &str) {
    match text.parse::<ModuleRef>() {
        Err(e) => tells_safely(&e),
        Ok(r) => {
            assert!(
                r.registry.contains('.') || r.registry.contains(':') || r.registry == "localhost",
                "registry {:?} of {text:?}",
                r.registry
            );
            assert!(!r.repository.is_empty(), "{text:?}");
            assert!(r.tag.is_some() || r.digest.is_some(), "{text:?}");
            if let Some(digest) = &r.digest {
                let hex = digest
                    .strip_prefix("sha256:")
                    .unwrap_or_else(|| panic!("digest {digest:?} of {text:?}"));
                assert!(
                    hex.len() == 64
                        && hex
                            .bytes()
                            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
                    "digest {digest:?} of {text:?}"
                );
            }
            let printed = r.to_string();
            assert!(
                !printed.chars().any(|c| c.is_whitespace() || is_unsafe(c)),
                "{printed:?}"
            );
            let again: ModuleRef = printed.parse().unwrap_or_else(|e| {
                panic!("{text:?} printed as {printed:?}, which does not parse: {e}")
            });
            assert_eq!(again, r, "{text:?} printed as {printed:?}");
        }
    }
}

/// A manifest from a registry: the one component layer found, or a refusal saying why, safely.
pub fn manifest(raw: &[u8]) {
    match artifact::module_layer(raw) {
        Err(e) => tells_safely(&e),
        Ok((digest, size)) => {
            let value: serde_json::Value = serde_json::from_slice(raw).expect("accepted, so JSON");
            assert!(value.get("manifests").is_none(), "an index accepted");
            assert_eq!(value["config"]["mediaType"], artifact::CONFIG_MEDIA_TYPE);
            let layers = value["layers"].as_array().expect("accepted, so layers");
            let wasm: Vec<_> = layers
                .iter()
                .filter(|l| l["mediaType"] == artifact::LAYER_MEDIA_TYPE)
                .collect();
            assert_eq!(wasm.len(), 1, "{layers:?}");
            assert_eq!(wasm[0]["digest"].as_str(), Some(digest.as_str()));
            assert_eq!(wasm[0]["size"].as_u64(), Some(size));
        }
    }
}

/// The key the signature invariants sign with (made once: a P-256 key takes a moment).
pub fn signing_key() -> &'static SignKey {
    static KEY: std::sync::OnceLock<SignKey> = std::sync::OnceLock::new();
    KEY.get_or_init(SignKey::generate)
}

/// A signature found next to an artifact, its payload anything, signed by the trusted key or
/// not: it verifies only if signed by that key over a simple-signing payload naming this
/// digest (and, when an identity is required, this repository); a refusal says why, safely.
pub fn signature(
    payload: &[u8],
    signed: bool,
    garbage_signature: &str,
    digest: &str,
    identity: Option<&str>,
) {
    let key = signing_key();
    let trusted = [key.trusted("team.pub")];
    let found = signature::Found {
        payload: payload.to_vec(),
        signature: if signed {
            key.sign(payload)
        } else {
            garbage_signature.to_string()
        },
    };
    match signature::verify(digest, &[found], &trusted, identity) {
        Err(e) => tells_safely(&e),
        Ok(by) => {
            assert_eq!(by, trusted[0].name);
            assert!(
                signed || garbage_signature == key.sign(payload),
                "an unsigned payload verified"
            );
            let value: serde_json::Value =
                serde_json::from_slice(payload).expect("verified, so JSON");
            assert_eq!(
                value["critical"]["image"]["docker-manifest-digest"].as_str(),
                Some(digest),
                "{value}"
            );
            if let Some(identity) = identity {
                assert_eq!(
                    value["critical"]["identity"]["docker-reference"].as_str(),
                    Some(identity),
                    "{value}"
                );
            }
        }
    }
}

/// Any `WWW-Authenticate` header: parsed without panicking into a scheme and named params.
pub fn challenge(header: &str) {
    let (scheme, params) = wire::parse_challenge(header);
    assert!(
        !scheme.chars().any(char::is_whitespace),
        "scheme {scheme:?} of {header:?}"
    );
    for (key, _) in &params {
        assert!(
            !key.is_empty() && !key.contains('=') && *key == key.to_ascii_lowercase(),
            "param {key:?} of {header:?}"
        );
    }
}

/// A header written from a scheme and params, every value quoted (quotes and backslashes
/// escaped): parsed back to what was written.
pub fn challenge_round_trip(scheme: &str, params: &[(String, String)]) {
    let quoted = |v: &str| v.replace('\\', "\\\\").replace('"', "\\\"");
    let written = params
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", quoted(v)))
        .collect::<Vec<_>>()
        .join(",");
    let header = format!("{scheme} {written}");
    let parsed = wire::parse_challenge(&header);
    let lowered: Vec<_> = params
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
        .collect();
    assert_eq!(parsed, (scheme.to_string(), lowered), "{header:?}");
}

/// A registry's docker config (a pull secret): parsed or refused without panicking, and a
/// refusal never says the secret.
pub fn docker_config(json: &[u8], registry: &str, secret: &str) {
    if let Err(e) = auth::from_docker_config(json, registry) {
        tells_safely(&e);
        assert!(
            secret.len() < 4 || !e.contains(secret),
            "the refusal says the secret: {e}"
        );
    }
}

/// An error answer's body: its status, code and message only, short and escaped.
pub fn error_body(status: u16, body: &[u8]) {
    let status =
        reqwest::StatusCode::from_u16(status.clamp(100, 999)).expect("100..=999 is a status");
    let (code, detail) = wire::oci_error(status, body);
    if let Some(code) = &code {
        assert!(
            code.len() <= 40 && !code.chars().any(is_unsafe),
            "code {code:?}"
        );
    }
    assert!(
        detail.len() <= 200,
        "{} bytes of detail: {detail:?}",
        detail.len()
    );
    assert!(!detail.chars().any(is_unsafe), "{detail:?}");
}

/// A body arriving in these chunks (or whole, its length known before a byte is read), read
/// under `limit`: whole exactly when it fits, never more than the limit kept; an error body's
/// prefix is its first bytes.
pub fn capped_body(chunks: &[Vec<u8>], limit: u64, length_known: bool) {
    let body: Vec<u8> = chunks.concat();
    let response = || {
        let wrapped = if length_known {
            reqwest::Body::from(body.clone())
        } else {
            // The stream must own its chunks ('static).
            let owned: Vec<Vec<u8>> = chunks.to_vec();
            let stream = futures::stream::iter(owned.into_iter().map(Ok::<_, std::io::Error>));
            reqwest::Body::wrap_stream(stream)
        };
        reqwest::Response::from(http::Response::new(wrapped))
    };
    match futures::executor::block_on(wire::read_capped(response(), limit))
        .expect("an in-memory body reads")
    {
        Capped::Whole(bytes) => {
            assert!(
                bytes.len() as u64 <= limit,
                "{} bytes kept under a limit of {limit}",
                bytes.len()
            );
            assert!(bytes == body, "the body read is not the body sent");
        }
        Capped::Over(size) => {
            assert!(
                body.len() as u64 > limit,
                "a body of {} bytes refused under a limit of {limit}",
                body.len()
            );
            assert!(
                size > limit && size <= body.len() as u64,
                "refused at {size} bytes ({} sent, limit {limit})",
                body.len()
            );
        }
    }
    let prefix_limit = limit.min(1 << 16) as usize;
    let prefix = futures::executor::block_on(wire::read_prefix(response(), prefix_limit));
    assert!(
        prefix == body[..body.len().min(prefix_limit)],
        "the prefix is not the body's first {prefix_limit} bytes"
    );
}

/// The module's decision and the same rules' natively: the same plan, or the same rule error
/// (the module's as the host bounds it), on any observed state. True if both made a plan.
pub fn same_decision(native: &dyn Rules, module: &dyn Rules, observed: &Observed) -> bool {
    let (n, m) = (native.reconcile(observed), module.reconcile(observed));
    match (n, m) {
        (Ok(n), Ok(m)) => {
            assert_eq!(
                n.value, m.value,
                "native and module plans differ for {observed:?}"
            );
            true
        }
        (Err(GuestError::Rules(n)), Err(GuestError::Rules(m))) => {
            let bounded = convert::rule_error(match n {
                zundoko_rules::RuleError::InvalidParams(s) => wit::RuleError::InvalidParams(s),
                zundoko_rules::RuleError::InconsistentSong(s) => {
                    wit::RuleError::InconsistentSong(s)
                }
                zundoko_rules::RuleError::Internal(s) => wit::RuleError::Internal(s),
            });
            assert_eq!(
                bounded, m,
                "native and module rule errors differ for {observed:?}"
            );
            false
        }
        (n, m) => panic!(
            "native {:?} but module {:?} for {observed:?}",
            n.map(|o| o.value),
            m.map(|o| o.value)
        ),
    }
}
