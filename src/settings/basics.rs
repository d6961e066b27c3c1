//! The few items every other settings module may need, owned here so that they import nothing
//! back: where ECS runs the agent tasks ([`LaunchType`]), how many user tags fit on a task
//! ([`MAX_USER_TAGS`]), and how a user's value is quoted in a message ([`quote`]).
//!
//! This module imports nothing from its siblings; they import from it, so the arrows between
//! the modules of `settings` point one way.

/// Where ECS runs the agent tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LaunchType {
    /// AWS Fargate, on-demand.
    Fargate,
    /// Fargate Spot, falling back to Fargate on capacity errors.
    FargateSpot,
    /// EC2 container instances that the plugin launches and retires.
    Ec2,
}

impl LaunchType {
    /// The ECS API name: `FARGATE`, `FARGATE_SPOT` or `EC2`.
    pub fn as_str(self) -> &'static str {
        match self {
            LaunchType::Fargate => "FARGATE",
            LaunchType::FargateSpot => "FARGATE_SPOT",
            LaunchType::Ec2 => "EC2",
        }
    }

    /// The launch type named exactly `name` (case-sensitive).
    pub fn from_name(name: &str) -> Option<LaunchType> {
        [LaunchType::Fargate, LaunchType::FargateSpot, LaunchType::Ec2].into_iter().find(|t| t.as_str() == name)
    }

    /// `FARGATE` or `FARGATE_SPOT`.
    pub fn is_fargate(self) -> bool {
        matches!(self, LaunchType::Fargate | LaunchType::FargateSpot)
    }
}

/// User tags allowed on a task in total: AWS allows 50 tags, and the plugin adds up to 13 of
/// its own (`cluster::identity::PLUGIN_TAGS`).
pub const MAX_USER_TAGS: usize = 50 - 13;

/// The longest user value quoted in a message, in characters.
const QUOTE_MAX: usize = 80;

/// Quotes a user value for a message: single quotes, cut at 80 characters with an ellipsis.
pub(crate) fn quote(value: &str) -> String {
    let mut chars = value.chars();
    let head: String = chars.by_ref().take(QUOTE_MAX).collect();
    if chars.next().is_some() {
        format!("'{head}…'")
    } else {
        format!("'{head}'")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_truncates_long_values() {
        assert_eq!(quote("abc"), "'abc'");
        let long = "x".repeat(200);
        let quoted = quote(&long);
        assert_eq!(quoted.chars().count(), 80 + 3);
        assert!(quoted.ends_with("…'"));
    }

    #[test]
    fn launch_types_by_name() {
        for t in [LaunchType::Fargate, LaunchType::FargateSpot, LaunchType::Ec2] {
            assert_eq!(LaunchType::from_name(t.as_str()), Some(t));
        }
        assert_eq!(LaunchType::from_name("fargate"), None);
        assert!(LaunchType::FargateSpot.is_fargate() && !LaunchType::Ec2.is_fargate());
    }
}
