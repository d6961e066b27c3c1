//! Unknown keys: the message that names the key, with the closest known key as a suggestion.

use super::basics::quote;
use super::keys::ProfileKind;

/// `'Foo' is not a setting of this plugin.`, with a suggestion where one is close.
pub(crate) fn unknown_key_message(kind: ProfileKind, key: &str) -> String {
    let quoted = quote(key);
    if let Some(close) = closest_key(kind, key) {
        return format!("{quoted} is not a setting of this plugin. Did you mean {close}?");
    }
    if kind.other().spec(key).is_some() {
        return format!(
            "{quoted} is not a setting of this plugin's {}s; it belongs in the {}.",
            kind.noun(),
            kind.other().noun()
        );
    }
    format!("{quoted} is not a setting of this plugin.")
}

/// The known key equal to `key` ignoring case, else the nearest within edit distance 2.
fn closest_key(kind: ProfileKind, key: &str) -> Option<&'static str> {
    let lower = key.to_lowercase();
    let keys = kind.keys().iter().map(|s| s.key);
    if let Some(exact) = keys.clone().find(|k| k.to_lowercase() == lower) {
        return Some(exact);
    }
    keys.map(|k| (edit_distance(&k.to_lowercase(), &lower), k))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "ab"), 2);
        assert_eq!(edit_distance("region", "regoin"), 2);
    }

    #[test]
    fn suggestions() {
        assert_eq!(closest_key(ProfileKind::Cluster, "REGION"), Some("Region"));
        assert_eq!(closest_key(ProfileKind::Cluster, "Regoin"), Some("Region"));
        assert_eq!(closest_key(ProfileKind::Elastic, "Cpus"), Some("Cpu"));
        assert_eq!(closest_key(ProfileKind::Elastic, "Processor"), None);
    }
}
