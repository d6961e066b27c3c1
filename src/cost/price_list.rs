//! A price table made from the AWS Price List's product documents (the JSON strings of
//! `GetProducts`' `PriceList`): Fargate's usage types of service `AmazonECS`, EC2 Linux
//! on-demand instance prices and gp3 storage of `AmazonEC2`. Documents it does not know are
//! skipped and counted.

use serde::Deserialize;
use std::collections::BTreeMap;

use super::prices::{FargateRate, PriceTable};

/// The service code of Fargate's prices.
pub const FARGATE_SERVICE: &str = "AmazonECS";
/// The service code of EC2's and EBS's prices.
pub const EC2_SERVICE: &str = "AmazonEC2";
/// The filters (`TERM_MATCH`) that ask for Fargate's usage types.
pub const FARGATE_FILTERS: &[(&str, &str)] = &[("productFamily", "Compute")];
/// The filters that ask for gp3 storage.
pub const GP3_FILTERS: &[(&str, &str)] = &[("productFamily", "Storage"), ("volumeApiName", "gp3")];

/// The filters that ask for `instance_type`'s price as the table keeps it: Linux, shared
/// tenancy, no pre-installed software, on demand (what [`Collector`] reads).
pub fn ec2_filters(instance_type: &str) -> [(&str, &str); 5] {
    [
        ("instanceType", instance_type),
        ("operatingSystem", "Linux"),
        ("tenancy", "Shared"),
        ("preInstalledSw", "NA"),
        ("capacitystatus", "Used"),
    ]
}

/// One product document, as far as it is read here.
#[derive(Debug, Deserialize)]
struct Document {
    product: Product,
    #[serde(default)]
    terms: Terms,
}

#[derive(Debug, Deserialize)]
struct Product {
    #[serde(default, rename = "productFamily")]
    family: String,
    #[serde(default)]
    attributes: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
struct Terms {
    #[serde(default, rename = "OnDemand")]
    on_demand: BTreeMap<String, Term>,
}

#[derive(Debug, Deserialize)]
struct Term {
    #[serde(default, rename = "priceDimensions")]
    dimensions: BTreeMap<String, Dimension>,
}

#[derive(Debug, Deserialize)]
struct Dimension {
    #[serde(default, rename = "pricePerUnit")]
    price: BTreeMap<String, String>,
}

/// Gathers product documents into a table.
#[derive(Debug, Default)]
pub struct Collector {
    table: PriceTable,
    /// Documents read into the table.
    pub used: usize,
    /// Documents skipped (not a price the table keeps, or unreadable).
    pub skipped: usize,
}

impl Collector {
    /// Reads one product document of `GetProducts`' `PriceList`.
    pub fn add(&mut self, document: &str) {
        if self.read(document).is_some() {
            self.used += 1;
        } else {
            self.skipped += 1;
        }
    }

    fn read(&mut self, document: &str) -> Option<()> {
        let doc: Document = serde_json::from_str(document).ok()?;
        let attr = |k: &str| doc.product.attributes.get(k).map(String::as_str);
        let region = attr("regionCode")?.to_string();
        let usd = on_demand_usd(&doc.terms)?;
        if let Some(instance_type) = attr("instanceType") {
            let linux_shared = attr("operatingSystem") == Some("Linux")
                && attr("tenancy") == Some("Shared")
                && attr("preInstalledSw") == Some("NA")
                && attr("capacitystatus").is_none_or(|c| c == "Used");
            if !linux_shared || !doc.product.family.starts_with("Compute Instance") {
                return None;
            }
            self.table.ec2.entry(region).or_default().insert(instance_type.to_string(), usd);
            return Some(());
        }
        if attr("volumeApiName") == Some("gp3") && doc.product.family == "Storage" {
            self.table.gp3_gb_month.insert(region, usd);
            return Some(());
        }
        let usage = fargate_usage(attr("usagetype")?)?;
        let prices = self.table.fargate.entry(region).or_default();
        match usage {
            "Fargate-vCPU-Hours:perCPU" => rate(&mut prices.x86).vcpu_hour = Some(usd),
            "Fargate-GB-Hours" => rate(&mut prices.x86).gb_hour = Some(usd),
            "Fargate-ARM-vCPU-Hours:perCPU" => rate(&mut prices.arm64).vcpu_hour = Some(usd),
            "Fargate-ARM-GB-Hours" => rate(&mut prices.arm64).gb_hour = Some(usd),
            "Fargate-Windows-vCPU-Hours:perCPU" => rate(&mut prices.windows).vcpu_hour = Some(usd),
            "Fargate-Windows-GB-Hours" => rate(&mut prices.windows).gb_hour = Some(usd),
            "Fargate-Windows-OS-Hours:perCPU" => rate(&mut prices.windows).license_vcpu_hour = Some(usd),
            "Fargate-EphemeralStorage-GB-Hours" => prices.ephemeral_gb_hour = Some(usd),
            _ => return None,
        }
        Some(())
    }

    /// The table gathered, dated and sourced by the caller.
    pub fn finish(mut self, date: String, source: String, notes: Vec<String>) -> PriceTable {
        self.table.fargate.retain(|_, r| r.x86.is_some() || r.arm64.is_some() || r.windows.is_some());
        PriceTable { date, source, notes, ..self.table }
    }
}

/// A rate to fill in, made when absent.
fn rate(r: &mut Option<FargateRate>) -> &mut FargateRate {
    r.get_or_insert_with(FargateRate::default)
}

/// The first on-demand USD price of a document.
fn on_demand_usd(terms: &Terms) -> Option<f64> {
    let term = terms.on_demand.values().next()?;
    let dimension = term.dimensions.values().next()?;
    dimension.price.get("USD")?.parse().ok()
}

/// A usage type without its region prefix (`USE1-Fargate-GB-Hours` → `Fargate-GB-Hours`).
fn fargate_usage(usage_type: &str) -> Option<&str> {
    if usage_type.starts_with("Fargate-") {
        return Some(usage_type);
    }
    let (prefix, rest) = usage_type.split_once('-')?;
    let plain = prefix.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    (plain && rest.starts_with("Fargate-")).then_some(rest)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A product document as the Price List writes it.
    pub(crate) fn document(family: &str, attributes: &[(&str, &str)], usd: &str) -> String {
        let attributes: serde_json::Map<String, serde_json::Value> =
            attributes.iter().map(|(k, v)| ((*k).to_string(), serde_json::Value::from(*v))).collect();
        serde_json::json!({
            "product": {"productFamily": family, "attributes": attributes, "sku": "SKU1"},
            "serviceCode": "AmazonECS",
            "terms": {"OnDemand": {"SKU1.JRTCKXETXF": {"offerTermCode": "JRTCKXETXF", "sku": "SKU1",
                "priceDimensions": {"SKU1.JRTCKXETXF.6YS6EN2CT7": {"unit": "hours", "description": "",
                    "pricePerUnit": {"USD": usd}}}}}},
            "version": "20261201000000",
            "publicationDate": "2026-12-01T00:00:00Z"
        })
        .to_string()
    }

    pub(crate) fn ec2(region: &str, instance_type: &str, os: &str, usd: &str) -> String {
        document(
            "Compute Instance",
            &[
                ("regionCode", region),
                ("instanceType", instance_type),
                ("operatingSystem", os),
                ("tenancy", "Shared"),
                ("preInstalledSw", "NA"),
                ("capacitystatus", "Used"),
            ],
            usd,
        )
    }

    pub(crate) fn fargate(region: &str, usage: &str, usd: &str) -> String {
        document("Compute", &[("regionCode", region), ("usagetype", usage)], usd)
    }

    #[test]
    fn fargate_usage_types_fill_the_regions_rates() {
        let mut c = Collector::default();
        for (usage, usd) in [
            ("EUW1-Fargate-vCPU-Hours:perCPU", "0.0404800000"),
            ("EUW1-Fargate-GB-Hours", "0.0044450000"),
            ("EUW1-Fargate-ARM-vCPU-Hours:perCPU", "0.0323800000"),
            ("EUW1-Fargate-Windows-OS-Hours:perCPU", "0.0460000000"),
            ("EUW1-Fargate-EphemeralStorage-GB-Hours", "0.0001110000"),
            ("EUW1-SpotUsage:Fargate-vCPU-Hours:perCPU", "0.0127"),
            ("EUW1-ECS-Anywhere-Instance-hours", "0.01025"),
        ] {
            c.add(&fargate("eu-west-1", usage, usd));
        }
        c.add(&fargate("us-east-1", "Fargate-GB-Hours", "0.004445"));
        assert_eq!((c.used, c.skipped), (6, 2));
        let t = c.finish("2026-12-03".into(), "test".into(), vec![]);
        let w = t.fargate("eu-west-1").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            w.x86,
            Some(FargateRate { vcpu_hour: Some(0.04048), gb_hour: Some(0.004445), license_vcpu_hour: None })
        );
        assert_eq!(w.arm64.and_then(|r| r.vcpu_hour), Some(0.03238));
        assert_eq!(w.windows.and_then(|r| r.license_vcpu_hour), Some(0.046));
        assert_eq!(w.ephemeral_gb_hour, Some(0.000111));
        assert!(t.fargate("us-east-1").is_ok(), "us-east-1's usage types have no prefix");
    }

    #[test]
    fn ec2_keeps_linux_shared_on_demand_and_gp3() {
        let mut c = Collector::default();
        c.add(&ec2("eu-west-1", "c5.xlarge", "Linux", "0.1920000000"));
        c.add(&ec2("eu-west-1", "c5.large", "Windows", "0.1800000000"));
        c.add(&document("Storage", &[("regionCode", "eu-west-1"), ("volumeApiName", "gp3")], "0.0880000000"));
        c.add("not json");
        assert_eq!((c.used, c.skipped), (2, 2));
        let t = c.finish("d".into(), "s".into(), vec![]);
        assert_eq!(t.ec2_hour("eu-west-1", "c5.xlarge"), Ok(0.192));
        assert!(t.ec2_hour("eu-west-1", "c5.large").is_err(), "Windows is not kept");
        assert_eq!(t.gp3_gb_month("eu-west-1"), Ok(0.088));
    }
}
