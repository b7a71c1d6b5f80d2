//! Process and socket I/O shared by the switch and the node: reads that tell tokio when they
//! drained a socket, or that a socket is drained (`read`), SIGTERM/SIGINT held pending until
//! the main thread waits for them (`signals`), the `-c`/`--check` flags both commands take
//! (`config_file_args`), the open-file limit and the connections it can hold (`open_files`),
//! and shedding connections when descriptors run short (`descriptor_pressure`).

mod config_file_args;
mod descriptor_pressure;
mod open_files;
mod read;
mod signals;

pub use config_file_args::ConfigFileArgs;
pub use descriptor_pressure::{
    Refusal, Shedding, SpareDescriptor, headroom, is_out_of_descriptors, leaves_too_few_descriptors,
    refuse_now,
};
pub use open_files::{
    ConnectionPlan, DescriptorBudget, OpenFileLimit, RaisedLimit, TooFewDescriptors, open_file_limit,
    plan_connections, raise_open_file_limit, raise_open_file_limit_for_server, system_ceiling,
};
pub use read::{mark_read_drained, try_read_buf_drained, try_read_drained};
pub use signals::TerminationSignals;
