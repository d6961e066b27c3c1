//! An EC2 instance's state name (`pending`, `running`, ...), as DescribeInstances,
//! TerminateInstances and the "EC2 Instance State-change Notification" event name it.

use super::aws_values;

aws_values! {
    /// An EC2 instance's state name.
    pub enum Ec2State {
        /// Launching or starting.
        Pending = "pending",
        /// Running.
        Running = "running",
        /// Terminating.
        ShuttingDown = "shutting-down",
        /// Terminated (listed for about an hour).
        Terminated = "terminated",
        /// Stopping (its EBS volumes stay).
        Stopping = "stopping",
        /// Stopped.
        Stopped = "stopped",
    }
}

impl From<&aws_sdk_ec2::types::InstanceStateName> for Ec2State {
    fn from(state: &aws_sdk_ec2::types::InstanceStateName) -> Self {
        Self::from(state.as_str())
    }
}
