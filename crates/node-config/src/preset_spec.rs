//! The spec strings of the node's models (`--storage`, `--cpu`): an optional preset first,
//! then `key=value` items that override it, separated by commas (`lard98,disks=2`).

/// Read `spec` into a configuration: `start` unless the first item names a preset (`preset`
/// finds it), then every `key=value` item handed to `set(config, key, value, item)`. `what`
/// names the model in errors.
pub(crate) fn parse_preset_spec<T>(
    spec: &str,
    what: &str,
    start: T,
    preset: impl Fn(&str) -> Option<T>,
    mut set: impl FnMut(&mut T, &str, &str, &str) -> Result<(), String>,
) -> Result<T, String> {
    let mut config = start;
    for (i, item) in spec.split(',').map(str::trim).filter(|x| !x.is_empty()).enumerate() {
        match item.split_once('=') {
            Some((key, value)) => set(&mut config, key.trim(), value.trim(), item)?,
            None => match preset(item) {
                Some(p) if i == 0 => config = p,
                _ => return Err(format!("invalid {what} item {item:?}: expected a preset or key=value")),
            },
        }
    }
    Ok(config)
}

/// `value` as a number, or an error quoting `item`.
pub(crate) fn spec_number(value: &str, item: &str) -> Result<f64, String> {
    value.parse::<f64>().map_err(|_| format!("invalid number in {item:?}"))
}

/// `value` as an integer, or an error quoting `item`.
pub(crate) fn spec_integer<N: std::str::FromStr>(value: &str, item: &str) -> Result<N, String> {
    value.parse::<N>().map_err(|_| format!("invalid integer in {item:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(spec: &str) -> Result<(f64, u32), String> {
        let preset = |name: &str| (name == "p").then_some((5.0, 7));
        parse_preset_spec(spec, "test", (1.0, 1), preset, |c, key, value, item| {
            match key {
                "a" => c.0 = spec_number(value, item)?,
                "b" => c.1 = spec_integer(value, item)?,
                other => return Err(format!("unknown test key {other:?}")),
            }
            Ok(())
        })
    }

    #[test]
    fn a_preset_only_comes_first_and_keys_override_it() {
        assert_eq!(parse(""), Ok((1.0, 1)));
        assert_eq!(parse("p"), Ok((5.0, 7)));
        assert_eq!(parse("p, b=3"), Ok((5.0, 3)));
        assert_eq!(parse("a=2.5"), Ok((2.5, 1)));
        assert!(parse("a=2,p").unwrap_err().contains("invalid test item \"p\""));
        assert!(parse("q").unwrap_err().contains("expected a preset"));
        assert!(parse("a=x").unwrap_err().contains("invalid number in \"a=x\""));
        assert!(parse("b=1.5").unwrap_err().contains("invalid integer"));
        assert!(parse("c=1").unwrap_err().contains("unknown test key"));
    }
}
