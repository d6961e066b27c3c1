//! `CapacityProviderStrategy`: agent tasks started through ECS capacity providers rather than a
//! launch type. ECS and the providers' own scaling (an Auto Scaling group's managed
//! scaling, Fargate) place and scale; the plugin launches no instance.
//!
//! The value is either `default` (RunTask with neither a launch type nor a strategy: the
//! cluster's default capacity provider strategy) or one provider per line, `NAME`,
//! `NAME:WEIGHT` or `NAME:WEIGHT:BASE` (weight 0 to 1000, default 1; base 0 to 100000, default
//! 0, on one provider at most; at most 20 providers, at least one with a weight). Example:
//!
//! ```text
//! FARGATE:1:2
//! FARGATE_SPOT:3
//! ```
//!
//! runs the first two agents on FARGATE and then three of every four on FARGATE_SPOT.

use super::basics::{quote, LaunchType};
use super::fields::Fields;

/// The key.
pub const KEY: &str = "CapacityProviderStrategy";
/// At most this many providers in one strategy (API_RunTask).
pub const MAX_PROVIDERS: usize = 20;

/// One provider of a strategy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderShare {
    /// The capacity provider's short name (`FARGATE`, `FARGATE_SPOT`, or an ASG provider's).
    pub name: String,
    /// Its share of the tasks beyond the base, relative to the others'.
    pub weight: u32,
    /// This many tasks run on it before the weights count.
    pub base: u32,
}

/// Where RunTask sends the agent tasks when `CapacityProviderStrategy` is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderStrategy {
    /// `default`: the cluster's default capacity provider strategy.
    ClusterDefault,
    /// These providers, by weight and base.
    Providers(Vec<ProviderShare>),
}

impl ProviderStrategy {
    /// Whether a provider other than Fargate's may run the tasks (an Auto Scaling group's, or
    /// whatever the cluster's default names): then the task definitions must suit EC2 too.
    pub fn may_use_ec2(&self) -> bool {
        match self {
            ProviderStrategy::ClusterDefault => true,
            ProviderStrategy::Providers(p) => p.iter().any(|s| s.name != "FARGATE" && s.name != "FARGATE_SPOT"),
        }
    }
}

impl std::fmt::Display for ProviderStrategy {
    /// For the status reports: `capacity providers FARGATE:1:2, FARGATE_SPOT:3:0`, or the
    /// cluster's default strategy.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProviderStrategy::ClusterDefault => f.write_str("the cluster's default capacity provider strategy"),
            ProviderStrategy::Providers(shares) => {
                let list: Vec<String> = shares.iter().map(|s| format!("{}:{}:{}", s.name, s.weight, s.base)).collect();
                write!(f, "capacity providers {}", list.join(", "))
            }
        }
    }
}

/// Parses the value.
///
/// # Errors
/// The sentence that says what is wrong, naming the line.
pub fn parse(value: &str) -> Result<ProviderStrategy, String> {
    let value = value.trim();
    if value.eq_ignore_ascii_case("default") {
        return Ok(ProviderStrategy::ClusterDefault);
    }
    let mut shares: Vec<ProviderShare> = Vec::new();
    for line in value.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let share = parse_line(line)?;
        if shares.iter().any(|s| s.name == share.name) {
            return Err(format!("{KEY} names capacity provider {} twice.", share.name));
        }
        shares.push(share);
    }
    if shares.len() > MAX_PROVIDERS {
        return Err(format!("{KEY} names {} capacity providers; ECS takes at most {MAX_PROVIDERS}.", shares.len()));
    }
    if shares.iter().filter(|s| s.base > 0).count() > 1 {
        return Err(format!("{KEY}: only one capacity provider may have a base (ECS's rule)."));
    }
    if shares.iter().all(|s| s.weight == 0) {
        return Err(format!("{KEY}: at least one capacity provider needs a weight above 0."));
    }
    Ok(ProviderStrategy::Providers(shares))
}

fn parse_line(line: &str) -> Result<ProviderShare, String> {
    let usage =
        "one provider per line as NAME, NAME:WEIGHT or NAME:WEIGHT:BASE, like FARGATE_SPOT:3, or 'default' alone";
    let mut parts = line.split(':').map(str::trim);
    let name = parts.next().unwrap_or_default();
    let number = |part: Option<&str>, what: &str, max: u32, default: u32| -> Result<u32, String> {
        match part {
            None => Ok(default),
            Some(p) => p.parse::<u32>().ok().filter(|n| *n <= max).ok_or_else(|| {
                format!("{KEY} line {}: the {what} must be a whole number from 0 to {max} ({usage}).", quote(line))
            }),
        }
    };
    let weight = number(parts.next(), "weight", 1000, 1)?;
    let base = number(parts.next(), "base", 100_000, 0)?;
    if parts.next().is_some() {
        return Err(format!("{KEY} line {} has too many parts ({usage}).", quote(line)));
    }
    let valid_name = !name.is_empty()
        && name.len() <= 255
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid_name {
        return Err(format!(
            "{KEY} line {}: a capacity provider name is 1 to 255 letters, digits, '-' and '_' ({usage}).",
            quote(line)
        ));
    }
    Ok(ProviderShare { name: name.to_string(), weight, base })
}

/// Reads the key: only with `LaunchType` left out, since ECS takes a launch type or a strategy,
/// never both.
pub(crate) fn read(f: &mut Fields<'_>, launch_type: Option<LaunchType>) -> Option<ProviderStrategy> {
    let value = f.raw(KEY)?;
    if f.is_set("LaunchType") {
        let named = launch_type.map_or("set", LaunchType::as_str);
        f.error(
            KEY,
            format!(
                "{KEY} replaces LaunchType (it is {named}): ECS starts a task through a launch type or a capacity \
                 provider strategy, never both. Remove LaunchType, or this key."
            ),
        );
        return None;
    }
    match parse(value) {
        Ok(strategy) => Some(strategy),
        Err(message) => {
            f.error(KEY, message);
            None
        }
    }
}

/// Which provider the next task goes to, so that the tasks launched so far (`launched`, one
/// count per provider, in the strategy's order) follow the strategy: the provider with a base
/// until it has that many, then the one furthest behind its weight's share of the rest. RunTask
/// starts one task per call, and ECS applies a strategy's base and weights within one call
/// only, so the plugin spreads its calls itself.
pub fn next_provider(shares: &[ProviderShare], launched: &[u64]) -> usize {
    if let Some(i) = shares.iter().zip(launched).position(|(s, n)| *n < u64::from(s.base)) {
        return i;
    }
    let beyond = |i: usize| launched.get(i).copied().unwrap_or(0).saturating_sub(u64::from(shares[i].base));
    // The smallest (beyond + 1) / weight, compared without division: a/w < b/v iff a·v < b·w.
    (0..shares.len()).filter(|i| shares[*i].weight > 0).fold(usize::MAX, |best, i| {
        if best == usize::MAX {
            return i;
        }
        let mine = (beyond(i) + 1) * u64::from(shares[best].weight);
        let theirs = (beyond(best) + 1) * u64::from(shares[i].weight);
        if mine < theirs {
            i
        } else {
            best
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(name: &str, weight: u32, base: u32) -> ProviderShare {
        ProviderShare { name: name.into(), weight, base }
    }

    #[test]
    fn parses_lines_and_default() {
        assert_eq!(parse(" Default "), Ok(ProviderStrategy::ClusterDefault));
        assert_eq!(
            parse("FARGATE:1:2\n\n FARGATE_SPOT : 3 \nmy-asg"),
            Ok(ProviderStrategy::Providers(vec![
                share("FARGATE", 1, 2),
                share("FARGATE_SPOT", 3, 0),
                share("my-asg", 1, 0)
            ]))
        );
    }

    #[test]
    fn described_for_the_status_reports() {
        assert_eq!(
            parse("FARGATE:1:2\nFARGATE_SPOT:3").unwrap().to_string(),
            "capacity providers FARGATE:1:2, FARGATE_SPOT:3:0"
        );
        assert_eq!(parse("default").unwrap().to_string(), "the cluster's default capacity provider strategy");
    }

    #[test]
    fn refuses_what_ecs_refuses() {
        let refused = |v: &str| parse(v).expect_err(v);
        assert!(refused("FARGATE:1001").contains("from 0 to 1000"));
        assert!(refused("FARGATE:1:100001").contains("from 0 to 100000"));
        assert!(refused("FARGATE:-1").contains("weight"));
        assert!(refused("FARGATE:1:1:1").contains("too many parts"));
        assert!(refused("FAR GATE").contains("letters, digits"));
        assert!(refused(":3").contains("letters, digits"));
        assert!(refused("FARGATE\nFARGATE:2").contains("twice"));
        assert!(refused("FARGATE:1:1\nFARGATE_SPOT:1:1").contains("only one"));
        assert!(refused("FARGATE:0\nFARGATE_SPOT:0").contains("weight above 0"));
        let many: String = (0..21).map(|i| format!("p{i}\n")).collect();
        assert!(refused(&many).contains("at most 20"));
        assert!(parse(&(0..20).map(|i| format!("p{i}\n")).collect::<String>()).is_ok());
    }

    #[test]
    fn ec2_compatible_task_definitions_only_when_a_provider_may_be_an_asg() {
        assert!(!parse("FARGATE\nFARGATE_SPOT").unwrap().may_use_ec2());
        assert!(parse("FARGATE\nmy-asg").unwrap().may_use_ec2());
        assert!(ProviderStrategy::ClusterDefault.may_use_ec2());
    }

    /// The providers of `n` launches in a row.
    fn spread(shares: &[ProviderShare], n: usize) -> Vec<u64> {
        let mut launched = vec![0; shares.len()];
        for _ in 0..n {
            let i = next_provider(shares, &launched);
            launched[i] += 1;
        }
        launched
    }

    #[test]
    fn base_first_then_by_weight() {
        let s = [share("FARGATE", 1, 2), share("FARGATE_SPOT", 3, 0)];
        assert_eq!(next_provider(&s, &[0, 0]), 0);
        assert_eq!(next_provider(&s, &[1, 0]), 0);
        assert_eq!(next_provider(&s, &[2, 0]), 1, "base met: weights from here");
        assert_eq!(spread(&s, 2), [2, 0]);
        assert_eq!(spread(&s, 10), [4, 6], "2 base + 8 by 1:3");
        assert_eq!(spread(&s, 102), [27, 75]);
        let zero = [share("a", 0, 1), share("b", 1, 0)];
        assert_eq!(spread(&zero, 5), [1, 4], "weight 0: the base only");
        let even = [share("a", 1, 0), share("b", 1, 0), share("c", 2, 0)];
        assert_eq!(spread(&even, 8), [2, 2, 4]);
    }
}
