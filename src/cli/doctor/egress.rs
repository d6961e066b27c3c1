//! `egress`: whether the tasks' security groups let builds reach their materials. GoCD builds
//! check out over SSH (TCP 22), `git://` (9418), plain HTTP (80) and HTTPS (443) from hosts
//! anywhere on the internet, so each of those ports must be let out to `0.0.0.0/0`; a rule to a
//! narrower CIDR, a prefix list or another security group does not reach an arbitrary material
//! host. A blocked port is a warning, not a failure: a shop that mirrors every material inside
//! the VPC needs none of them.
//!
//! One line per distinct set of groups: the cluster profile's (shared by the elastic profiles
//! that set no `SecurityGroupIds`), and each given elastic profile's own, which replace the
//! cluster's.

use std::io;

use super::network::{lets_tcp_out, Network};
use super::{Aws, Report};
use crate::aws::doctor_reads::{EgressRule, EgressTarget};
use crate::settings::ElasticProfile;

/// The internet, as an outbound rule names it.
const INTERNET: &str = "0.0.0.0/0";

/// The ports builds fetch materials on, each with what fails without it.
const MATERIAL_PORTS: [(u16, &str); 4] = [
    (22, "builds that check out over SSH (22) will fail"),
    (9418, "builds that check out over git:// (9418) will fail"),
    (80, "builds that fetch from plain HTTP (80) hosts will fail"),
    (443, "builds that check out over HTTPS (443) will fail"),
];

/// Whether `rule` reaches any address on the internet.
fn to_internet(rule: &EgressRule) -> bool {
    matches!(&rule.to, EgressTarget::Ipv4(cidr) if cidr == INTERNET)
}

/// The material ports no rule of `rules` lets out to the internet, in [`MATERIAL_PORTS`] order.
fn blocked_ports(rules: &[EgressRule]) -> Vec<u16> {
    MATERIAL_PORTS
        .iter()
        .map(|(port, _)| *port)
        .filter(|port| !rules.iter().any(|rule| to_internet(rule) && lets_tcp_out(rule, *port)))
        .collect()
}

/// Whether a rule of `rules` lets all traffic out to the internet.
fn all_traffic_out(rules: &[EgressRule]) -> bool {
    rules.iter().any(|rule| rule.protocol == "-1" && to_internet(rule))
}

/// One rule as an operator reads it: `sg-0abc: tcp 443 to 0.0.0.0/0 ("HTTPS")`.
fn describe(rule: &EgressRule) -> String {
    let protocol = match rule.protocol.as_str() {
        "-1" => "all traffic".to_string(),
        "tcp" | "6" => "tcp".to_string(),
        "udp" | "17" => "udp".to_string(),
        "icmp" | "1" => "icmp".to_string(),
        other => format!("protocol {other}"),
    };
    let ports = match (rule.protocol.as_str(), rule.from_port, rule.to_port) {
        ("-1", _, _) | (_, None | Some(-1), _) => String::new(),
        (_, Some(from), Some(to)) if to != from => format!(" {from}-{to}"),
        (_, Some(from), _) => format!(" {from}"),
    };
    let to = match &rule.to {
        EgressTarget::Ipv4(cidr) | EgressTarget::Ipv6(cidr) => cidr.clone(),
        EgressTarget::PrefixList(id) => format!("prefix list {id}"),
        EgressTarget::Group(id) => format!("security group {id}"),
    };
    let description = rule.description.as_ref().map(|d| format!(" ({d:?})")).unwrap_or_default();
    format!("{}: {protocol}{ports} to {to}{description}", rule.group_id)
}

/// `22, 9418 and 80`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// One set of security groups and whose tasks use it.
#[derive(Debug)]
struct GroupSet {
    groups: Vec<String>,
    whose: Vec<String>,
    /// The set's rules when already read (the cluster profile's, by the reach check).
    rules: Option<Vec<EgressRule>>,
}

/// The distinct sets: the cluster profile's first (with the elastic profiles that share it),
/// then each other set of the elastic profiles' own `SecurityGroupIds`.
fn group_sets(
    network: Option<&Network>,
    cluster_rules: Option<&[EgressRule]>,
    elastic: &[(String, ElasticProfile)],
) -> Vec<GroupSet> {
    let key = |groups: &[String]| {
        let mut key = groups.to_vec();
        key.sort();
        key.dedup();
        key
    };
    let mut sets = Vec::new();
    if let Some(network) = network {
        sets.push(GroupSet {
            groups: network.groups.clone(),
            whose: vec!["the cluster profile".to_string()],
            rules: cluster_rules.map(<[EgressRule]>::to_vec),
        });
    }
    for (shown, e) in elastic {
        let groups = if e.security_group_ids.is_empty() {
            match network {
                Some(network) => &network.groups,
                None => continue,
            }
        } else {
            &e.security_group_ids
        };
        match sets.iter_mut().find(|s| key(&s.groups) == key(groups)) {
            Some(set) => set.whose.push(shown.clone()),
            None => sets.push(GroupSet { groups: groups.clone(), whose: vec![shown.clone()], rules: None }),
        }
    }
    sets
}

/// The `egress` lines.
pub(super) async fn check(
    aws: &Aws,
    network: Option<&Network>,
    cluster_rules: Option<&[EgressRule]>,
    elastic: &[(String, ElasticProfile)],
    r: &mut Report<'_>,
) -> io::Result<()> {
    if network.is_none() {
        r.warn("egress", "the cluster profile's security groups: not checked: the networking check failed", None)?;
    }
    for set in group_sets(network, cluster_rules, elastic) {
        let who = set.whose.join(", ");
        let groups = set.groups.join(", ");
        let rules = match set.rules {
            Some(rules) => rules,
            None => match aws.security_groups(&set.groups).await {
                Ok(found) => {
                    let missing: Vec<&str> = set
                        .groups
                        .iter()
                        .filter(|g| !found.iter().any(|(id, _, _)| id == *g))
                        .map(String::as_str)
                        .collect();
                    if !missing.is_empty() {
                        r.warn(
                            "egress",
                            format!("{who}: security group(s) {} do not exist in {}", missing.join(", "), aws.region),
                            "correct SecurityGroupIds".to_string(),
                        )?;
                        continue;
                    }
                    found.into_iter().flat_map(|(_, _, egress)| egress).collect()
                }
                Err(e) => {
                    let fix = super::fix::fix_for(&e, "ec2:DescribeSecurityGroups", "check network access to EC2");
                    r.warn("egress", format!("{who}: security group(s) {groups} not checked: {}", e.detail), fix)?;
                    continue;
                }
            },
        };
        line(&who, &groups, &rules, r)?;
    }
    Ok(())
}

/// The line of one set of groups whose `rules` are known.
fn line(who: &str, groups: &str, rules: &[EgressRule], r: &mut Report<'_>) -> io::Result<()> {
    if all_traffic_out(rules) {
        return r.ok("egress", format!("{who}: security group(s) {groups} let all traffic out"));
    }
    let blocked = blocked_ports(rules);
    if blocked.is_empty() {
        return r.ok(
            "egress",
            format!("{who}: security group(s) {groups} let TCP 22, 80, 443 and 9418 out to {INTERNET}, as builds' checkouts need"),
        );
    }
    let ports: Vec<String> = blocked.iter().map(u16::to_string).collect();
    let fails: Vec<&str> =
        MATERIAL_PORTS.iter().filter(|(port, _)| blocked.contains(port)).map(|(_, what)| *what).collect();
    let existing: Vec<String> = rules.iter().map(describe).collect();
    let existing = if existing.is_empty() { "none".to_string() } else { existing.join("; ") };
    let narrow = if rules.iter().any(|rule| !to_internet(rule)) {
        " (a rule to a narrower CIDR, a prefix list or a security group does not reach arbitrary material hosts)"
    } else {
        ""
    };
    r.warn(
        "egress",
        format!(
            "{who}: security group(s) {groups} let no TCP {} out to the internet ({INTERNET}): {}; their outbound rules: {existing}{narrow}",
            and_list(&ports),
            fails.join("; ")
        ),
        format!(
            "add outbound rules for TCP {} to {INTERNET} in one of {groups}, or remove the restriction: the VPC's default security group lets all traffic out (nothing to do if every material is mirrored inside the VPC; `ecs-elastic-agent try ... --material URL` proves a material host is reachable)",
            and_list(&ports)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(protocol: &str, ports: Option<(i32, i32)>, to: EgressTarget, description: Option<&str>) -> EgressRule {
        EgressRule {
            group_id: "sg-0abc".into(),
            protocol: protocol.into(),
            from_port: ports.map(|p| p.0),
            to_port: ports.map(|p| p.1),
            to,
            description: description.map(str::to_string),
        }
    }

    fn internet() -> EgressTarget {
        EgressTarget::Ipv4(INTERNET.into())
    }

    #[test]
    fn all_traffic_to_the_internet_blocks_nothing() {
        let rules = [rule("-1", None, internet(), None)];
        assert!(all_traffic_out(&rules));
        assert!(blocked_ports(&rules).is_empty());
    }

    #[test]
    fn only_https_out_blocks_ssh_git_and_http() {
        let rules = [rule("tcp", Some((443, 443)), internet(), Some("HTTPS"))];
        assert!(!all_traffic_out(&rules));
        assert_eq!(blocked_ports(&rules), [22, 9418, 80]);
        assert_eq!(describe(&rules[0]), r#"sg-0abc: tcp 443 to 0.0.0.0/0 ("HTTPS")"#);
    }

    #[test]
    fn no_rules_block_every_material_port() {
        assert_eq!(blocked_ports(&[]), [22, 9418, 80, 443]);
    }

    #[test]
    fn a_range_and_protocol_six_count() {
        let rules = [rule("6", Some((0, 65535)), internet(), None)];
        assert!(blocked_ports(&rules).is_empty());
        let rules = [rule("tcp", Some((20, 90)), internet(), None), rule("tcp", Some((443, 443)), internet(), None)];
        assert_eq!(blocked_ports(&rules), [9418]);
        assert_eq!(describe(&rules[0]), "sg-0abc: tcp 20-90 to 0.0.0.0/0");
    }

    #[test]
    fn narrower_destinations_do_not_reach_material_hosts() {
        let rules = [
            rule("-1", None, EgressTarget::Ipv4("10.0.0.0/8".into()), None),
            rule("tcp", Some((22, 22)), EgressTarget::PrefixList("pl-1234".into()), Some("GitHub")),
            rule("tcp", Some((9418, 9418)), EgressTarget::Group("sg-proxy".into()), None),
            rule("-1", None, EgressTarget::Ipv6("::/0".into()), None),
            rule("udp", Some((53, 53)), internet(), None),
        ];
        assert!(!all_traffic_out(&rules));
        assert_eq!(blocked_ports(&rules), [22, 9418, 80, 443]);
        let described: Vec<String> = rules.iter().map(describe).collect();
        assert_eq!(
            described,
            [
                "sg-0abc: all traffic to 10.0.0.0/8",
                r#"sg-0abc: tcp 22 to prefix list pl-1234 ("GitHub")"#,
                "sg-0abc: tcp 9418 to security group sg-proxy",
                "sg-0abc: all traffic to ::/0",
                "sg-0abc: udp 53 to 0.0.0.0/0",
            ]
        );
    }

    #[test]
    fn lists_read_as_a_sentence() {
        assert_eq!(and_list(&["22".into()]), "22");
        assert_eq!(and_list(&["22".into(), "9418".into(), "80".into()]), "22, 9418 and 80");
    }
}
