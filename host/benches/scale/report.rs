//! The report.

use super::*;

pub(crate) fn print_runs(n: usize, concurrency: u16, latency_ms: u64, runs: &[Run]) {
    println!();
    println!("== {n} Hikawas, intervalMillis 0, concurrency {concurrency}, latency {latency_ms} ms per request ==");
    println!(
        "{:<8} {:>8} {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8} {:>5} | {:>9} {:>9} | {:>10} {:>9} {:>9} {:>9}",
        "run", "words", "seconds", "words/s", "steady", "RSS idle", "peak", "end", "thr", "cpu/word", "server", "reconciles", "requests", "watch ev", "watch KB"
    );
    println!(
        "{:<8} {:>8} {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8} {:>5} | {:>9} {:>9} | {:>10} {:>9} {:>9} {:>9}",
        "", "", "", "", "10-90%", "MiB", "MiB", "MiB", "", "client ms", "ms", "per word", "per word", "per word", "per word"
    );
    for r in runs {
        let per_word = |x: f64| x / r.words.max(1) as f64;
        let idle = if r.rss_idle_kib == 0 { "-".to_string() } else { format!("{:.1}", mib(r.rss_idle_kib)) };
        let reconciles = if r.reconciles == 0 { "-".to_string() } else { format!("{:.2}", per_word(r.reconciles as f64)) };
        // What only the local server's process tells: not printed as zero for a remote one.
        let local = |x: f64| if r.remote { "-".to_string() } else { format!("{x:.3}") };
        println!(
            "{:<8} {:>8} {:>8.1} {:>8.0} {:>8.0} | {:>8} {:>8.1} {:>8.1} {:>5} | {:>9.3} {:>9} | {:>10} {:>9.2} {:>9} {:>9}",
            r.name,
            r.words,
            r.seconds,
            r.words_per_sec(),
            r.steady_words_per_sec(),
            idle,
            mib(r.rss_peak_kib),
            mib(r.rss_end_kib),
            r.threads_end,
            per_word(r.client_cpu_s * 1000.0),
            local(per_word(r.server_cpu_s * 1000.0)),
            reconciles,
            per_word(r.requests_total() as f64),
            local(per_word(r.watch_events as f64)),
            local(per_word(r.watch_bytes as f64 / 1024.0)),
        );
    }
    if runs.iter().any(|r| r.remote) {
        println!("remote API server: its process CPU and RSS, the local server's cost-model charges, connections and watch events cannot");
        println!("be read there and are left out (-); requests per word are as the client counted them (zundoko_rest_client_requests_total).");
    }
    for r in runs.iter().filter(|r| !r.not_decided.is_empty()) {
        let why: Vec<String> = r.not_decided.iter().map(|(w, c)| format!("{w} {:.2}", *c as f64 / r.words.max(1) as f64)).collect();
        let requests: Vec<String> = r
            .requests
            .iter()
            .filter(|(_, c)| *c as f64 / r.words.max(1) as f64 >= 0.005)
            .map(|((verb, resource, sub), c)| {
                let what = if sub.is_empty() { format!("{verb} {resource}") } else { format!("{verb} {resource}/{sub}") };
                format!("{what} {:.2}", *c as f64 / r.words.max(1) as f64)
            })
            .collect();
        println!("{:<8} per word: not decided: {}; requests: {}", r.name, why.join(", "), requests.join(", "));
    }
    for r in runs.iter().filter(|r| !r.breakdown_end.is_empty()) {
        println!("{:<8} RSS idle: {}", r.name, r.breakdown_idle);
        println!("{:<8} RSS end:  {}", r.name, r.breakdown_end);
        let (idle, peak, end) = r.pss_kib;
        println!(
            "{:<8} PSS idle {:.1}, peak (sampled) {:.1}, end {:.1} MiB; RSS peak of the start (loading the module) {:.1} MiB",
            r.name,
            mib(idle),
            mib(peak),
            mib(end),
            mib(r.rss_start_peak_kib)
        );
    }
    // The server's own request duration for a word's writes, as apiserver_request_duration_seconds.
    for r in runs {
        if let Some(why) = &r.durations_unread {
            println!("{:<8} server's request durations: not read ({why})", r.name);
        }
    }
    for r in runs.iter().filter(|r| !r.durations.is_empty()) {
        let mean = |verb, resource, sub| r.mean_ms(verb, resource, sub).map_or("-".into(), |ms| format!("{ms:.1}"));
        println!(
            "{:<8} server's mean ms: POST zundokos {}, POST events {}, PATCH hikawas/status {}, PUT leases {}",
            r.name,
            mean("create", "zundokos", ""),
            mean("create", "events", ""),
            mean("patch", "hikawas", "status"),
            mean("update", "leases", "")
        );
        if r.remote {
            continue;
        }
        println!(
            "{:<8} charged for (object/body/managedFields, watchers): POST zundokos {}; POST events {}; PATCH hikawas/status {}",
            r.name,
            r.mean_facts("create", "zundokos", ""),
            r.mean_facts("create", "events", ""),
            r.mean_facts("patch", "hikawas", "status")
        );
    }
    // The connections the server accepted, by client: a new one costs a real server a TLS
    // handshake, and HTTP/1.1 needs one per request in flight.
    for r in runs.iter().filter(|r| r.connections_total > 0) {
        let clients: Vec<String> = r.connections.iter().map(|(agent, accepted, most)| format!("{agent:?} {accepted} (most open at once {most})")).collect();
        println!("{:<8} connections accepted: {} in all; by client: {}", r.name, r.connections_total, clients.join(", "));
    }
    if let Some(r) = runs.iter().find(|r| !r.sizes.is_empty()) {
        println!("{}", r.sizes);
    }
    // Against the mean of the ceiling runs (measured before and after the operator's, so the
    // machine's other load weighs on both alike).
    let ceilings: Vec<&Run> = runs.iter().filter(|r| r.name.starts_with("ceiling")).collect();
    let find = |name: &str| runs.iter().find(|r| r.name == name);
    let ratio = |a: f64, b: f64| a / b;
    if !ceilings.is_empty() {
        let mean = |f: fn(&Run) -> f64| ceilings.iter().map(|r| f(r)).sum::<f64>() / ceilings.len() as f64;
        let (whole, steady) = (mean(Run::words_per_sec), mean(Run::steady_words_per_sec));
        if ceilings.len() > 1 {
            let spread = |f: fn(&Run) -> f64| {
                let v: Vec<f64> = ceilings.iter().map(|r| f(r)).collect();
                (v.iter().cloned().fold(f64::MAX, f64::min), v.iter().cloned().fold(0.0, f64::max))
            };
            let (lo, hi) = spread(Run::words_per_sec);
            println!("ceiling (mean of {} runs): {whole:.0} words/s ({lo:.0}..{hi:.0}), {steady:.0} steady", ceilings.len());
        }
        for r in runs.iter().filter(|r| !r.name.starts_with("ceiling")) {
            println!(
                "{} / ceiling words/s: {:.2} ({:.2} steady)",
                r.name,
                ratio(r.words_per_sec(), whole),
                ratio(r.steady_words_per_sec(), steady)
            );
        }
    }
    // Against the bare client's writes (bare.rs), the mean of its runs.
    let bares: Vec<&Run> = runs.iter().filter(|r| r.name.starts_with("bare")).collect();
    if !bares.is_empty() {
        let mean = |f: fn(&Run) -> f64| bares.iter().map(|r| f(r)).sum::<f64>() / bares.len() as f64;
        let (whole, steady) = (mean(Run::words_per_sec), mean(Run::steady_words_per_sec));
        println!("bare (mean of {} runs): {whole:.0} words/s, {steady:.0} steady", bares.len());
        for r in runs.iter().filter(|r| !r.name.starts_with("bare")) {
            println!("{} / bare words/s: {:.2} ({:.2} steady)", r.name, ratio(r.words_per_sec(), whole), ratio(r.steady_words_per_sec(), steady));
        }
        print_write_durations(&bares, steady, runs);
    }
    if let (Some(wasm), Some(native)) = (find("wasm"), find("native")) {
        println!(
            "wasm / native words/s: {:.2} ({:.2} steady)",
            ratio(wasm.words_per_sec(), native.words_per_sec()),
            ratio(wasm.steady_words_per_sec(), native.steady_words_per_sec())
        );
    }
}

/// A word's three writes as the server timed them (apiserver_request_duration_seconds), the
/// bare client's (its runs together) beside each other run's, then issue 55's check per run:
/// steady words/s at least 0.9 of the bare client's, each write's mean within 15% of its.
fn print_write_durations(bares: &[&Run], bare_steady: f64, runs: &[Run]) {
    const WRITES: [(&str, &str, &str, &str); 3] =
        [("POST zundokos", "create", "zundokos", ""), ("POST events", "create", "events", ""), ("PATCH hikawas/status", "patch", "hikawas", "status")];
    let others: Vec<&Run> = runs.iter().filter(|r| !r.name.starts_with("bare") && !r.name.starts_with("ceiling") && !r.durations.is_empty()).collect();
    if others.is_empty() || bares.iter().all(|r| r.durations.is_empty()) {
        return;
    }
    // The bare runs' requests together: seconds over requests, not a mean of means.
    let bare_ms = |verb: &str, resource: &str, sub: &str| {
        let (n, sum) = bares.iter().flat_map(|r| &r.durations).filter(|((v, r, s), ..)| v == verb && r == resource && s == sub).fold((0u64, 0.0), |(n, t), (_, m, sum, _)| (n + m, t + sum));
        (n > 0).then(|| sum * 1000.0 / n as f64)
    };
    let cell = |ms: Option<f64>| ms.map_or("-".to_string(), |ms| format!("{ms:.1}"));
    println!("server's mean ms per write (apiserver_request_duration_seconds{}):", if bares.iter().any(|r| r.remote) { ", the difference of two scrapes of /metrics" } else { "" });
    let names: Vec<String> = others.iter().map(|r| format!("{:>10} {:>6}", r.name, "ratio")).collect();
    println!("{:<22} {:>10} {}", "write", "bare", names.join(" "));
    for (label, verb, resource, sub) in WRITES {
        let bare = bare_ms(verb, resource, sub);
        let cells: Vec<String> = others
            .iter()
            .map(|r| {
                let ms = r.mean_ms(verb, resource, sub);
                let ratio = ms.zip(bare).map_or("-".to_string(), |(ms, bare)| format!("{:.2}", ms / bare));
                format!("{:>10} {ratio:>6}", cell(ms))
            })
            .collect();
        println!("{label:<22} {:>10} {}", cell(bare), cells.join(" "));
    }
    for r in others {
        let ratios: Vec<String> = WRITES
            .iter()
            .map(|(label, verb, resource, sub)| {
                let ratio = r.mean_ms(verb, resource, sub).zip(bare_ms(verb, resource, sub)).map_or("-".to_string(), |(ms, bare)| format!("{:.2}", ms / bare));
                format!("{label} {ratio}")
            })
            .collect();
        println!(
            "issue 55, {}: steady words/s {:.2} of the bare client's (at least 0.90); server's mean per write against the bare client's: {} (each at most 1.15)",
            r.name,
            r.steady_words_per_sec() / bare_steady,
            ratios.join(", ")
        );
    }
}

/// One line per size, latency and operator run: the operator beside the API server's ceiling.
pub(crate) fn print_summary(concurrency: u16, summary: &[(usize, u64, Vec<Run>)]) {
    println!();
    println!("== Summary: the operator against the API server's ceiling, concurrency {concurrency} ==");
    println!(
        "{:>8} {:>8} {:<8} | {:>8} {:>8} {:>6} {:>6} | {:>9} | {:>8} {:>8} {:>8}",
        "Hikawas", "latency", "run", "words/s", "ceiling", "ratio", "x wasm", "CPU/word", "RSS idle", "RSS peak", "RSS end"
    );
    println!(
        "{:>8} {:>8} {:<8} | {:>8} {:>8} {:>6} {:>6} | {:>9} | {:>8} {:>8} {:>8}",
        "", "ms", "", "", "words/s", "", "", "ms", "MiB", "MiB", "MiB"
    );
    for (n, latency_ms, runs) in summary {
        let ceilings: Vec<&Run> = runs.iter().filter(|r| r.name.starts_with("ceiling")).collect();
        let ceiling = (!ceilings.is_empty()).then(|| ceilings.iter().map(|r| r.words_per_sec()).sum::<f64>() / ceilings.len() as f64);
        // Python's and JavaScript's words/s against Rust's (the `wasm` run) in the same run.
        let wasm = runs.iter().find(|r| r.name == "wasm").map(|r| r.words_per_sec());
        for r in runs.iter().filter(|r| !r.name.starts_with("ceiling")) {
            let (ceiling_text, ratio) = match ceiling {
                Some(c) => (format!("{c:.0}"), format!("{:.2}", r.words_per_sec() / c)),
                None => ("-".into(), "-".into()),
            };
            let to_wasm = wasm.map_or("-".into(), |w| format!("{:.2}", r.words_per_sec() / w));
            let idle = if r.rss_idle_kib == 0 { "-".to_string() } else { format!("{:.1}", mib(r.rss_idle_kib)) };
            println!(
                "{:>8} {:>8} {:<8} | {:>8.0} {:>8} {:>6} {:>6} | {:>9.3} | {:>8} {:>8.1} {:>8.1}",
                n,
                latency_ms,
                r.name,
                r.words_per_sec(),
                ceiling_text,
                ratio,
                to_wasm,
                r.client_cpu_s * 1000.0 / r.words.max(1) as f64,
                idle,
                mib(r.rss_peak_kib),
                mib(r.rss_end_kib)
            );
        }
    }
}
