//! `explain` as the tests run it: parsed as the command line parses it, run in process.

use clap::Parser;
use zundoko_operator::cli::explain::{Report, explain};
use zundoko_operator::cli::{Cli, Command};

use super::cluster::Cluster;

/// `zundoko-operator explain ARGV...` against the cluster, its report.
pub async fn run(cluster: &Cluster, argv: &[&str]) -> Report {
    let cli = Cli::try_parse_from([&["zundoko-operator", "explain"], argv].concat()).unwrap();
    let Command::Explain(args) = cli.command else { unreachable!() };
    explain(&cluster.client, &args).await.unwrap()
}
