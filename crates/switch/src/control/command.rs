//! The runtime API's commands (`locus ctl`, the control socket, `POST /locus/ctl`): one line
//! of words in, parsed strictly here — an unknown word, a missing or extra argument, a weight
//! out of range or a line too long is refused with what was expected, never guessed at.

/// Longest command line accepted.
pub const MAX_LINE: usize = 4096;

/// Largest weight `weight` sets (as a configuration may).
pub const MAX_WEIGHT: u32 = 1_000_000;

/// One command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// The status document.
    Status,
    /// Every node: state, weight, load, counters.
    Nodes,
    /// Take the node out of the view; its requests in flight finish; health checks go on.
    Drain(String),
    /// Take the node out of the view and pause its health checks (maintenance).
    Disable(String),
    /// Put a drained or disabled node back (slow start; health checks decide from there).
    Enable(String),
    /// Set the node's weight.
    Weight(String, u32),
    /// The policy's name and parameters.
    Policy,
    /// Set one of the policy's parameters (`t_high 80`); the policy keeps its state when it
    /// can take the change.
    PolicySet(String, String),
    /// Connections open now (and, in handoff mode, the ones on nodes).
    Sessions,
    /// Read the configuration file again and put it in force.
    Reload,
}

/// Every command's form, for an error message and `locus ctl --help`.
pub const USAGE: &str = "status | nodes | drain <node> | disable <node> | enable <node> | weight <node> <1..1000000> \
                         | policy | policy set <param> <value> | sessions | reload";

/// A line that is not a command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    #[error("empty command (expected one of: {USAGE})")]
    Empty,
    #[error("command line longer than {MAX_LINE} bytes")]
    TooLong,
    #[error("unknown command `{0}` (expected one of: {USAGE})")]
    Unknown(String),
    #[error("`{command}` takes {expected}")]
    Arguments { command: &'static str, expected: &'static str },
    #[error("weight `{0}` is not a whole number from 1 to {MAX_WEIGHT}")]
    Weight(String),
}

impl Command {
    /// Parse one command line (surrounding white space ignored).
    pub fn parse(line: &str) -> Result<Command, CommandError> {
        if line.len() > MAX_LINE {
            return Err(CommandError::TooLong);
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some((&name, args)) = words.split_first() else { return Err(CommandError::Empty) };
        let arity = |command: &'static str, expected: &'static str, n: usize| {
            if args.len() == n { Ok(()) } else { Err(CommandError::Arguments { command, expected }) }
        };
        let node = |command: &'static str| arity(command, "one node name", 1).map(|()| args[0].to_string());
        Ok(match name {
            "status" => arity("status", "no arguments", 0).map(|()| Command::Status)?,
            "nodes" => arity("nodes", "no arguments", 0).map(|()| Command::Nodes)?,
            "sessions" => arity("sessions", "no arguments", 0).map(|()| Command::Sessions)?,
            "reload" => arity("reload", "no arguments", 0).map(|()| Command::Reload)?,
            "drain" => Command::Drain(node("drain")?),
            "disable" => Command::Disable(node("disable")?),
            "enable" => Command::Enable(node("enable")?),
            "weight" => {
                arity("weight", "a node name and a weight", 2)?;
                let w = args[1].parse::<u32>().ok().filter(|w| (1..=MAX_WEIGHT).contains(w));
                Command::Weight(args[0].to_string(), w.ok_or_else(|| CommandError::Weight(args[1].into()))?)
            }
            "policy" => match args {
                [] => Command::Policy,
                ["set", param, value] => Command::PolicySet(param.to_string(), value.to_string()),
                _ => {
                    return Err(CommandError::Arguments {
                        command: "policy",
                        expected: "no arguments, or `set <param> <value>`",
                    });
                }
            },
            other => return Err(CommandError::Unknown(other.chars().take(64).collect())),
        })
    }

    /// Whether the command changes anything (logged, and counted apart).
    pub fn changes_state(&self) -> bool {
        !matches!(self, Command::Status | Command::Nodes | Command::Policy | Command::Sessions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_form_parses_and_wrong_arguments_are_refused_with_what_was_expected() {
        assert_eq!(Command::parse("  nodes \n"), Ok(Command::Nodes));
        assert_eq!(Command::parse("drain n1"), Ok(Command::Drain("n1".into())));
        assert_eq!(Command::parse("weight n1 7"), Ok(Command::Weight("n1".into(), 7)));
        assert_eq!(
            Command::parse("policy set t_high 80"),
            Ok(Command::PolicySet("t_high".into(), "80".into()))
        );
        assert_eq!(Command::parse(""), Err(CommandError::Empty));
        assert!(matches!(Command::parse("drain"), Err(CommandError::Arguments { command: "drain", .. })));
        assert!(matches!(Command::parse("nodes now"), Err(CommandError::Arguments { .. })));
        assert!(matches!(Command::parse("policy get x"), Err(CommandError::Arguments { .. })));
        assert_eq!(Command::parse("weight n1 0"), Err(CommandError::Weight("0".into())));
        assert_eq!(Command::parse("weight n1 -3"), Err(CommandError::Weight("-3".into())));
        assert_eq!(Command::parse("shutdown"), Err(CommandError::Unknown("shutdown".into())));
        assert_eq!(Command::parse(&"x".repeat(MAX_LINE + 1)), Err(CommandError::TooLong));
    }

    proptest! {
        #[test]
        fn any_line_parses_or_is_refused_without_panicking(line in "\\PC{0,200}") {
            if let Ok(c) = Command::parse(&line) {
                prop_assert!(line.split_whitespace().next().is_some(), "{c:?} from {line:?}");
            }
        }
    }
}
