//! The reference of every profile key, as Markdown (`docs/profile-keys.md`): written from the
//! one table of keys ([`super::keys`]), so the document cannot drift from what the plugin reads.
//! A unit test keeps the checked-in file equal to [`markdown`]; after changing a key, rewrite it
//! with `UPDATE_KEY_REFERENCE=1 cargo test --lib key_reference`. Each profile's part shows its
//! form (`docs/images/`, photographed by `tests/local/profile_views.rs`).

use std::fmt::Write as _;

use super::keys::{Input, KeySpec, ProfileKind};

/// The whole reference: both profiles, each by fieldset, one table row per key.
pub fn markdown() -> String {
    let mut out = String::from(
        "# Profile keys\n\n\
         Every key of the two profiles, generated from the plugin's own table of keys (the one the \
         GoCD forms, validation and the parsers use), so it says what the plugin reads. Defaults, \
         ranges and the launch types a key applies to are in its description. Keys are \
         case-sensitive; a key the plugin does not know is refused, with the closest known key \
         named. `ecs-elastic-agent validate` checks a profile kept in a file.\n",
    );
    for (kind, intro) in [
        (
            ProfileKind::Cluster,
            "The cluster profile: one AWS account (or role), region and ECS cluster, owned by the \
             operators.",
        ),
        (
            ProfileKind::Elastic,
            "The elastic agent profile: what one agent looks like, owned by the teams; it points at a \
             cluster profile, and create-agent checks the pair.",
        ),
    ] {
        let title = match kind {
            ProfileKind::Cluster => "Cluster profile",
            ProfileKind::Elastic => "Elastic agent profile",
        };
        let _ = write!(out, "\n## {title}\n\n{intro}\n");
        let (image, noun) = match kind {
            ProfileKind::Cluster => ("cluster-profile-view.png", "cluster profile"),
            ProfileKind::Elastic => ("elastic-profile-view.png", "elastic agent profile"),
        };
        let open: Vec<String> = kind.open_groups().iter().map(|g| format!("*{g}*")).collect();
        let open = match open.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => open.join(""),
        };
        let _ = write!(
            out,
            "\nGoCD's {noun} form shows each key's name beside its label, in the groups below: {open} open, \
             the others collapsed until clicked.\n\n![The {noun} form of a new profile](images/{image})\n"
        );
        for group in kind.groups() {
            let _ = write!(out, "\n### {group}\n\n| key | entry | description |\n|---|---|---|\n");
            for spec in kind.keys().iter().filter(|s| s.group == *group) {
                let _ = writeln!(out, "| `{}` | {} | {} |", spec.key, entry(spec), cell(spec.help));
            }
        }
    }
    out
}

/// How the key is entered, and whether it is required or stored encrypted.
fn entry(spec: &KeySpec) -> String {
    let mut entry = match spec.input {
        Input::Text => "text".to_string(),
        Input::Password => "secret text".to_string(),
        Input::Lines => "lines".to_string(),
        Input::Checkbox => "`true` or `false`".to_string(),
        Input::Select(values) => values.iter().map(|v| format!("`{v}`")).collect::<Vec<_>>().join(", "),
    };
    if spec.required {
        entry.push_str("; **required**");
    }
    if spec.secure {
        entry.push_str("; stored encrypted");
    }
    entry
}

/// Help text as one table cell (a `|` would end the cell).
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_reference_is_the_checked_in_document() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/profile-keys.md");
        let want = markdown();
        if std::env::var_os("UPDATE_KEY_REFERENCE").is_some() {
            std::fs::write(&path, &want).expect("docs/profile-keys.md is writable");
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "docs/profile-keys.md differs from the table of keys: rewrite it with \
             `UPDATE_KEY_REFERENCE=1 cargo test --lib key_reference`"
        );
    }

    #[test]
    fn every_key_has_one_row_in_its_profile() {
        let doc = markdown();
        let (cluster, elastic) = doc.split_once("\n## Elastic agent profile\n").expect("two parts");
        for (kind, part) in [(ProfileKind::Cluster, cluster), (ProfileKind::Elastic, elastic)] {
            for spec in kind.keys() {
                let row = format!("| `{}` |", spec.key);
                assert_eq!(part.matches(&row).count(), 1, "{:?} {}", kind, spec.key);
            }
        }
    }
}
