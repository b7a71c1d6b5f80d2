//! The `locus` command: parses arguments and hands each subcommand to its library crate.
//! The servers (switch, node) are always in; the tools only with the `tools` feature.

#[cfg(feature = "tools")]
mod tools;

use clap::{Parser, Subcommand};
use std::io::IsTerminal;

/// Locus: a content-aware web cluster.
#[derive(Parser, Debug)]
#[command(name = "locus", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the front-end switch.
    Switch(Box<locus_switch::cli::SwitchArgs>),
    /// Run a back-end node.
    Node(Box<locus_node::cli::NodeArgs>),
    /// Send a command to a running switch's runtime API (nodes, drain, weight, reload, ...).
    Ctl(locus_switch::ctl::CtlArgs),
    /// The tools (feature `tools`): demo, load, sim, trace, bench, lab.
    #[cfg(feature = "tools")]
    #[command(flatten)]
    Tool(Box<tools::ToolCommand>),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // Servers log their life cycle; the demo and benchmarks run servers in-process or as
    // children and only want to hear about problems. LOCUS_LOG overrides either default.
    let default_level = match cli.command {
        Command::Switch(_) | Command::Node(_) => "info",
        Command::Ctl(_) => "warn",
        #[cfg(feature = "tools")]
        Command::Tool(_) => "warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LOCUS_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal, never into a file, pipe or journal.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let result = match cli.command {
        Command::Switch(args) => locus_switch::cli::run(*args),
        Command::Node(args) => locus_node::cli::run(*args),
        Command::Ctl(args) => locus_switch::ctl::run(args),
        #[cfg(feature = "tools")]
        Command::Tool(cmd) => tools::run(*cmd),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("locus: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
