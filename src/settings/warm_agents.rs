//! `WarmAgents` of an elastic profile: how many idle agents its pool keeps ready — a number,
//! or `auto` (sized from the arrivals of the last hour and of the coming hour on earlier days by
//! `cluster::warm::target`); and
//! `WarmLaunchType`: where its warm agents run on a Fargate cluster profile (`FARGATE` or
//! `FARGATE_SPOT`; by default where the cluster profile's `LaunchType` runs every agent).

use super::basics::LaunchType;

/// The largest number `WarmAgents` takes (`MaxAgents`' own upper bound; the pass caps the
/// target at the cluster profile's `MaxAgents`).
pub const MAX_WARM_AGENTS: u32 = 1000;

/// The `WarmAgents` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WarmAgents {
    /// Exactly this many (0, the default, keeps none).
    #[default]
    Off,
    /// This many, at least 1.
    Count(u32),
    /// Sized from the arrivals of the last hour and of the coming hour on earlier days.
    Auto,
}

/// Why a `WarmAgents` value was refused; the message is shown to the GoCD administrator as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("WarmAgents: \"{0}\" is not a number of agents from 0 to 1000 or \"auto\".")]
pub struct WarmAgentsError(String);

impl WarmAgents {
    /// Parses the setting: empty or `0` is off, a number up to [`MAX_WARM_AGENTS`], or `auto`
    /// (any case).
    pub fn parse(text: &str) -> Result<WarmAgents, WarmAgentsError> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(WarmAgents::Off);
        }
        if text.eq_ignore_ascii_case("auto") {
            return Ok(WarmAgents::Auto);
        }
        match text.parse::<u32>() {
            Ok(0) => Ok(WarmAgents::Off),
            Ok(n) if n <= MAX_WARM_AGENTS => Ok(WarmAgents::Count(n)),
            _ => Err(WarmAgentsError(text.to_string())),
        }
    }
}

/// The values `WarmLaunchType` takes.
pub const WARM_LAUNCH_TYPES: &[&str] = &["FARGATE", "FARGATE_SPOT"];

/// Why a `WarmLaunchType` value was refused; the message is shown to the GoCD administrator as
/// is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("WarmLaunchType: \"{0}\" is not FARGATE or FARGATE_SPOT{1}.")]
pub struct WarmLaunchTypeError(String, &'static str);

/// Parses `WarmLaunchType`: empty is the cluster profile's own launch type (`None`), else
/// `FARGATE` or `FARGATE_SPOT`, exactly (ECS's spelling, as `LaunchType` takes it).
///
/// # Errors
/// Any other value.
pub fn parse_launch_type(text: &str) -> Result<Option<LaunchType>, WarmLaunchTypeError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    match LaunchType::from_name(text) {
        Some(t @ (LaunchType::Fargate | LaunchType::FargateSpot)) => Ok(Some(t)),
        Some(LaunchType::Ec2) => Err(WarmLaunchTypeError(
            text.to_string(),
            ": warm agents run where the cluster profile's LaunchType EC2 places every agent",
        )),
        None if WARM_LAUNCH_TYPES.iter().any(|v| v.eq_ignore_ascii_case(text)) => {
            Err(WarmLaunchTypeError(text.to_string(), " (in capitals)"))
        }
        None => Err(WarmLaunchTypeError(text.to_string(), "")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_launch_type_takes_fargate_or_fargate_spot() {
        assert_eq!(parse_launch_type(""), Ok(None), "the cluster profile's own");
        assert_eq!(parse_launch_type(" FARGATE "), Ok(Some(LaunchType::Fargate)));
        assert_eq!(parse_launch_type("FARGATE_SPOT"), Ok(Some(LaunchType::FargateSpot)));
        let message = |text: &str| parse_launch_type(text).expect_err("refused").to_string();
        assert_eq!(message("SPOT"), "WarmLaunchType: \"SPOT\" is not FARGATE or FARGATE_SPOT.");
        assert_eq!(
            message("fargate_spot"),
            "WarmLaunchType: \"fargate_spot\" is not FARGATE or FARGATE_SPOT (in capitals)."
        );
        assert!(message("EC2").contains("LaunchType EC2"), "{}", message("EC2"));
    }

    #[test]
    fn parse() {
        let cases = [
            ("", Ok(WarmAgents::Off)),
            (" 0 ", Ok(WarmAgents::Off)),
            ("2", Ok(WarmAgents::Count(2))),
            ("1000", Ok(WarmAgents::Count(1000))),
            ("AUTO", Ok(WarmAgents::Auto)),
            ("auto", Ok(WarmAgents::Auto)),
            ("1001", Err(WarmAgentsError("1001".into()))),
            ("-1", Err(WarmAgentsError("-1".into()))),
            ("two", Err(WarmAgentsError("two".into()))),
            ("2.5", Err(WarmAgentsError("2.5".into()))),
        ];
        for (text, want) in cases {
            assert_eq!(WarmAgents::parse(text), want, "{text:?}");
        }
        let message = WarmAgents::parse("many").expect_err("refused").to_string();
        assert_eq!(message, "WarmAgents: \"many\" is not a number of agents from 0 to 1000 or \"auto\".");
    }
}

#[cfg(test)]
mod profile_tests {
    use crate::protocol::profiles::Properties;
    use crate::settings::{check_compatible, validate_elastic_profile, ClusterProfile, ElasticProfile, LaunchType};

    fn props(pairs: &[(&str, &str)]) -> Properties {
        pairs.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect()
    }

    fn cluster(pairs: &[(&str, &str)]) -> ClusterProfile {
        ClusterProfile::parse(&props(pairs)).unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn messages(props_: &[(&str, &str)]) -> Vec<String> {
        validate_elastic_profile(&props(props_)).into_iter().map(|e| format!("{}: {}", e.key, e.message)).collect()
    }

    #[test]
    fn warm_launch_type_is_read_with_warm_agents() {
        let spot = [("Image", "alpine"), ("WarmAgents", "2"), ("WarmLaunchType", "FARGATE_SPOT")];
        let e = ElasticProfile::parse(&props(&spot)).expect("valid");
        assert_eq!(e.warm.launch_type, Some(LaunchType::FargateSpot));
        let e = ElasticProfile::parse(&props(&[("Image", "alpine"), ("WarmAgents", "auto")])).expect("valid");
        assert_eq!(e.warm.launch_type, None, "the cluster profile's own launch type");
        // Not part of the profile's identity: where warm agents run is the pool's, not the agents'.
        let plain = ElasticProfile::parse(&props(&spot[..2])).expect("valid");
        assert_eq!(ElasticProfile::parse(&props(&spot)).expect("valid").hash, plain.hash);

        assert_eq!(
            messages(&[("Image", "alpine"), ("WarmLaunchType", "FARGATE_SPOT")]),
            ["WarmLaunchType: WarmLaunchType needs WarmAgents above 0 (or auto): no agents are kept warm without it."]
        );
        assert_eq!(
            messages(&[("Image", "alpine"), ("WarmAgents", "1"), ("WarmLaunchType", "spot")]),
            ["WarmLaunchType: WarmLaunchType: \"spot\" is not FARGATE or FARGATE_SPOT."]
        );
        let windows = [
            ("Image", "alpine"),
            ("WarmAgents", "1"),
            ("WarmLaunchType", "FARGATE_SPOT"),
            ("OperatingSystemFamily", "WINDOWS_SERVER_2022_CORE"),
            ("Cpu", "1024"),
            ("Memory", "2048"),
        ];
        assert!(messages(&windows).iter().any(|m| m.contains("Windows tasks cannot run on Fargate Spot")));
        // With EC2-only keys, no cluster profile runs it.
        let ec2_only =
            [("Image", "alpine"), ("WarmAgents", "1"), ("WarmLaunchType", "FARGATE"), ("Privileged", "true")];
        let m = messages(&ec2_only);
        assert!(m.iter().any(|m| m.contains("no cluster profile can run both")), "{m:?}");
    }

    #[test]
    fn warm_launch_type_applies_to_fargate_launch_types_only() {
        let e = ElasticProfile::parse(&props(&[
            ("Image", "alpine"),
            ("WarmAgents", "1"),
            ("WarmLaunchType", "FARGATE_SPOT"),
        ]))
        .expect("valid");
        assert_eq!(check_compatible(&cluster(&[("ClusterName", "ci")]), &e), []);
        assert_eq!(check_compatible(&cluster(&[("ClusterName", "ci"), ("LaunchType", "FARGATE_SPOT")]), &e), []);
        let ec2 = cluster(&[
            ("ClusterName", "ci"),
            ("LaunchType", "EC2"),
            ("Ec2InstanceType", "c5.xlarge"),
            ("Ec2InstanceProfile", "ecsInstanceRole"),
            ("Ec2AmiId", "ami-0a1b2c3d"),
        ]);
        let errors = check_compatible(&ec2, &e);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].key, "WarmLaunchType");
        assert_eq!(
            errors[0].message,
            "WarmLaunchType only applies to a cluster profile with LaunchType FARGATE or FARGATE_SPOT; this cluster profile's launch type is EC2. Remove WarmLaunchType."
        );
        for strategy in ["FARGATE:1", "FARGATE_SPOT:1\nFARGATE:0", "default"] {
            let c = cluster(&[("ClusterName", "ci"), ("CapacityProviderStrategy", strategy)]);
            let errors = check_compatible(&c, &e);
            assert_eq!(errors.len(), 1, "{strategy}: {errors:?}");
            assert!(errors[0].message.contains("CapacityProviderStrategy decides"), "{strategy}: {errors:?}");
        }
    }
}
