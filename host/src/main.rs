use clap::Parser;
use zundoko_operator::cli::{self, Cli, Command};

/// mimalloc rather than glibc's malloc: a word makes a few hundred small allocations (requests,
/// answers, watch events, the guest's input), and glibc's malloc and free were a fifth of the
/// operator's CPU; mimalloc takes about 8% off the CPU per word (`make bench-scale`). Buffers of
/// 4 MiB and more are mapped on their own, so they go back to the system when freed on any
/// thread (process/allocator.rs).
#[global_allocator]
static ALLOCATOR: zundoko_operator::process::allocator::OperatorAllocator = zundoko_operator::process::allocator::OperatorAllocator;

/// An error ends the process with one line naming it (its causes joined), no backtrace.
fn main() -> std::process::ExitCode {
    // Before any thread starts: see memory.rs.
    zundoko_operator::process::memory::no_transparent_huge_pages();
    zundoko_operator::process::memory::limit_malloc_arenas();
    zundoko_operator::process::memory::purge_freed_segments_at_once();
    let cli = Cli::parse();
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Command::Run(args) = &cli.command {
        runtime.worker_threads(usize::from(args.worker_threads));
    }
    let ran = runtime.enable_all().build().map_err(anyhow::Error::from).and_then(|rt| rt.block_on(main_async(cli)));
    match ran {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            // One line whatever the causes say (a YAML parser's error spans several).
            let line = format!("{error:#}").split_whitespace().collect::<Vec<_>>().join(" ");
            eprintln!("error: {}", zundoko_operator::text::printable(&line, 4096));
            std::process::ExitCode::FAILURE
        }
    }
}

async fn main_async(cli: Cli) -> anyhow::Result<()> {
    zundoko_operator::process::telemetry::init(cli.log_format, &cli::log_filter(&cli.command, &cli.log_filter));
    let mut stdout = std::io::stdout().lock();
    match &cli.command {
        Command::Run(args) => cli::run(args).await,
        Command::Simulate(args) => cli::simulate(args, &mut stdout).map(drop),
        Command::Check(args) => cli::check(args, &mut stdout).await,
        Command::Push(args) => cli::push(args, &mut stdout).await,
        Command::Keygen(args) => cli::keygen(args, &mut stdout),
        Command::Sign(args) => cli::sign(args, &mut stdout),
        Command::CompileModule(args) => cli::compile_module(args),
        Command::Test(args) => cli::test(args, &mut stdout),
        Command::Crd => cli::crd(&mut stdout),
        Command::GrantReads(args) => cli::grant_reads(args, &mut stdout),
        Command::Explain(args) => cli::explain::run(args, &mut stdout).await,
    }
}
