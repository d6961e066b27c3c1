//! The reads of `doctor`'s reach check, on the port's [`CheckClients`]: a VPC's route tables
//! (which subnets each serves and where its default route goes) and its VPC endpoints, as plain
//! data. Whether tasks can reach the registry and the GoCD server from there is the CLI's
//! (`cli::doctor::reach`).

use aws_sdk_ec2::types::{Filter, RouteState};

use super::doctor::CheckClients;
use super::status::VpcEndpointState;
use super::AwsError;

/// One route table of a VPC.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteTableView {
    /// Its id.
    pub id: String,
    /// Whether it is the VPC's main table (serving every subnet with no table of its own).
    pub main: bool,
    /// The subnets associated with it explicitly.
    pub subnets: Vec<String>,
    /// Where its active default route (`0.0.0.0/0`) goes: an internet gateway (`igw-`), a NAT
    /// gateway (`nat-`), a transit gateway, a peering, an instance or an interface; `None` when
    /// it has none.
    pub default_route: Option<String>,
}

fn filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}

impl CheckClients {
    /// The route tables of `vpc`.
    ///
    /// # Errors
    /// The failed DescribeRouteTables call.
    pub async fn route_tables(&self, vpc: &str) -> Result<Vec<RouteTableView>, AwsError> {
        let mut tables = Vec::new();
        let mut token = None;
        loop {
            let call = self.ec2.describe_route_tables().filters(filter("vpc-id", vpc)).set_next_token(token).send();
            let out = self
                .call("DescribeRouteTables", async {
                    call.await.map_err(|e| AwsError::from_sdk("DescribeRouteTables", &e))
                })
                .await?;
            for t in out.route_tables() {
                let associations = t.associations();
                let default_route = t
                    .routes()
                    .iter()
                    .filter(|r| r.destination_cidr_block() == Some("0.0.0.0/0"))
                    .filter(|r| r.state() != Some(&RouteState::Blackhole))
                    .find_map(|r| {
                        r.nat_gateway_id()
                            .or(r.gateway_id())
                            .or(r.transit_gateway_id())
                            .or(r.vpc_peering_connection_id())
                            .or(r.network_interface_id())
                            .or(r.instance_id())
                            .map(str::to_string)
                    });
                tables.push(RouteTableView {
                    id: t.route_table_id().unwrap_or("?").to_string(),
                    main: associations.iter().any(|a| a.main() == Some(true)),
                    subnets: associations.iter().filter_map(|a| a.subnet_id()).map(str::to_string).collect(),
                    default_route,
                });
            }
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                return Ok(tables);
            }
        }
    }

    /// The service names of `vpc`'s VPC endpoints that are available or pending
    /// (`com.amazonaws.us-east-1.ecr.dkr`, ...).
    ///
    /// # Errors
    /// The failed DescribeVpcEndpoints call.
    pub async fn vpc_endpoint_services(&self, vpc: &str) -> Result<Vec<String>, AwsError> {
        let mut services = Vec::new();
        let mut token = None;
        loop {
            let call = self.ec2.describe_vpc_endpoints().filters(filter("vpc-id", vpc)).set_next_token(token).send();
            let out = self
                .call("DescribeVpcEndpoints", async {
                    call.await.map_err(|e| AwsError::from_sdk("DescribeVpcEndpoints", &e))
                })
                .await?;
            services.extend(
                out.vpc_endpoints()
                    .iter()
                    .filter(|e| e.state().is_none_or(|s| VpcEndpointState::from(s).serves()))
                    .filter_map(|e| e.service_name())
                    .map(str::to_string),
            );
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                return Ok(services);
            }
        }
    }
}
