//! The price table: what AWS charges per vCPU-hour, GB-hour and instance-hour, by region, with
//! its date and source; the embedded one ([`PriceTable::embedded`], `prices.json` beside this
//! file) and price files of the same format (a cluster profile's `PriceTable`, what
//! `prices --refresh` writes) laid over it ([`PriceTable::overlay`]).
//!
//! Every price is optional: a region or figure the table does not hold is absent, never zero,
//! and a lookup says which one is missing ([`NoPrice`]).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The embedded table, as JSON.
const EMBEDDED: &str = include_str!("prices.json");

/// Fargate's price for one OS and architecture, in one region.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FargateRate {
    /// USD per vCPU-hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcpu_hour: Option<f64>,
    /// USD per GB-hour of memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gb_hour: Option<f64>,
    /// USD per vCPU-hour of the OS licence (Windows only), on top of `vcpu_hour`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license_vcpu_hour: Option<f64>,
}

/// Fargate's prices in one region.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FargateRegion {
    /// Linux on x86_64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x86: Option<FargateRate>,
    /// Linux on ARM64 (Graviton).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm64: Option<FargateRate>,
    /// Windows (x86_64 only), with its licence fee.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<FargateRate>,
    /// USD per GB-hour of ephemeral storage beyond the free 20 GB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral_gb_hour: Option<f64>,
}

/// The whole table (the format of `prices.json` and of price files).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceTable {
    /// When the figures were taken (YYYY-MM-DD).
    pub date: String,
    /// Where they were taken from (URLs, or the Price List API).
    pub source: String,
    /// What was checked, what is left out and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The fraction Fargate Spot takes off the vCPU and memory price (0.7 = 70 % off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fargate_spot_discount: Option<f64>,
    /// The least a Windows task on Fargate is billed for, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fargate_windows_minimum_seconds: Option<u64>,
    /// Fargate, by region code.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fargate: BTreeMap<String, FargateRegion>,
    /// EC2 on demand, Linux, shared tenancy: region code → instance type → USD per hour.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ec2: BTreeMap<String, BTreeMap<String, f64>>,
    /// gp3 EBS storage: region code → USD per GB-month.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gp3_gb_month: BTreeMap<String, f64>,
}

/// A figure the table does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the price table has no {what} price for {region}")]
pub struct NoPrice {
    /// What was looked up, e.g. `Fargate Linux/ARM64 vCPU-hour`, `EC2 c5.xlarge`.
    pub what: String,
    /// The region.
    pub region: String,
}

/// A price file that could not be used, said for the operator who named it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadPriceFile(pub String);

impl PriceTable {
    /// The table compiled into the binary.
    ///
    /// # Panics
    /// Never once the unit tests pass: they parse and check the same text.
    pub fn embedded() -> PriceTable {
        PriceTable::parse(EMBEDDED).expect("the embedded price table is valid (unit tests)")
    }

    /// Reads a price table from JSON text, and checks its figures.
    ///
    /// # Errors
    /// Where the JSON does not fit the format (with the path of the bad field), or a price is
    /// negative or not a number, or the Spot discount is not a fraction.
    pub fn parse(text: &str) -> Result<PriceTable, BadPriceFile> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let table: PriceTable = serde_path_to_error::deserialize(de).map_err(|e| {
            // A path only means something once the text is JSON.
            let path = e.path().to_string();
            let data = e.inner().classify() == serde_json::error::Category::Data;
            let at = if data && path != "." { format!(" at {path}") } else { String::new() };
            BadPriceFile(format!("not a price table{at}: {}", e.inner()))
        })?;
        table.check()?;
        Ok(table)
    }

    /// Reads and checks the price file at `path`.
    ///
    /// # Errors
    /// The file cannot be read, or [`PriceTable::parse`] refuses it; the message names the file.
    pub fn load(path: &Path) -> Result<PriceTable, BadPriceFile> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| BadPriceFile(format!("cannot read the price file {}: {e}", path.display())))?;
        PriceTable::parse(&text).map_err(|BadPriceFile(why)| BadPriceFile(format!("{}: {why}", path.display())))
    }

    /// The embedded table with the price file at `path` laid over it.
    ///
    /// # Errors
    /// As [`PriceTable::load`].
    pub fn embedded_with(path: &Path) -> Result<PriceTable, BadPriceFile> {
        Ok(PriceTable::embedded().overlay(PriceTable::load(path)?))
    }

    /// This table with `over` laid on it: every figure `over` holds replaces this one's, every
    /// other figure stays; `over`'s date and source lead, this table's notes follow its own.
    #[must_use]
    pub fn overlay(mut self, over: PriceTable) -> PriceTable {
        let mut notes = over.notes;
        notes.push(format!("Laid over the table of {} ({}).", self.date, self.source));
        notes.append(&mut self.notes);
        self.notes = notes;
        self.date = over.date;
        self.source = over.source;
        self.fargate_spot_discount = over.fargate_spot_discount.or(self.fargate_spot_discount);
        self.fargate_windows_minimum_seconds =
            over.fargate_windows_minimum_seconds.or(self.fargate_windows_minimum_seconds);
        for (region, top) in over.fargate {
            let base = self.fargate.entry(region).or_default();
            base.x86 = merge_rate(base.x86, top.x86);
            base.arm64 = merge_rate(base.arm64, top.arm64);
            base.windows = merge_rate(base.windows, top.windows);
            base.ephemeral_gb_hour = top.ephemeral_gb_hour.or(base.ephemeral_gb_hour);
        }
        for (region, types) in over.ec2 {
            self.ec2.entry(region).or_default().extend(types);
        }
        self.gp3_gb_month.extend(over.gp3_gb_month);
        self
    }

    /// Fargate's prices in `region`.
    ///
    /// # Errors
    /// The table has no Fargate price there.
    pub fn fargate(&self, region: &str) -> Result<&FargateRegion, NoPrice> {
        self.fargate.get(region).ok_or_else(|| NoPrice { what: "Fargate".into(), region: region.into() })
    }

    /// An EC2 instance type's on-demand Linux price per hour in `region`.
    ///
    /// # Errors
    /// The table has no price for that type there.
    pub fn ec2_hour(&self, region: &str, instance_type: &str) -> Result<f64, NoPrice> {
        self.ec2
            .get(region)
            .and_then(|types| types.get(instance_type))
            .copied()
            .ok_or_else(|| NoPrice { what: format!("EC2 {instance_type}"), region: region.into() })
    }

    /// gp3 storage per GB-month in `region`.
    ///
    /// # Errors
    /// The table has no gp3 price there.
    pub fn gp3_gb_month(&self, region: &str) -> Result<f64, NoPrice> {
        self.gp3_gb_month
            .get(region)
            .copied()
            .ok_or_else(|| NoPrice { what: "gp3 GB-month".into(), region: region.into() })
    }

    /// The table as a price file (pretty JSON, one figure a line).
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Refuses negative or non-finite prices and a Spot discount outside 0..=1.
    fn check(&self) -> Result<(), BadPriceFile> {
        let bad =
            |what: String, v: f64| BadPriceFile(format!("{what} is {v}: a price must be a number of USD, 0 or more"));
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        if let Some(d) = self.fargate_spot_discount {
            if !(0.0..=1.0).contains(&d) {
                return Err(BadPriceFile(format!(
                    "fargate_spot_discount is {d}: give the fraction Spot takes off, from 0 to 1 (0.7 for 70 % off)"
                )));
            }
        }
        for (region, r) in &self.fargate {
            let rates = [("x86", r.x86), ("arm64", r.arm64), ("windows", r.windows)];
            for (name, rate) in rates {
                let Some(rate) = rate else { continue };
                for (field, v) in [
                    ("vcpu_hour", rate.vcpu_hour),
                    ("gb_hour", rate.gb_hour),
                    ("license_vcpu_hour", rate.license_vcpu_hour),
                ] {
                    match v {
                        Some(v) if !ok(v) => return Err(bad(format!("fargate.{region}.{name}.{field}"), v)),
                        _ => {}
                    }
                }
            }
            match r.ephemeral_gb_hour {
                Some(v) if !ok(v) => return Err(bad(format!("fargate.{region}.ephemeral_gb_hour"), v)),
                _ => {}
            }
        }
        for (region, types) in &self.ec2 {
            if let Some((t, v)) = types.iter().find(|(_, v)| !ok(**v)) {
                return Err(bad(format!("ec2.{region}.{t}"), *v));
            }
        }
        if let Some((region, v)) = self.gp3_gb_month.iter().find(|(_, v)| !ok(**v)) {
            return Err(bad(format!("gp3_gb_month.{region}"), *v));
        }
        Ok(())
    }
}

/// `top`'s figures over `base`'s, field by field.
fn merge_rate(base: Option<FargateRate>, top: Option<FargateRate>) -> Option<FargateRate> {
    match (base, top) {
        (Some(b), Some(t)) => Some(FargateRate {
            vcpu_hour: t.vcpu_hour.or(b.vcpu_hour),
            gb_hour: t.gb_hour.or(b.gb_hour),
            license_vcpu_hour: t.license_vcpu_hour.or(b.license_vcpu_hour),
        }),
        (b, t) => t.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_table_parses_and_says_when_and_where_from() {
        let t = PriceTable::embedded();
        assert!(t.date.len() == 10 && t.date.starts_with("20"), "{}", t.date);
        assert!(t.source.contains("https://aws.amazon.com/fargate/pricing/"), "{}", t.source);
        assert!(!t.notes.is_empty());
        let east = t.fargate("us-east-1").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(east.x86.and_then(|r| r.vcpu_hour), Some(0.04048));
        assert_eq!(east.x86.and_then(|r| r.gb_hour), Some(0.004445));
        assert_eq!(t.ec2_hour("us-east-1", "c5.xlarge"), Ok(0.17));
        assert_eq!(t.gp3_gb_month("us-east-1"), Ok(0.08));
    }

    #[test]
    fn the_embedded_table_covers_the_common_instance_types_in_the_biggest_regions() {
        let t = PriceTable::embedded();
        let regions =
            ["us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-1", "ap-northeast-1"];
        for region in regions {
            let families = [
                "c5", "c6a", "c6g", "c6i", "c7a", "c7g", "c7i", "c8g", "m5", "m6a", "m6g", "m6i", "m7g", "m7i", "m8g",
                "r5", "r6g", "r6i", "r7g", "r7i", "r8g", "t3", "t3a", "t4g",
            ];
            for family in families {
                let sizes: &[&str] = if family.starts_with('t') {
                    &["large", "xlarge", "2xlarge"]
                } else {
                    &["large", "xlarge", "2xlarge", "4xlarge"]
                };
                let mut last = 0.0;
                for size in sizes {
                    let price = t.ec2_hour(region, &format!("{family}.{size}")).unwrap_or_else(|e| panic!("{e}"));
                    assert!(price > last, "{region} {family}.{size} costs more than the size below it");
                    last = price;
                }
            }
        }
    }

    #[test]
    fn the_embedded_table_holds_the_checked_regional_figures_and_leaves_the_rest_absent() {
        let t = PriceTable::embedded();
        for (region, fargate) in &t.fargate {
            let x86 = fargate.x86.unwrap_or_else(|| panic!("{region} has no Linux/x86 figures"));
            assert!(x86.vcpu_hour.is_some() && x86.gb_hour.is_some(), "{region}: both or neither");
        }
        let x86 = |region: &str| t.fargate(region).ok().and_then(|f| f.x86).and_then(|r| r.vcpu_hour);
        assert_eq!(x86("eu-central-1"), Some(0.04656));
        assert_eq!(x86("ap-northeast-1"), Some(0.05056));
        let arm = |region: &str| t.fargate(region).ok().and_then(|f| f.arm64).and_then(|r| r.vcpu_hour);
        assert_eq!(arm("eu-west-1"), Some(0.03238));
        assert_eq!(t.ec2_hour("eu-west-1", "c5.xlarge"), Ok(0.192));
        assert_eq!(t.ec2_hour("eu-west-2", "c5.xlarge"), Ok(0.202));
        assert_eq!(t.ec2_hour("us-west-1", "m6i.large"), Ok(0.112));
        assert_eq!(t.ec2_hour("ca-west-1", "c7g.xlarge"), Ok(0.1581));
        assert_eq!(t.gp3_gb_month("us-west-2"), Ok(0.08));
        assert_eq!(arm("us-west-2"), Some(0.03238));
        assert_eq!(t.fargate("us-west-2").ok().and_then(|f| f.arm64).and_then(|r| r.gb_hour), Some(0.00356));
        assert_eq!(t.gp3_gb_month("eu-central-1"), Ok(0.0952));
        // No transcription was found for these: absent, never guessed.
        assert!(t.fargate("ap-southeast-7").is_err());
        assert!(t.fargate("il-central-1").is_err());
        assert!(t.ec2_hour("mx-central-1", "c5.large").is_err(), "not offered there: no row");
        assert!(t.ec2_hour("me-central-1", "c7g.large").is_err(), "its source had no row");
    }

    #[test]
    fn a_missing_price_is_named_not_zero() {
        let t = PriceTable::embedded();
        let e = t.ec2_hour("us-east-1", "x9.huge").expect_err("no such type");
        assert_eq!(e.to_string(), "the price table has no EC2 x9.huge price for us-east-1");
        assert!(t.fargate("mars-east-1").is_err());
    }

    #[test]
    fn a_price_file_overrides_and_extends_figure_by_figure() {
        let over = PriceTable::parse(
            r#"{"date": "2027-01-01", "source": "ours", "fargate_spot_discount": 0.5,
                "fargate": {"us-east-1": {"x86": {"vcpu_hour": 0.05}}, "eu-west-1": {"x86": {"vcpu_hour": 0.04, "gb_hour": 0.004}}},
                "ec2": {"us-east-1": {"c5.xlarge": 0.2}, "eu-west-1": {"c5.xlarge": 0.192}}}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let t = PriceTable::embedded().overlay(over);
        assert_eq!((t.date.as_str(), t.source.as_str()), ("2027-01-01", "ours"));
        let east = t.fargate("us-east-1").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(east.x86.and_then(|r| r.vcpu_hour), Some(0.05), "replaced");
        assert_eq!(east.x86.and_then(|r| r.gb_hour), Some(0.004445), "kept");
        assert_eq!(east.arm64.and_then(|r| r.vcpu_hour), Some(0.03238), "kept");
        assert!(t.fargate("eu-west-1").is_ok(), "added");
        assert_eq!(t.ec2_hour("us-east-1", "c5.xlarge"), Ok(0.2));
        assert_eq!(t.ec2_hour("us-east-1", "m5.large"), Ok(0.096));
        assert_eq!(t.ec2_hour("eu-west-1", "c5.xlarge"), Ok(0.192));
        assert_eq!(t.fargate_spot_discount, Some(0.5));
        assert_eq!(t.fargate_windows_minimum_seconds, Some(900));
        assert!(t.notes.iter().any(|n| n.starts_with("Laid over the table of")));
    }

    #[test]
    fn a_bad_price_file_says_what_to_fix() {
        let cases = [
            ("{", "not a price table: EOF"),
            ("[date = 1]", "not a price table: expected value"),
            (r#"{"date": "x"}"#, "missing field `source`"),
            (r#"{"date": "x", "source": "y", "ec2": {"us-east-1": {"c5.large": "0.1"}}}"#, "at ec2.us-east-1.c5.large"),
            (r#"{"date": "x", "source": "y", "fargate": {"us-east-1": {"x86": {"vcpu": 1}}}}"#, "unknown field `vcpu`"),
            (r#"{"date": "x", "source": "y", "ec2": {"us-east-1": {"c5.large": -1}}}"#, "ec2.us-east-1.c5.large is -1"),
            (r#"{"date": "x", "source": "y", "fargate_spot_discount": 70}"#, "from 0 to 1"),
        ];
        for (text, expected) in cases {
            let e = PriceTable::parse(text).expect_err(text);
            assert!(e.to_string().contains(expected), "{text}: {e}");
        }
    }

    #[test]
    fn a_price_file_round_trips_and_a_missing_one_is_named() {
        let t = PriceTable::embedded();
        assert_eq!(PriceTable::parse(&t.to_json()), Ok(t));
        let e = PriceTable::load(Path::new("no-such-prices.json")).expect_err("missing");
        assert!(e.to_string().starts_with("cannot read the price file no-such-prices.json"), "{e}");
    }
}
