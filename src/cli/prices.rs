//! `prices`: the price table the cost figures use — the embedded one, or a price file laid over
//! it (`--price-table`, as a cluster profile's `PriceTable`) — printed as a price file; and
//! `prices --refresh --out FILE`, which reads the AWS Price List Query API through the port
//! (`aws::pricing`, `pricing:GetProducts` in us-east-1) and writes a price file of every
//! region's Fargate prices and the listed EC2 types' and gp3 prices.

use std::collections::BTreeSet;
use std::io::{self, Write};

use super::PricesArgs;
use crate::aws::pricing::PriceList;
use crate::aws::AwsError;
use crate::cost::price_list::{ec2_filters, Collector, EC2_SERVICE, FARGATE_FILTERS, FARGATE_SERVICE, GP3_FILTERS};
use crate::cost::PriceTable;

/// Where a refreshed table's figures come from.
pub const REFRESH_SOURCE: &str =
    "AWS Price List Query API (pricing:GetProducts, service codes AmazonECS and AmazonEC2), https://api.pricing.us-east-1.amazonaws.com";

/// Runs `prices`; `Ok(true)` when the table was printed or written.
///
/// # Errors
/// Only when writing to `out` fails.
pub async fn run(args: &PricesArgs, out: &mut dyn Write) -> io::Result<bool> {
    let base = match &args.price_table {
        Some(path) => match PriceTable::embedded_with(path) {
            Ok(table) => table,
            Err(e) => {
                writeln!(out, "{e}")?;
                return Ok(false);
            }
        },
        None => PriceTable::embedded(),
    };
    if !args.refresh {
        out.write_all(base.to_json().as_bytes())?;
        return Ok(true);
    }
    let Some(path) = &args.out else {
        writeln!(out, "prices --refresh needs --out FILE: where to write the price file")?;
        return Ok(false);
    };
    let types = instance_types(&base, &args.instance_types);
    let today = jiff::Timestamp::now().strftime("%Y-%m-%d").to_string();
    match refresh(&PriceList::from_environment().await, &base, &types, &today).await {
        Ok(table) => match std::fs::write(path, table.to_json()) {
            Ok(()) => {
                let notes = table.notes.first().cloned().unwrap_or_default();
                writeln!(out, "{}: written ({notes})", path.display())?;
                Ok(true)
            }
            Err(e) => {
                writeln!(out, "cannot write {}: {e}", path.display())?;
                Ok(false)
            }
        },
        Err(e) => {
            writeln!(
                out,
                "{e}\nThe refresh needs pricing:GetProducts (an optional permission, not part of the plugin's policy) \
                 with the SDK's default credentials (AWS_PROFILE, environment, instance role)."
            )?;
            Ok(false)
        }
    }
}

/// The EC2 types to refresh: those the table holds in any region, and `extra`.
fn instance_types(table: &PriceTable, extra: &[String]) -> BTreeSet<String> {
    table.ec2.values().flat_map(|types| types.keys().cloned()).chain(extra.iter().cloned()).collect()
}

/// A price file from the Price List: Fargate in every region AWS lists (one paginated query),
/// gp3 in every region, and each of `types` (one query each: Linux, shared tenancy, no
/// pre-installed software). Spot's discount and Windows' minimum are not in the Price List:
/// they are `base`'s.
///
/// # Errors
/// The first call that failed.
pub async fn refresh(
    prices: &PriceList,
    base: &PriceTable,
    types: &BTreeSet<String>,
    today: &str,
) -> Result<PriceTable, AwsError> {
    let mut collector = Collector::default();
    for doc in prices.products(FARGATE_SERVICE, FARGATE_FILTERS).await? {
        collector.add(&doc);
    }
    for doc in prices.products(EC2_SERVICE, GP3_FILTERS).await? {
        collector.add(&doc);
    }
    for instance_type in types {
        for doc in prices.products(EC2_SERVICE, &ec2_filters(instance_type)).await? {
            collector.add(&doc);
        }
    }
    let notes = vec![
        format!(
            "{} Price List products read, {} skipped; {} EC2 types asked for.",
            collector.used,
            collector.skipped,
            types.len()
        ),
        "Prices in USD, on demand, Linux EC2 with shared tenancy, before taxes and discounts.".to_string(),
        "fargate_spot_discount and fargate_windows_minimum_seconds are not in the Price List: copied from the table refreshed."
            .to_string(),
    ];
    let mut table = collector.finish(today.to_string(), REFRESH_SOURCE.to_string(), notes);
    table.fargate_spot_discount = base.fargate_spot_discount;
    table.fargate_windows_minimum_seconds = base.fargate_windows_minimum_seconds;
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::verifier::Verifier;
    use crate::cost::price_list::tests::{document, ec2, fargate};

    fn page(documents: &[String], next: Option<&str>) -> String {
        let mut body = serde_json::json!({"FormatVersion": "aws_v1", "PriceList": documents});
        if let Some(next) = next {
            body["NextToken"] = next.into();
        }
        body.to_string()
    }

    #[tokio::test]
    async fn refresh_reads_fargate_gp3_and_each_type_into_a_price_file() {
        let v = Verifier::default();
        v.expect("GetProducts")
            .with(|c| assert_eq!(c.json["ServiceCode"], "AmazonECS"))
            .answers(page(&[fargate("eu-west-1", "EUW1-Fargate-vCPU-Hours:perCPU", "0.0404800000")], Some("t2")));
        v.expect("GetProducts")
            .with(|c| assert_eq!(c.json["NextToken"], "t2"))
            .answers(page(&[fargate("eu-west-1", "EUW1-Fargate-GB-Hours", "0.0044450000")], None));
        v.expect("GetProducts").with(|c| assert_eq!(c.json["Filters"][1]["Value"], "gp3")).answers(page(
            &[document("Storage", &[("regionCode", "eu-west-1"), ("volumeApiName", "gp3")], "0.0880000000")],
            None,
        ));
        v.expect("GetProducts")
            .with(|c| {
                assert_eq!(
                    c.json["Filters"][0],
                    serde_json::json!({"Type": "TERM_MATCH", "Field": "instanceType", "Value": "c5.xlarge"})
                )
            })
            .answers(page(&[ec2("eu-west-1", "c5.xlarge", "Linux", "0.1920000000")], None));
        let types = BTreeSet::from(["c5.xlarge".to_string()]);
        let table = refresh(&PriceList::over(v.clone()), &PriceTable::embedded(), &types, "2026-12-03").await;
        v.done();
        let table = table.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((table.date.as_str(), table.source.as_str()), ("2026-12-03", REFRESH_SOURCE));
        let west = table.fargate("eu-west-1").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(west.x86.and_then(|r| r.gb_hour), Some(0.004445));
        assert_eq!(table.ec2_hour("eu-west-1", "c5.xlarge"), Ok(0.192));
        assert_eq!(table.gp3_gb_month("eu-west-1"), Ok(0.088));
        assert_eq!(table.fargate_spot_discount, Some(0.7));
        assert_eq!(PriceTable::parse(&table.to_json()), Ok(table), "what is written reads back");
    }

    #[tokio::test]
    async fn a_denied_refresh_stops_at_the_first_call() {
        let v = Verifier::default();
        v.expect("GetProducts").fails(
            400,
            "AccessDeniedException",
            "User is not authorized to perform: pricing:GetProducts",
        );
        let e = refresh(&PriceList::over(v.clone()), &PriceTable::embedded(), &BTreeSet::new(), "2026-12-03").await;
        v.done();
        assert_eq!(e.map(|_| ()).map_err(|e| e.failure), Err(crate::aws::Failure::Denied));
    }

    #[test]
    fn the_types_refreshed_are_the_tables_and_those_asked_for() {
        let types = instance_types(&PriceTable::embedded(), &["x2.large".to_string()]);
        assert!(types.contains("c5.xlarge") && types.contains("t4g.large") && types.contains("x2.large"));
    }
}
