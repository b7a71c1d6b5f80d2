//! A stand-alone `locus node` for benchmarks and manual runs, until the `locus` binary wires
//! the subcommand: `cargo run -p locus-node --release --example node -- --root DIR`.

use clap::Parser;

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    node: locus_node::cli::NodeArgs,
}

fn main() -> anyhow::Result<()> {
    locus_node::cli::run(Args::parse().node)
}
