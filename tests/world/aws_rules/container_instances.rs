//! What a container instance registers with ECS (`ecs.container_instance_resources`).
//!
//! On AWS the ECS agent registers its instance with the instance's CPU and memory
//! (RegisterContainerInstance `totalResources`): 1024 CPU units a vCPU, and the memory the
//! operating system reports less `ECS_RESERVED_MEMORY` (0 by default), which is somewhat less
//! than the type's memory (the kernel keeps some). moto ignores `totalResources` and registers
//! every container instance with 4096 CPU units and 7482 MiB, whatever its type, and takes what
//! each task placed on it needs from those figures.
//!
//! The proxy answers container instances as ECS would have registered them: in the answers of
//! DescribeContainerInstances, RegisterContainerInstance, DeregisterContainerInstance and
//! UpdateContainerInstancesState, each container instance whose type (its
//! `ecs.instance-type` attribute) moto's DescribeInstanceTypes knows gets [`ecs_registers`] of
//! the type's vCPUs and MiB as `registeredResources`, and as `remainingResources` those less
//! what moto has taken for the tasks placed on it (moto's registered less moto's remaining), so
//! the room left follows the tasks as they start and stop. An 8 GiB, 4-vCPU type (c5.xlarge,
//! c5a.xlarge, c6g.xlarge) registers moto's own 4096 CPU units and 7482 MiB.
//!
//! moto still places a RunTask on EC2 capacity by its own figures (a task larger than 4096
//! units or 7482 MiB is placed nowhere, whatever the type); StartTask, which the plugin uses on
//! its instances, is placed whatever moto's figures say.

use std::collections::{BTreeSet, HashMap};

use serde_json::{json, Value};

use super::super::http::{self, HttpResponse};
use super::super::proxy::Call;
use super::*;

/// Of each MiB of an instance type, what ECS registers: 7482 of a c5.xlarge's 8192 (moto's
/// figure for every container instance, the same fraction for every type).
pub const REGISTERED_MEMORY_FRACTION: (i64, i64) = (7482, 8192);

/// What an instance with `vcpus` vCPUs and `memory_mib` MiB (as DescribeInstanceTypes says)
/// registers with ECS: 1024 CPU units a vCPU, and [`REGISTERED_MEMORY_FRACTION`] of its memory
/// (rounded down).
pub fn ecs_registers(vcpus: i64, memory_mib: i64) -> (i64, i64) {
    (vcpus * 1024, memory_mib * REGISTERED_MEMORY_FRACTION.0 / REGISTERED_MEMORY_FRACTION.1)
}

/// The operations whose answers carry container instances.
const ANSWERS_CONTAINER_INSTANCES: &[&str] = &[
    "DescribeContainerInstances",
    "RegisterContainerInstance",
    "DeregisterContainerInstance",
    "UpdateContainerInstancesState",
];

/// A resource's integer value in a `registeredResources` or `remainingResources` list.
fn resource(list: &Value, name: &str) -> Option<i64> {
    list.as_array()?.iter().find(|r| r["name"] == name)?["integerValue"].as_i64()
}

fn set_resource(list: &mut Value, name: &str, value: i64) {
    for r in list.as_array_mut().into_iter().flatten().filter(|r| r["name"] == name) {
        r["integerValue"] = json!(value);
    }
}

/// A container instance's type: its `ecs.instance-type` attribute.
fn instance_type(instance: &Value) -> Option<String> {
    let attributes = instance["attributes"].as_array()?;
    let attribute = attributes.iter().find(|a| a["name"] == "ecs.instance-type")?;
    attribute["value"].as_str().map(str::to_string)
}

/// Sets a container instance's registered CPU and memory to what its type registers (`registers`:
/// CPU units and MiB by type), and its remaining ones to those less what moto took for its tasks.
fn as_registered(instance: &mut Value, registers: &HashMap<String, (i64, i64)>) {
    let Some(&(cpu, memory)) = instance_type(instance).and_then(|t| registers.get(&t)) else {
        return;
    };
    for (name, total) in [("CPU", cpu), ("MEMORY", memory)] {
        let (Some(moto_total), Some(moto_remaining)) =
            (resource(&instance["registeredResources"], name), resource(&instance["remainingResources"], name))
        else {
            continue;
        };
        set_resource(&mut instance["registeredResources"], name, total);
        set_resource(&mut instance["remainingResources"], name, total - (moto_total - moto_remaining));
    }
}

impl AwsRules {
    /// Whether this call's answer is one [`AwsRules::container_instances_as_aws`] rewrites.
    pub(super) fn answers_container_instances(&self, call: &Call) -> bool {
        call.service == "ecs"
            && ANSWERS_CONTAINER_INSTANCES.contains(&call.operation.as_str())
            && self.on(CONTAINER_INSTANCE_RESOURCES)
    }

    /// moto's answer with each container instance's resources as ECS registers its type.
    pub(super) async fn container_instances_as_aws(&self, call: &Call, upstream: SocketAddr) -> HttpResponse {
        let answer = match http::send(upstream, &call.request).await {
            Ok(answer) if answer.status == 200 => answer,
            Ok(other) => return other,
            Err(e) => return HttpResponse::upstream_failed(&e),
        };
        let Ok(mut v) = serde_json::from_slice::<Value>(&answer.body) else {
            return answer;
        };
        let types: BTreeSet<String> = v["containerInstances"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(std::iter::once(&v["containerInstance"]))
            .filter_map(instance_type)
            .collect();
        let mut registers = HashMap::new();
        for t in types {
            if let Some(figures) = self.type_registers(call, upstream, &t).await {
                registers.insert(t, figures);
            }
        }
        if registers.is_empty() {
            return answer;
        }
        for instance in v["containerInstances"].as_array_mut().into_iter().flatten() {
            as_registered(instance, &registers);
        }
        if v["containerInstance"].is_object() {
            as_registered(&mut v["containerInstance"], &registers);
        }
        HttpResponse::aws_json(200, &v)
    }

    /// What an instance of this type registers with ECS, from moto's DescribeInstanceTypes;
    /// `None` when moto does not know the type.
    async fn type_registers(&self, call: &Call, upstream: SocketAddr, instance_type: &str) -> Option<(i64, i64)> {
        let first = |v: Option<Vec<String>>| v?.first()?.parse::<i64>().ok();
        let types = ("DescribeInstanceTypes", "InstanceType.1");
        let vcpus = first(self.described(call, upstream, types.0, types.1, instance_type, "defaultVCpus").await)?;
        // `memoryInfo`'s is the first `sizeInMiB` of a type (GPU memory comes after it).
        let mib = first(self.described(call, upstream, types.0, types.1, instance_type, "sizeInMiB").await)?;
        Some(ecs_registers(vcpus, mib))
    }
}
