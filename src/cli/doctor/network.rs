//! Where the tasks of a cluster profile attach, as the doctor's network check found it, and how
//! each of its subnets reaches the world: the checks of what runs inside the task, of what the
//! tasks can reach and of EC2 instances read it.

use crate::aws::doctor_reads::EgressRule;
use crate::aws::doctor_routes::RouteTableView;

/// Where tasks attach: the subnets and groups, and their VPC.
#[derive(Debug, Clone)]
pub(super) struct Network {
    pub(super) vpc: String,
    pub(super) subnets: Vec<String>,
    pub(super) groups: Vec<String>,
}

/// Whether one of `rules` lets TCP to `port` out (to some destination: the rules' CIDRs are not
/// read).
pub(super) fn allows_tcp_out(rules: &[EgressRule], port: u16) -> bool {
    rules.iter().any(|rule| lets_tcp_out(rule, port))
}

/// Whether `rule` lets TCP to `port` out (all traffic, or TCP over a range holding `port`).
pub(super) fn lets_tcp_out(rule: &EgressRule, port: u16) -> bool {
    let protocol = rule.protocol.as_str();
    let all = protocol == "-1";
    let tcp = protocol == "tcp" || protocol == "6";
    let from = rule.from_port.unwrap_or(0);
    let to = rule.to_port.unwrap_or(65535);
    all || (tcp && (from == -1 || (from..=to).contains(&i32::from(port))))
}

/// How one subnet reaches the world.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Way {
    Nat(String),
    Internet(String),
    Other(String),
    EndpointsOnly,
}

/// The way out of `subnet`: its own route table's default route, else the main table's.
pub(super) fn way_out(subnet: &str, tables: &[RouteTableView]) -> Way {
    let table =
        tables.iter().find(|t| t.subnets.iter().any(|s| s == subnet)).or_else(|| tables.iter().find(|t| t.main));
    match table.and_then(|t| t.default_route.clone()) {
        Some(target) if target.starts_with("nat-") => Way::Nat(target),
        Some(target) if target.starts_with("igw-") => Way::Internet(target),
        Some(target) => Way::Other(target),
        None => Way::EndpointsOnly,
    }
}
