//! The port's Price List calls (`pricing:GetProducts`): for `prices --refresh`, with the
//! credentials of the SDK's default chain, and for an engine whose price table lacks a price it
//! needs, with its cluster profile's ([`PriceList::of`]). The Price List Query API answers in
//! us-east-1 ([`PRICE_LIST_REGION`]) for every region. Every page is one call through the call
//! budget's retries; the documents come back as AWS sends them (`PriceList`: one JSON string a
//! product), for `cost::price_list`.

use std::sync::Arc;

use aws_sdk_pricing::types::{Filter, FilterType};
use aws_smithy_runtime_api::client::http::HttpConnector;

use super::calls::CallStats;
use super::AwsError;

/// The region whose endpoint serves the Price List Query API (it also serves every region's
/// prices).
pub const PRICE_LIST_REGION: &str = "us-east-1";

/// The most products GetProducts answers a page.
pub const PAGE: i32 = 100;

/// A Price List client of `config`'s credentials, in [`PRICE_LIST_REGION`] whatever its region.
pub fn client_of(config: &aws_config::SdkConfig) -> aws_sdk_pricing::Client {
    let config = aws_sdk_pricing::config::Builder::from(config)
        .region(aws_sdk_pricing::config::Region::new(PRICE_LIST_REGION))
        .build();
    aws_sdk_pricing::Client::from_conf(config)
}

/// A Price List client.
#[derive(Debug, Clone)]
pub struct PriceList {
    client: aws_sdk_pricing::Client,
    calls: Arc<CallStats>,
}

impl PriceList {
    /// A client with the SDK's default credentials chain and config (`AWS_PROFILE`,
    /// `AWS_ENDPOINT_URL`, …), in [`PRICE_LIST_REGION`].
    pub async fn from_environment() -> PriceList {
        let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(PRICE_LIST_REGION))
            .load()
            .await;
        PriceList { client: aws_sdk_pricing::Client::new(&config), calls: Arc::default() }
    }

    /// The Price List as `aws`'s credentials reach it, its calls counted in `aws`'s budget.
    pub fn of(aws: &super::AwsClients) -> PriceList {
        PriceList { client: aws.pricing.clone(), calls: aws.calls.clone() }
    }

    /// A client whose every request goes to `connector` (the tests' scripted verifier).
    pub fn over(connector: impl HttpConnector + Clone + 'static) -> PriceList {
        use aws_smithy_runtime_api::client::http::{http_client_fn, SharedHttpConnector};
        let http = http_client_fn(move |_, _| SharedHttpConnector::new(connector.clone()));
        let config = aws_sdk_pricing::Config::builder()
            .behavior_version(aws_sdk_pricing::config::BehaviorVersion::latest())
            .region(aws_sdk_pricing::config::Region::new(PRICE_LIST_REGION))
            .credentials_provider(aws_credential_types::Credentials::new("AKIDFAKE", "fake", None, None, "tests"))
            .http_client(http)
            .retry_config(aws_sdk_pricing::config::retry::RetryConfig::disabled())
            .build();
        PriceList { client: aws_sdk_pricing::Client::from_conf(config), calls: Arc::default() }
    }

    /// Every product document of `service_code` whose attributes equal `filters` (field,
    /// value: `TERM_MATCH`), page after page.
    ///
    /// # Errors
    /// The first page that failed (after the budget's retries).
    pub async fn products(&self, service_code: &str, filters: &[(&str, &str)]) -> Result<Vec<String>, AwsError> {
        let filters: Vec<Filter> = filters
            .iter()
            .filter_map(|(field, value)| {
                Filter::builder().r#type(FilterType::TermMatch).field(*field).value(*value).build().ok()
            })
            .collect();
        let mut documents = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let request = self
                .client
                .get_products()
                .service_code(service_code)
                .format_version("aws_v1")
                .max_results(PAGE)
                .set_filters(Some(filters.clone()))
                .set_next_token(token.clone());
            let out = self.calls.call("GetProducts", || request.clone().send()).await?;
            documents.extend(out.price_list().iter().cloned());
            match out.next_token() {
                Some(next) if !next.is_empty() && token.as_deref() != Some(next) => token = Some(next.to_string()),
                _ => return Ok(documents),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::verifier::Verifier;
    use crate::aws::Failure;

    #[tokio::test]
    async fn products_follow_next_token_and_send_the_filters() {
        let v = Verifier::default();
        v.expect("GetProducts")
            .with(|call| {
                assert_eq!(call.json["ServiceCode"], "AmazonEC2");
                assert_eq!(call.json["FormatVersion"], "aws_v1");
                assert_eq!(call.json["MaxResults"], 100);
                assert_eq!(
                    call.json["Filters"],
                    serde_json::json!([{"Type": "TERM_MATCH", "Field": "instanceType", "Value": "c5.xlarge"}])
                );
                assert!(call.json.get("NextToken").is_none());
            })
            .answers(r#"{"FormatVersion": "aws_v1", "PriceList": ["{\"a\":1}", "{\"b\":2}"], "NextToken": "page-2"}"#);
        v.expect("GetProducts")
            .with(|call| assert_eq!(call.json["NextToken"], "page-2"))
            .answers(r#"{"FormatVersion": "aws_v1", "PriceList": ["{\"c\":3}"]}"#);
        let docs = PriceList::over(v.clone()).products("AmazonEC2", &[("instanceType", "c5.xlarge")]).await;
        assert_eq!(docs, Ok(vec![r#"{"a":1}"#.to_string(), r#"{"b":2}"#.to_string(), r#"{"c":3}"#.to_string()]));
        v.done();
    }

    #[tokio::test]
    async fn a_refusal_is_a_typed_failure() {
        let v = Verifier::default();
        v.expect("GetProducts").fails(400, "AccessDeniedException", "not authorized to perform: pricing:GetProducts");
        let e = PriceList::over(v.clone()).products("AmazonECS", &[]).await.expect_err("denied");
        assert_eq!(e.failure, Failure::Denied);
        assert!(e.detail.contains("pricing:GetProducts"), "{e}");
        v.done();
    }
}
