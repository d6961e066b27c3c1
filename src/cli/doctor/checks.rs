//! The checks after credentials and role: cluster, networking, capacity, EC2, log group, tasks,
//! the identity's permissions.
//! Each writes its line(s); a failure of one does not stop the others.

use std::collections::BTreeSet;
use std::io;

use super::fix::fix_for;
use super::network::Network;
use super::{Aws, Report};
use crate::aws::doctor_reads::{ClusterLookup, ClusterView as Cluster, DryRunLaunch};
use crate::aws::status::ResourceStatus;
use crate::aws::Failure;
use crate::cluster::capacity::ec2::catalog::Catalog;
use crate::cluster::capacity::ec2::OsClass;
use crate::settings::{ClusterProfile, ElasticProfile, LaunchType, ProviderStrategy};

/// Every check, in order.
pub(super) async fn all(
    aws: &Aws,
    profile: &ClusterProfile,
    elastic: &[(String, ElasticProfile)],
    server_id: Option<&str>,
    caller_arn: &str,
    r: &mut Report<'_>,
) -> io::Result<()> {
    let cluster = cluster(aws, profile, r).await?;
    let network = network(aws, profile, r).await?;
    super::reach::check(aws, profile, network.as_ref(), elastic, r).await?;
    super::task_parts::all(aws, network.as_ref(), elastic, r).await?;
    capacity(aws, profile, cluster.as_ref(), r).await?;
    super::given::check(aws, profile, elastic, r).await?;
    super::soci::check(aws, profile, elastic, server_id, r).await?;
    if profile.launch_type == LaunchType::Ec2 {
        ec2(aws, profile, network.as_ref(), r).await?;
    }
    log_group(aws, profile, r)?;
    super::event_queue::check(aws, profile, r).await?;
    tasks(aws, profile, r).await?;
    super::permissions::check(aws, profile, elastic, caller_arn, r).await?;
    r.warn(
        "launch",
        "RunTask is not tried: ECS has no dry run (checked by ListTasks only); the permissions line reads ecs:RunTask, ecs:TagResource and iam:PassRole by action, not by resource or condition",
        "a refusal for a resource or a condition shows in the first job's console log; compare the policy's resources and conditions with `ecs-elastic-agent iam-policy`".to_string(),
    )
}

/// DescribeClusters: the cluster exists and is ACTIVE.
async fn cluster(aws: &Aws, profile: &ClusterProfile, r: &mut Report<'_>) -> io::Result<Option<Cluster>> {
    let name = &profile.cluster_name;
    let found = match aws.describe_cluster(name).await {
        Ok(ClusterLookup::Found(found)) => Some(found),
        Ok(ClusterLookup::Missing { reason }) => {
            r.fail(
                "cluster",
                format!("ECS cluster {name} does not exist in {} of account {} ({reason})", aws.region, aws.account),
                format!(
                    "create it (aws ecs create-cluster --cluster-name {} --region {}) or correct ClusterName and Region; the plugin never creates clusters",
                    aws.cluster_name, aws.region
                ),
            )?;
            None
        }
        Err(e) => {
            let fix = fix_for(&e, "ecs:DescribeClusters", "check network access to ECS in this region");
            r.fail("cluster", format!("cannot describe ECS cluster {name}: {}", e.detail), fix)?;
            return Ok(None);
        }
    };
    let Some(found) = found else {
        return Ok(None);
    };
    let status = &found.status;
    if *status != ResourceStatus::Active {
        r.fail(
            "cluster",
            format!("ECS cluster {name} is {status}, not ACTIVE"),
            "use an ACTIVE cluster: an INACTIVE cluster was deleted and takes no tasks",
        )?;
        return Ok(None);
    }
    r.ok(
        "cluster",
        format!(
            "ECS cluster {} is ACTIVE in {} (account {}): {} running task(s), {} container instance(s)",
            found.name.as_deref().unwrap_or(name),
            aws.region,
            aws.account,
            found.running_tasks,
            found.container_instances
        ),
    )?;
    Ok(Some(found))
}

/// Subnets and security groups exist and share one VPC (or the default VPC has default subnets
/// and a default group).
async fn network(aws: &Aws, profile: &ClusterProfile, r: &mut Report<'_>) -> io::Result<Option<Network>> {
    let (vpc, subnets, from_default) = if profile.subnet_ids.is_empty() {
        match default_subnets(aws).await {
            Ok((vpc, subnets)) => (vpc, subnets, true),
            Err((finding, fix)) => return r.fail("network", finding, fix).map(|_| None),
        }
    } else {
        match given_subnets(aws, &profile.subnet_ids).await {
            Ok(vpc) => (vpc, profile.subnet_ids.clone(), false),
            Err((finding, fix)) => return r.fail("network", finding, fix).map(|_| None),
        }
    };
    let groups = if profile.security_group_ids.is_empty() {
        default_group(aws, &vpc).await.map(|g| vec![g])
    } else {
        given_groups(aws, &profile.security_group_ids, &vpc).await.map(|_| profile.security_group_ids.clone())
    };
    let groups = match groups {
        Ok(groups) => groups,
        Err((finding, fix)) => return r.fail("network", finding, fix).map(|_| None),
    };
    let origin = if from_default { "the default VPC " } else { "VPC " };
    r.ok(
        "network",
        format!("subnet(s) {} and security group(s) {} exist in {origin}{vpc}", subnets.join(", "), groups.join(", ")),
    )?;
    Ok(Some(Network { vpc, subnets, groups }))
}

type Problem = (String, String);

async fn default_subnets(aws: &Aws) -> Result<(String, Vec<String>), Problem> {
    let vpc = aws.default_vpc().await.map_err(|e| {
        (
            format!("cannot look up the default VPC: {}", e.detail),
            fix_for(&e, "ec2:DescribeVpcs", "check network access to EC2"),
        )
    })?;
    let Some(vpc) = vpc else {
        return Err((
            format!("the profile sets no SubnetIds and {} has no default VPC", aws.region),
            "set SubnetIds and SecurityGroupIds in the cluster profile".into(),
        ));
    };
    let mut subnets = aws.default_subnets(&vpc).await.map_err(|e| {
        (
            format!("cannot list the default subnets: {}", e.detail),
            fix_for(&e, "ec2:DescribeSubnets", "check network access to EC2"),
        )
    })?;
    subnets.sort();
    if subnets.is_empty() {
        return Err((
            format!("the default VPC {vpc} has no default subnets"),
            "set SubnetIds in the cluster profile".into(),
        ));
    }
    Ok((vpc, subnets))
}

async fn given_subnets(aws: &Aws, ids: &[String]) -> Result<String, Problem> {
    let found = aws.subnets(ids).await.map_err(|e| {
        let fix = fix_for(
            &e,
            "ec2:DescribeSubnets",
            format!("correct SubnetIds: use subnets of {} in the cluster's account", aws.region),
        );
        (format!("subnet(s) {} cannot be used: {}", ids.join(", "), e.detail), fix)
    })?;
    let missing: Vec<&String> = ids.iter().filter(|id| !found.iter().any(|(f, _)| f == *id)).collect();
    if !missing.is_empty() {
        let missing: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
        return Err((
            format!("subnet(s) {} do not exist in {}", missing.join(", "), aws.region),
            "correct SubnetIds".into(),
        ));
    }
    let vpcs: BTreeSet<&str> = found.iter().map(|(_, v)| v.as_str()).collect();
    if vpcs.len() > 1 {
        let each: Vec<String> = found.iter().map(|(s, v)| format!("{s} in {v}")).collect();
        return Err((
            format!("the subnets are in different VPCs ({})", each.join(", ")),
            "use subnets of one VPC".into(),
        ));
    }
    let vpc = vpcs.into_iter().next().unwrap_or("?").to_string();
    Ok(vpc)
}

async fn default_group(aws: &Aws, vpc: &str) -> Result<String, Problem> {
    let group = aws.default_group(vpc).await.map_err(|e| {
        (
            format!("cannot look up the default security group: {}", e.detail),
            fix_for(&e, "ec2:DescribeSecurityGroups", "check network access to EC2"),
        )
    })?;
    group.ok_or_else(|| {
        (format!("VPC {vpc} has no default security group"), "set SecurityGroupIds in the cluster profile".into())
    })
}

async fn given_groups(aws: &Aws, ids: &[String], vpc: &str) -> Result<(), Problem> {
    let groups = aws.security_groups(ids).await.map_err(|e| {
        let fix =
            fix_for(&e, "ec2:DescribeSecurityGroups", format!("correct SecurityGroupIds: use groups of VPC {vpc}"));
        (format!("security group(s) {} cannot be used: {}", ids.join(", "), e.detail), fix)
    })?;
    for id in ids {
        match groups.iter().find(|(g, _, _)| g == id) {
            None => {
                return Err((
                    format!("security group {id} does not exist in {}", aws.region),
                    "correct SecurityGroupIds".into(),
                ))
            }
            Some((_, group_vpc, _)) if group_vpc.as_deref() != Some(vpc) => {
                return Err((
                    format!(
                        "security group {id} is in {} but the subnets are in {vpc}",
                        group_vpc.as_deref().unwrap_or("no VPC")
                    ),
                    format!("use security groups of VPC {vpc}"),
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Fargate: the capacity providers ECS knows, and FARGATE_SPOT on the cluster when needed.
/// EC2: the registered container instances.
async fn capacity(
    aws: &Aws,
    profile: &ClusterProfile,
    cluster: Option<&Cluster>,
    r: &mut Report<'_>,
) -> io::Result<()> {
    if profile.launch_type == LaunchType::Ec2 {
        return match aws.count_container_instances(&profile.cluster_name).await {
            Ok(count) => r.ok(
                "capacity",
                format!("EC2: {count} container instance(s) registered; the plugin launches more as jobs need them"),
            ),
            Err(e) => r.fail(
                "capacity",
                format!("cannot list container instances: {}", e.detail),
                fix_for(&e, "ecs:ListContainerInstances", "check the cluster"),
            ),
        };
    }
    let spot = profile.launch_type == LaunchType::FargateSpot;
    let on_cluster: Vec<&str> =
        cluster.map(|c| c.capacity_providers.iter().map(String::as_str).collect()).unwrap_or_default();
    if let (Some(strategy), Some(c)) = (&profile.capacity_providers, cluster) {
        return providers_on_cluster(aws, strategy, c, &on_cluster, r).await;
    }
    if spot && cluster.is_some() && !on_cluster.contains(&"FARGATE_SPOT") {
        r.fail(
            "capacity",
            format!("FARGATE_SPOT is not a capacity provider of cluster {} (it has: {})", aws.cluster_name, list_or_none(&on_cluster)),
            format!(
                "aws ecs put-cluster-capacity-providers --cluster {} --capacity-providers FARGATE FARGATE_SPOT --default-capacity-provider-strategy capacityProvider=FARGATE,weight=1 --region {}",
                aws.cluster_name, aws.region
            ),
        )?;
    }
    let names: Vec<String> = if spot { vec!["FARGATE_SPOT".into(), "FARGATE".into()] } else { vec!["FARGATE".into()] };
    match aws.capacity_providers(&names).await {
        Err(e) => r.warn(
            "capacity",
            format!("could not describe the Fargate capacity providers: {}", e.detail),
            fix_for(&e, "ecs:DescribeCapacityProviders", "nothing, if tasks start; this only informs"),
        ),
        Ok((_, missing)) => {
            let usable = format!("{} with launch type {}", names.join(" and "), profile.launch_type.as_str());
            if missing.is_empty() {
                r.ok("capacity", format!("{usable}: ECS reports the capacity providers ACTIVE"))
            } else {
                r.warn(
                    "capacity",
                    format!(
                        "ECS reports {} MISSING from DescribeCapacityProviders (a local emulator such as moto always does; on AWS, Fargate is then not offered in {})",
                        missing.join(", "),
                        aws.region
                    ),
                    "on AWS: use a region where Fargate is available".to_string(),
                )
            }
        }
    }
}

/// `CapacityProviderStrategy`: every provider it names is one of the cluster's; `default` needs
/// the cluster to have a default strategy.
async fn providers_on_cluster(
    aws: &Aws,
    strategy: &ProviderStrategy,
    cluster: &Cluster,
    on_cluster: &[&str],
    r: &mut Report<'_>,
) -> io::Result<()> {
    match strategy {
        ProviderStrategy::ClusterDefault => {
            let default: Vec<&str> = cluster.default_strategy.iter().map(String::as_str).collect();
            if default.is_empty() {
                r.fail(
                    "capacity",
                    format!("cluster {} has no default capacity provider strategy for 'default' to use", aws.cluster_name),
                    format!(
                        "aws ecs put-cluster-capacity-providers --cluster {} --capacity-providers {} --default-capacity-provider-strategy capacityProvider=NAME,weight=1 --region {}",
                        aws.cluster_name,
                        if on_cluster.is_empty() { "NAME".to_string() } else { on_cluster.join(" ") },
                        aws.region
                    ),
                )
            } else {
                r.ok("capacity", format!("the cluster's default capacity provider strategy: {}", default.join(", ")))
            }
        }
        ProviderStrategy::Providers(shares) => {
            let missing: Vec<&str> =
                shares.iter().map(|s| s.name.as_str()).filter(|n| !on_cluster.contains(n)).collect();
            if missing.is_empty() {
                r.ok("capacity", format!("{strategy}: each is a capacity provider of cluster {}", aws.cluster_name))?;
                let names: Vec<String> = shares.iter().map(|s| s.name.clone()).collect();
                providers_active(aws, &names, r).await
            } else {
                let all: Vec<&str> = on_cluster.iter().copied().chain(missing.iter().copied()).collect();
                r.fail(
                    "capacity",
                    format!(
                        "{} not a capacity provider of cluster {} (it has: {})",
                        missing.join(", "),
                        aws.cluster_name,
                        list_or_none(on_cluster)
                    ),
                    format!(
                        "aws ecs put-cluster-capacity-providers --cluster {} --capacity-providers {} --default-capacity-provider-strategy capacityProvider={},weight=1 --region {} (keep the cluster's default strategy if it has one)",
                        aws.cluster_name,
                        all.join(" "),
                        all[0],
                        aws.region
                    ),
                )
            }
        }
    }
}

/// The strategy's providers other than Fargate's: each described, its kind named (an Auto
/// Scaling group's or ECS Managed Instances), and ACTIVE.
async fn providers_active(aws: &Aws, names: &[String], r: &mut Report<'_>) -> io::Result<()> {
    let asked: Vec<String> = names.iter().filter(|n| *n != "FARGATE" && *n != "FARGATE_SPOT").cloned().collect();
    if asked.is_empty() {
        return Ok(());
    }
    let described = match aws.capacity_providers(&asked).await {
        Ok((described, _)) => described,
        Err(e) => {
            let fix = fix_for(&e, "ecs:DescribeCapacityProviders", "the plugin needs it to learn the providers' kinds");
            return r.fail("capacity", format!("could not describe the capacity providers: {}", e.detail), fix);
        }
    };
    for name in &asked {
        let found = described.iter().find(|p| &p.name == name);
        let Some(found) = found else {
            r.fail(
                "capacity",
                format!(
                    "capacity provider {name} does not exist in {} (DescribeCapacityProviders: MISSING)",
                    aws.region
                ),
                format!(
                    "create it (aws ecs create-capacity-provider --name {name} ...) or fix CapacityProviderStrategy"
                ),
            )?;
            continue;
        };
        let kind = found.kind.describe();
        let status = &found.status;
        if *status == ResourceStatus::Active {
            r.ok("capacity", format!("capacity provider {name}: {kind}, ACTIVE"))?;
        } else {
            r.fail(
                "capacity",
                format!("capacity provider {name} ({kind}) is {status}, not ACTIVE: ECS places no task through it"),
                format!("aws ecs describe-capacity-providers --capacity-providers {name} --region {} (its updateStatusReason says why)", aws.region),
            )?;
        }
    }
    Ok(())
}

fn list_or_none(items: &[&str]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

/// EC2 launch type: the AMI, the instance profile, the key pair, and a dry-run RunInstances.
async fn ec2(aws: &Aws, profile: &ClusterProfile, network: Option<&Network>, r: &mut Report<'_>) -> io::Result<()> {
    let Some(capacity) = &profile.ec2 else {
        return Ok(());
    };
    let catalog = super::ec2_types::check(aws, capacity, r).await?;
    let name = capacity.instance_profile.rsplit('/').next().unwrap_or(&capacity.instance_profile).to_string();
    match aws.instance_profile_roles(&name).await {
        Ok(roles) => {
            if roles.is_empty() {
                r.fail("ec2 instance profile", format!("instance profile {name} has no role"), format!("aws iam add-role-to-instance-profile --instance-profile-name {name} --role-name <a role with AmazonEC2ContainerServiceforEC2Role>"))?
            } else {
                r.ok("ec2 instance profile", format!("instance profile {name} exists with role {}", roles.join(", ")))?
            }
        }
        Err(e) => {
            let fix = fix_for(
                &e,
                "iam:GetInstanceProfile",
                format!("create it: aws iam create-instance-profile --instance-profile-name {name}, then add a role with the AmazonEC2ContainerServiceforEC2Role policy"),
            );
            r.fail("ec2 instance profile", format!("instance profile {name} cannot be used: {}", e.detail), fix)?
        }
    }
    if let Some(key) = &capacity.key_pair {
        match aws.key_pair_exists(key).await {
            Ok(true) => r.ok("ec2 key pair", format!("key pair {key} exists"))?,
            Ok(false) => r.fail(
                "ec2 key pair",
                format!("key pair {key} does not exist in {}", aws.region),
                "create it, or clear Ec2KeyPair",
            )?,
            Err(e) => r.fail(
                "ec2 key pair",
                format!("key pair {key} cannot be used: {}", e.detail),
                fix_for(&e, "ec2:DescribeKeyPairs", "create it, or clear Ec2KeyPair"),
            )?,
        }
    }
    dry_run(aws, profile, network, &catalog, r).await
}

/// RunInstances with DryRun: permissions and parameters, without launching anything (the
/// first listed type that has an AMI of its architecture, with that AMI).
async fn dry_run(
    aws: &Aws,
    profile: &ClusterProfile,
    network: Option<&Network>,
    catalog: &Catalog,
    r: &mut Report<'_>,
) -> io::Result<()> {
    let (Some(capacity), Some(network)) = (&profile.ec2, network) else {
        return r.warn("ec2 launch", "RunInstances not dry-run: the networking check failed", None);
    };
    let launchable =
        catalog.launchable().next().and_then(|t| Some((t.name.clone(), catalog.ami_for(t.arch, OsClass::Linux)?)));
    let Some((instance_type, ami)) = launchable else {
        return r.warn("ec2 launch", "RunInstances not dry-run: no listed instance type has a listed AMI", None);
    };
    let launch = DryRunLaunch {
        ami_id: ami.id.clone(),
        instance_type: instance_type.clone(),
        subnet_id: network.subnets.first().cloned(),
        security_groups: network.groups.clone(),
        key_name: capacity.key_pair.clone(),
        instance_profile: capacity.instance_profile.clone(),
    };
    match aws.dry_run_launch(&launch).await {
        Err(e) if e.failure == Failure::DryRunPassed => {
            r.ok("ec2 launch", format!("RunInstances of a {instance_type} with {} would succeed (dry run)", ami.id))
        }
        Err(e) => {
            let fix = fix_for(
                &e,
                "ec2:RunInstances (and iam:PassRole for the instance role)",
                "correct the Ec2* settings named in the error",
            );
            r.fail("ec2 launch", format!("RunInstances (dry run) was refused: {}", e.detail), fix)
        }
        Ok(_) => r.warn(
            "ec2 launch",
            "RunInstances answered a dry run with instances; terminate any instance without gocd tags",
            None,
        ),
    }
}

/// The log group cannot be checked without the CloudWatch Logs API.
fn log_group(aws: &Aws, profile: &ClusterProfile, r: &mut Report<'_>) -> io::Result<()> {
    match &profile.log_group {
        None => r.ok("log group", "no LogGroup: agent output is not sent to CloudWatch Logs"),
        Some(group) => r.warn(
            "log group",
            format!("{group} not checked: this binary has no CloudWatch Logs client"),
            format!(
                "check: aws logs describe-log-groups --log-group-name-prefix {group} --region {}; the tasks' execution role needs logs:CreateLogStream and logs:PutLogEvents on it",
                aws.region
            ),
        ),
    }
}

/// ListTasks: what every server-ping starts with.
async fn tasks(aws: &Aws, profile: &ClusterProfile, r: &mut Report<'_>) -> io::Result<()> {
    match aws.count_running_tasks(&profile.cluster_name).await {
        Ok(count) => r.ok("tasks", format!("ListTasks works: {count} running task(s) in the cluster")),
        Err(e) => r.fail(
            "tasks",
            format!("ListTasks was refused: {}", e.detail),
            fix_for(&e, "ecs:ListTasks", "check the cluster and network access to ECS"),
        ),
    }
}
