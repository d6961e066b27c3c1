//! `WarmAgents` of an elastic profile: how many idle agents its pool keeps ready — a number,
//! or `auto` (sized from the arrivals of the last hour by `cluster::warm::target`).

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
    /// Sized from the arrivals of the last hour.
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

#[cfg(test)]
mod tests {
    use super::*;

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
