//! The tools' subcommands (feature `tools`, on by default): the demo, the load generator, the
//! simulator, traces, benchmarks and the lab, each handed to its library crate.

use clap::Subcommand;

/// The subcommands that are not servers.
#[derive(Subcommand, Debug)]
pub enum ToolCommand {
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

/// Run a tool's subcommand.
pub fn run(command: ToolCommand) -> anyhow::Result<()> {
    match command {
        ToolCommand::Demo(args) => locus_lab::loopback_demo::run_loopback_demo_command(args),
        ToolCommand::Bench(cmd) => locus_bench::cli::run(cmd),
        ToolCommand::Trace(cmd) => locus_trace::cli::run(cmd),
        ToolCommand::Sim(cmd) => locus_sim::cli::run(cmd),
        ToolCommand::Load(args) => locus_load::cli::run(args),
        ToolCommand::Lab(cmd) => locus_lab::cli::run(cmd),
    }
}
