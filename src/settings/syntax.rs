//! Pure syntax checks for AWS names, ids and ARNs, URLs and Docker image references.
//!
//! No I/O and no AWS calls: validation never asks AWS whether something exists (`docs/design.md`,
//! "Profiles"). Checks answer `bool`, or `Err(reason)` where a reason helps the user more than
//! "invalid".

/// Region name prefixes (partition and geography), longest first so `us-gov` wins over `us`.
const REGION_PREFIXES: &[&str] =
    &["us-isob", "us-isof", "us-iso", "eu-isoe", "us-gov", "us", "eu", "ap", "sa", "ca", "me", "af", "il", "mx", "cn"];
const REGION_DIRECTIONS: &[&str] =
    &["northeast", "northwest", "southeast", "southwest", "central", "north", "south", "east", "west"];

/// A region name such as `us-east-1`, `eu-west-3`, `us-gov-west-1`, `cn-north-1`, `ap-southeast-4`.
pub(crate) fn is_region(s: &str) -> bool {
    REGION_PREFIXES.iter().any(|prefix| {
        let Some(rest) = s.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')) else {
            return false;
        };
        let Some((direction, number)) = rest.rsplit_once('-') else {
            return false;
        };
        REGION_DIRECTIONS.contains(&direction)
            && (1..=2).contains(&number.len())
            && number.bytes().all(|b| b.is_ascii_digit())
            && !number.starts_with('0')
    })
}

/// An AWS partition: `aws`, `aws-cn`, `aws-us-gov`, ... (`aws[-a-z]*`).
fn is_partition(s: &str) -> bool {
    s.strip_prefix("aws").is_some_and(|rest| rest.bytes().all(|b| b == b'-' || b.is_ascii_lowercase()))
}

/// A 12-digit account id.
fn is_account_id(s: &str) -> bool {
    s.len() == 12 && s.bytes().all(|b| b.is_ascii_digit())
}

/// `<prefix>-` followed by 8 or 17 lowercase hex digits (`subnet-`, `sg-`, `ami-`).
pub(crate) fn is_hex_id(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')).is_some_and(|hex| {
        (hex.len() == 8 || hex.len() == 17) && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// `[A-Za-z0-9_-]{1,255}`: ECS cluster, task family and container names.
pub(crate) fn is_ecs_name(s: &str) -> bool {
    (1..=255).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// IAM's name characters `[\w+=,.@-]`.
pub(crate) fn is_iam_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_+=,.@-".contains(c)
}

/// The six parts of an ARN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Arn<'a> {
    pub region: &'a str,
    pub resource: &'a str,
}

/// Splits `arn:<partition>:<service>:<region>:<account>:<resource>`; checks partition and account.
/// The region must be empty when `global`, a region name otherwise.
pub(crate) fn parse_arn<'a>(s: &'a str, service: &str, global: bool) -> Option<Arn<'a>> {
    let mut parts = s.splitn(6, ':');
    let (arn, partition) = (parts.next()?, parts.next()?);
    let (svc, region, account, resource) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let region_ok = if global { region.is_empty() } else { is_region(region) };
    (arn == "arn" && is_partition(partition) && svc == service && region_ok && is_account_id(account))
        .then_some(Arn { region, resource })
}

/// An IAM path and name after `role/` or `instance-profile/`: `[path/]name`, IAM characters.
fn is_iam_path_name(s: &str) -> bool {
    let name = s.rsplit('/').next().unwrap_or_default();
    (1..=64).contains(&name.len())
        && s.len() <= 512
        && s.split('/').all(|segment| !segment.is_empty() && segment.chars().all(is_iam_char))
}

/// `arn:aws[-a-z]*:iam::<account>:role/<path/name>`.
pub(crate) fn is_role_arn(s: &str) -> bool {
    parse_arn(s, "iam", true).and_then(|arn| arn.resource.strip_prefix("role/")).is_some_and(is_iam_path_name)
}

/// `arn:aws[-a-z]*:iam::<account>:instance-profile/<path/name>`.
pub(crate) fn is_instance_profile_arn(s: &str) -> bool {
    parse_arn(s, "iam", true)
        .and_then(|arn| arn.resource.strip_prefix("instance-profile/"))
        .is_some_and(is_iam_path_name)
}

/// An IAM name: `[\w+=,.@-]{1,max}`.
pub(crate) fn is_iam_name(s: &str, max: usize) -> bool {
    (1..=max).contains(&s.len()) && s.chars().all(is_iam_char)
}

/// `arn:aws[-a-z]*:ecs:<region>:<account>:cluster/<name>`: the cluster's region and name.
pub(crate) fn cluster_arn(s: &str) -> Option<(&str, &str)> {
    let arn = parse_arn(s, "ecs", false)?;
    let name = arn.resource.strip_prefix("cluster/")?;
    is_ecs_name(name).then_some((arn.region, name))
}

/// A Secrets Manager secret ARN or an SSM parameter ARN.
pub(crate) fn is_secret_source_arn(s: &str) -> bool {
    if let Some(arn) = parse_arn(s, "secretsmanager", false) {
        return arn.resource.strip_prefix("secret:").is_some_and(|r| !r.is_empty());
    }
    if let Some(arn) = parse_arn(s, "ssm", false) {
        return arn
            .resource
            .strip_prefix("parameter/")
            .is_some_and(|r| !r.is_empty() && !r.contains(char::is_whitespace));
    }
    false
}

/// A task definition: its ARN (`...:task-definition/<family>:<revision>`), `family:revision` or `family`.
pub(crate) fn is_task_definition(s: &str) -> bool {
    let family_revision = match parse_arn(s, "ecs", false) {
        Some(arn) => match arn.resource.strip_prefix("task-definition/") {
            Some(rest) if rest.contains(':') => rest,
            _ => return false,
        },
        None if s.starts_with("arn:") => return false,
        None => s,
    };
    match family_revision.split_once(':') {
        Some((family, revision)) => is_ecs_name(family) && is_revision(revision),
        None => is_ecs_name(family_revision),
    }
}

fn is_revision(s: &str) -> bool {
    !s.is_empty() && !s.starts_with('0') && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit())
}

/// An environment variable name: `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn is_env_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Characters AWS allows in tag keys and values: letters, digits, spaces and `_ . : / = + - @`.
pub(crate) fn is_tag_text(s: &str) -> bool {
    s.chars().all(|c| c.is_alphanumeric() || c == ' ' || "_.:/=+-@".contains(c))
}

/// A CloudWatch log group name: `[.\-_/#A-Za-z0-9]{1,512}`.
pub(crate) fn is_log_group(s: &str) -> bool {
    (1..=512).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b".-_/#".contains(&b))
}

/// An SQS queue URL, `http(s)://host[:port]/<12-digit account>/<queue name>`: its account and
/// queue name. A queue name is 1 to 80 letters, digits, `-` and `_` (a FIFO queue's ends in
/// `.fifo`).
pub(crate) fn sqs_queue_url(s: &str) -> Option<(&str, &str)> {
    let rest = s.strip_prefix("https://").or_else(|| s.strip_prefix("http://"))?;
    let (host, path) = rest.split_once('/')?;
    let (account, name) = path.split_once('/')?;
    let host_ok = !host.is_empty() && host.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:".contains(&b));
    let account_ok = account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit());
    let base = name.strip_suffix(".fifo").unwrap_or(name);
    let name_ok =
        (1..=80).contains(&name.len()) && base.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    (host_ok && account_ok && name_ok && !base.is_empty()).then_some((account, name))
}

/// An EC2 instance type such as `c5.xlarge`, `t3a.medium` or `m7g.metal-48xl`.
pub(crate) fn is_instance_type(s: &str) -> bool {
    let lower_alnum_dash = |p: &str| p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    s.len() <= 64
        && s.split_once('.').is_some_and(|(family, size)| {
            family.starts_with(|c: char| c.is_ascii_lowercase())
                && !size.is_empty()
                && lower_alnum_dash(family)
                && lower_alnum_dash(size)
        })
}

/// An EC2 key pair name: 1 to 255 printable ASCII characters.
pub(crate) fn is_key_pair_name(s: &str) -> bool {
    (1..=255).contains(&s.len()) && s.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// `http(s)://host[:port]/.../go`, nothing after `/go`.
pub(crate) fn check_go_server_url(s: &str) -> Result<(), &'static str> {
    let lower = s.to_ascii_lowercase();
    let scheme_len = if lower.starts_with("https://") {
        8
    } else if lower.starts_with("http://") {
        7
    } else {
        return Err("it must start with https:// or http://");
    };
    if s.contains(|c: char| c.is_whitespace() || c.is_control()) {
        return Err("it must not contain spaces");
    }
    if s.contains(['?', '#']) {
        return Err("it must not have a query or fragment");
    }
    let rest = &s[scheme_len..];
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    check_authority(authority)?;
    if path.ends_with("/go/") {
        return Err("remove the slash after /go");
    }
    if !path.ends_with("/go") {
        return Err("it must end in /go");
    }
    Ok(())
}

fn check_authority(authority: &str) -> Result<(), &'static str> {
    if authority.contains('@') {
        return Err("it must not contain a user name or password");
    }
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (inside, after) = v6.split_once(']').ok_or("the IPv6 address is not closed with ]")?;
            if inside.is_empty() || !inside.bytes().all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.') {
                return Err("the host is not a valid IPv6 address");
            }
            (inside, after.strip_prefix(':'))
        }
        None => match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let host_ok = !host.is_empty()
        && (authority.starts_with('[') || host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-'));
    if !host_ok {
        return Err("it has no valid host name");
    }
    match port {
        Some(port) if !port.parse::<u16>().is_ok_and(|p| p > 0) => Err("the port must be a number from 1 to 65535"),
        _ => Ok(()),
    }
}

/// A Docker image reference: `[registry[:port]/]path[:tag][@digest]`, no whitespace, at most 255 chars.
pub(crate) fn check_image(s: &str) -> Result<(), &'static str> {
    if s.len() > 255 {
        return Err("it is longer than 255 characters");
    }
    if s.contains(|c: char| c.is_whitespace() || c.is_control()) {
        return Err("it must not contain spaces");
    }
    let (name_tag, digest) = match s.split_once('@') {
        Some((name_tag, digest)) => (name_tag, Some(digest)),
        None => (s, None),
    };
    if let Some(digest) = digest {
        let (algorithm, hex) = digest.split_once(':').ok_or("the digest must look like sha256:<hex>")?;
        let ok = !algorithm.is_empty()
            && algorithm.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+._-".contains(&b))
            && hex.len() >= 32
            && hex.bytes().all(|b| b.is_ascii_hexdigit());
        if !ok {
            return Err("the digest must look like sha256:<hex>");
        }
    }
    let last_slash = name_tag.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match name_tag[last_slash..].rfind(':') {
        Some(i) => (&name_tag[..last_slash + i], Some(&name_tag[last_slash + i + 1..])),
        None => (name_tag, None),
    };
    if let Some(tag) = tag {
        let ok = (1..=128).contains(&tag.len())
            && !tag.starts_with(['.', '-'])
            && tag.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
        if !ok {
            return Err("the tag after ':' may use letters, digits, '_', '.' and '-' (at most 128)");
        }
    }
    check_image_name(name)
}

fn check_image_name(name: &str) -> Result<(), &'static str> {
    let mut components: Vec<&str> = name.split('/').collect();
    let first = components[0];
    let has_registry = components.len() > 1 && (first.contains(['.', ':']) || first == "localhost");
    if has_registry {
        check_authority(first).map_err(|_| "the registry host is not valid")?;
        components.remove(0);
    }
    let component_ok = |c: &str| {
        c.starts_with(|ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit())
            && c.ends_with(|ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit())
            && c.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
    };
    if components.iter().all(|c| component_ok(c)) {
        Ok(())
    } else {
        Err("the repository name may use lowercase letters, digits, '.', '_', '-' and '/'")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqs_queue_urls() {
        let aws = "https://sqs.us-east-1.amazonaws.com/123456789012/gocd-ecs-events";
        assert_eq!(sqs_queue_url(aws), Some(("123456789012", "gocd-ecs-events")));
        assert_eq!(sqs_queue_url("http://127.0.0.1:4566/123456789012/q.fifo"), Some(("123456789012", "q.fifo")));
        for bad in [
            "sqs.us-east-1.amazonaws.com/123456789012/q",
            "https://sqs.us-east-1.amazonaws.com/12345/q",
            "https://sqs.us-east-1.amazonaws.com/123456789012/",
            "https://sqs.us-east-1.amazonaws.com/123456789012/a b",
            "https://sqs.us-east-1.amazonaws.com/123456789012/q/extra",
            "arn:aws:sqs:us-east-1:123456789012:q",
        ] {
            assert_eq!(sqs_queue_url(bad), None, "{bad}");
        }
    }

    #[test]
    fn regions() {
        for good in [
            "us-east-1",
            "eu-west-3",
            "us-gov-west-1",
            "cn-north-1",
            "ap-southeast-4",
            "il-central-1",
            "us-isob-east-1",
        ] {
            assert!(is_region(good), "{good}");
        }
        for bad in ["", "us-east", "US-EAST-1", "us-east-01", "moon-east-1", "us-upward-1", "us-east-1a", "us-east-123"]
        {
            assert!(!is_region(bad), "{bad}");
        }
    }

    #[test]
    fn hex_ids() {
        assert!(is_hex_id("subnet-0a1b2c3d", "subnet"));
        assert!(is_hex_id("sg-0123456789abcdef0", "sg"));
        assert!(!is_hex_id("sg-0123456789abcdef", "sg"));
        assert!(!is_hex_id("subnet-0A1B2C3D", "subnet"));
        assert!(!is_hex_id("sg-0a1b2c3d", "subnet"));
    }

    #[test]
    fn arns() {
        assert!(is_role_arn("arn:aws:iam::123456789012:role/gocd"));
        assert!(is_role_arn("arn:aws-us-gov:iam::123456789012:role/service-role/gocd-agents"));
        assert!(!is_role_arn("arn:aws:iam::123456789012:user/gocd"));
        assert!(!is_role_arn("arn:aws:iam::12345:role/gocd"));
        assert!(!is_role_arn("arn:aws:iam:us-east-1:123456789012:role/gocd"));
        assert!(!is_role_arn("arn:aws:iam::123456789012:role/"));
        assert!(!is_role_arn("arn:aws:iam::123456789012:role/a b"));
        assert!(is_instance_profile_arn("arn:aws:iam::123456789012:instance-profile/ecs"));
        assert_eq!(cluster_arn("arn:aws:ecs:eu-west-1:123456789012:cluster/ci"), Some(("eu-west-1", "ci")));
        assert_eq!(cluster_arn("arn:aws:ecs:eu-west-1:123456789012:service/ci"), None);
        assert!(is_secret_source_arn("arn:aws:secretsmanager:us-east-1:123456789012:secret:ci/npm-AbCdEf"));
        assert!(is_secret_source_arn("arn:aws:ssm:us-east-1:123456789012:parameter/ci/npm"));
        assert!(!is_secret_source_arn("arn:aws:s3:::bucket/key"));
        assert!(!is_secret_source_arn("arn:aws:ssm:us-east-1:123456789012:document/x"));
    }

    #[test]
    fn task_definitions() {
        for good in ["gocd-agent", "gocd-agent:3", "arn:aws:ecs:us-east-1:123456789012:task-definition/gocd-agent:12"] {
            assert!(is_task_definition(good), "{good}");
        }
        for bad in
            ["gocd agent", "gocd:0", "gocd:x", "arn:aws:ecs:us-east-1:123456789012:task-definition/gocd", "arn:nope"]
        {
            assert!(!is_task_definition(bad), "{bad}");
        }
    }

    #[test]
    fn go_server_urls() {
        for good in
            ["https://gocd.example.com/go", "http://10.0.0.1:8153/go", "https://[::1]:8443/go", "https://h/ci/go"]
        {
            assert_eq!(check_go_server_url(good), Ok(()), "{good}");
        }
        assert_eq!(check_go_server_url("https://h/go/"), Err("remove the slash after /go"));
        assert_eq!(check_go_server_url("https://h"), Err("it must end in /go"));
        assert_eq!(check_go_server_url("ftp://h/go"), Err("it must start with https:// or http://"));
        assert!(check_go_server_url("https://h:99999/go").is_err());
        assert!(check_go_server_url("https://u:p@h/go").is_err());
        assert!(check_go_server_url("https:///go").is_err());
        assert!(check_go_server_url("https://h/go?x=1").is_err());
    }

    #[test]
    fn images() {
        for good in [
            "alpine",
            "gocd/gocd-agent-ubuntu-22.04:v24.1.0",
            "123456789012.dkr.ecr.us-east-1.amazonaws.com/gocd/agent:Latest_1",
            "localhost:5000/agent",
            "agent@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(check_image(good), Ok(()), "{good}");
        }
        for bad in ["gocd agent", "Gocd/Agent", "agent:", "agent:-x", "agent@md5", "/agent", &"a".repeat(256)] {
            assert!(check_image(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn small_names() {
        assert!(is_env_name("_A1") && !is_env_name("1A") && !is_env_name("A-B") && !is_env_name(""));
        assert!(is_tag_text("team: ci/cd @x") && !is_tag_text("a*b"));
        assert!(is_log_group("/gocd/agents#1") && !is_log_group("a b"));
        assert!(
            is_instance_type("c5.xlarge") && is_instance_type("m7g.metal-48xl") && is_instance_type("u-6tb1.metal")
        );
        assert!(!is_instance_type("c5") && !is_instance_type("C5.xlarge") && !is_instance_type("5c.large"));
        assert!(is_key_pair_name("my key") && !is_key_pair_name("k\u{e9}y"));
        assert!(is_iam_name("gocd-ecs", 64) && !is_iam_name("a b", 64));
        assert!(is_ecs_name("ci_agents-1") && !is_ecs_name("ci.agents"));
    }
}
