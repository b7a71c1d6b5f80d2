//! The demo (`locus lab demo`, and `locus demo` on loopback): its built-in experiment and the
//! note on its tuning (`experiment`), the notes on its hot-spot and dynamic workloads
//! (`tuning`), and the checks of its claims (`checks`).

mod checks;
mod experiment;
mod tuning;

pub use checks::{DemoCheck, checks_markdown, demo_checks};
pub use experiment::{DEMO_EXPERIMENT, demo_experiment, tuning_note};
