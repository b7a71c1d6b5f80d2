//! The `locus` command: parses arguments and hands each subcommand to its library crate.

fn main() {}
