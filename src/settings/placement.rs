//! `PlacementStrategy` and `PlacementConstraints` of an elastic profile: sent on
//! RunTask when ECS places the task on EC2 capacity, that is through a cluster profile's
//! `CapacityProviderStrategy` that may name an Auto Scaling group's provider (Fargate takes
//! neither; with `LaunchType` EC2 the plugin chooses the instance itself).
//!
//! One item per line, as ECS spells them:
//!
//! ```text
//! PlacementStrategy:                 PlacementConstraints:
//!   spread:attribute:ecs.availability-zone   memberOf:attribute:ecs.cpu-architecture == arm64
//!   binpack:memory                           distinctInstance
//!   random
//! ```

use super::basics::quote;
use super::fields::Fields;

/// At most this many strategies on one RunTask (API_RunTask).
pub const MAX_STRATEGIES: usize = 5;
/// At most this many constraints on one RunTask (API_RunTask).
pub const MAX_CONSTRAINTS: usize = 10;

/// One placement strategy: `spread` over a field, `binpack` by `cpu` or `memory`, `random`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Strategy {
    /// `spread`, `binpack` or `random`.
    pub kind: String,
    /// What to spread over or pack by; none for `random`.
    pub field: Option<String>,
}

/// One placement constraint: `distinctInstance`, or `memberOf` with a cluster query expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    /// `distinctInstance` or `memberOf`.
    pub kind: String,
    /// The cluster query language expression of `memberOf`.
    pub expression: Option<String>,
}

/// Parses one `PlacementStrategy` line.
///
/// # Errors
/// What is wrong with it, in words.
pub fn parse_strategy(line: &str) -> Result<Strategy, String> {
    let (kind, field) = match line.split_once(':') {
        Some((k, f)) => (k.trim(), Some(f.trim())),
        None => (line.trim(), None),
    };
    let bad = |why: &str| {
        Err(format!(
            "PlacementStrategy line {}: {why} (spread:FIELD like spread:attribute:ecs.availability-zone or \
             spread:instanceId, binpack:cpu, binpack:memory, or random).",
            quote(line)
        ))
    };
    match (kind, field) {
        ("random", None) => Ok(Strategy { kind: kind.into(), field: None }),
        ("random", Some(_)) => bad("random takes no field"),
        ("binpack", Some(f @ ("cpu" | "memory"))) => Ok(Strategy { kind: kind.into(), field: Some(f.into()) }),
        ("binpack", _) => bad("binpack packs by cpu or memory"),
        ("spread", Some(f)) if is_spread_field(f) => Ok(Strategy { kind: kind.into(), field: Some(f.into()) }),
        ("spread", _) => bad("spread needs instanceId, host or attribute:NAME"),
        _ => bad("the type is spread, binpack or random"),
    }
}

fn is_spread_field(field: &str) -> bool {
    let attribute = |name: &str| {
        !name.is_empty()
            && name.len() <= 128
            && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/'))
    };
    field == "instanceId" || field == "host" || field.strip_prefix("attribute:").is_some_and(attribute)
}

/// Parses one `PlacementConstraints` line.
///
/// # Errors
/// What is wrong with it, in words.
pub fn parse_constraint(line: &str) -> Result<Constraint, String> {
    let line = line.trim();
    if line == "distinctInstance" {
        return Ok(Constraint { kind: line.into(), expression: None });
    }
    match line.split_once(':') {
        Some(("memberOf", expression)) if !expression.trim().is_empty() && expression.trim().len() <= 2000 => {
            Ok(Constraint { kind: "memberOf".into(), expression: Some(expression.trim().into()) })
        }
        _ => Err(format!(
            "PlacementConstraints line {}: write distinctInstance, or memberOf:EXPRESSION with a cluster query of at \
             most 2000 characters, like memberOf:attribute:ecs.cpu-architecture == arm64.",
            quote(line)
        )),
    }
}

/// Reads both keys.
pub(crate) fn read(f: &mut Fields<'_>) -> (Vec<Strategy>, Vec<Constraint>) {
    let strategies = read_lines(f, "PlacementStrategy", MAX_STRATEGIES, parse_strategy);
    let constraints = read_lines(f, "PlacementConstraints", MAX_CONSTRAINTS, parse_constraint);
    (strategies, constraints)
}

fn read_lines<T>(f: &mut Fields<'_>, key: &str, max: usize, parse: fn(&str) -> Result<T, String>) -> Vec<T> {
    let lines = f.lines(key);
    if lines.len() > max {
        f.error(key, format!("{key} has {} lines; ECS takes at most {max} on a task.", lines.len()));
        return Vec::new();
    }
    let mut out = Vec::new();
    for line in &lines {
        match parse(line) {
            Ok(item) => out.push(item),
            Err(message) => f.error(key, message),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies() {
        let s = |kind: &str, field: Option<&str>| Strategy { kind: kind.into(), field: field.map(Into::into) };
        assert_eq!(
            parse_strategy("spread:attribute:ecs.availability-zone"),
            Ok(s("spread", Some("attribute:ecs.availability-zone")))
        );
        assert_eq!(parse_strategy("binpack:memory"), Ok(s("binpack", Some("memory"))));
        assert_eq!(parse_strategy("spread:instanceId"), Ok(s("spread", Some("instanceId"))));
        assert_eq!(parse_strategy("random"), Ok(s("random", None)));
        for bad in ["binpack:disk", "spread", "spread:zone", "random:x", "pack:cpu", "spread:attribute:"] {
            assert!(parse_strategy(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn constraints() {
        assert_eq!(
            parse_constraint("distinctInstance"),
            Ok(Constraint { kind: "distinctInstance".into(), expression: None })
        );
        assert_eq!(
            parse_constraint("memberOf:attribute:ecs.cpu-architecture == arm64"),
            Ok(Constraint {
                kind: "memberOf".into(),
                expression: Some("attribute:ecs.cpu-architecture == arm64".into())
            })
        );
        let long = format!("memberOf:{}", "x".repeat(2001));
        for bad in ["memberOf:", "memberOf", "distinct", long.as_str()] {
            assert!(parse_constraint(bad).is_err(), "{bad}");
        }
    }
}
