//! Prices the table lacks, read from the AWS Price List while the plugin runs. When a job
//! completes on capacity whose price the cluster profile's table (the embedded one, with its
//! `PriceTable` file laid over it) does not hold — Fargate in a region or for an OS or
//! architecture, an EC2 instance type, gp3 — the engine asks the Price List Query API
//! (`pricing:GetProducts`, with the profile's credentials) for that one gap in that region.
//! What it answers fills the table's gaps for the rest of the process; it never replaces a
//! figure the table or the file holds. A gap asked for is not asked again for an hour, whatever
//! the answer (a role without the permission, a figure AWS does not list): the job's line then
//! says its price is not known and how to give one, as without this.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use crate::aws::pricing::PriceList;
use crate::aws::{AwsClients, AwsError};
use crate::cost::price_list::{ec2_filters, Collector, EC2_SERVICE, FARGATE_FILTERS, FARGATE_SERVICE, GP3_FILTERS};
use crate::cost::PriceTable;

/// How long a gap asked for is not asked for again.
pub const ASK_AGAIN_AFTER: Duration = Duration::from_secs(3600);

/// Where the figures read at run time come from, as the table's notes say it.
pub const SOURCE: &str = "the AWS Price List Query API (pricing:GetProducts), read while the plugin ran";

/// One price the table lacks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Gap {
    /// Fargate's figures in the region (every OS, architecture and storage: one query).
    Fargate,
    /// An EC2 instance type's on-demand Linux price.
    Ec2(String),
    /// gp3 storage per GB-month.
    Gp3,
}

/// What was read so far, and when each gap was asked for.
#[derive(Debug, Default)]
pub struct Filled {
    /// The figures read (none until the first answer).
    pub table: Option<PriceTable>,
    asked: HashMap<(String, Gap), SystemTime>,
}

impl Filled {
    /// The gaps of `wanted` in `region` not asked for in the last [`ASK_AGAIN_AFTER`]; they
    /// count as asked from `now`.
    pub fn to_ask(&mut self, region: &str, wanted: Vec<Gap>, now: SystemTime) -> Vec<Gap> {
        let fresh = |at: &SystemTime| now.duration_since(*at).unwrap_or_default() < ASK_AGAIN_AFTER;
        let mut out = Vec::new();
        for gap in wanted {
            let key = (region.to_string(), gap.clone());
            if self.asked.get(&key).is_some_and(fresh) || out.contains(&gap) {
                continue;
            }
            self.asked.insert(key, now);
            out.push(gap);
        }
        out
    }

    /// Adds figures read for `region`.
    pub fn add(&mut self, read: PriceTable) {
        self.table = Some(match self.table.take() {
            None => read,
            Some(before) => before.overlay(read),
        });
    }

    /// `base` with the figures read filling its gaps (`base`'s own figures kept).
    pub fn under(&self, base: PriceTable) -> PriceTable {
        match &self.table {
            None => base,
            Some(read) => read.clone().overlay(base),
        }
    }
}

/// The Price List's figures for `gap` in `region`, as a table dated `today`.
///
/// # Errors
/// The first GetProducts call that failed (refused without `pricing:GetProducts`).
pub async fn read(aws: &AwsClients, region: &str, gap: &Gap, today: &str) -> Result<PriceTable, AwsError> {
    let prices = PriceList::of(aws);
    let documents = match gap {
        Gap::Fargate => prices.products(FARGATE_SERVICE, &in_region(region, FARGATE_FILTERS)).await?,
        Gap::Gp3 => prices.products(EC2_SERVICE, &in_region(region, GP3_FILTERS)).await?,
        Gap::Ec2(instance_type) => {
            prices.products(EC2_SERVICE, &in_region(region, &ec2_filters(instance_type))).await?
        }
    };
    let mut collector = Collector::default();
    for document in &documents {
        collector.add(document);
    }
    let mut table = collector.finish(today.to_string(), SOURCE.to_string(), Vec::new());
    // Only the region asked for (a document of another region is not this gap's answer).
    table.fargate.retain(|r, _| r == region);
    table.ec2.retain(|r, _| r == region);
    table.gp3_gb_month.retain(|r, _| r == region);
    Ok(table)
}

/// The filters of `prices --refresh`'s query, narrowed to `region`.
fn in_region<'a>(region: &'a str, filters: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    std::iter::once(("regionCode", region)).chain(filters.iter().copied()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::price_list::tests::{ec2, fargate};

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
    }

    #[test]
    fn a_gap_is_asked_for_once_an_hour_per_region() {
        let mut filled = Filled::default();
        let wanted = vec![Gap::Fargate, Gap::Ec2("c5a.xlarge".into()), Gap::Fargate];
        assert_eq!(filled.to_ask("il-central-1", wanted.clone(), at(0)), [Gap::Fargate, Gap::Ec2("c5a.xlarge".into())]);
        assert!(filled.to_ask("il-central-1", wanted.clone(), at(3599)).is_empty(), "asked within the hour");
        assert_eq!(filled.to_ask("ca-west-1", vec![Gap::Fargate], at(10)), [Gap::Fargate], "another region");
        assert_eq!(filled.to_ask("il-central-1", wanted, at(3600)).len(), 2, "an hour later");
    }

    #[tokio::test]
    async fn a_fargate_gap_is_one_query_for_the_regions_usage_types() {
        let v = crate::aws::verifier::Verifier::default();
        let documents = [
            fargate("il-central-1", "ILC1-Fargate-vCPU-Hours:perCPU", "0.0499000000"),
            fargate("il-central-1", "ILC1-Fargate-ARM-GB-Hours", "0.0044000000"),
            fargate("ca-west-1", "CAW1-Fargate-vCPU-Hours:perCPU", "0.0450000000"),
        ];
        v.expect("GetProducts")
            .with(|c| {
                assert_eq!(c.json["ServiceCode"], "AmazonECS");
                let filters = serde_json::json!([
                    {"Type": "TERM_MATCH", "Field": "regionCode", "Value": "il-central-1"},
                    {"Type": "TERM_MATCH", "Field": "productFamily", "Value": "Compute"}
                ]);
                assert_eq!(c.json["Filters"], filters);
            })
            .answers(serde_json::json!({"FormatVersion": "aws_v1", "PriceList": documents}).to_string());
        let aws = crate::aws::fake_aws::clients_over(v.clone());
        let table = read(&aws, "il-central-1", &Gap::Fargate, "2026-12-06").await.unwrap_or_else(|e| panic!("{e}"));
        v.done();
        let israel = table.fargate("il-central-1").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(israel.x86.and_then(|r| r.vcpu_hour), Some(0.0499));
        assert_eq!(israel.arm64.and_then(|r| r.gb_hour), Some(0.0044));
        assert!(table.fargate("ca-west-1").is_err(), "only the region asked for");
        assert_eq!((table.date.as_str(), table.source.as_str()), ("2026-12-06", SOURCE));
    }

    #[test]
    fn figures_read_fill_gaps_and_never_replace_the_tables() {
        let mut collector = Collector::default();
        collector.add(&fargate("il-central-1", "ILC1-Fargate-vCPU-Hours:perCPU", "0.0499"));
        collector.add(&fargate("il-central-1", "ILC1-Fargate-GB-Hours", "0.0055"));
        collector.add(&ec2("us-east-1", "c5.xlarge", "Linux", "0.99"));
        let mut filled = Filled::default();
        filled.add(collector.finish("2026-12-06".into(), SOURCE.into(), Vec::new()));
        let table = filled.under(PriceTable::embedded());
        let x86 = table.fargate("il-central-1").ok().and_then(|f| f.x86);
        assert_eq!(x86.and_then(|r| r.vcpu_hour), Some(0.0499), "a gap filled");
        assert_eq!(table.ec2_hour("us-east-1", "c5.xlarge"), Ok(0.17), "the table's own figure kept");
        assert_eq!(table.date, PriceTable::embedded().date, "the table's date leads");
        assert!(table.notes.iter().any(|n| n.contains(SOURCE)), "the notes say what filled it");
        assert_eq!(Filled::default().under(PriceTable::embedded()), PriceTable::embedded());
    }
}
