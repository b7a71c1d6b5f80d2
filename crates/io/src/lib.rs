//! Process and socket I/O shared by the switch and the node: reads that tell tokio when they
//! drained a socket, or that a socket is drained (`read`), SIGTERM/SIGINT held pending until
//! the main thread waits for them (`signals`), and the `-c`/`--check` flags both commands
//! take (`config_file_args`).

mod config_file_args;
mod read;
mod signals;

pub use config_file_args::ConfigFileArgs;
pub use read::{mark_read_drained, try_read_buf_drained, try_read_drained};
pub use signals::TerminationSignals;
