//! AWS's billing rules, as pure functions of a size, a region, an interval and the
//! [`PriceTable`]:
//!
//! - Fargate bills a task from the start of its image pull (ECS's `pullStartedAt`; `startedAt`
//!   when the pull time is missing) to its stop (`stoppedAt`), per second, rounded up, with a
//!   one-minute minimum on Linux and the table's Windows minimum (15 minutes) on Windows; per
//!   vCPU-hour and GB-hour of the task's size, plus Windows' licence fee per vCPU-hour, plus
//!   ephemeral storage beyond the free 20 GB. Fargate Spot takes the table's discount off vCPU
//!   and memory (not off storage).
//! - EC2 Linux instances bill per second, with a one-minute minimum, from launch to termination,
//!   plus their gp3 volumes per GB-month (prorated per second over a 30-day month).

use std::time::SystemTime;

use super::prices::{NoPrice, PriceTable};
use crate::platform::{Arch, OsClass};

/// Linux's least billed time on Fargate and EC2, in seconds.
pub const LINUX_MINIMUM_SECONDS: u64 = 60;
/// Ephemeral storage every Fargate task has without charge, in GB.
pub const FREE_EPHEMERAL_GB: f64 = 20.0;
/// Hours in the month EBS prorates its GB-month over (30 days).
pub const EBS_MONTH_HOURS: f64 = 30.0 * 24.0;

/// The price a Fargate task was billed at: on demand, or Spot's discount. (Where a task runs,
/// Fargate, Spot, an instance or a provider, is `cluster::agents::tasks::Capacity`; this is only
/// what the bill needs of it.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Market {
    /// Fargate on demand.
    Fargate,
    /// Fargate Spot.
    FargateSpot,
}

/// What a Fargate task was billed for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TaskSize {
    /// vCPUs (the task's CPU units / 1024).
    pub vcpu: f64,
    /// Memory in GB (the task's MiB / 1024).
    pub memory_gb: f64,
    /// Ephemeral storage in GB (20 unless the task asked for more).
    pub ephemeral_gb: f64,
    /// CPU architecture.
    pub arch: Arch,
    /// Operating system.
    pub os: OsClass,
    /// On demand or Spot.
    pub market: Market,
}

impl TaskSize {
    /// A task of ECS's `cpu` units and `memory` MiB, on Linux x86 Fargate on demand with the
    /// free 20 GB of storage.
    pub fn linux(cpu_units: u32, memory_mib: u32) -> TaskSize {
        TaskSize {
            vcpu: f64::from(cpu_units) / 1024.0,
            memory_gb: f64::from(memory_mib) / 1024.0,
            ephemeral_gb: FREE_EPHEMERAL_GB,
            arch: Arch::X86_64,
            os: OsClass::Linux,
            market: Market::Fargate,
        }
    }
}

/// Why a cost could not be worked out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CostError {
    /// The table lacks a figure.
    #[error(transparent)]
    NoPrice(#[from] NoPrice),
    /// Windows does not run on ARM64 on Fargate.
    #[error("Fargate runs Windows on x86_64 only")]
    WindowsOnArm,
}

/// The start of a Fargate task's billing: `pullStartedAt`, else `startedAt`.
pub fn fargate_billing_start(
    pull_started_at: Option<SystemTime>,
    started_at: Option<SystemTime>,
) -> Option<SystemTime> {
    pull_started_at.or(started_at)
}

/// Whole seconds billed for `start..stop` with a least of `minimum` (rounded up; a stop before
/// the start counts as no time).
pub fn billed_seconds(start: SystemTime, stop: SystemTime, minimum: u64) -> u64 {
    let ran = stop.duration_since(start).unwrap_or_default();
    let seconds = ran.as_secs() + u64::from(ran.subsec_nanos() > 0);
    seconds.max(minimum)
}

/// What a Fargate task of `size` in `region` costs for `start..stop`, in USD.
///
/// # Errors
/// The table lacks a figure this task needs, or the size is impossible (Windows on ARM64).
pub fn fargate_task_cost(
    table: &PriceTable,
    size: &TaskSize,
    region: &str,
    start: SystemTime,
    stop: SystemTime,
) -> Result<f64, CostError> {
    let (hourly, minimum) = fargate_hourly(table, size, region)?;
    Ok(hourly * billed_seconds(start, stop, minimum) as f64 / 3600.0)
}

/// What a Fargate task of `size` in `region` costs an hour, in USD, and the least seconds AWS
/// bills a task of it (60 on Linux, the table's Windows minimum on Windows).
///
/// # Errors
/// As [`fargate_task_cost`].
pub fn fargate_hourly(table: &PriceTable, size: &TaskSize, region: &str) -> Result<(f64, u64), CostError> {
    let prices = table.fargate(region)?;
    let missing = |what: &str| NoPrice { what: format!("Fargate {what}"), region: region.into() };
    let (rate, name, minimum) = match (size.os, size.arch) {
        (OsClass::Windows, Arch::Arm64) => return Err(CostError::WindowsOnArm),
        (OsClass::Windows, Arch::X86_64) => (
            prices.windows,
            "Windows",
            table.fargate_windows_minimum_seconds.ok_or_else(|| missing("Windows minimum"))?,
        ),
        (OsClass::Linux, Arch::X86_64) => (prices.x86, "Linux/x86", LINUX_MINIMUM_SECONDS),
        (OsClass::Linux, Arch::Arm64) => (prices.arm64, "Linux/ARM64", LINUX_MINIMUM_SECONDS),
    };
    let rate = rate.ok_or_else(|| missing(name))?;
    let vcpu_hour = rate.vcpu_hour.ok_or_else(|| missing(&format!("{name} vCPU-hour")))?;
    let gb_hour = rate.gb_hour.ok_or_else(|| missing(&format!("{name} GB-hour")))?;
    let license = match size.os {
        OsClass::Windows => rate.license_vcpu_hour.ok_or_else(|| missing("Windows licence vCPU-hour"))?,
        OsClass::Linux => 0.0,
    };
    let extra_storage = (size.ephemeral_gb - FREE_EPHEMERAL_GB).max(0.0);
    let storage = if extra_storage > 0.0 {
        extra_storage * prices.ephemeral_gb_hour.ok_or_else(|| missing("ephemeral storage GB-hour"))?
    } else {
        0.0
    };
    let spot = match size.market {
        Market::Fargate => 1.0,
        Market::FargateSpot => 1.0 - table.fargate_spot_discount.ok_or_else(|| missing("Spot discount"))?,
    };
    let compute = size.vcpu * vcpu_hour + size.memory_gb * gb_hour;
    Ok((compute * spot + size.vcpu * license + storage, minimum))
}

/// What `gp3_gb` GB of gp3 volumes cost an hour in `region`, in USD (the GB-month prorated over
/// a 30-day month, as EBS bills it).
///
/// # Errors
/// The table has no gp3 price there (nothing is asked of it when `gp3_gb` is 0).
pub fn gp3_hourly(table: &PriceTable, region: &str, gp3_gb: u32) -> Result<f64, CostError> {
    if gp3_gb == 0 {
        return Ok(0.0);
    }
    Ok(f64::from(gp3_gb) * table.gp3_gb_month(region)? / EBS_MONTH_HOURS)
}

/// What an EC2 Linux instance of `instance_type` in `region` with `gp3_gb` GB of gp3 volumes
/// costs from `launch` to `stop`, in USD.
///
/// # Errors
/// The table lacks the type's price there (or the gp3 price, when `gp3_gb` is not 0).
pub fn ec2_instance_cost(
    table: &PriceTable,
    region: &str,
    instance_type: &str,
    gp3_gb: u32,
    launch: SystemTime,
    stop: SystemTime,
) -> Result<f64, CostError> {
    let hour = table.ec2_hour(region, instance_type)?;
    let storage = gp3_hourly(table, region, gp3_gb)?;
    let hours = billed_seconds(launch, stop, LINUX_MINIMUM_SECONDS) as f64 / 3600.0;
    Ok(hours * (hour + storage))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(seconds: f64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000) + Duration::from_secs_f64(seconds)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    fn cost(size: &TaskSize, seconds: f64) -> f64 {
        fargate_task_cost(&PriceTable::embedded(), size, "us-east-1", at(0.0), at(seconds))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn linux_fargate_bills_each_second_rounded_up() {
        let size = TaskSize::linux(1024, 2048);
        // 1 vCPU × 0.04048 + 2 GB × 0.004445 = 0.04937 an hour.
        assert!(close(cost(&size, 3600.0), 0.04937));
        assert!(close(cost(&size, 432.0), 0.04937 * 432.0 / 3600.0));
        assert!(close(cost(&size, 431.2), 0.04937 * 432.0 / 3600.0), "a started second is a second");
    }

    #[test]
    fn linux_fargate_bills_a_minute_at_least() {
        let size = TaskSize::linux(256, 512);
        let minute = cost(&size, 60.0);
        assert!(close(cost(&size, 1.0), minute));
        assert!(close(cost(&size, 0.0), minute), "a task that stopped as it started");
        assert!(cost(&size, 61.0) > minute);
    }

    #[test]
    fn windows_fargate_adds_its_licence_and_bills_fifteen_minutes_at_least() {
        let size = TaskSize { os: OsClass::Windows, ..TaskSize::linux(1024, 2048) };
        let hour = 0.046552 + 2.0 * 0.00511175 + 0.046;
        assert!(close(cost(&size, 3600.0), hour));
        assert!(close(cost(&size, 120.0), hour * 900.0 / 3600.0));
        assert!(close(cost(&size, 901.0), hour * 901.0 / 3600.0));
        let arm = TaskSize { arch: Arch::Arm64, ..size };
        let e = fargate_task_cost(&PriceTable::embedded(), &arm, "us-east-1", at(0.0), at(60.0));
        assert_eq!(e, Err(CostError::WindowsOnArm));
    }

    #[test]
    fn arm64_has_its_own_price() {
        let size = TaskSize { arch: Arch::Arm64, ..TaskSize::linux(2048, 4096) };
        assert!(close(cost(&size, 3600.0), 2.0 * 0.03238 + 4.0 * 0.00356));
    }

    #[test]
    fn storage_beyond_twenty_gb_is_billed_and_not_discounted_on_spot() {
        let plain = TaskSize::linux(1024, 2048);
        let big = TaskSize { ephemeral_gb: 50.0, ..plain };
        assert!(close(cost(&big, 3600.0) - cost(&plain, 3600.0), 30.0 * 0.000111));
        let spot = TaskSize { market: Market::FargateSpot, ..big };
        assert!(close(cost(&spot, 3600.0), 0.04937 * 0.3 + 30.0 * 0.000111));
    }

    #[test]
    fn the_spot_discount_comes_from_the_table() {
        let size = TaskSize { market: Market::FargateSpot, ..TaskSize::linux(1024, 2048) };
        let mut table = PriceTable::embedded();
        table.fargate_spot_discount = Some(0.5);
        let half = fargate_task_cost(&table, &size, "us-east-1", at(0.0), at(3600.0));
        assert!(half.is_ok_and(|c| close(c, 0.04937 / 2.0)));
        assert!(close(cost(&size, 30.0), 0.04937 * 0.3 / 60.0), "the minute minimum holds on Spot");
    }

    #[test]
    fn billing_starts_at_the_pull_else_at_the_start() {
        assert_eq!(fargate_billing_start(Some(at(5.0)), Some(at(40.0))), Some(at(5.0)));
        assert_eq!(fargate_billing_start(None, Some(at(40.0))), Some(at(40.0)));
        assert_eq!(fargate_billing_start(None, None), None);
    }

    #[test]
    fn a_region_or_figure_the_table_lacks_is_an_error_naming_it() {
        let table = PriceTable::embedded();
        let size = TaskSize::linux(1024, 2048);
        let e = fargate_task_cost(&table, &size, "xx-nowhere-1", at(0.0), at(60.0)).expect_err("no region");
        assert_eq!(e.to_string(), "the price table has no Fargate price for xx-nowhere-1");
        let arm_only = PriceTable::parse(
            r#"{"date": "x", "source": "y",
                "fargate": {"xx-armonly-1": {"arm64": {"vcpu_hour": 0.03725, "gb_hour": 0.00409}}}}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let e = fargate_task_cost(&arm_only, &size, "xx-armonly-1", at(0.0), at(60.0)).expect_err("no x86 there");
        assert_eq!(e.to_string(), "the price table has no Fargate Linux/x86 price for xx-armonly-1");
    }

    #[test]
    fn an_ec2_instance_bills_per_second_with_a_minute_minimum_and_its_volume() {
        let table = PriceTable::embedded();
        let c = |gb, seconds| {
            ec2_instance_cost(&table, "us-east-1", "c5.xlarge", gb, at(0.0), at(seconds))
                .unwrap_or_else(|e| panic!("{e}"))
        };
        assert!(close(c(0, 3600.0), 0.17));
        assert!(close(c(0, 10.0), 0.17 / 60.0));
        assert!(close(c(30, 3600.0), 0.17 + 30.0 * 0.08 / 720.0));
        let e = ec2_instance_cost(&table, "us-east-1", "c5.24xlarge", 0, at(0.0), at(60.0)).expect_err("not listed");
        assert_eq!(e.to_string(), "the price table has no EC2 c5.24xlarge price for us-east-1");
    }
}
