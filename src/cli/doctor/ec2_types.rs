//! doctor's look at `Ec2InstanceType` and `Ec2AmiId`: every listed AMI exists (and its
//! architecture), every listed type exists in the region (its vCPUs, memory, architecture), and
//! every type has a listed AMI of its architecture; the same reading and the same words as the
//! plugin's own ([`crate::cluster::ec2::catalog`]).

use std::io;
use std::time::SystemTime;

use aws_sdk_ec2::types::InstanceType;

use super::checks::fix_for;
use super::{Aws, Report};
use crate::aws::{AwsError, Failure};
use crate::cluster::ec2::catalog::{self, Catalog};
use crate::cluster::ec2::{api, OsClass};
use crate::settings::Ec2Capacity;

/// Checks the listed AMIs and types; the catalog read (for the dry run's type and AMI).
pub(super) async fn check(aws: &Aws, capacity: &Ec2Capacity, r: &mut Report<'_>) -> io::Result<Catalog> {
    let call = aws.ec2.describe_images().set_image_ids(Some(capacity.ami_ids.clone())).send();
    let images = aws
        .call("DescribeImages", async { call.await.map_err(|e| AwsError::from_sdk("DescribeImages", &e)) })
        .await
        .map(|out| (api::ami_infos(&out), out));
    let amis = match &images {
        Ok((infos, out)) => {
            for id in &capacity.ami_ids {
                match (infos.iter().find(|a| &a.id == id), out.images().iter().find(|i| i.image_id() == Some(id))) {
                    (Some(info), Some(image)) => r.ok(
                        "ec2 image",
                        format!(
                            "AMI {id} exists: {} ({}{})",
                            image.name().unwrap_or("no name"),
                            info.arch.map_or("?", |a| a.as_str()),
                            if info.os == OsClass::Windows { ", Windows" } else { "" }
                        ),
                    )?,
                    _ => {
                        r.fail("ec2 image", format!("AMI {id} does not exist in {}", aws.region), ami_fix(&aws.region))?
                    }
                }
            }
            Ok(infos.clone())
        }
        Err(e) => {
            let fix = fix_for(e, "ec2:DescribeImages", ami_fix(&aws.region));
            let listed = capacity.ami_ids.join(", ");
            r.fail("ec2 image", format!("AMI {listed} cannot be used: {}", e.detail), fix)?;
            Err(e.clone())
        }
    };
    let wanted: Vec<InstanceType> = capacity.instance_types.iter().map(|t| InstanceType::from(t.as_str())).collect();
    let call = aws.ec2.describe_instance_types().set_instance_types(Some(wanted)).send();
    let types = aws
        .call("DescribeInstanceTypes", async {
            call.await.map_err(|e| AwsError::from_sdk("DescribeInstanceTypes", &e))
        })
        .await
        .map(|out| api::type_infos(&out));
    match &types {
        Ok(infos) => {
            for t in infos {
                let size = t
                    .capacity
                    .map_or(String::new(), |c| format!(", registers {} CPU units and {} MiB", c.cpu, c.memory));
                r.ok("ec2 instance type", format!("{} exists in {}: {}{size}", t.name, aws.region, t.arch.as_str()))?;
            }
        }
        Err(e) if e.failure == Failure::NotFound => {}
        Err(e) => r.fail(
            "ec2 instance type",
            format!("the instance types {} cannot be read: {}", capacity.instance_types.join(", "), e.detail),
            fix_for(e, "ec2:DescribeInstanceTypes", "correct Ec2InstanceType"),
        )?,
    }
    let read = catalog::build(capacity, &aws.region, types, amis, SystemTime::now());
    for problem in &read.problems {
        let finding = problem.trim_end_matches('.');
        r.fail("ec2 instance type", finding, "correct Ec2InstanceType and Ec2AmiId as the finding says")?;
    }
    Ok(read)
}

pub(super) fn ami_fix(region: &str) -> String {
    format!(
        "use an ECS-optimised AMI of {region} for each architecture: aws ssm get-parameters --names /aws/service/ecs/optimized-ami/amazon-linux-2023/recommended/image_id /aws/service/ecs/optimized-ami/amazon-linux-2023/arm64/recommended/image_id --region {region}"
    )
}
