//! doctor's look at `Ec2InstanceType` and `Ec2AmiId`: every listed AMI exists (and its
//! architecture), every listed type exists in the region (its vCPUs, memory, architecture), and
//! every type has a listed AMI of its architecture; the same reading and the same words as the
//! plugin's own ([`crate::cluster::capacity::ec2::catalog`]).

use std::io;
use std::time::SystemTime;

use super::fix::fix_for;
use super::{Aws, Report};
use crate::aws::Failure;
use crate::cluster::capacity::ec2::catalog::{self, Catalog};
use crate::cluster::capacity::ec2::OsClass;
use crate::settings::Ec2Capacity;

/// Checks the listed AMIs and types; the catalog read (for the dry run's type and AMI).
pub(super) async fn check(aws: &Aws, capacity: &Ec2Capacity, r: &mut Report<'_>) -> io::Result<Catalog> {
    let images = aws.describe_images(&capacity.ami_ids).await;
    let amis = match &images {
        Ok(images) => {
            for id in &capacity.ami_ids {
                match images.iter().find(|i| &i.info.id == id) {
                    Some(image) => r.ok(
                        "ec2 image",
                        format!(
                            "AMI {id} exists: {} ({}{})",
                            image.name.as_deref().unwrap_or("no name"),
                            image.info.arch.map_or("?", |a| a.as_str()),
                            if image.info.os == OsClass::Windows { ", Windows" } else { "" }
                        ),
                    )?,
                    _ => {
                        r.fail("ec2 image", format!("AMI {id} does not exist in {}", aws.region), ami_fix(&aws.region))?
                    }
                }
            }
            Ok(images.iter().map(|i| i.info.clone()).collect())
        }
        Err(e) => {
            let fix = fix_for(e, "ec2:DescribeImages", ami_fix(&aws.region));
            let listed = capacity.ami_ids.join(", ");
            r.fail("ec2 image", format!("AMI {listed} cannot be used: {}", e.detail), fix)?;
            Err(e.clone())
        }
    };
    let types = aws.describe_instance_types(&capacity.instance_types).await;
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
