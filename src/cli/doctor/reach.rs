//! Whether the agent tasks can reach what they need, seen from AWS's side: the image registry
//! (and, with `LogGroup`, CloudWatch Logs), the GoCD server and the builds' materials. A task
//! that reaches neither registry nor server starts, never registers, and is stopped when
//! `AgentRegisterTimeoutMinutes` runs out, so this is the check that saves a new operator that
//! wait. It reads each subnet's route table (its own, else the VPC's main one), the VPC's
//! endpoints and the security groups' outbound rules:
//!
//! - a default route to a NAT gateway: fine;
//! - a default route to an internet gateway: fine with `AssignPublicIp` on, else the tasks get no
//!   public address and reach nothing outside the VPC (FAIL);
//! - no default route: only VPC endpoints (ECR's `ecr.api` and `ecr.dkr`, S3 for ECR's layers,
//!   `logs` with `LogGroup`) — any missing one FAILs; with all of them the images must be in ECR
//!   of this region and the server reachable inside the VPC (warn);
//! - a default route elsewhere (transit gateway, peering, an appliance): not followed (warn);
//! - the security groups must let TCP 443 out (registry, AWS APIs) and the server's port.
//!
//! `GoServerUrl` must be a URL a GoCD server answers at. A stock server answers plain HTTP on
//! 8153 (`http://host:8153/go`) and TLS is a reverse proxy's (`https://host/go`), so these FAIL:
//! `https://` on 8153; the TLS port servers opened before 20.6; a URL not ending in `/go`.
//!
//! Lines: `reach` (routes and endpoints), `server` (`GoServerUrl` and its port), then `egress`
//! (the ports builds check out over, per set of security groups: `super::egress`) and `image`
//! (Docker Hub images pulled anonymously through a NAT gateway: `super::image`), which read the
//! same groups and route tables.

use std::io;

use super::fix::fix_for;
use super::network::{allows_tcp_out, way_out, Network, Way};
use super::{Aws, Report};
use crate::aws::doctor_reads::EgressRule;
use crate::aws::doctor_routes::RouteTableView;
use crate::settings::{ClusterProfile, ElasticProfile};

/// The port a stock GoCD server answers agents on, in plain HTTP.
const GOCD_HTTP_PORT: u16 = 8153;
/// The TLS port GoCD servers opened before 20.6; no server listens there now.
const RETIRED_TLS_PORT: u16 = 8154;

/// The endpoints a VPC without a way out needs, as service names.
fn needed_endpoints(region: &str, logs: bool) -> Vec<String> {
    let mut needed: Vec<String> =
        ["ecr.api", "ecr.dkr", "s3"].iter().map(|s| format!("com.amazonaws.{region}.{s}")).collect();
    if logs {
        needed.push(format!("com.amazonaws.{region}.logs"));
    }
    needed
}

/// The TCP port of a GoCD server URL (`https://host/go` is 443, `http://host:8153/go` 8153).
fn server_port(url: &str) -> Option<u16> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split('/').next()?;
    let host_port = authority.rsplit('@').next()?;
    // An IPv6 literal keeps its colons inside brackets.
    let after_host = host_port.rsplit_once(']').map_or(host_port, |(_, after)| after);
    match after_host.rsplit_once(':') {
        Some((_, port)) => port.parse().ok(),
        None if scheme.eq_ignore_ascii_case("https") => Some(443),
        None => Some(80),
    }
}

/// The host of a GoCD server URL, an IPv6 literal in its brackets.
fn server_host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or(rest);
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    match host_port.rsplit_once(']') {
        Some((literal, _)) => &host_port[..=literal.len()],
        None => host_port.split(':').next().unwrap_or(host_port),
    }
}

/// What is wrong with `url` as a GoCD server's URL, as (finding, fix); `None` when nothing is.
fn url_problem(url: &str, port: u16) -> Option<(String, String)> {
    let host = server_host(url);
    let stock = format!(
        "a stock GoCD server answers plain HTTP on {GOCD_HTTP_PORT}: http://{host}:{GOCD_HTTP_PORT}/go; TLS is a \
         reverse proxy's, usually https://{host}/go"
    );
    let https = url.get(..8).is_some_and(|s| s.eq_ignore_ascii_case("https://"));
    if port == RETIRED_TLS_PORT {
        return Some((
            format!(
                "GoServerUrl {url} names the TLS port GoCD servers opened before 20.6: no GoCD server listens there \
                 now, so agents cannot register"
            ),
            stock,
        ));
    }
    if https && port == GOCD_HTTP_PORT {
        return Some((
            format!(
                "GoServerUrl {url} asks for TLS on {GOCD_HTTP_PORT}, where a GoCD server answers plain HTTP: \
                 agents fail the TLS handshake and never register"
            ),
            stock,
        ));
    }
    if !url.ends_with("/go") {
        return Some((
            format!("GoServerUrl {url} does not end in /go: agents ask the wrong path and never register"),
            format!("end GoServerUrl in /go ({stock})"),
        ));
    }
    None
}

/// The `reach`, `server`, `egress` and `image` lines.
pub(super) async fn check(
    aws: &Aws,
    profile: &ClusterProfile,
    network: Option<&Network>,
    elastic: &[(String, ElasticProfile)],
    r: &mut Report<'_>,
) -> io::Result<()> {
    let Some(network) = network else {
        r.warn("reach", "not checked: the networking check failed", None)?;
        server(profile, None, r)?;
        return super::egress::check(aws, None, None, elastic, r).await;
    };
    let egress: Option<Vec<EgressRule>> = match aws.security_groups(&network.groups).await {
        Ok(groups) => Some(groups.into_iter().flat_map(|(_, _, egress)| egress).collect()),
        Err(e) => {
            let fix = fix_for(&e, "ec2:DescribeSecurityGroups", "check network access to EC2");
            r.fail("reach", format!("cannot read the security groups' outbound rules: {}", e.detail), fix)?;
            None
        }
    };
    let tables = match aws.route_tables(&network.vpc).await {
        Ok(tables) => Some(tables),
        Err(e) => {
            if egress.is_some() {
                let fix = fix_for(&e, "ec2:DescribeRouteTables", "check network access to EC2");
                r.fail("reach", format!("cannot read the route tables of {}: {}", network.vpc, e.detail), fix)?;
            }
            None
        }
    };
    if let (Some(egress), Some(tables)) = (&egress, &tables) {
        routes(aws, profile, network, egress, tables, r).await?;
    }
    server(profile, egress.as_deref().map(|egress| (network, egress)), r)?;
    super::egress::check(aws, Some(network), egress.as_deref(), elastic, r).await?;
    super::image::check(aws, Some(network), tables.as_deref(), elastic, r)
}

async fn routes(
    aws: &Aws,
    profile: &ClusterProfile,
    network: &Network,
    egress: &[EgressRule],
    tables: &[RouteTableView],
    r: &mut Report<'_>,
) -> io::Result<()> {
    let groups = network.groups.join(", ");
    if !allows_tcp_out(egress, 443) {
        return r.fail(
            "reach",
            format!("security group(s) {groups} let no TCP 443 out: tasks cannot pull their image or call AWS"),
            "add an outbound rule for TCP 443 (to 0.0.0.0/0, or to the VPC endpoints and the registry)",
        );
    }
    let ways: Vec<(String, Way)> = network.subnets.iter().map(|s| (s.clone(), way_out(s, tables))).collect();
    if !profile.assign_public_ip {
        if let Some((subnet, Way::Internet(igw))) = ways.iter().find(|(_, w)| matches!(w, Way::Internet(_))) {
            return r.fail(
                "reach",
                format!(
                    "subnet {subnet} routes to the internet gateway {igw} but AssignPublicIp is off: tasks get no \
                     public address, cannot pull their image or reach the GoCD server, and are stopped after \
                     AgentRegisterTimeoutMinutes"
                ),
                "set AssignPublicIp to true, or use private subnets whose default route is a NAT gateway",
            );
        }
    }
    let mut said = Vec::new();
    let mut warnings = Vec::new();
    for (subnet, way) in &ways {
        match way {
            Way::Nat(nat) => said.push(format!("{subnet} through NAT gateway {nat}")),
            Way::Internet(igw) => said.push(format!("{subnet} through internet gateway {igw} with a public IP")),
            Way::Other(target) => {
                said.push(format!("{subnet} through {target}"));
                warnings
                    .push(format!("subnet {subnet}'s default route goes to {target}, which doctor does not follow"));
            }
            Way::EndpointsOnly => said.push(format!("{subnet} through VPC endpoints only")),
        }
    }
    if ways.iter().any(|(_, w)| *w == Way::EndpointsOnly) {
        let services = match aws.vpc_endpoint_services(&network.vpc).await {
            Ok(services) => services,
            Err(e) => {
                let fix = fix_for(&e, "ec2:DescribeVpcEndpoints", "check network access to EC2");
                return r.fail("reach", format!("cannot read the VPC endpoints of {}: {}", network.vpc, e.detail), fix);
            }
        };
        let missing: Vec<String> = needed_endpoints(&aws.region, profile.log_group.is_some())
            .into_iter()
            .filter(|n| !services.contains(n))
            .collect();
        if !missing.is_empty() {
            let private: Vec<&str> =
                ways.iter().filter(|(_, w)| *w == Way::EndpointsOnly).map(|(s, _)| s.as_str()).collect();
            return r.fail(
                "reach",
                format!(
                    "subnet(s) {} have no default route and VPC {} has no endpoint for {}: tasks there cannot pull \
                     their image",
                    private.join(", "),
                    network.vpc,
                    missing.join(", ")
                ),
                format!(
                    "route 0.0.0.0/0 to a NAT gateway, or add the VPC endpoints {} (S3 as a gateway endpoint)",
                    missing.join(", ")
                ),
            );
        }
        warnings.push(
            "subnets without a default route reach only the VPC endpoints: images must be in ECR of this region, \
             and the GoCD server must be reachable inside the VPC (peering, VPN)"
                .to_string(),
        );
    }
    let finding = format!("tasks reach the registry: {}; TCP 443 out allowed by {groups}", said.join(", "));
    if warnings.is_empty() {
        r.ok("reach", finding)
    } else {
        r.warn("reach", format!("{finding}; but {}", warnings.join("; ")), None)
    }
}

/// `GoServerUrl`: set or not, a URL a GoCD server answers at, and its port allowed out.
fn server(profile: &ClusterProfile, network: Option<(&Network, &[EgressRule])>, r: &mut Report<'_>) -> io::Result<()> {
    let Some(url) = &profile.go_server_url else {
        return r.warn(
            "server",
            "GoServerUrl is not set: agents get the GoCD server's site URL (its secure site URL when set, Admin > \
             Server Configuration), create-agent refuses jobs when the server has neither, and whether the tasks \
             reach it is not checked",
            format!(
                "set GoServerUrl to the URL the tasks reach the server at (http://host:{GOCD_HTTP_PORT}/go, or \
                 https://host/go behind a TLS proxy); `ecs-elastic-agent try ... --server-url URL` proves the tasks \
                 reach it"
            ),
        );
    };
    let Some(port) = server_port(url) else {
        return r.fail("server", format!("GoServerUrl {url} has no usable port"), "correct GoServerUrl");
    };
    if let Some((finding, fix)) = url_problem(url, port) {
        return r.fail("server", finding, fix);
    }
    match network {
        Some((network, egress)) if !allows_tcp_out(egress, port) => r.fail(
            "server",
            format!(
                "agents reach GoCD at {url}, but security group(s) {} let no TCP {port} out",
                network.groups.join(", ")
            ),
            format!("add an outbound rule for TCP {port} to the GoCD server"),
        ),
        Some(_) => r.ok(
            "server",
            format!("agents reach GoCD at {url} (TCP {port} out allowed; the server's own firewall not checked)"),
        ),
        None => r.warn("server", format!("agents reach GoCD at {url}; TCP {port} out not checked"), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(id: &str, main: bool, subnets: &[&str], route: Option<&str>) -> RouteTableView {
        RouteTableView {
            id: id.into(),
            main,
            subnets: subnets.iter().map(|s| s.to_string()).collect(),
            default_route: route.map(str::to_string),
        }
    }

    #[test]
    fn a_subnet_uses_its_own_table_else_the_main_one() {
        let tables = [
            table("rtb-main", true, &[], Some("igw-1")),
            table("rtb-private", false, &["subnet-b"], Some("nat-1")),
            table("rtb-isolated", false, &["subnet-c"], None),
            table("rtb-tgw", false, &["subnet-d"], Some("tgw-1")),
        ];
        assert_eq!(way_out("subnet-a", &tables), Way::Internet("igw-1".into()));
        assert_eq!(way_out("subnet-b", &tables), Way::Nat("nat-1".into()));
        assert_eq!(way_out("subnet-c", &tables), Way::EndpointsOnly);
        assert_eq!(way_out("subnet-d", &tables), Way::Other("tgw-1".into()));
        assert_eq!(way_out("subnet-a", &[]), Way::EndpointsOnly);
    }

    #[test]
    fn server_ports() {
        for (url, port) in [
            ("https://gocd.example.com/go", Some(443)),
            ("http://gocd.example.com/go", Some(80)),
            ("https://gocd.example.com:8443/go", Some(8443)),
            ("http://10.0.0.5:8153/go", Some(8153)),
            ("https://[2001:db8::1]/go", Some(443)),
            ("http://[2001:db8::1]:8153/go", Some(8153)),
            ("https://gocd.example.com:x/go", None),
        ] {
            assert_eq!(server_port(url), port, "{url}");
        }
    }

    #[test]
    fn server_hosts() {
        assert_eq!(server_host("http://gocd.example.com:8153/go"), "gocd.example.com");
        assert_eq!(server_host("https://gocd.example.com/go"), "gocd.example.com");
        assert_eq!(server_host("http://[2001:db8::1]:8153/go"), "[2001:db8::1]");
    }

    /// The finding's start, or `None` when the URL is fine.
    fn problem(url: &str) -> Option<String> {
        let port = server_port(url).expect("a port");
        url_problem(url, port).map(|(finding, fix)| {
            assert!(fix.contains("/go"), "{fix}");
            finding
        })
    }

    #[test]
    fn urls_a_stock_server_answers_pass() {
        for url in [
            "http://gocd.example.com:8153/go",
            "https://gocd.example.com/go",
            "https://gocd.example.com:8443/go",
            "http://10.0.0.5:8153/go",
            "https://gocd.example.com/ci/go",
        ] {
            assert_eq!(problem(url), None, "{url}");
        }
    }

    #[test]
    fn the_retired_tls_port_and_tls_on_the_http_port_fail() {
        let url = format!("https://gocd.example.com:{RETIRED_TLS_PORT}/go");
        let port = server_port(&url).expect("a port");
        let (finding, fix) = url_problem(&url, port).expect("a problem");
        assert!(finding.contains("before 20.6"), "{finding}");
        assert_eq!(
            fix,
            "a stock GoCD server answers plain HTTP on 8153: http://gocd.example.com:8153/go; TLS is a reverse \
             proxy's, usually https://gocd.example.com/go"
        );
        let finding = problem("https://gocd.example.com:8153/go").expect("a problem");
        assert!(finding.contains("asks for TLS on 8153"), "{finding}");
    }

    #[test]
    fn a_url_not_ending_in_go_fails() {
        for url in ["http://gocd.example.com:8153/", "http://gocd.example.com:8153", "https://gocd.example.com/go/"] {
            let finding = problem(url).expect("a problem");
            assert!(finding.contains("does not end in /go"), "{url}: {finding}");
        }
    }

    #[test]
    fn endpoints_needed_without_a_way_out() {
        assert_eq!(
            needed_endpoints("eu-west-1", true),
            [
                "com.amazonaws.eu-west-1.ecr.api",
                "com.amazonaws.eu-west-1.ecr.dkr",
                "com.amazonaws.eu-west-1.s3",
                "com.amazonaws.eu-west-1.logs"
            ]
        );
        assert_eq!(needed_endpoints("us-east-1", false).len(), 3);
    }
}
