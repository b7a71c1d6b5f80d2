//! `locus sim` without the rest of the `locus` binary: the same subcommands (`run`, `sweep`,
//! `reproduce lard | csld | cap | sc`), for a quick release build of the simulator alone.
//! `cargo run --release -p locus-sim --example sim_cli -- reproduce sc --out DIR`

use clap::Parser;

#[derive(Parser, Debug)]
struct SimCli {
    #[command(subcommand)]
    cmd: locus_sim::cli::SimCommand,
}

fn main() -> anyhow::Result<()> {
    locus_sim::cli::run(SimCli::parse().cmd)
}
