//! The statuses ECS and EC2 report, as types: a task's last and desired status and its stop
//! code, a container instance's status, an EC2 instance's state, the status of a cluster, a
//! task-definition revision or a capacity provider, and a VPC endpoint's state.
//!
//! The port turns AWS's text into these where it builds its own views of an SDK answer or an
//! EventBridge event, once; everything past the port matches on the enums. A value this crate
//! does not know survives as `Other` (AWS adds values), and [`Display`](std::fmt::Display),
//! `as_str` and `Serialize` give back AWS's exact spelling, for reports, logs and the wire.

mod container_instance;
mod ec2_state;
mod resource;
mod stop_code;
mod task;
mod vpc_endpoint;

pub use container_instance::ContainerInstanceStatus;
pub use ec2_state::Ec2State;
pub use resource::ResourceStatus;
pub use stop_code::StopCode;
pub use task::TaskStatus;
pub use vpc_endpoint::VpcEndpointState;

/// Defines one status enum: its known values, each with AWS's spelling, plus `Other(String)`
/// for any other; `as_str`, `From<&str>`, `From<String>`, `Display`, `Serialize` (as AWS's
/// text) and `Default` (`Other("")`: AWS said nothing).
macro_rules! aws_values {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value this crate does not know, as AWS wrote it (`""` when AWS said none).
            Other(String),
        }

        impl $name {
            /// AWS's spelling.
            pub fn as_str(&self) -> &str {
                match self {
                    $( Self::$variant => $text, )+
                    Self::Other(text) => text,
                }
            }

            /// The known value AWS spells `text`, if any.
            #[allow(dead_code)]
            fn known(text: &str) -> Option<Self> {
                match text {
                    $( $text => Some(Self::$variant), )+
                    _ => None,
                }
            }
        }

        impl From<&str> for $name {
            fn from(text: &str) -> Self {
                Self::known(text).unwrap_or_else(|| Self::Other(text.to_string()))
            }
        }

        impl From<String> for $name {
            fn from(text: String) -> Self {
                Self::known(&text).unwrap_or(Self::Other(text))
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::Other(String::new())
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }
    };
}
use aws_values;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_read_and_print_as_aws_spells_them() {
        assert_eq!(TaskStatus::from("DEPROVISIONING"), TaskStatus::Deprovisioning);
        assert_eq!(TaskStatus::Deprovisioning.to_string(), "DEPROVISIONING");
        assert_eq!(StopCode::from("SpotInterruption"), StopCode::SpotInterruption);
        assert_eq!(ContainerInstanceStatus::from("REGISTRATION_FAILED"), ContainerInstanceStatus::RegistrationFailed);
        assert_eq!(Ec2State::from("shutting-down"), Ec2State::ShuttingDown);
        assert_eq!(Ec2State::ShuttingDown.as_str(), "shutting-down");
        assert_eq!(ResourceStatus::from("DELETE_IN_PROGRESS"), ResourceStatus::DeleteInProgress);
        assert_eq!(format!("{:>9}|", Ec2State::Running), "  running|", "padding as a string's");
    }

    #[test]
    fn an_unknown_value_survives_as_aws_wrote_it() {
        let new = TaskStatus::from("HIBERNATING".to_string());
        assert_eq!(new, TaskStatus::Other("HIBERNATING".into()));
        assert_eq!(new.to_string(), "HIBERNATING");
        assert_eq!(serde_json::to_value(&new).unwrap(), "HIBERNATING");
        assert_eq!(TaskStatus::from("running"), TaskStatus::Other("running".into()), "AWS's case only");
        assert_eq!(TaskStatus::default().as_str(), "", "nothing said reads as nothing");
        assert_eq!(serde_json::to_value(Some(StopCode::TaskFailedToStart)).unwrap(), "TaskFailedToStart");
    }
}
