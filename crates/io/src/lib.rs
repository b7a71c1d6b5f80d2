//! Process and socket I/O shared by the switch and the node: reads that tell tokio when they
//! drained a socket (`read`), and SIGTERM/SIGINT held pending until the main thread waits for
//! them (`signals`).

mod read;
mod signals;

pub use read::{try_read_buf_drained, try_read_drained};
pub use signals::TerminationSignals;
