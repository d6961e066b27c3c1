//! Capacity provider rules of RunTask and ECS Managed Instances, where moto is
//! silent: moto runs any strategy on its first provider, whatever else it names, and knows no
//! Managed Instances providers at all.
//!
//! - a strategy mixes Fargate providers with others, names more than 20 providers or gives more
//!   than one a base: `InvalidParameterException`;
//! - a provider other than Fargate's that is not one of the cluster's (moto's DescribeClusters
//!   `capacityProviders`): `InvalidParameterException`. `FARGATE` and `FARGATE_SPOT` are taken
//!   as associated with every cluster (AWS wants them associated too; the world's clusters are
//!   created without providers);
//! - the task definition's `requiresCompatibilities` lacks what the chosen provider needs
//!   (FARGATE for Fargate's, EC2 for an Auto Scaling group's, MANAGED_INSTANCES for ECS
//!   Managed Instances; no `requiresCompatibilities` means EC2): `InvalidParameterException`
//!   "Task definition does not support launch_type ...";
//! - a RunTask through a Managed Instances provider needs `awsvpcConfiguration` (the rule
//!   `ecs.run_task.awsvpc`);
//! - a task definition requiring MANAGED_INSTANCES with a parameter ECS refuses there:
//!   `ClientException`.
//!
//! The stand-in for Managed Instances: a test names a provider with
//! [`AwsRules::managed_instances_provider`] (`Proxy::managed_instances_provider`), and
//! associates it with its cluster in moto (moto's PutClusterCapacityProviders takes any name).
//! DescribeCapacityProviders then answers it as AWS would (`type` MANAGED_INSTANCES, a
//! `managedInstancesProvider`, ACTIVE) instead of moto's MISSING, and moto places the tasks of a
//! RunTask through it on the container instances the test registered, with its name as the
//! task's `capacityProviderName`, as for an Auto Scaling group's provider.

use serde_json::{json, Value};

use super::super::http::{self, HttpRequest, HttpResponse};
use super::super::proxy::Call;
use super::*;

/// Task definition parameters ECS refuses for MANAGED_INSTANCES: (where, name).
const MI_REFUSED_CONTAINER: &[&str] = &[
    "disableNetworking",
    "dnsSearchDomains",
    "dnsServers",
    "dockerLabels",
    "dockerSecurityOptions",
    "extraHosts",
    "hostname",
    "links",
];
const MI_REFUSED_LINUX: &[&str] = &["maxSwap", "sharedMemorySize", "swappiness", "tmpfs"];
const MI_REFUSED_TASK: &[&str] = &["ephemeralStorage", "ipcMode", "proxyConfiguration"];

fn is_fargate(name: &str) -> bool {
    name == "FARGATE" || name == "FARGATE_SPOT"
}

fn set(v: &Value) -> bool {
    !v.is_null() && !v.as_array().is_some_and(Vec::is_empty) && !v.as_object().is_some_and(|o| o.is_empty())
}

impl AwsRules {
    /// Names `provider` an ECS Managed Instances capacity provider (the world's stand-in).
    pub fn managed_instances_provider(&self, provider: &str) {
        self.managed_instances.lock().unwrap().insert(provider.to_string());
    }

    fn is_managed_instances(&self, provider: &str) -> bool {
        self.managed_instances.lock().unwrap().contains(provider)
    }

    /// The capacity provider rules of one RunTask.
    pub(super) async fn capacity_strategy(&self, call: &Call, v: &Value, upstream: SocketAddr) -> Result<(), Broken> {
        let strategy = v["capacityProviderStrategy"].as_array().cloned().unwrap_or_default();
        if strategy.is_empty() {
            return Ok(());
        }
        let names: Vec<String> =
            strategy.iter().map(|s| s["capacityProvider"].as_str().unwrap_or("").to_string()).collect();
        if self.on(RUN_TASK_STRATEGY_LIMITS) {
            if names.len() > 20 {
                return Err(invalid(
                    RUN_TASK_STRATEGY_LIMITS,
                    format!(
                        "A capacity provider strategy can contain a maximum of 20 capacity providers (it has {}).",
                        names.len()
                    ),
                ));
            }
            if strategy.iter().filter(|s| s["base"].as_i64().unwrap_or(0) > 0).count() > 1 {
                return Err(invalid(
                    RUN_TASK_STRATEGY_LIMITS,
                    "Only one capacity provider in a capacity provider strategy can have a base defined.",
                ));
            }
        }
        let fargate = names.iter().filter(|n| is_fargate(n)).count();
        if self.on(RUN_TASK_STRATEGY_MIX) && fargate > 0 && fargate < names.len() {
            return Err(invalid(
                RUN_TASK_STRATEGY_MIX,
                "A capacity provider strategy cannot contain a mix of capacity providers using Auto Scaling groups and Fargate providers. Specify one or the other and try again.",
            ));
        }
        let others: Vec<&String> = names.iter().filter(|n| !is_fargate(n)).collect();
        if self.on(RUN_TASK_PROVIDER_IN_CLUSTER) && !others.is_empty() {
            let answer = moto_json(call, upstream, "DescribeClusters", json!({ "clusters": [cluster_name(v)] })).await;
            if let Some(answer) = answer {
                let cluster = &answer["clusters"][0];
                let of_cluster: Vec<&str> =
                    cluster["capacityProviders"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                if let Some(stranger) = others.iter().find(|n| !of_cluster.contains(&n.as_str())) {
                    return Err(invalid(
                        RUN_TASK_PROVIDER_IN_CLUSTER,
                        format!("The specified capacity provider strategy cannot contain a capacity provider that is not associated with the cluster. Associate the capacity provider with the cluster or specify a valid capacity provider and try again. ({stranger})"),
                    ));
                }
            }
        }
        let managed = names.iter().any(|n| self.is_managed_instances(n));
        if managed && self.on(RUN_TASK_AWSVPC) && !v["networkConfiguration"]["awsvpcConfiguration"].is_object() {
            return Err(invalid(
                RUN_TASK_AWSVPC,
                "Network Configuration must be provided when networkMode 'awsvpc' is specified.",
            ));
        }
        if self.on(RUN_TASK_PROVIDER_COMPATIBILITY) {
            let reference = v["taskDefinition"].as_str().unwrap_or("");
            if let Some(td) = self.task_def_info(call, reference, upstream).await {
                for name in &names {
                    let (needs, has) = if is_fargate(name) {
                        ("FARGATE", td.fargate)
                    } else if self.is_managed_instances(name) {
                        ("MANAGED_INSTANCES", td.managed_instances)
                    } else {
                        ("EC2", td.ec2)
                    };
                    if !has {
                        return Err(invalid(
                            RUN_TASK_PROVIDER_COMPATIBILITY,
                            format!("Task definition does not support launch_type {needs}. (capacity provider {name})"),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// A task definition requiring MANAGED_INSTANCES has none of what ECS refuses there.
    pub(super) fn managed_instances_task_definition(&self, v: &Value) -> Result<(), Broken> {
        let managed =
            v["requiresCompatibilities"].as_array().is_some_and(|c| c.iter().any(|c| c == "MANAGED_INSTANCES"));
        if !managed || !self.on(TD_MANAGED_INSTANCES) {
            return Ok(());
        }
        let refuse = |what: String| {
            Err(client(
                TD_MANAGED_INSTANCES,
                format!(
                    "{what} is not supported for task definitions that require the MANAGED_INSTANCES compatibility."
                ),
            ))
        };
        if let Some(field) = MI_REFUSED_TASK.iter().find(|f| set(&v[**f])) {
            return refuse(format!("The '{field}' parameter"));
        }
        for volume in v["volumes"].as_array().into_iter().flatten() {
            let name = volume["name"].as_str().unwrap_or("");
            if volume["host"]["sourcePath"].is_string() {
                return refuse(format!("The host sourcePath parameter (volume {name})"));
            }
            if set(&volume["dockerVolumeConfiguration"]) {
                return refuse(format!("The dockerVolumeConfiguration parameter (volume {name})"));
            }
        }
        for c in v["containerDefinitions"].as_array().into_iter().flatten() {
            let name = c["name"].as_str().unwrap_or("");
            if let Some(field) = MI_REFUSED_CONTAINER.iter().find(|f| set(&c[**f])) {
                return refuse(format!("The '{field}' container parameter (container {name})"));
            }
            if let Some(field) = MI_REFUSED_LINUX.iter().find(|f| set(&c["linuxParameters"][**f])) {
                return refuse(format!("The '{field}' linux parameter (container {name})"));
            }
        }
        Ok(())
    }

    /// DescribeCapacityProviders: moto's answer, with the Managed Instances providers the test
    /// named answered as AWS would (moto says MISSING).
    pub(super) async fn describe_capacity_providers(&self, call: &Call, upstream: SocketAddr) -> Option<Emulated> {
        let body = call.json()?;
        let asked: Vec<String> = body["capacityProviders"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|n| self.is_managed_instances(n))
            .map(str::to_string)
            .collect();
        if asked.is_empty() {
            return None;
        }
        let answer = match http::send(upstream, &call.request).await {
            Ok(a) if a.status == 200 => a,
            other => return Some(Emulated::Answer(other)),
        };
        let mut v: Value = serde_json::from_slice(&answer.body).unwrap_or_else(|_| json!({}));
        let failures: Vec<Value> = v["failures"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|f| {
                !asked.iter().any(|n| f["arn"].as_str().is_some_and(|a| a == n || a.ends_with(&format!("/{n}"))))
            })
            .cloned()
            .collect();
        v["failures"] = json!(failures);
        let mut providers = v["capacityProviders"].as_array().cloned().unwrap_or_default();
        for name in &asked {
            providers.push(json!({
                "capacityProviderArn": format!("arn:aws:ecs:{}:{}:capacity-provider/{name}", call.region, call.account),
                "name": name,
                "status": "ACTIVE",
                "type": "MANAGED_INSTANCES",
                "managedInstancesProvider": {
                    "infrastructureRoleArn": format!("arn:aws:iam::{}:role/ecsInfrastructureRole", call.account),
                    "instanceLaunchTemplate": {
                        "ec2InstanceProfileArn": format!("arn:aws:iam::{}:instance-profile/ecsInstanceRole", call.account),
                        "networkConfiguration": { "subnets": [] }
                    }
                },
                "tags": []
            }));
        }
        v["capacityProviders"] = json!(providers);
        Some(Emulated::Answer(Ok(HttpResponse::aws_json(200, &v))))
    }
}

/// One ECS JSON call to moto with the signing headers of `call` (moto checks no signature).
async fn moto_json(call: &Call, upstream: SocketAddr, operation: &str, body: Value) -> Option<Value> {
    let mut headers = signing_headers(call);
    headers.push(("Content-Type".into(), "application/x-amz-json-1.1".into()));
    headers.push(("X-Amz-Target".into(), format!("AmazonEC2ContainerServiceV20141113.{operation}")));
    let request = HttpRequest {
        method: "POST".into(),
        target: "/".into(),
        version: "HTTP/1.1".into(),
        headers,
        body: body.to_string().into_bytes(),
    };
    let answer = http::send(upstream, &request).await.ok().filter(|a| a.status == 200)?;
    serde_json::from_slice(&answer.body).ok()
}
