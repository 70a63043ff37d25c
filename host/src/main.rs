use clap::Parser;
use zundoko_operator::cli::{self, Cli, Command};

/// An error ends the process with one line naming it (its causes joined), no backtrace.
fn main() -> std::process::ExitCode {
    // Before any thread starts: see memory::limit_malloc_arenas.
    zundoko_operator::process::memory::limit_malloc_arenas();
    let ran = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(anyhow::Error::from).and_then(|rt| rt.block_on(main_async()));
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

async fn main_async() -> anyhow::Result<()> {
    let cli = Cli::parse();
    zundoko_operator::process::telemetry::init(cli.log_format, &cli.log_filter);
    let mut stdout = std::io::stdout().lock();
    match &cli.command {
        Command::Run(args) => cli::run(args).await,
        Command::Simulate(args) => cli::simulate(args, &mut stdout).map(drop),
        Command::Check(args) => cli::check(args, &mut stdout).await,
        Command::Push(args) => cli::push(args, &mut stdout).await,
        Command::Keygen(args) => cli::keygen(args, &mut stdout),
        Command::CompileModule(args) => cli::compile_module(args),
        Command::Test(args) => cli::test(args, &mut stdout),
        Command::Crd => {
            print!("{}", zundoko_operator::crd::all_yaml()?);
            Ok(())
        }
    }
}
