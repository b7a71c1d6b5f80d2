//! The `locus` command: parses arguments and hands each subcommand to its library crate.

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
    Switch(locus_switch::cli::SwitchArgs),
    /// Run a back-end node.
    Node(Box<locus_node::cli::NodeArgs>),
    /// A two-node cluster on loopback, compared across policies on a generated site.
    Demo(locus_lab::loopback_demo::LoopbackDemoArgs),
    /// Generate load: replay a trace or a synthetic workload, verify every response.
    Load(locus_load::LoadArgs),
    /// Trace-driven simulation of a cluster on the production policy and cache code.
    #[command(subcommand)]
    Sim(locus_sim::cli::SimCommand),
    /// Make, convert and characterise request traces.
    #[command(subcommand)]
    Trace(locus_trace::cli::TraceCommand),
    /// System benchmarks (Locus beside HAProxy and NGINX).
    #[command(subcommand)]
    Bench(locus_bench::cli::BenchCommand),
    /// The namespace lab: a cluster in network namespaces, experiments, reports with plots.
    #[command(subcommand)]
    Lab(locus_lab::cli::LabCommand),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // Servers log their life cycle; the demo and benchmarks run servers in-process or as
    // children and only want to hear about problems. LOCUS_LOG overrides either default.
    let default_level = match cli.command {
        Command::Switch(_) | Command::Node(_) => "info",
        _ => "warn",
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
        Command::Switch(args) => locus_switch::cli::run(args),
        Command::Node(args) => locus_node::cli::run(*args),
        Command::Demo(args) => locus_lab::loopback_demo::run_loopback_demo_command(args),
        Command::Bench(cmd) => locus_bench::cli::run(cmd),
        Command::Trace(cmd) => locus_trace::cli::run(cmd),
        Command::Sim(cmd) => locus_sim::cli::run(cmd),
        Command::Load(args) => locus_load::cli::run(args),
        Command::Lab(cmd) => locus_lab::cli::run(cmd),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("locus: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
