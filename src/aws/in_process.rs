//! What the port's two in-process test doubles share (the scripted verifier, `verifier.rs`, and
//! the fake ECS, `fake_aws.rs`): SDK clients of one account whose every call a connector in
//! memory answers, and AWS's JSON error body.

use std::sync::Arc;

use aws_credential_types::Credentials;
use aws_sdk_ecs::config::{BehaviorVersion, Region};
use aws_smithy_runtime_api::client::http::{http_client_fn, HttpConnector, SharedHttpConnector};
use serde_json::Value;

use super::{AwsClients, CallStats, RoleStats};

/// The account of the in-process doubles.
pub const ACCOUNT: &str = "123456789012";
/// Their region.
pub const REGION: &str = "us-east-1";

/// The JSON protocols' error body (ECS, SQS), as AWS writes it:
/// `{"__type":"ThrottlingException","message":"Rate exceeded"}`. The in-process doubles' one
/// writer of it.
pub fn json_error(code: &str, message: &str) -> Value {
    serde_json::json!({ "__type": code, "message": message })
}

/// SDK clients of one account (the doubles' account and region, retries off) whose every call
/// `connector` answers: the fake's (`super::fake_aws`), or the scripted verifier's
/// (`super::verifier`).
pub fn clients_over(connector: impl HttpConnector + Clone + 'static) -> Arc<AwsClients> {
    let http = http_client_fn(move |_, _| SharedHttpConnector::new(connector.clone()));
    let creds = Credentials::new("AKIDFAKE", "fake-secret", None, None, "engine-tests");
    let ecs = aws_sdk_ecs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(REGION))
        .credentials_provider(creds.clone())
        .http_client(http.clone())
        .retry_config(aws_sdk_ecs::config::retry::RetryConfig::disabled())
        .build();
    let ec2 = aws_sdk_ec2::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(aws_sdk_ec2::config::Region::new(REGION))
        .credentials_provider(creds.clone())
        .http_client(http.clone())
        .retry_config(aws_sdk_ec2::config::retry::RetryConfig::disabled())
        .build();
    let sqs = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(aws_sdk_sqs::config::Region::new(REGION))
        .credentials_provider(creds.clone())
        .http_client(http.clone())
        .retry_config(aws_sdk_sqs::config::retry::RetryConfig::disabled())
        .build();
    Arc::new(AwsClients {
        ecs: aws_sdk_ecs::Client::from_conf(ecs),
        ec2: aws_sdk_ec2::Client::from_conf(ec2),
        sqs: aws_sdk_sqs::Client::from_conf(sqs),
        ecr: aws_sdk_ecr::Client::from_conf(
            aws_sdk_ecr::Config::builder()
                .behavior_version(BehaviorVersion::latest())
                .region(aws_sdk_ecr::config::Region::new(REGION))
                .credentials_provider(creds.clone())
                .http_client(http.clone())
                .retry_config(aws_sdk_ecr::config::retry::RetryConfig::disabled())
                .build(),
        ),
        pricing: aws_sdk_pricing::Client::from_conf(
            aws_sdk_pricing::Config::builder()
                .behavior_version(BehaviorVersion::latest())
                .region(aws_sdk_pricing::config::Region::new(super::pricing::PRICE_LIST_REGION))
                .credentials_provider(creds.clone())
                .http_client(http.clone())
                .retry_config(aws_sdk_pricing::config::retry::RetryConfig::disabled())
                .build(),
        ),
        region: REGION.into(),
        role_arn: None,
        role: Arc::new(RoleStats::default()),
        calls: Arc::new(CallStats::default()),
        account_id: Some(ACCOUNT.into()),
    })
}
