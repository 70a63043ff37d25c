//! The ceiling: the operator's writes without the operator.

use super::*;

/// One Hikawa's song as the ceiling client sings it: what the operator would observe.
pub(crate) struct Song {
    pub(crate) hikawa: Hikawa,
    pub(crate) observed: Observed,
}

/// The ceiling client (a process of its own, like the operator). Prints one line:
/// `figures words seconds cpu_s rss_peak_kib rss_end_kib threads t:w,t:w,...`, then the
/// requests it sent (`zundoko_rest_client_requests_total` samples, the Hikawas' creation left out: the
/// operator's runs do not count it either).
pub(crate) async fn ceiling_client() {
    let n: usize = env_number("ZUNDOKO_BENCH_N", 1000);
    let concurrency: usize = env_number("ZUNDOKO_BENCH_CONCURRENCY", 16);
    // The bare client's writes (bare.rs) instead of the operator's.
    let bare = std::env::var("ZUNDOKO_BENCH_BARE").is_ok_and(|v| v == "1");
    let mut config = kube::Config::infer().await.expect("a kubeconfig");
    config.headers.push((http::header::USER_AGENT, http::HeaderValue::from_static(if bare { "bench-bare" } else { "zundoko-operator/bench-ceiling" })));
    // The operator's client stack: its requests counted as the operator counts its own.
    let metrics = Arc::new(Metrics::new());
    let client = zundoko_operator::process::api_metrics::observed(Client::try_from(config).expect("a client"), metrics.clone());
    let namespace = std::env::var("ZUNDOKO_BENCH_NAMESPACE").unwrap_or_else(|_| NAMESPACE.into());
    let rules: Arc<dyn Rules> = Arc::new(NativeRules::new(zundoko_rules::classic()));
    // One process, every shard: the operator without election.
    let shards = ShardTable::all(32, "bench-ceiling", client.clone());
    let ctx = Arc::new(Context {
        client: client.clone(),
        writers: Writer::per_shard(&shards, "bench-ceiling"),
        shards,
        rules: Arc::new(RulesSlot::new(rules.clone())),
        // No rule sets: the ceiling sings with the default rules only.
        rulesets: Arc::new(RuleSets::new().0),
        metrics: metrics.clone(),
        plan_limits: PlanLimits::default(),
        children: Arc::new(ChildIndex::default()),
        pace: Pace::new(PaceSettings::default()),
        // Native rules have no line: nothing is ever woken.
        places: zundoko_operator::controllers::hikawa::places::Places::new(concurrency as u16, tokio::sync::mpsc::unbounded_channel().0),
        entropy: zundoko_operator::controllers::hikawa::entropy::Entropy::new(None),
        queue: Default::default(),
        calls: Default::default(),
    });
    let queue: Arc<std::sync::Mutex<VecDeque<Song>>> = Arc::default();
    let ready = Arc::new(tokio::sync::Notify::new());
    let remaining = Arc::new(AtomicUsize::new(n));
    let words = Arc::new(AtomicU64::new(0));
    let started = Instant::now();

    let creator = {
        let (queue, ready, client) = (queue.clone(), ready.clone(), client.clone());
        tokio::spawn(async move {
            create_hikawas(client, namespace, n, |h| {
                let observed = Observed { hikawa: zundoko_operator::controllers::hikawa::observe::hikawa_view(&h), ..Observed::default() };
                queue.lock().unwrap().push_back(Song { hikawa: h, observed });
                ready.notify_one();
            })
            .await
        })
    };
    let samples: Arc<std::sync::Mutex<Vec<(f64, u64)>>> = Arc::default();
    let sampler = {
        let (words, samples) = (words.clone(), samples.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                samples.lock().unwrap().push((started.elapsed().as_secs_f64(), words.load(Ordering::Relaxed)));
            }
        })
    };
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (queue, ready, remaining, words, ctx, rules) = (queue.clone(), ready.clone(), remaining.clone(), words.clone(), ctx.clone(), rules.clone());
            tokio::spawn(async move {
                while remaining.load(Ordering::Acquire) > 0 {
                    let next = queue.lock().unwrap().pop_front();
                    let Some(mut song) = next else {
                        // Nothing to sing now: wait for a Hikawa (or look again soon).
                        let _ = tokio::time::timeout(Duration::from_millis(5), ready.notified()).await;
                        continue;
                    };
                    let mut observed = song.observed.clone();
                    observed.now = jiff::Timestamp::now().as_millisecond();
                    observed.entropy = rand::random();
                    let decision = decide(rules.as_ref(), &observed, &ctx.plan_limits);
                    let plan = decision.outcome.expect("the classic rules decide");
                    if bare {
                        let (created, kiyoshi) = bare_word(&ctx.client, &song.hikawa, &plan).await;
                        words.fetch_add(created, Ordering::Relaxed);
                        observed.apply(&plan);
                        song.observed = observed;
                        if kiyoshi {
                            remaining.fetch_sub(1, Ordering::AcqRel);
                        } else {
                            queue.lock().unwrap().push_back(song);
                            ready.notify_one();
                        }
                        continue;
                    }
                    let applied = zundoko_operator::controllers::hikawa::apply::apply(&ctx, &ctx.writers[ctx.shards.shard_of(song.hikawa.metadata.uid.as_deref().unwrap_or_default()) as usize], &song.hikawa, &observed, &plan, &decision.module, Default::default())
                        .await
                        .expect("the API server takes the writes");
                    words.fetch_add(u64::from(applied.created), Ordering::Relaxed);
                    song.hikawa.status = Some(applied.status);
                    // The next status write's precondition: the Hikawa as this one left it.
                    if let Some(version) = applied.resource_version {
                        song.hikawa.metadata.resource_version = Some(version);
                    }
                    observed.apply(&plan);
                    song.observed = observed;
                    if applied.kiyoshi {
                        remaining.fetch_sub(1, Ordering::AcqRel);
                    } else {
                        queue.lock().unwrap().push_back(song);
                        ready.notify_one();
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.await.expect("a ceiling worker");
    }
    let seconds = started.elapsed().as_secs_f64();
    creator.await.expect("the creator");
    sampler.abort();
    let mut samples = std::mem::take(&mut *samples.lock().unwrap());
    let words = words.load(Ordering::Relaxed);
    samples.push((seconds, words));
    let samples: Vec<String> = samples.iter().map(|(t, w)| format!("{t:.3}:{w}")).collect();
    let me = std::process::id().to_string();
    println!(
        "figures {words} {seconds:.3} {:.3} {} {} {} {}",
        cpu_seconds(&me),
        proc_status_kib(&me, "VmHWM:"),
        proc_status_kib(&me, "VmRSS:"),
        proc_status_kib(&me, "Threads:"),
        samples.join(",")
    );
    for line in metrics.encode().lines().filter(|l| l.starts_with("zundoko_rest_client_requests_total{")) {
        println!("{line}");
    }
}

pub(crate) fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The ceiling's run, or with `bare` the bare client's (bare.rs).
pub(crate) async fn run_ceiling(n: usize, concurrency: u16, latency_ms: u64, bare: bool) -> Run {
    let mut server = Target::fresh(if bare { "bare" } else { "ceiling" }, latency_ms).await;
    server.songs_start().await;
    let server_cpu = server.cpu();
    let mut command = own_process();
    command
        .env(ROLE, "ceiling")
        .env("ZUNDOKO_BENCH_N", n.to_string())
        .env("ZUNDOKO_BENCH_CONCURRENCY", concurrency.to_string())
        .env("ZUNDOKO_BENCH_BARE", if bare { "1" } else { "0" })
        .env("KUBECONFIG", server.kubeconfig())
        .env("ZUNDOKO_BENCH_NAMESPACE", server.namespace())
        .stderr(Stdio::inherit());
    let output = tokio::task::spawn_blocking(move || command.output()).await.unwrap().expect("running the ceiling client");
    let server_cpu = server.cpu() - server_cpu;
    assert!(output.status.success(), "the ceiling client failed");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().find_map(|l| l.strip_prefix("figures ")).unwrap_or_else(|| panic!("ceiling output: {stdout}"));
    let f: Vec<&str> = line.split(' ').collect();
    let number = |i: usize| f.get(i).and_then(|s| s.parse::<f64>().ok()).unwrap_or_else(|| panic!("ceiling output: {line}"));
    let samples = f
        .get(6)
        .map(|s| s.split(',').filter_map(|p| p.split_once(':')).filter_map(|(t, w)| Some((t.parse().ok()?, w.parse().ok()?))).collect())
        .unwrap_or_default();
    let mut run = Run {
        name: if bare { "bare" } else { "ceiling" }.into(),
        words: number(0) as u64,
        seconds: number(1),
        client_cpu_s: number(2),
        rss_peak_kib: number(3) as u64,
        rss_end_kib: number(4) as u64,
        threads_end: number(5) as u64,
        samples,
        server_cpu_s: server_cpu,
        requests: client_requests(&stdout).into_iter().filter(|((verb, resource, _), _)| !(verb == "create" && resource == "hikawas")).collect(),
        ..Run::default()
    };
    check_songs(server.client(), server.namespace(), n, Some(run.words)).await;
    server.finish(&mut run).await;
    run
}
