//! A reload's settings that only a restart can change: the switch's and the node's reloads
//! put the running value back into the new configuration and name the setting, so the report
//! and the log say what waits for a restart.

/// When `new` differs from `running`, put the running value back and add `name` to `changed`.
pub fn keep_running<T: PartialEq + Clone>(
    changed: &mut Vec<&'static str>,
    name: &'static str,
    new: &mut T,
    running: &T,
) {
    if new != running {
        changed.push(name);
        *new = running.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_setting_gets_its_running_value_back_and_is_named_an_equal_one_is_not() {
        let mut changed = Vec::new();
        let (mut new, running) = (8081, 8080);
        keep_running(&mut changed, "listen", &mut new, &running);
        let (mut same, same_running) = ("a".to_string(), "a".to_string());
        keep_running(&mut changed, "name", &mut same, &same_running);
        assert_eq!((new, changed), (8080, vec!["listen"]));
    }
}
