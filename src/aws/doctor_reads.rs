//! The reads of `doctor`'s checks, on the port's [`CheckClients`]: the cluster, the network,
//! the capacity providers, the EC2 launch settings (with a dry-run RunInstances) and the task
//! list, each as plain data. What is wrong and how to fix it is the CLI's (`cli::doctor`).

use aws_sdk_ec2::types::{Filter, IamInstanceProfileSpecification, InstanceType};
use aws_sdk_ecs::types::DesiredStatus;

use super::capacity_providers::{described, DescribedProvider};
use super::doctor::CheckClients;
use super::status::ResourceStatus;
use super::AwsError;

/// What DescribeClusters said of one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterLookup {
    /// ECS has it.
    Found(ClusterView),
    /// ECS does not (its failure reason, `MISSING` when it gave none).
    Missing {
        /// ECS's reason.
        reason: String,
    },
}

/// One ECS cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterView {
    /// Its name.
    pub name: Option<String>,
    /// `ACTIVE`, `INACTIVE`, ... (`UNKNOWN` when ECS gave none).
    pub status: ResourceStatus,
    /// Running tasks.
    pub running_tasks: i32,
    /// Registered container instances.
    pub container_instances: i32,
    /// Its capacity providers.
    pub capacity_providers: Vec<String>,
    /// Its default capacity provider strategy's providers, in order.
    pub default_strategy: Vec<String>,
}

/// One egress rule of a security group: a protocol and port range to one destination (AWS's
/// permissions with several destinations are one rule per destination here, as the console
/// lists them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressRule {
    /// The security group the rule belongs to.
    pub group_id: String,
    /// `tcp`, `6`, `-1` (all), ...
    pub protocol: String,
    /// First port (`None`: all).
    pub from_port: Option<i32>,
    /// Last port (`None`: all).
    pub to_port: Option<i32>,
    /// Where the rule lets traffic go.
    pub to: EgressTarget,
    /// The rule's description, when it has one.
    pub description: Option<String>,
}

/// The destination of an egress rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EgressTarget {
    /// An IPv4 CIDR (`0.0.0.0/0` is the internet).
    Ipv4(String),
    /// An IPv6 CIDR.
    Ipv6(String),
    /// A managed prefix list, by id.
    PrefixList(String),
    /// Another security group, by id.
    Group(String),
}

/// The rules of one IP permission, one per destination.
fn egress_rules(group_id: &str, p: &aws_sdk_ec2::types::IpPermission) -> Vec<EgressRule> {
    let rule = |to: EgressTarget, description: Option<&str>| EgressRule {
        group_id: group_id.to_string(),
        protocol: p.ip_protocol().unwrap_or("").to_string(),
        from_port: p.from_port(),
        to_port: p.to_port(),
        to,
        description: description.filter(|d| !d.is_empty()).map(str::to_string),
    };
    let v4 = p.ip_ranges().iter().filter_map(|r| Some(rule(EgressTarget::Ipv4(r.cidr_ip()?.into()), r.description())));
    let v6 =
        p.ipv6_ranges().iter().filter_map(|r| Some(rule(EgressTarget::Ipv6(r.cidr_ipv6()?.into()), r.description())));
    let lists = p
        .prefix_list_ids()
        .iter()
        .filter_map(|l| Some(rule(EgressTarget::PrefixList(l.prefix_list_id()?.into()), l.description())));
    let groups = p
        .user_id_group_pairs()
        .iter()
        .filter_map(|g| Some(rule(EgressTarget::Group(g.group_id()?.into()), g.description())));
    v4.chain(v6).chain(lists).chain(groups).collect()
}

/// A dry-run RunInstances of one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DryRunLaunch {
    /// The AMI.
    pub ami_id: String,
    /// The instance type.
    pub instance_type: String,
    /// The subnet.
    pub subnet_id: Option<String>,
    /// The security groups.
    pub security_groups: Vec<String>,
    /// The key pair.
    pub key_name: Option<String>,
    /// The instance profile, by ARN (`arn:...`) or name.
    pub instance_profile: String,
}

fn filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}

impl CheckClients {
    /// DescribeClusters of one cluster.
    ///
    /// # Errors
    /// The failed call.
    pub async fn describe_cluster(&self, name: &str) -> Result<ClusterLookup, AwsError> {
        let call = self.ecs.describe_clusters().clusters(name).send();
        let out = self
            .call("DescribeClusters", async { call.await.map_err(|e| AwsError::from_sdk("DescribeClusters", &e)) })
            .await?;
        let Some(found) = out.clusters().first() else {
            let reason = out.failures().first().and_then(|f| f.reason()).unwrap_or("MISSING").to_string();
            return Ok(ClusterLookup::Missing { reason });
        };
        Ok(ClusterLookup::Found(ClusterView {
            name: found.cluster_name().map(str::to_string),
            status: ResourceStatus::from(found.status().unwrap_or("UNKNOWN")),
            running_tasks: found.running_tasks_count(),
            container_instances: found.registered_container_instances_count(),
            capacity_providers: found.capacity_providers().to_vec(),
            default_strategy: found
                .default_capacity_provider_strategy()
                .iter()
                .map(|s| s.capacity_provider().to_string())
                .collect(),
        }))
    }

    /// The default VPC's id, if the region has one.
    ///
    /// # Errors
    /// The failed DescribeVpcs call.
    pub async fn default_vpc(&self) -> Result<Option<String>, AwsError> {
        let call = self.ec2.describe_vpcs().filters(filter("is-default", "true")).send();
        let out =
            self.call("DescribeVpcs", async { call.await.map_err(|e| AwsError::from_sdk("DescribeVpcs", &e)) }).await?;
        Ok(out.vpcs().iter().find_map(|v| v.vpc_id()).map(str::to_string))
    }

    /// The default subnets of `vpc` (one per zone).
    ///
    /// # Errors
    /// The failed DescribeSubnets call.
    pub async fn default_subnets(&self, vpc: &str) -> Result<Vec<String>, AwsError> {
        let call =
            self.ec2.describe_subnets().filters(filter("vpc-id", vpc)).filters(filter("default-for-az", "true")).send();
        let out = self
            .call("DescribeSubnets", async { call.await.map_err(|e| AwsError::from_sdk("DescribeSubnets", &e)) })
            .await?;
        Ok(out.subnets().iter().filter_map(|s| s.subnet_id()).map(str::to_string).collect())
    }

    /// The subnets `ids`, each with its VPC (`?` when EC2 did not say).
    ///
    /// # Errors
    /// The failed DescribeSubnets call.
    pub async fn subnets(&self, ids: &[String]) -> Result<Vec<(String, String)>, AwsError> {
        let call = self.ec2.describe_subnets().set_subnet_ids(Some(ids.to_vec())).send();
        let out = self
            .call("DescribeSubnets", async { call.await.map_err(|e| AwsError::from_sdk("DescribeSubnets", &e)) })
            .await?;
        Ok(out
            .subnets()
            .iter()
            .filter_map(|s| Some((s.subnet_id()?.to_string(), s.vpc_id().unwrap_or("?").to_string())))
            .collect())
    }

    /// The id of `vpc`'s default security group, if it has one.
    ///
    /// # Errors
    /// The failed DescribeSecurityGroups call.
    pub async fn default_group(&self, vpc: &str) -> Result<Option<String>, AwsError> {
        let call = self
            .ec2
            .describe_security_groups()
            .filters(filter("vpc-id", vpc))
            .filters(filter("group-name", "default"))
            .send();
        let out = self
            .call("DescribeSecurityGroups", async {
                call.await.map_err(|e| AwsError::from_sdk("DescribeSecurityGroups", &e))
            })
            .await?;
        Ok(out.security_groups().iter().find_map(|g| g.group_id()).map(str::to_string))
    }

    /// The security groups `ids`, each with its VPC and egress rules (one per destination).
    ///
    /// # Errors
    /// The failed DescribeSecurityGroups call.
    pub async fn security_groups(
        &self,
        ids: &[String],
    ) -> Result<Vec<(String, Option<String>, Vec<EgressRule>)>, AwsError> {
        let call = self.ec2.describe_security_groups().set_group_ids(Some(ids.to_vec())).send();
        let out = self
            .call("DescribeSecurityGroups", async {
                call.await.map_err(|e| AwsError::from_sdk("DescribeSecurityGroups", &e))
            })
            .await?;
        Ok(out
            .security_groups()
            .iter()
            .filter_map(|g| {
                let id = g.group_id()?;
                let egress = g.ip_permissions_egress().iter().flat_map(|p| egress_rules(id, p)).collect();
                Some((id.to_string(), g.vpc_id().map(str::to_string), egress))
            })
            .collect())
    }

    /// How many container instances `cluster` lists (one page).
    ///
    /// # Errors
    /// The failed ListContainerInstances call.
    pub async fn count_container_instances(&self, cluster: &str) -> Result<usize, AwsError> {
        let call = self.ecs.list_container_instances().cluster(cluster).send();
        let out = self
            .call("ListContainerInstances", async {
                call.await.map_err(|e| AwsError::from_sdk("ListContainerInstances", &e))
            })
            .await?;
        Ok(out.container_instance_arns().len())
    }

    /// How many running tasks `cluster` lists (one page).
    ///
    /// # Errors
    /// The failed ListTasks call.
    pub async fn count_running_tasks(&self, cluster: &str) -> Result<usize, AwsError> {
        let call = self.ecs.list_tasks().cluster(cluster).desired_status(DesiredStatus::Running).send();
        let out = self.call("ListTasks", async { call.await.map_err(|e| AwsError::from_sdk("ListTasks", &e)) }).await?;
        Ok(out.task_arns().len())
    }

    /// DescribeCapacityProviders of `names`: those described, and the short names of those ECS
    /// reports MISSING.
    ///
    /// # Errors
    /// The failed call.
    pub async fn capacity_providers(
        &self,
        names: &[String],
    ) -> Result<(Vec<DescribedProvider>, Vec<String>), AwsError> {
        let call = self.ecs.describe_capacity_providers().set_capacity_providers(Some(names.to_vec())).send();
        let out = self
            .call("DescribeCapacityProviders", async {
                call.await.map_err(|e| AwsError::from_sdk("DescribeCapacityProviders", &e))
            })
            .await?;
        let missing = out
            .failures()
            .iter()
            .filter_map(|f| f.arn())
            .map(|a| a.rsplit('/').next().unwrap_or(a).to_string())
            .collect();
        Ok((out.capacity_providers().iter().map(described).collect(), missing))
    }

    /// The roles of the instance profile `name` (GetInstanceProfile).
    ///
    /// # Errors
    /// The failed call (`NotFound` when it does not exist).
    pub async fn instance_profile_roles(&self, name: &str) -> Result<Vec<String>, AwsError> {
        let call = self.iam.get_instance_profile().instance_profile_name(name).send();
        let out = self
            .call("GetInstanceProfile", async { call.await.map_err(|e| AwsError::from_sdk("GetInstanceProfile", &e)) })
            .await?;
        Ok(out
            .instance_profile()
            .map(|p| p.roles().iter().map(|r| r.role_name().to_string()).collect())
            .unwrap_or_default())
    }

    /// Whether the key pair `name` exists (DescribeKeyPairs).
    ///
    /// # Errors
    /// The failed call.
    pub async fn key_pair_exists(&self, name: &str) -> Result<bool, AwsError> {
        let call = self.ec2.describe_key_pairs().key_names(name).send();
        let out = self
            .call("DescribeKeyPairs", async { call.await.map_err(|e| AwsError::from_sdk("DescribeKeyPairs", &e)) })
            .await?;
        Ok(!out.key_pairs().is_empty())
    }

    /// A dry-run RunInstances. `Ok` only when EC2 launched despite the dry run.
    ///
    /// # Errors
    /// The call's answer: `DryRunPassed` when the launch would succeed, else the refusal.
    pub async fn dry_run_launch(&self, launch: &DryRunLaunch) -> Result<(), AwsError> {
        let profile = if launch.instance_profile.starts_with("arn:") {
            IamInstanceProfileSpecification::builder().arn(&launch.instance_profile).build()
        } else {
            IamInstanceProfileSpecification::builder().name(&launch.instance_profile).build()
        };
        let call = self
            .ec2
            .run_instances()
            .dry_run(true)
            .image_id(&launch.ami_id)
            .instance_type(InstanceType::from(launch.instance_type.as_str()))
            .min_count(1)
            .max_count(1)
            .set_subnet_id(launch.subnet_id.clone())
            .set_security_group_ids(Some(launch.security_groups.clone()))
            .set_key_name(launch.key_name.clone())
            .iam_instance_profile(profile)
            .send();
        self.call("RunInstances", async { call.await.map_err(|e| AwsError::from_sdk("RunInstances", &e)) })
            .await
            .map(|_| ())
    }
}
