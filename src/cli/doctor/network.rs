//! Where the tasks of a cluster profile attach, as the doctor's network check found it: the
//! checks of what runs inside the task, of what the tasks can reach and of EC2 instances read
//! it.

use crate::aws::doctor_reads::EgressRule;

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
