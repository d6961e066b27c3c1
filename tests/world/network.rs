//! The network a task lives in, and the hosts outside it: what an agent's connections meet in
//! AWS. No packet moves here; each connection a task would make is decided from what AWS
//! decides it from, read from moto as AWS keeps it:
//!
//! - the host name resolves ([`Internet`]: the world's DNS and the hosts behind it);
//! - one of the task's security groups lets the TCP port out to the address (its egress rules);
//! - the task's subnet routes the address: inside the VPC's range (local), else the most
//!   specific route of the subnet's route table (its own, else the VPC's main one): an internet
//!   gateway only for a task with a public address (`assignPublicIp` of its RunTask), a NAT
//!   gateway (the traffic leaves from the NAT's public address), a peering connection (from the
//!   task's private address);
//! - a listener on that port takes it, and its firewall admits the address the traffic comes
//!   from;
//! - for HTTP(S): TLS as the listener serves it (a certificate of a private CA is not trusted
//!   by the agent image), the path (GoCD answers under `/go`), and whether it is a GoCD server
//!   (its `/admin/latest-agent.status` carries the agent's checksum headers).
//!
//! The agent simulator asks [`TaskNetwork::fetch_agent_status`] before an agent registers (it
//! is the agent's first request) and [`TaskNetwork::connect`] for a job's materials; the probe
//! runner ([`super::probes`]) answers `try`'s probe from the same rules.

use std::collections::HashMap;
use std::fmt;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use aws_config::SdkConfig;
use aws_sdk_ec2::types::Filter;
use serde_json::Value;

use super::moto::aws_error_text;

/// An IPv4 range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    base: u32,
    bits: u8,
}

impl Cidr {
    /// `10.0.0.0/16`; `None` for anything else (IPv6 ranges among them).
    pub fn parse(s: &str) -> Option<Cidr> {
        let (ip, bits) = s.split_once('/').unwrap_or((s, "32"));
        let ip: Ipv4Addr = ip.parse().ok()?;
        let bits: u8 = bits.parse().ok().filter(|b| *b <= 32)?;
        Some(Cidr { base: u32::from(ip) & mask(bits), bits })
    }

    /// Whether the range holds `ip`.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & mask(self.bits) == self.base
    }
}

fn mask(bits: u8) -> u32 {
    if bits == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(bits))
    }
}

/// How a listener serves TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tls {
    /// Plain TCP (HTTP).
    None,
    /// A certificate any agent image trusts.
    Trusted,
    /// A certificate of a private CA, which the agent images do not trust.
    PrivateCa,
}

/// What answers on a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// A GoCD server under `/go` (behind a TLS proxy when `Tls` is not `None`).
    GoCd(Tls),
    /// A web server that is not GoCD.
    WebPage(Tls),
    /// SSH (git over SSH).
    Ssh,
    /// The git daemon (`git://`).
    GitDaemon,
}

/// One port of a host.
#[derive(Debug, Clone)]
struct Listener {
    port: u16,
    service: Service,
}

/// A host outside the VPCs, by name.
#[derive(Debug, Clone)]
struct Host {
    name: String,
    address: Ipv4Addr,
    listeners: Vec<Listener>,
    /// Where its firewall admits connections from; empty: anywhere.
    admits: Vec<Cidr>,
}

/// The hosts the tasks may try to reach, and the DNS that names them. Cloned handles share it,
/// so a test can change a firewall while agents run.
#[derive(Debug, Clone, Default)]
pub struct Internet {
    hosts: Arc<Mutex<Vec<Host>>>,
}

/// The GoCD server of [`Internet::stock`]: plain HTTP on 8153, as GoCD ships.
pub const GOCD_HOST: &str = "gocd.example.com";
/// [`GOCD_HOST`]'s address.
pub const GOCD_ADDRESS: &str = "203.0.113.10";
/// A GoCD server whose TLS proxy has a certificate of a private CA.
pub const PRIVATE_CA_HOST: &str = "gocd.corp.example.com";
/// A web server that is not GoCD.
pub const WEB_HOST: &str = "www.example.com";
/// A git host: SSH, git:// and HTTPS.
pub const GIT_HOST: &str = "github.com";

impl Internet {
    /// No hosts.
    pub fn new() -> Internet {
        Internet::default()
    }

    /// The hosts of most tests: [`GOCD_HOST`] (GoCD on plain 8153, and on 443 behind a TLS proxy
    /// with a trusted certificate), [`PRIVATE_CA_HOST`] (GoCD on 443 behind a proxy with a
    /// private CA's certificate), [`WEB_HOST`] (a web page on 80 and 443) and [`GIT_HOST`] (SSH,
    /// git:// and HTTPS).
    pub fn stock() -> Internet {
        let net = Internet::new();
        net.add_host(GOCD_HOST, GOCD_ADDRESS, &[(8153, Service::GoCd(Tls::None)), (443, Service::GoCd(Tls::Trusted))]);
        net.add_host(PRIVATE_CA_HOST, "203.0.113.11", &[(443, Service::GoCd(Tls::PrivateCa))]);
        net.add_host(
            WEB_HOST,
            "203.0.113.20",
            &[(80, Service::WebPage(Tls::None)), (443, Service::WebPage(Tls::Trusted))],
        );
        net.add_host(
            GIT_HOST,
            "140.82.121.4",
            &[(22, Service::Ssh), (9418, Service::GitDaemon), (443, Service::WebPage(Tls::Trusted))],
        );
        net
    }

    /// Adds a host (its name resolves to `address` everywhere).
    pub fn add_host(&self, name: &str, address: &str, listeners: &[(u16, Service)]) {
        let host = Host {
            name: name.to_string(),
            address: address.parse().expect("an IPv4 address"),
            listeners: listeners.iter().map(|&(port, service)| Listener { port, service }).collect(),
            admits: Vec::new(),
        };
        self.hosts.lock().unwrap().push(host);
    }

    /// The host's firewall admits only these ranges from now on (empty: anywhere).
    pub fn admit_only(&self, name: &str, ranges: &[&str]) {
        let mut hosts = self.hosts.lock().unwrap();
        let host = hosts.iter_mut().find(|h| h.name == name).expect("a host of this world");
        host.admits = ranges.iter().map(|r| Cidr::parse(r).expect("a range")).collect();
    }

    fn resolve(&self, name: &str) -> Option<Host> {
        let hosts = self.hosts.lock().unwrap();
        match name.parse::<Ipv4Addr>() {
            Ok(ip) => hosts.iter().find(|h| h.address == ip).cloned().or_else(|| {
                Some(Host { name: name.to_string(), address: ip, listeners: Vec::new(), admits: Vec::new() })
            }),
            Err(_) => hosts.iter().find(|h| h.name.eq_ignore_ascii_case(name)).cloned(),
        }
    }
}

/// Where a route sends traffic.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    InternetGateway(String),
    Nat { id: String, public_ip: Option<Ipv4Addr> },
    Peering(String),
    Other(String),
}

/// An outbound rule of a security group.
#[derive(Debug, Clone)]
struct Egress {
    group: String,
    protocol: String,
    from: i32,
    to: i32,
    ranges: Vec<Cidr>,
}

impl Egress {
    fn lets_out(&self, port: u16, to: Ipv4Addr) -> bool {
        let port = i32::from(port);
        let protocol = self.protocol == "-1" || self.protocol == "tcp" || self.protocol == "6";
        let ports = self.protocol == "-1" || self.from == -1 || (self.from..=self.to).contains(&port);
        protocol && ports && self.ranges.iter().any(|r| r.contains(to))
    }
}

/// Why a connection did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocked {
    /// The name does not resolve.
    NoName { host: String },
    /// No security group of the task lets the port out to the address.
    SecurityGroups { groups: Vec<String>, port: u16 },
    /// The subnet's route table has no way there (or an internet gateway without a public
    /// address).
    NoRoute { subnet: String, why: String },
    /// Nothing listens on the port.
    Refused { host: String, port: u16 },
    /// The host's firewall drops traffic from that address.
    Firewall { host: String, port: u16, source: Ipv4Addr },
}

impl Blocked {
    /// Refused, rather than silently dropped (a timeout).
    fn refused(&self) -> bool {
        matches!(self, Blocked::Refused { .. })
    }
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blocked::NoName { host } => write!(f, "the name {host} does not resolve"),
            Blocked::SecurityGroups { groups, port } => {
                write!(f, "security group(s) {} let no TCP {port} out", groups.join(", "))
            }
            Blocked::NoRoute { subnet, why } => write!(f, "subnet {subnet}: {why}"),
            Blocked::Refused { host, port } => write!(f, "nothing listens on {host}:{port}"),
            Blocked::Firewall { host, port, source } => {
                write!(f, "{host}'s firewall drops TCP {port} from {source}")
            }
        }
    }
}

/// Why the agent's first request (`GET <server>/admin/latest-agent.status`) failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchFailure {
    /// No connection (name, security groups, route, listener, firewall).
    Connect(Blocked),
    /// The TLS handshake failed (an untrusted certificate, or TLS to a plain port).
    Tls(String),
    /// An HTTP error status.
    Http(u16),
    /// An answer without GoCD's agent checksum headers.
    NotGoCd,
}

impl fmt::Display for FetchFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FetchFailure::Connect(b) => write!(f, "no connection: {b}"),
            FetchFailure::Tls(why) => write!(f, "TLS failed: {why}"),
            FetchFailure::Http(code) => write!(f, "HTTP {code}"),
            FetchFailure::NotGoCd => write!(f, "answered, but not as a GoCD server"),
        }
    }
}

/// A URL's parts: scheme, host, port, path.
fn url_parts(url: &str) -> Option<(String, String, u16, String)> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    let default_port = if scheme == "https" { 443 } else { 80 };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h.to_string(), p.parse().ok()?),
        None => (authority.to_string(), default_port),
    };
    Some((scheme, host, port, path))
}

/// A task's place in its VPC, read from moto as AWS keeps it.
#[derive(Debug, Clone)]
pub struct TaskNetwork {
    pub subnet: String,
    pub private_ip: Ipv4Addr,
    pub public_ip: Option<Ipv4Addr>,
    vpc_ranges: Vec<Cidr>,
    routes: Vec<(Cidr, Target)>,
    egress: Vec<Egress>,
    groups: Vec<String>,
}

impl TaskNetwork {
    /// Reads the task's network: its ENI attachment (DescribeTasks), the ENI's groups, its
    /// subnet's VPC and route table, the groups' egress rules and the NAT gateways' addresses;
    /// whether it has a public address comes from its RunTask (`assignPublicIp`) among the
    /// `run_tasks` bodies the proxy saw, matched by the agent id the overrides carry.
    ///
    /// # Errors
    /// A read that failed, or a task with no ENI (not awsvpc).
    pub async fn read(
        cfg: &SdkConfig,
        cluster: &str,
        task_arn: &str,
        run_tasks: &[Value],
    ) -> Result<TaskNetwork, String> {
        let ecs = aws_sdk_ecs::Client::new(cfg);
        let ec2 = aws_sdk_ec2::Client::new(cfg);
        let out = ecs
            .describe_tasks()
            .cluster(cluster)
            .tasks(task_arn)
            .send()
            .await
            .map_err(|e| format!("DescribeTasks: {}", aws_error_text(&e)))?;
        let task = out.tasks().first().ok_or("no such task")?;
        let detail = |name: &str| {
            task.attachments()
                .iter()
                .flat_map(|a| a.details())
                .find(|d| d.name() == Some(name))
                .and_then(|d| d.value())
                .map(str::to_string)
        };
        let subnet = detail("subnetId").ok_or("the task has no ENI attachment")?;
        let eni = detail("networkInterfaceId").ok_or("the task has no ENI")?;
        let private_ip: Ipv4Addr =
            detail("privateIPv4Address").and_then(|a| a.parse().ok()).ok_or("the ENI has no private address")?;
        let agent_id = super::moto::task_override_env(task, "GO_EA_AUTO_REGISTER_ELASTIC_AGENT_ID").map(str::to_string);

        let enis = ec2
            .describe_network_interfaces()
            .network_interface_ids(&eni)
            .send()
            .await
            .map_err(|e| format!("DescribeNetworkInterfaces: {}", aws_error_text(&e)))?;
        let groups: Vec<String> = enis
            .network_interfaces()
            .iter()
            .flat_map(|n| n.groups())
            .filter_map(|g| g.group_id().map(str::to_string))
            .collect();

        let subnets = ec2
            .describe_subnets()
            .subnet_ids(&subnet)
            .send()
            .await
            .map_err(|e| format!("DescribeSubnets: {}", aws_error_text(&e)))?;
        let vpc = subnets.subnets().first().and_then(|s| s.vpc_id()).ok_or("the subnet has no VPC")?.to_string();
        let vpcs = ec2
            .describe_vpcs()
            .vpc_ids(&vpc)
            .send()
            .await
            .map_err(|e| format!("DescribeVpcs: {}", aws_error_text(&e)))?;
        let vpc_ranges: Vec<Cidr> = vpcs
            .vpcs()
            .iter()
            .flat_map(|v| {
                let main = v.cidr_block().map(str::to_string);
                let more = v.cidr_block_association_set().iter().filter_map(|a| a.cidr_block().map(str::to_string));
                main.into_iter().chain(more)
            })
            .filter_map(|c| Cidr::parse(&c))
            .collect();

        let tables = ec2
            .describe_route_tables()
            .filters(Filter::builder().name("vpc-id").values(&vpc).build())
            .send()
            .await
            .map_err(|e| format!("DescribeRouteTables: {}", aws_error_text(&e)))?;
        let own = tables
            .route_tables()
            .iter()
            .find(|t| t.associations().iter().any(|a| a.subnet_id() == Some(subnet.as_str())))
            .or_else(|| tables.route_tables().iter().find(|t| t.associations().iter().any(|a| a.main() == Some(true))));
        let mut routes = Vec::new();
        let mut nats = Vec::new();
        for route in own.map(|t| t.routes()).unwrap_or_default() {
            let Some(range) = route.destination_cidr_block().and_then(Cidr::parse) else { continue };
            let target = if let Some(nat) = route.nat_gateway_id() {
                nats.push(nat.to_string());
                Target::Nat { id: nat.to_string(), public_ip: None }
            } else if let Some(pcx) = route.vpc_peering_connection_id() {
                Target::Peering(pcx.to_string())
            } else if let Some(gateway) = route.gateway_id() {
                if gateway == "local" {
                    continue;
                }
                if gateway.starts_with("igw-") {
                    Target::InternetGateway(gateway.to_string())
                } else {
                    Target::Other(gateway.to_string())
                }
            } else if let Some(tgw) = route.transit_gateway_id() {
                Target::Other(tgw.to_string())
            } else {
                continue;
            };
            routes.push((range, target));
        }
        if !nats.is_empty() {
            let out = ec2
                .describe_nat_gateways()
                .set_nat_gateway_ids(Some(nats))
                .send()
                .await
                .map_err(|e| format!("DescribeNatGateways: {}", aws_error_text(&e)))?;
            let addresses: HashMap<String, Ipv4Addr> = out
                .nat_gateways()
                .iter()
                .filter_map(|n| {
                    let ip = n.nat_gateway_addresses().iter().find_map(|a| a.public_ip()?.parse().ok())?;
                    Some((n.nat_gateway_id()?.to_string(), ip))
                })
                .collect();
            for (_, target) in &mut routes {
                if let Target::Nat { id, public_ip } = target {
                    *public_ip = addresses.get(id.as_str()).copied();
                }
            }
        }

        let found = ec2
            .describe_security_groups()
            .set_group_ids(Some(groups.clone()))
            .send()
            .await
            .map_err(|e| format!("DescribeSecurityGroups: {}", aws_error_text(&e)))?;
        let egress = found
            .security_groups()
            .iter()
            .flat_map(|g| {
                let group = g.group_id().unwrap_or("?").to_string();
                g.ip_permissions_egress().iter().map(move |p| Egress {
                    group: group.clone(),
                    protocol: p.ip_protocol().unwrap_or("-1").to_string(),
                    from: p.from_port().unwrap_or(-1),
                    to: p.to_port().unwrap_or(-1),
                    ranges: p.ip_ranges().iter().filter_map(|r| r.cidr_ip().and_then(Cidr::parse)).collect(),
                })
            })
            .collect();

        // The proxy logs a call once moto answered it: a task moto already shows may not be in
        // the log yet. Not deciding without its RunTask, the caller looks again at its next poll.
        let public_ip = match agent_id {
            Some(id) => assigned_public_ip(run_tasks, &id, private_ip)
                .ok_or_else(|| format!("the RunTask of {id} is not in the proxy's log yet"))?,
            None => None,
        };
        Ok(TaskNetwork { subnet, private_ip, public_ip, vpc_ranges, routes, egress, groups })
    }

    /// Opens a TCP connection to `host:port` as the task would; the host on success.
    ///
    /// # Errors
    /// Why it does not happen.
    fn open(&self, internet: &Internet, host: &str, port: u16) -> Result<(Host, Listener), Blocked> {
        let Some(target) = internet.resolve(host) else {
            return Err(Blocked::NoName { host: host.to_string() });
        };
        let to = target.address;
        if !self.egress.iter().any(|e| e.lets_out(port, to)) {
            return Err(Blocked::SecurityGroups { groups: self.groups.clone(), port });
        }
        let source = self.source_towards(to)?;
        let Some(listener) = target.listeners.iter().find(|l| l.port == port).cloned() else {
            return Err(Blocked::Refused { host: host.to_string(), port });
        };
        if !target.admits.is_empty() && !target.admits.iter().any(|r| r.contains(source)) {
            return Err(Blocked::Firewall { host: host.to_string(), port, source });
        }
        Ok((target, listener))
    }

    /// The address the task's traffic to `to` leaves from, by the subnet's routes.
    fn source_towards(&self, to: Ipv4Addr) -> Result<Ipv4Addr, Blocked> {
        if self.vpc_ranges.iter().any(|r| r.contains(to)) {
            return Ok(self.private_ip);
        }
        let no_route = |why: String| Blocked::NoRoute { subnet: self.subnet.clone(), why };
        let best = self.routes.iter().filter(|(range, _)| range.contains(to)).max_by_key(|(range, _)| range.bits);
        match best.map(|(_, t)| t) {
            None => Err(no_route(format!("no route to {to} (no NAT gateway, internet gateway or peering)"))),
            Some(Target::InternetGateway(igw)) => self.public_ip.ok_or_else(|| {
                no_route(format!(
                    "routes {to} to internet gateway {igw}, but the task has no public address (assignPublicIp)"
                ))
            }),
            Some(Target::Nat { id, public_ip }) => {
                public_ip.ok_or_else(|| no_route(format!("NAT gateway {id} has no public address")))
            }
            Some(Target::Peering(_)) => Ok(self.private_ip),
            Some(Target::Other(other)) => {
                Err(no_route(format!("routes {to} to {other}, which this world does not follow")))
            }
        }
    }

    /// A TCP connection to a material host, as `git` would open it.
    ///
    /// # Errors
    /// Why it does not happen.
    pub fn connect(&self, internet: &Internet, host: &str, port: u16) -> Result<(), Blocked> {
        self.open(internet, host, port).map(|_| ())
    }

    /// The agent's first request: `GET <server>/admin/latest-agent.status`.
    ///
    /// # Errors
    /// What the agent (or `curl`) meets instead of a GoCD server's answer.
    pub fn fetch_agent_status(&self, internet: &Internet, server_url: &str) -> Result<(), FetchFailure> {
        let Some((scheme, host, port, path)) = url_parts(server_url) else {
            return Err(FetchFailure::Connect(Blocked::NoName { host: server_url.to_string() }));
        };
        let (_, listener) = self.open(internet, &host, port).map_err(FetchFailure::Connect)?;
        let tls = match listener.service {
            Service::GoCd(tls) | Service::WebPage(tls) => tls,
            // Not HTTP at all: curl's request gets no HTTP answer.
            Service::Ssh | Service::GitDaemon => return Err(FetchFailure::Http(0)),
        };
        match (scheme.as_str(), tls) {
            ("https", Tls::None) => return Err(FetchFailure::Tls("TLS to a plain port".into())),
            ("https", Tls::PrivateCa) => return Err(FetchFailure::Tls("the certificate's CA is not trusted".into())),
            ("http", Tls::Trusted | Tls::PrivateCa) => return Err(FetchFailure::Http(400)),
            _ => {}
        }
        match listener.service {
            Service::GoCd(_) if path.trim_end_matches('/') == "/go" => Ok(()),
            Service::GoCd(_) => Err(FetchFailure::Http(404)),
            _ => Err(FetchFailure::NotGoCd),
        }
    }

    /// The exit status of `try`'s probe script in this task (the contract of
    /// `src/cli/trial/probe.rs`): the server first, then each material host.
    pub fn probe_exit(&self, internet: &Internet, server_url: Option<&str>, materials: &[(String, u16)]) -> i32 {
        if let Some(url) = server_url.filter(|u| !u.is_empty()) {
            match self.fetch_agent_status(internet, url) {
                Ok(()) => {}
                Err(FetchFailure::Connect(Blocked::NoName { .. })) => return 41,
                Err(FetchFailure::Connect(_)) => return 42,
                Err(FetchFailure::Tls(_)) => return 43,
                Err(FetchFailure::Http(0)) => return 42,
                Err(FetchFailure::Http(_)) => return 44,
                Err(FetchFailure::NotGoCd) => return 45,
            }
        }
        for (host, port) in materials {
            match self.connect(internet, host, *port) {
                Ok(()) => {}
                Err(Blocked::NoName { .. }) => return 46,
                Err(_) => return 47,
            }
        }
        0
    }

    /// What `git` prints when it cannot reach `material`, as a build's console shows it.
    pub fn git_error(blocked: &Blocked, material: &str) -> Vec<String> {
        let (host, port) = material_host(material);
        let failure = match blocked {
            Blocked::NoName { .. } => "Name or service not known",
            b if b.refused() => "Connection refused",
            _ => "Connection timed out",
        };
        let scheme = material.split_once("://").map_or("ssh", |(s, _)| s);
        match (scheme, blocked) {
            ("https" | "http", Blocked::NoName { .. }) => {
                vec![format!("fatal: unable to access '{material}': Could not resolve host: {host}")]
            }
            ("https" | "http", _) => vec![format!(
                "fatal: unable to access '{material}': Failed to connect to {host} port {port}: {failure}"
            )],
            ("git", _) => vec![format!("fatal: unable to connect to {host}:"), format!("{host}: {failure}")],
            (_, Blocked::NoName { .. }) => vec![
                format!("ssh: Could not resolve hostname {host}: {failure}"),
                "fatal: Could not read from remote repository.".to_string(),
            ],
            _ => vec![
                format!("ssh: connect to host {host} port {port}: {failure}"),
                "fatal: Could not read from remote repository.".to_string(),
            ],
        }
    }
}

/// The network rules an agent simulator holds its agents to: the hosts outside, and the
/// RunTask calls the proxy saw (for `assignPublicIp`).
#[derive(Clone)]
pub struct NetworkWorld {
    pub internet: Internet,
    run_tasks: Arc<dyn Fn() -> Vec<Value> + Send + Sync>,
}

impl fmt::Debug for NetworkWorld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetworkWorld").field("internet", &self.internet).finish()
    }
}

impl NetworkWorld {
    /// The rules for tasks started through `proxy`, against `internet`.
    pub fn new(internet: Internet, proxy: &super::proxy::Proxy) -> NetworkWorld {
        NetworkWorld { internet, run_tasks: Arc::new(proxy.requests_reader("ecs", "RunTask")) }
    }

    /// The network of one task.
    ///
    /// # Errors
    /// As [`TaskNetwork::read`].
    pub async fn task(&self, cfg: &SdkConfig, cluster: &str, task_arn: &str) -> Result<TaskNetwork, String> {
        TaskNetwork::read(cfg, cluster, task_arn, &(self.run_tasks)()).await
    }
}

/// The public address AWS gave the task when its RunTask asked for one (`assignPublicIp`
/// ENABLED): a stable address of the documentation range, derived from the private one.
/// `None` when no RunTask the proxy logged carries the agent; `Some(None)` when it asked for no
/// public address.
fn assigned_public_ip(run_tasks: &[Value], agent_id: &str, private_ip: Ipv4Addr) -> Option<Option<Ipv4Addr>> {
    let asked = run_tasks.iter().find(|body| carries_agent(body, agent_id))?;
    let enabled = asked["networkConfiguration"]["awsvpcConfiguration"]["assignPublicIp"] == "ENABLED";
    let [_, _, c, d] = private_ip.octets();
    Some(enabled.then(|| Ipv4Addr::new(198, 51, c.wrapping_add(100), d)))
}

fn carries_agent(body: &Value, agent_id: &str) -> bool {
    super::proxy::request_override_env(body, "GO_EA_AUTO_REGISTER_ELASTIC_AGENT_ID") == Some(agent_id)
}

/// Gives moto's default VPC what AWS's default VPC has and moto's lacks: an internet gateway
/// and the main route table's `0.0.0.0/0` route to it. Returns the gateway's id.
pub async fn default_vpc_as_aws_makes_it(cfg: &SdkConfig) -> String {
    let ec2 = aws_sdk_ec2::Client::new(cfg);
    let vpc = super::moto::default_network(cfg).await.vpc_id;
    let igw = ec2.create_internet_gateway().send().await.expect("CreateInternetGateway");
    let igw = igw.internet_gateway().and_then(|g| g.internet_gateway_id()).expect("an id").to_string();
    ec2.attach_internet_gateway().internet_gateway_id(&igw).vpc_id(&vpc).send().await.expect("AttachInternetGateway");
    let tables = ec2
        .describe_route_tables()
        .filters(Filter::builder().name("vpc-id").values(&vpc).build())
        .filters(Filter::builder().name("association.main").values("true").build())
        .send()
        .await
        .expect("DescribeRouteTables");
    let main = tables.route_tables().first().and_then(|t| t.route_table_id()).expect("a main table").to_string();
    ec2.create_route()
        .route_table_id(&main)
        .destination_cidr_block("0.0.0.0/0")
        .gateway_id(&igw)
        .send()
        .await
        .expect("CreateRoute");
    igw
}

/// A security group in `vpc` that lets out only TCP to `ports` (0.0.0.0/0), as an operator
/// restricts one: the default allow-all rule revoked.
pub async fn group_letting_out(cfg: &SdkConfig, vpc: &str, name: &str, ports: &[u16]) -> String {
    let ec2 = aws_sdk_ec2::Client::new(cfg);
    let made = ec2
        .create_security_group()
        .group_name(name)
        .description("agents, restricted egress")
        .vpc_id(vpc)
        .send()
        .await
        .expect("CreateSecurityGroup");
    let group = made.group_id().expect("a group id").to_string();
    restrict_egress(cfg, &group, ports).await;
    group
}

/// Replaces a group's outbound rules with TCP to `ports` (0.0.0.0/0), as CloudFormation does
/// for a group whose `SecurityGroupEgress` lists them.
pub async fn restrict_egress(cfg: &SdkConfig, group: &str, ports: &[u16]) {
    use aws_sdk_ec2::types::{IpPermission, IpRange};
    let ec2 = aws_sdk_ec2::Client::new(cfg);
    let found = ec2.describe_security_groups().group_ids(group).send().await.expect("DescribeSecurityGroups");
    let existing: Vec<IpPermission> =
        found.security_groups().first().map(|g| g.ip_permissions_egress().to_vec()).unwrap_or_default();
    if !existing.is_empty() {
        ec2.revoke_security_group_egress()
            .group_id(group)
            .set_ip_permissions(Some(existing))
            .send()
            .await
            .expect("RevokeSecurityGroupEgress");
    }
    let anywhere = IpRange::builder().cidr_ip("0.0.0.0/0").build();
    let rules: Vec<IpPermission> = ports
        .iter()
        .map(|&p| {
            IpPermission::builder()
                .ip_protocol("tcp")
                .from_port(i32::from(p))
                .to_port(i32::from(p))
                .ip_ranges(anywhere.clone())
                .build()
        })
        .collect();
    ec2.authorize_security_group_egress()
        .group_id(group)
        .set_ip_permissions(Some(rules))
        .send()
        .await
        .expect("AuthorizeSecurityGroupEgress");
}

/// A material as a job names it: `git@host:org/repo.git` (SSH), `git://host/…`, `https://host/…`,
/// `http://host/…`, `ssh://host[:port]/…`: its host and port.
pub fn material_host(material: &str) -> (String, u16) {
    if let Some((scheme, _, port, _)) = url_parts(material) {
        let (_, rest) = material.split_once("://").unwrap_or_default();
        let host = rest.split('/').next().unwrap_or("").rsplit('@').next().unwrap_or("");
        let host = host.rsplit_once(':').map_or(host, |(h, _)| h).to_string();
        let port = match (scheme.as_str(), rest.split('/').next().unwrap_or("").contains(':')) {
            (_, true) => port,
            ("ssh", false) => 22,
            ("git", false) => 9418,
            _ => port,
        };
        return (host, port);
    }
    let (user_host, _) = material.split_once(':').expect("git@host:path");
    (user_host.rsplit('@').next().unwrap_or(user_host).to_string(), 22)
}
