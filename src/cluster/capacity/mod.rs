//! Where tasks run beyond Fargate's own: the kinds of the strategy's capacity providers
//! (`providers`), the EC2 instances the plugin launches and retires (`ec2`), and the warm agents
//! kept ready for the next job (`warm`).

pub mod ec2;
pub mod providers;
pub mod warm;
