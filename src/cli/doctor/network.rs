//! Where the tasks of a cluster profile attach, as the doctor's network check found it: the
//! checks of what runs inside the task and of EC2 instances read it.

/// Where tasks attach: the subnets and groups, and their VPC.
#[derive(Debug, Clone)]
pub(super) struct Network {
    pub(super) subnets: Vec<String>,
    pub(super) groups: Vec<String>,
}
