//! A reader over GoCD's flat property map: typed getters that collect every problem at once.
//!
//! Each getter returns a usable value (the default when the field is unset or bad) and records one
//! [`FieldError`] per problem, so a parser reads every key and reports everything in one answer.
//! Empty, whitespace-only and `null` values mean "not set"; values are trimmed. Values of secure
//! keys are never quoted in messages. [`profile_hash`] hashes such a map as the reader sees it.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use sha2::{Digest, Sha256};

use super::basics::quote;
use super::keys::ProfileKind;
use super::unknown_keys::unknown_key_message;
use crate::protocol::profiles::{FieldError, Properties};

/// `A, B or C`.
pub(crate) fn one_of(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// The trimmed value of `key`, or `None` when it is missing, `null`, empty or blank.
pub(crate) fn set_value<'a>(props: &'a Properties, key: &str) -> Option<&'a str> {
    props.get(key)?.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// How to read a `KEY=VALUE`-per-line field.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LineRule {
    /// What one line is called in messages (plural adds an `s`): "variable", "tag", "secret".
    pub noun: &'static str,
    /// `Err(sentence fragment)` when the key is not acceptable.
    pub check_key: fn(&str) -> Result<(), String>,
    /// `Err(sentence fragment)` when the value (second argument) of the key is not acceptable.
    pub check_value: fn(&str, &str) -> Result<(), String>,
    /// At most this many lines.
    pub max: Option<usize>,
}

/// Reads one profile's properties and collects its errors.
#[derive(Debug)]
pub(crate) struct Fields<'a> {
    props: &'a Properties,
    kind: ProfileKind,
    errors: Vec<FieldError>,
}

impl<'a> Fields<'a> {
    /// Starts reading; keys that are not in the profile's table are reported right away.
    pub(crate) fn new(props: &'a Properties, kind: ProfileKind) -> Self {
        let mut fields = Fields { props, kind, errors: Vec::new() };
        for key in props.keys() {
            if kind.spec(key).is_none() && set_value(props, key).is_some() {
                fields.errors.push(FieldError { key: key.clone(), message: unknown_key_message(kind, key) });
            }
        }
        fields
    }

    /// The trimmed value of `key`, `None` when not set. `key` must be in the profile's table.
    pub(crate) fn raw(&self, key: &str) -> Option<&'a str> {
        debug_assert!(self.kind.spec(key).is_some(), "{key} is missing from the key table");
        set_value(self.props, key)
    }

    /// Whether `key` has a non-blank value.
    pub(crate) fn is_set(&self, key: &str) -> bool {
        self.raw(key).is_some()
    }

    /// Records a problem with `key`.
    pub(crate) fn error(&mut self, key: &str, message: impl Into<String>) {
        self.errors.push(FieldError { key: key.to_string(), message: message.into() });
    }

    /// Whether a problem with `key` was recorded already.
    pub(crate) fn has_error(&self, key: &str) -> bool {
        self.errors.iter().any(|e| e.key == key)
    }

    /// `; 'value' is not` for plain keys, nothing for secure ones.
    fn is_not(&self, key: &str, value: &str) -> String {
        if self.kind.spec(key).is_some_and(|s| s.secure) {
            String::new()
        } else {
            format!("; {} is not", quote(value))
        }
    }

    /// An optional string; `check` returns the whole message when the value is not acceptable.
    pub(crate) fn string(&mut self, key: &str, check: impl FnOnce(&str) -> Result<(), String>) -> Option<String> {
        let value = self.raw(key)?;
        match check(value) {
            Ok(()) => Some(value.to_string()),
            Err(message) => {
                self.error(key, message);
                None
            }
        }
    }

    /// A required string: `{key} is required.` when not set.
    pub(crate) fn required(&mut self, key: &str, check: impl FnOnce(&str) -> Result<(), String>) -> Option<String> {
        if !self.is_set(key) {
            self.error(key, format!("{key} is required."));
            return None;
        }
        self.string(key, check)
    }

    /// A whole number in `range`, `default` when not set or bad.
    pub(crate) fn number(&mut self, key: &str, range: RangeInclusive<u32>, default: u32) -> u32 {
        self.optional_number(key, range).unwrap_or(default)
    }

    /// A whole number in `range`, `None` when not set or bad.
    pub(crate) fn optional_number(&mut self, key: &str, range: RangeInclusive<u32>) -> Option<u32> {
        let value = self.raw(key)?;
        let (low, high) = (*range.start(), *range.end());
        let digits = !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit());
        let message = match value.parse::<u32>() {
            Ok(n) if digits && range.contains(&n) => return Some(n),
            Ok(n) if digits && n < low => {
                format!("{key} must be at least {low}; {n} is too small.")
            }
            _ if digits => format!("{key} must be at most {high}; {value} is too large."),
            _ => format!("{key} must be a whole number from {low} to {high}{}.", self.is_not(key, value)),
        };
        self.error(key, message);
        None
    }

    /// `true` or `false` in any case, `default` when not set or bad.
    pub(crate) fn boolean(&mut self, key: &str, default: bool) -> bool {
        let Some(value) = self.raw(key) else {
            return default;
        };
        match value.to_ascii_lowercase().as_str() {
            "true" => true,
            "false" => false,
            _ => {
                let message = format!("{key} must be true or false{}.", self.is_not(key, value));
                self.error(key, message);
                default
            }
        }
    }

    /// One of `choices` (case-sensitive); the first choice when not set, `None` when bad.
    pub(crate) fn choice(&mut self, key: &str, choices: &'static [&'static str]) -> Option<&'static str> {
        let Some(value) = self.raw(key) else {
            return choices.first().copied();
        };
        if let Some(choice) = choices.iter().find(|c| **c == value) {
            return Some(choice);
        }
        let hint = match choices.iter().find(|c| c.eq_ignore_ascii_case(value)) {
            Some(c) => format!(" (in capitals: did you mean {c}?)"),
            None => String::new(),
        };
        let message = format!("{key} must be one of {}{}{hint}.", one_of(choices), self.is_not(key, value));
        self.error(key, message);
        None
    }

    /// Ids separated by commas (spaces allowed): each `<prefix>-` and 8 or 17 hex digits,
    /// no duplicates, at most `max`.
    pub(crate) fn id_list(&mut self, key: &str, prefix: &str, noun: &str, max: usize) -> Vec<String> {
        let Some(value) = self.raw(key) else {
            return Vec::new();
        };
        let mut ids: Vec<String> = Vec::new();
        for item in value.split(|c: char| c == ',' || c.is_whitespace()).filter(|s| !s.is_empty()) {
            if !super::syntax::is_hex_id(item, prefix) {
                let message = format!(
                    "{} is not a {noun}: it must be {prefix}- followed by 8 or 17 lowercase hex digits, like {prefix}-0a1b2c3d.",
                    quote(item)
                );
                self.error(key, message);
            } else if ids.iter().any(|id| id == item) {
                self.error(key, format!("{key} lists {item} more than once."));
            } else {
                ids.push(item.to_string());
            }
        }
        if ids.len() > max {
            self.error(key, format!("{key} lists {} {noun}s; at most {max} are allowed.", ids.len()));
        }
        ids
    }

    /// Non-empty trimmed lines.
    pub(crate) fn lines(&self, key: &str) -> Vec<String> {
        let Some(value) = self.raw(key) else {
            return Vec::new();
        };
        value.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect()
    }

    /// `KEY=VALUE` per line: blank lines skipped, keys and values trimmed, each key once.
    pub(crate) fn key_values(&mut self, key: &str, rule: &LineRule) -> Vec<(String, String)> {
        let Some(value) = self.raw(key) else {
            return Vec::new();
        };
        let mut pairs: Vec<(String, String)> = Vec::new();
        let mut first_line: BTreeMap<&str, usize> = BTreeMap::new();
        for (n, line) in value.lines().enumerate().map(|(i, l)| (i + 1, l.trim())) {
            if line.is_empty() {
                continue;
            }
            let Some((k, v)) = line.split_once('=').map(|(k, v)| (k.trim(), v.trim())) else {
                self.error(key, format!("Line {n} must look like KEY=VALUE but has no '='."));
                continue;
            };
            let problem = if let Err(reason) = (rule.check_key)(k) {
                Some(reason)
            } else if let Some(first) = first_line.get(k) {
                Some(format!("{k} is already set on line {first}"))
            } else {
                (rule.check_value)(k, v).err()
            };
            match problem {
                Some(reason) => self.error(key, format!("Line {n}: {reason}.")),
                None => {
                    first_line.insert(k, n);
                    pairs.push((k.to_string(), v.to_string()));
                }
            }
        }
        if let Some(max) = rule.max.filter(|max| pairs.len() > *max) {
            let message = format!("{key} has {} {}s; at most {max} are allowed.", pairs.len(), rule.noun);
            self.error(key, message);
        }
        pairs
    }

    /// One glob pattern per line, each compiled.
    pub(crate) fn globs(&mut self, key: &str) -> Vec<glob::Pattern> {
        let Some(value) = self.raw(key) else {
            return Vec::new();
        };
        let mut patterns = Vec::new();
        for (n, line) in value.lines().enumerate().map(|(i, l)| (i + 1, l.trim())) {
            if line.is_empty() {
                continue;
            }
            match glob::Pattern::new(line) {
                Ok(pattern) => patterns.push(pattern),
                Err(e) => {
                    let message = format!("Line {n}: {} is not a valid glob pattern: {}.", quote(line), e.msg);
                    self.error(key, message);
                }
            }
        }
        patterns
    }

    /// `Ok(value)` when nothing was wrong, else every problem found.
    pub(crate) fn finish<T>(self, value: T) -> Result<T, Vec<FieldError>> {
        if self.errors.is_empty() {
            Ok(value)
        } else {
            Err(self.errors)
        }
    }
}

/// A short, stable hash of a profile: 12 lowercase hex characters of SHA-256 over the lines
/// `key=value\n` of the set (non-blank, trimmed) properties in key order.
/// Keys left out of [`profile_hash`].
const NOT_IDENTITY: [&str; 3] = ["WarmAgents", "WarmSchedule", "WarmLaunchType"];

pub fn profile_hash(props: &Properties) -> String {
    let mut hasher = Sha256::new();
    // How many warm agents a pool keeps, when and where, is not what the agents are: editing them
    // changes the pool, not the profile pair its agents belong to.
    for key in props.keys().filter(|k| !NOT_IDENTITY.contains(&k.as_str())) {
        if let Some(value) = set_value(props, key) {
            hasher.update(format!("{key}={value}\n").as_bytes());
        }
    }
    hasher.finalize().iter().take(6).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, Option<&str>)]) -> Properties {
        pairs.iter().map(|(k, v)| (k.to_string(), v.map(String::from))).collect()
    }

    fn messages(fields: Fields<'_>) -> Vec<String> {
        fields.finish(()).err().unwrap_or_default().into_iter().map(|e| e.message).collect()
    }

    #[test]
    fn one_of_joins_like_a_sentence() {
        assert_eq!(one_of(&["A"]), "A");
        assert_eq!(one_of(&["A", "B", "C"]), "A, B or C");
    }

    #[test]
    fn blank_and_null_mean_not_set() {
        let p = props(&[("MaxAgents", Some("  ")), ("Region", None), ("LogGroup", Some(" /x "))]);
        let f = Fields::new(&p, ProfileKind::Cluster);
        assert_eq!(f.raw("MaxAgents"), None);
        assert_eq!(f.raw("Region"), None);
        assert_eq!(f.raw("LogGroup"), Some("/x"));
    }

    #[test]
    fn numbers_say_the_range() {
        let p = props(&[
            ("MaxAgents", Some("0")),
            ("Ec2MaxInstances", Some("ten")),
            ("Ec2IdleMinutes", Some("99999999999")),
        ]);
        let mut f = Fields::new(&p, ProfileKind::Cluster);
        assert_eq!(f.number("MaxAgents", 1..=1000, 10), 10);
        assert_eq!(f.number("Ec2MaxInstances", 1..=100, 5), 5);
        assert_eq!(f.number("Ec2IdleMinutes", 0..=1440, 10), 10);
        assert_eq!(f.number("Ec2MinInstances", 0..=100, 0), 0);
        assert_eq!(
            messages(f),
            [
                "MaxAgents must be at least 1; 0 is too small.",
                "Ec2MaxInstances must be a whole number from 1 to 100; 'ten' is not.",
                "Ec2IdleMinutes must be at most 1440; 99999999999 is too large.",
            ]
        );
    }

    #[test]
    fn booleans_and_choices() {
        let p = props(&[("AssignPublicIp", Some("TRUE")), ("Ec2Spot", Some("yes")), ("LaunchType", Some("fargate"))]);
        let mut f = Fields::new(&p, ProfileKind::Cluster);
        assert!(f.boolean("AssignPublicIp", false));
        assert!(!f.boolean("Ec2Spot", false));
        assert_eq!(f.choice("LaunchType", &["FARGATE", "EC2"]), None);
        assert_eq!(
            messages(f),
            [
                "Ec2Spot must be true or false; 'yes' is not.",
                "LaunchType must be one of FARGATE or EC2; 'fargate' is not (in capitals: did you mean FARGATE?).",
            ]
        );
    }

    #[test]
    fn id_lists_report_each_bad_item_duplicates_and_length() {
        let p = props(&[("SubnetIds", Some("subnet-0a1b2c3d, subnet-0a1b2c3d,,subnet-xyz subnet-1a1b2c3d"))]);
        let mut f = Fields::new(&p, ProfileKind::Cluster);
        assert_eq!(f.id_list("SubnetIds", "subnet", "subnet id", 1), ["subnet-0a1b2c3d", "subnet-1a1b2c3d"]);
        let m = messages(f);
        assert_eq!(m.len(), 3, "{m:?}");
        assert!(m[0].contains("more than once"));
        assert!(m[1].starts_with("'subnet-xyz' is not a subnet id"));
        assert_eq!(m[2], "SubnetIds lists 2 subnet ids; at most 1 are allowed.");
    }

    #[test]
    fn key_value_lines_name_the_line() {
        let rule = LineRule {
            noun: "variable",
            check_key: |k| {
                if super::super::syntax::is_env_name(k) {
                    Ok(())
                } else {
                    Err(format!("{} is not a name", quote(k)))
                }
            },
            check_value: |_, _| Ok(()),
            max: Some(2),
        };
        let p = props(&[("EnvironmentVariables", Some("A=1\n\n B = two words \nA=3\nnoequals\n1X=2\nC=\nD=4"))]);
        let mut f = Fields::new(&p, ProfileKind::Cluster);
        let pairs = f.key_values("EnvironmentVariables", &rule);
        assert_eq!(
            pairs,
            [
                ("A".into(), "1".into()),
                ("B".into(), "two words".into()),
                ("C".into(), String::new()),
                ("D".into(), "4".into())
            ]
        );
        assert_eq!(
            messages(f),
            [
                "Line 4: A is already set on line 1.",
                "Line 5 must look like KEY=VALUE but has no '='.",
                "Line 6: '1X' is not a name.",
                "EnvironmentVariables has 4 variables; at most 2 are allowed.",
            ]
        );
    }

    #[test]
    fn globs_compile_or_say_why() {
        let p = props(&[("AllowedImages", Some("gocd/*\n\n[unclosed"))]);
        let mut f = Fields::new(&p, ProfileKind::Cluster);
        assert_eq!(f.globs("AllowedImages").len(), 1);
        let m = messages(f);
        assert_eq!(m.len(), 1);
        assert!(m[0].starts_with("Line 3: '[unclosed' is not a valid glob pattern"), "{m:?}");
    }

    #[test]
    fn unknown_keys_suggest_the_closest() {
        let p = props(&[
            ("clustername", Some("x")),
            ("ClusterNme", Some("x")),
            ("Image", Some("x")),
            ("Wholly", Some("x")),
            ("Blank", Some(" ")),
            ("Null", None),
        ]);
        assert_eq!(
            messages(Fields::new(&p, ProfileKind::Cluster)),
            [
                "'ClusterNme' is not a setting of this plugin. Did you mean ClusterName?",
                "'Image' is not a setting of this plugin's cluster profiles; it belongs in the elastic agent profile.",
                "'Wholly' is not a setting of this plugin.",
                "'clustername' is not a setting of this plugin. Did you mean ClusterName?",
            ]
        );
    }
}
