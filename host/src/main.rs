use clap::Parser;
use zundoko_operator::cli::{self, Cli, Command};

fn main() -> anyhow::Result<()> {
    // Before any thread starts: see memory::limit_malloc_arenas.
    zundoko_operator::memory::limit_malloc_arenas();
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(main_async())
}

async fn main_async() -> anyhow::Result<()> {
    let cli = Cli::parse();
    zundoko_operator::telemetry::init(cli.log_format, &cli.log_filter);
    let mut stdout = std::io::stdout().lock();
    match &cli.command {
        Command::Run(args) => cli::run(args).await,
        Command::Simulate(args) => cli::simulate(args, &mut stdout).map(drop),
        Command::Check(args) => cli::check(args, &mut stdout),
        Command::Test(args) => cli::test(args, &mut stdout),
        Command::Crd => {
            print!("{}", zundoko_operator::crd::all_yaml()?);
            Ok(())
        }
    }
}
