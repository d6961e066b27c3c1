//! The cluster stack (`packaging/cloudformation/cluster.yaml`) in moto's CloudFormation, and what
//! moto's CloudFormation leaves out that real CloudFormation makes. Used by
//! `tests/e2e/cloudformation.rs` and `tests/e2e/guide.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_config::SdkConfig;

/// The cluster stack's template, as the release archive ships it.
pub fn template() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../packaging/cloudformation/cluster.yaml");
    std::fs::read_to_string(path).expect("read cluster.yaml")
}

/// Creates the stack `name` with the template's defaults and the `given` parameters, through
/// CreateStack (`CAPABILITY_NAMED_IAM`), waits for CREATE_COMPLETE and returns its outputs.
///
/// moto takes a CommaDelimitedList parameter's default as one string (a real stack splits it):
/// the subnet ranges are given as their defaults unless `given` names them.
///
/// # Panics
/// When CreateStack fails or the stack is not CREATE_COMPLETE within 30 s.
pub async fn deploy(cfg: &SdkConfig, name: &str, given: &[(&str, &str)]) -> BTreeMap<String, String> {
    use aws_sdk_cloudformation::types::{Capability, Parameter, StackStatus};
    let cfn = aws_sdk_cloudformation::Client::new(cfg);
    let parameter = |k: &str, v: &str| Parameter::builder().parameter_key(k).parameter_value(v).build();
    let mut create =
        cfn.create_stack().stack_name(name).template_body(template()).capabilities(Capability::CapabilityNamedIam);
    for (k, default) in
        [("PublicSubnetCidrs", "10.0.0.0/24,10.0.1.0/24"), ("PrivateSubnetCidrs", "10.0.16.0/20,10.0.32.0/20")]
    {
        if !given.iter().any(|(g, _)| *g == k) {
            create = create.parameters(parameter(k, default));
        }
    }
    for (k, v) in given {
        create = create.parameters(parameter(k, v));
    }
    create.send().await.expect("CreateStack");
    let mut status = None;
    for _ in 0..60 {
        let out = cfn.describe_stacks().stack_name(name).send().await.expect("DescribeStacks");
        let stack = out.stacks()[0].clone();
        status = stack.stack_status().cloned();
        if status == Some(StackStatus::CreateComplete) {
            return stack
                .outputs()
                .iter()
                .map(|o| (o.output_key().unwrap().to_string(), o.output_value().unwrap_or("").to_string()))
                .collect();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("the stack is {status:?}, not CREATE_COMPLETE");
}

/// The VPC of the stack's private subnets (its `SubnetIds` output).
pub async fn vpc_of(cfg: &SdkConfig, private: &[String]) -> String {
    let ec2 = aws_sdk_ec2::Client::new(cfg);
    let found = ec2.describe_subnets().set_subnet_ids(Some(private.to_vec())).send().await.expect("DescribeSubnets");
    found.subnets()[0].vpc_id().expect("a VPC").to_string()
}

/// What moto leaves out of the stack's VPC and real CloudFormation makes: the VPC's
/// `EnableDnsHostnames` (moto ignores it, then fails RunTask in that VPC) and the subnets' route
/// table associations.
pub async fn as_cloudformation_makes_the_vpc(cfg: &SdkConfig, vpc: &str, private: &[String]) {
    let ec2 = aws_sdk_ec2::Client::new(cfg);
    let hostnames = ec2
        .describe_vpc_attribute()
        .vpc_id(vpc)
        .attribute(aws_sdk_ec2::types::VpcAttributeName::EnableDnsHostnames)
        .send()
        .await
        .expect("DescribeVpcAttribute");
    if hostnames.enable_dns_hostnames().and_then(|a| a.value()) != Some(true) {
        eprintln!("moto did not set the VPC's EnableDnsHostnames: only real CloudFormation does; set here");
        let on = aws_sdk_ec2::types::AttributeBooleanValue::builder().value(true).build();
        ec2.modify_vpc_attribute().vpc_id(vpc).enable_dns_hostnames(on).send().await.expect("ModifyVpcAttribute");
    }
    associate_as_cloudformation_does(cfg, vpc, private).await;
}

/// moto makes the stack's route tables and routes but drops its `SubnetRouteTableAssociation`s
/// (every subnet then falls back to the VPC's main table, which has no way out): associate them
/// as real CloudFormation does, the private subnets (`SubnetIds`) with the table that routes to
/// the NAT gateway, the public ones with the table that routes to the internet gateway.
pub async fn associate_as_cloudformation_does(cfg: &SdkConfig, vpc: &str, private: &[String]) {
    use aws_sdk_ec2::types::Filter;
    let ec2 = aws_sdk_ec2::Client::new(cfg);
    let in_vpc = || Filter::builder().name("vpc-id").values(vpc).build();
    let tables = ec2.describe_route_tables().filters(in_vpc()).send().await.expect("DescribeRouteTables");
    if tables.route_tables().iter().any(|t| t.associations().iter().any(|a| a.subnet_id().is_some())) {
        return;
    }
    eprintln!("moto made no SubnetRouteTableAssociation: associated here as real CloudFormation does");
    let table = |nat: bool| {
        tables
            .route_tables()
            .iter()
            .find(|t| {
                t.routes().iter().any(|r| {
                    if nat {
                        r.nat_gateway_id().is_some()
                    } else {
                        r.gateway_id().is_some_and(|g| g.starts_with("igw-"))
                    }
                })
            })
            .and_then(|t| t.route_table_id())
            .expect("the stack's route table")
            .to_string()
    };
    let (nat_table, igw_table) = (table(true), table(false));
    let subnets = ec2.describe_subnets().filters(in_vpc()).send().await.expect("DescribeSubnets");
    for subnet in subnets.subnets().iter().filter_map(|s| s.subnet_id()) {
        let table = if private.iter().any(|p| p == subnet) { &nat_table } else { &igw_table };
        ec2.associate_route_table().route_table_id(table).subnet_id(subnet).send().await.expect("AssociateRouteTable");
    }
}
