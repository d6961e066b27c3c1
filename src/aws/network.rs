//! awsvpc networking: the profile's subnets and security groups, or the default VPC's
//! default-for-AZ subnets and its `default` group. An explicit group list is always sent
//! (moto answers 500 without one; AWS would pick the default group).

use aws_sdk_ec2::types::Filter;

use super::{AwsClients, AwsError};

/// Where tasks of a profile attach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Network {
    /// Subnet ids.
    pub subnets: Vec<String>,
    /// Security group ids.
    pub security_groups: Vec<String>,
}

/// Resolves the subnets and groups to use, looking up defaults only for what is not given.
///
/// # Errors
/// When the lookups fail, or no default VPC exists and nothing was configured.
pub async fn resolve(aws: &AwsClients, subnets: &[String], security_groups: &[String]) -> Result<Network, AwsError> {
    if !subnets.is_empty() && !security_groups.is_empty() {
        return Ok(Network { subnets: subnets.to_vec(), security_groups: security_groups.to_vec() });
    }
    let vpc_id = if subnets.is_empty() { default_vpc(aws).await? } else { vpc_of_subnet(aws, &subnets[0]).await? };
    let subnets = if subnets.is_empty() { default_subnets(aws, &vpc_id).await? } else { subnets.to_vec() };
    let security_groups =
        if security_groups.is_empty() { vec![default_group(aws, &vpc_id).await?] } else { security_groups.to_vec() };
    Ok(Network { subnets, security_groups })
}

fn filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}

async fn default_vpc(aws: &AwsClients) -> Result<String, AwsError> {
    let out =
        aws.calls.call("DescribeVpcs", || aws.ec2.describe_vpcs().filters(filter("is-default", "true")).send()).await?;
    out.vpcs().iter().find_map(|v| v.vpc_id().map(str::to_string)).ok_or_else(|| {
        AwsError::in_answer(
            "DescribeVpcs",
            format!(
                "region {} has no default VPC: set SubnetIds and SecurityGroupIds in the cluster profile",
                aws.region
            ),
        )
    })
}

async fn vpc_of_subnet(aws: &AwsClients, subnet: &str) -> Result<String, AwsError> {
    let out = aws.calls.call("DescribeSubnets", || aws.ec2.describe_subnets().subnet_ids(subnet).send()).await?;
    out.subnets().iter().find_map(|s| s.vpc_id().map(str::to_string)).ok_or_else(|| {
        AwsError::in_answer("DescribeSubnets", format!("subnet {subnet} was not found in {}", aws.region))
    })
}

async fn default_subnets(aws: &AwsClients, vpc_id: &str) -> Result<Vec<String>, AwsError> {
    let request =
        aws.ec2.describe_subnets().filters(filter("vpc-id", vpc_id)).filters(filter("default-for-az", "true"));
    let out = aws.calls.call("DescribeSubnets", || request.clone().send()).await?;
    let mut subnets: Vec<String> = out.subnets().iter().filter_map(|s| s.subnet_id().map(str::to_string)).collect();
    subnets.sort();
    if subnets.is_empty() {
        return Err(AwsError::in_answer(
            "DescribeSubnets",
            format!("the default VPC {vpc_id} has no default subnets: set SubnetIds in the cluster profile"),
        ));
    }
    Ok(subnets)
}

async fn default_group(aws: &AwsClients, vpc_id: &str) -> Result<String, AwsError> {
    let request =
        aws.ec2.describe_security_groups().filters(filter("vpc-id", vpc_id)).filters(filter("group-name", "default"));
    let out = aws.calls.call("DescribeSecurityGroups", || request.clone().send()).await?;
    out.security_groups().iter().find_map(|g| g.group_id().map(str::to_string)).ok_or_else(|| {
        AwsError::in_answer(
            "DescribeSecurityGroups",
            format!("VPC {vpc_id} has no default security group: set SecurityGroupIds in the cluster profile"),
        )
    })
}
