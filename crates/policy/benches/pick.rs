//! Criterion benchmarks of `pick` for every policy.
fn main() {}
