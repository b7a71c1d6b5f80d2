//! Process and socket I/O shared by the switch and the node. The server skeleton: binding a
//! worker's SO_REUSEPORT listeners (`listener`), backing off from accept errors
//! (`accept_backoff`), the connection limit and its RAII slots (`connection_limit`), stopping
//! gracefully (`drain`), and shedding connections when descriptors run short
//! (`descriptor_pressure`). Besides: the splice(2) pipes and relays (`splice_pipe`), reads that
//! tell tokio when they drained a socket (`read`), SIGTERM/SIGINT held pending until the main
//! thread waits for them (`signals`), the `-c`/`--check` flags both commands take
//! (`config_file_args`), and the open-file limit and the connections it can hold (`open_files`).

mod accept_backoff;
mod config_file_args;
mod connection_limit;
mod descriptor_pressure;
mod drain;
mod listener;
mod open_files;
mod read;
mod restart_only;
pub mod service_notify;
mod signals;
mod splice_pipe;

pub use accept_backoff::{ACCEPT_BACKOFF, AcceptBackoff, AcceptRecovery, is_connection_error};
pub use config_file_args::ConfigFileArgs;
pub use connection_limit::{ConnectionLimit, ConnectionSlot};
pub use descriptor_pressure::{
    Refusal, Shedding, SpareDescriptor, headroom, is_out_of_descriptors, leaves_too_few_descriptors,
    refuse_now,
};
pub use drain::{Drained, TaskTracker, drain};
pub use listener::{BindRetry, LISTEN_BACKLOG, bind_listener, bind_listener_patiently, bind_listeners};
pub use open_files::{
    ConnectionPlan, DescriptorBudget, OpenFileLimit, RaisedLimit, TooFewDescriptors, open_file_limit,
    plan_connections, raise_open_file_limit, raise_open_file_limit_for_server, system_ceiling,
};
pub use read::{mark_read_drained, try_read_buf_drained, try_read_drained};
pub use restart_only::keep_running;
pub use signals::TerminationSignals;
pub use splice_pipe::{
    Pipe, PipePool, SpliceDirection, SpliceError, TunnelBytes, splice, splice_exact, tunnel, tunnel_through,
};
