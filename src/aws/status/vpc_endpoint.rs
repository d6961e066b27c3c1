//! A VPC endpoint's `State`. EC2 writes it in lower case (`available`) where the SDK's enum
//! spells it capitalised (`Available`), so it is read in either case.

use super::aws_values;

aws_values! {
    /// A VPC endpoint's state.
    pub enum VpcEndpointState {
        /// Waiting for the service's owner to accept it.
        PendingAcceptance = "pendingacceptance",
        /// Being created.
        Pending = "pending",
        /// In use.
        Available = "available",
        /// Being deleted.
        Deleting = "deleting",
        /// Deleted.
        Deleted = "deleted",
        /// Refused by the service's owner.
        Rejected = "rejected",
        /// Could not be created.
        Failed = "failed",
        /// Its acceptance expired.
        Expired = "expired",
        /// Partly available.
        Partial = "partial",
    }
}

impl VpcEndpointState {
    /// The state EC2 names `text`, in any case.
    pub fn of_any_case(text: &str) -> Self {
        Self::known(&text.to_ascii_lowercase()).unwrap_or_else(|| Self::Other(text.to_string()))
    }

    /// Whether the endpoint serves the VPC, or is about to.
    pub fn serves(&self) -> bool {
        matches!(self, Self::Available | Self::Pending)
    }
}

impl From<&aws_sdk_ec2::types::State> for VpcEndpointState {
    fn from(state: &aws_sdk_ec2::types::State) -> Self {
        Self::of_any_case(state.as_str())
    }
}
