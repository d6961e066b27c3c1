//! Where tasks run beyond Fargate's own: the EC2 instances the plugin launches and retires
//! (`ec2`), and the warm agents kept ready for the next job (`warm`).

pub mod ec2;
pub mod warm;
