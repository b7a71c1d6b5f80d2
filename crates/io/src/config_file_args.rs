//! `ConfigFileArgs`: the configuration-file flags `locus switch` and `locus node` share
//! (`-c/--config FILE`, `--check`), flattened into each one's own flags.

use std::path::PathBuf;

/// `-c/--config FILE` and `--check`, the same for every server subcommand.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ConfigFileArgs {
    /// TOML configuration file; flags given as well override its values.
    #[arg(long, short, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Check the configuration (and the files it names) and exit without serving.
    #[arg(long)]
    pub check: bool,
}

impl ConfigFileArgs {
    /// With `--check`: report the checked configuration (`summary` says what it holds) on
    /// standard output and return true, telling the caller to stop there.
    pub fn report_check(&self, summary: &str) -> bool {
        if self.check {
            println!("configuration OK: {summary}");
        }
        self.check
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        file: ConfigFileArgs,
    }

    #[test]
    fn short_and_long_config_flags_and_check_parse_alike() {
        let a = Cli::try_parse_from(["x", "-c", "a.toml", "--check"]).unwrap().file;
        assert_eq!((a.config, a.check), (Some(PathBuf::from("a.toml")), true));
        let b = Cli::try_parse_from(["x", "--config", "b.toml"]).unwrap().file;
        assert_eq!((b.config, b.check), (Some(PathBuf::from("b.toml")), false));
        assert!(!ConfigFileArgs::default().report_check("unused"));
    }
}
