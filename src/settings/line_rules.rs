//! The `KEY=VALUE`-per-line rules shared by both profiles: environment variables, tags, secrets.

use super::basics::{quote, MAX_USER_TAGS};
use super::fields::LineRule;
use super::syntax;

/// Environment variables: `NAME=value`, any value.
pub(crate) const ENV_VARIABLES: LineRule =
    LineRule { noun: "variable", check_key: check_env_name, check_value: |_, _| Ok(()), max: None };

/// User tags: key 1 to 128 characters, value at most 256, AWS's tag characters, no reserved prefix.
pub(crate) const TAGS: LineRule = LineRule {
    noun: "tag",
    check_key: |key| {
        let lower = key.to_lowercase();
        if let Some(prefix) = ["aws:", "gocd:"].into_iter().find(|p| lower.starts_with(p)) {
            Err(format!("tag keys starting with {prefix} are reserved; {} cannot be used", quote(key)))
        } else if key.is_empty() || key.chars().count() > 128 {
            Err("a tag key must have 1 to 128 characters".to_string())
        } else if !syntax::is_tag_text(key) {
            Err(format!("{} may use only letters, digits, spaces and _ . : / + - @", quote(key)))
        } else {
            Ok(())
        }
    },
    check_value: |key, value| {
        if value.chars().count() > 256 {
            Err(format!("the value of tag {key} is longer than 256 characters"))
        } else if !syntax::is_tag_text(value) {
            Err(format!("the value of tag {key} may use only letters, digits, spaces and _ . : / = + - @"))
        } else {
            Ok(())
        }
    },
    // AWS allows 50 tags a task, and the plugin sets some of its own.
    max: Some(MAX_USER_TAGS),
};

/// `Err` unless `name` is a valid environment variable name.
pub(crate) fn check_env_name(name: &str) -> Result<(), String> {
    if syntax::is_env_name(name) {
        Ok(())
    } else {
        Err(format!(
            "{} is not a valid variable name: use letters, digits and _, not starting with a digit",
            quote(name)
        ))
    }
}

/// `Secrets`: `NAME=ARN`, the ARN a Secrets Manager secret or an SSM parameter.
pub(crate) const SECRETS: LineRule = LineRule {
    noun: "secret",
    check_key: check_env_name,
    check_value: |name, arn| {
        if syntax::is_secret_source_arn(arn) {
            Ok(())
        } else {
            Err(format!(
                "{name} must be set to a Secrets Manager secret ARN (arn:aws:secretsmanager:...:secret:...) or an SSM parameter ARN (arn:aws:ssm:...:parameter/...); {} is neither",
                quote(arn)
            ))
        }
    },
    max: None,
};
