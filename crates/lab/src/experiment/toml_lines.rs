//! Where a key of an experiment file is: the line of a dotted key path such as
//! `workload[1].hot_spot.share`, found in the file's spanned TOML tree, so that a value that
//! parses but makes no sense is reported with its line like a syntax error is.

use toml::de::{DeTable, DeValue};

/// The 1-based line of the deepest part of `path` that the file has (`workload[1]` alone
/// gives the line of the second `[[workload]]` table); `None` if the text does not parse or
/// has not even the first key.
pub fn line_of_key(text: &str, path: &str) -> Option<usize> {
    let root = DeTable::parse(text).ok()?;
    let mut table = root.get_ref();
    let mut found: Option<usize> = None;
    for part in path.split('.') {
        let (key, index) = split_index(part);
        let Some((k, mut value)) = table.iter().find(|(k, _)| k.get_ref().as_ref() == key) else {
            break;
        };
        found = Some(k.span().start);
        if let Some(i) = index {
            match value.get_ref() {
                DeValue::Array(items) => match items.get(i) {
                    Some(item) => {
                        found = Some(item.span().start);
                        value = item;
                    }
                    None => break,
                },
                _ => break,
            }
        }
        match value.get_ref() {
            DeValue::Table(t) => table = t,
            _ => break,
        }
    }
    found.map(|offset| text[..offset.min(text.len())].matches('\n').count() + 1)
}

/// `name[3]` into (`name`, Some(3)); `name` into (`name`, None).
fn split_index(part: &str) -> (&str, Option<usize>) {
    match part.split_once('[') {
        Some((key, rest)) => (key, rest.trim_end_matches(']').parse().ok()),
        None => (part, None),
    }
}

/// The leading dotted key path of a validation message (`workload[0].hot_spot.share = 2: …`).
pub fn key_path_of(message: &str) -> &str {
    let end = message
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']' | '-')))
        .unwrap_or(message.len());
    message[..end].trim_end_matches('.')
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "nodes = [1]\n\n[node]\ncache = \"8MiB\"\n\n[[workload]]\nname = \"a\"\nfiles = 10\n\n[[workload]]\nname = \"b\"\nfiles = 20\n\n[workload.hot_spot]\ndocuments = 30\nshare = 2.0\n";

    #[test]
    fn a_key_path_finds_the_line_of_its_deepest_part() {
        assert_eq!(line_of_key(TEXT, "nodes"), Some(1));
        assert_eq!(line_of_key(TEXT, "node.cache"), Some(4));
        assert_eq!(line_of_key(TEXT, "workload[0].files"), Some(8));
        assert_eq!(line_of_key(TEXT, "workload[1].files"), Some(12));
        assert_eq!(line_of_key(TEXT, "workload[1].hot_spot.share"), Some(16));
        assert_eq!(line_of_key(TEXT, "workload[1].hot_spot.documents"), Some(15));
        assert_eq!(line_of_key(TEXT, "workload[1].rate"), Some(10), "a missing key: its table's line");
        assert_eq!(line_of_key(TEXT, "switch[0]"), None);
        assert_eq!(line_of_key("not toml [", "nodes"), None);
    }

    #[test]
    fn the_key_path_is_the_start_of_a_message() {
        assert_eq!(key_path_of("workload[1].hot_spot.share = 2: must be"), "workload[1].hot_spot.share");
        assert_eq!(key_path_of("switch[0] (locus).policies[1]: x"), "switch[0]");
        assert_eq!(key_path_of("node.storage: bad"), "node.storage");
        assert_eq!(key_path_of("`nodes` must"), "");
    }
}
