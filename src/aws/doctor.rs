//! The port's clients for `doctor`: the same credentials, role and region as the plugin, each
//! call under the check's time limit (not the engine's budget: `doctor` is one short run), and
//! its reads returning plain data. The checks' verdicts and fixes are the CLI's
//! (`cli::doctor`).

use std::future::Future;
use std::time::Duration;

use aws_config::SdkConfig;
use aws_sdk_sqs::types::QueueAttributeName;

use super::ec2_types::{AmiInfo, TypeInfo};
use super::{AwsError, Failure};

/// The SDK clients of the checks, acting as the plugin would.
#[derive(Debug)]
pub struct CheckClients {
    /// The region the calls go to.
    pub region: String,
    /// The account the calls act in.
    pub account: String,
    /// The cluster's short name.
    pub cluster_name: String,
    /// Each call's time limit.
    pub timeout: Duration,
    pub(super) ecs: aws_sdk_ecs::Client,
    pub(super) ec2: aws_sdk_ec2::Client,
    pub(super) iam: aws_sdk_iam::Client,
    pub(super) ecr: aws_sdk_ecr::Client,
    sqs: aws_sdk_sqs::Client,
    events: aws_sdk_eventbridge::Client,
    pricing: aws_sdk_pricing::Client,
}

/// One AMI as DescribeImages shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageView {
    /// What the plugin reads of it.
    pub info: AmiInfo,
    /// Its name, if it has one.
    pub name: Option<String>,
}

impl CheckClients {
    /// The clients of `config` (its credentials, role and region).
    pub fn new(config: &SdkConfig, region: String, account: String, cluster_name: String, timeout: Duration) -> Self {
        CheckClients {
            region,
            account,
            cluster_name,
            timeout,
            ecs: aws_sdk_ecs::Client::new(config),
            ec2: aws_sdk_ec2::Client::new(config),
            iam: aws_sdk_iam::Client::new(config),
            ecr: aws_sdk_ecr::Client::new(config),
            sqs: aws_sdk_sqs::Client::new(config),
            events: aws_sdk_eventbridge::Client::new(config),
            pricing: super::pricing::client_of(config),
        }
    }

    /// The plugin's own client set over these clients (its calls counted apart from any
    /// engine's), for the checks that reuse the engine's reads.
    pub fn engine_clients(&self, role_arn: Option<String>) -> super::AwsClients {
        super::AwsClients {
            ecs: self.ecs.clone(),
            ec2: self.ec2.clone(),
            sqs: self.sqs.clone(),
            ecr: self.ecr.clone(),
            pricing: self.pricing.clone(),
            region: self.region.clone(),
            role_arn,
            role: std::sync::Arc::new(super::RoleStats::default()),
            calls: std::sync::Arc::new(super::CallStats::default()),
            account_id: Some(self.account.clone()),
        }
    }

    /// Runs one call with the check's time limit.
    ///
    /// # Errors
    /// The call's error, or no answer in time (transient).
    pub async fn call<T, F>(&self, operation: &'static str, call: F) -> Result<T, AwsError>
    where
        F: Future<Output = Result<T, AwsError>>,
    {
        within(self.timeout, operation, call).await
    }

    /// The ARN of the queue at `url` (GetQueueAttributes); `None` when SQS does not say. A
    /// queue that does not exist is the port's `NotFound`.
    ///
    /// # Errors
    /// The failed call.
    pub async fn queue_arn(&self, url: &str) -> Result<Option<String>, AwsError> {
        let call = self.sqs.get_queue_attributes().queue_url(url).attribute_names(QueueAttributeName::QueueArn).send();
        let out = self
            .call("GetQueueAttributes", async { call.await.map_err(|e| AwsError::from_sdk("GetQueueAttributes", &e)) })
            .await?;
        Ok(out.attributes().and_then(|a| a.get(&QueueAttributeName::QueueArn)).cloned())
    }

    /// The names of the EventBridge rules that target `arn` (ListRuleNamesByTarget).
    ///
    /// # Errors
    /// The failed call.
    pub async fn rules_targeting(&self, arn: &str) -> Result<Vec<String>, AwsError> {
        let call = self.events.list_rule_names_by_target().target_arn(arn).send();
        let out = self
            .call("ListRuleNamesByTarget", async {
                call.await.map_err(|e| AwsError::from_sdk("ListRuleNamesByTarget", &e))
            })
            .await?;
        Ok(out.rule_names().to_vec())
    }

    /// The AMIs `ids` (DescribeImages).
    ///
    /// # Errors
    /// The failed call (`NotFound` when one does not exist).
    pub async fn describe_images(&self, ids: &[String]) -> Result<Vec<ImageView>, AwsError> {
        let call = self.ec2.describe_images().set_image_ids(Some(ids.to_vec())).send();
        let out = self
            .call("DescribeImages", async { call.await.map_err(|e| AwsError::from_sdk("DescribeImages", &e)) })
            .await?;
        let infos = super::ec2::ami_infos(&out);
        Ok(infos
            .into_iter()
            .map(|info| {
                let name = out
                    .images()
                    .iter()
                    .find(|i| i.image_id() == Some(info.id.as_str()))
                    .and_then(|i| i.name())
                    .map(str::to_string);
                ImageView { info, name }
            })
            .collect())
    }

    /// The instance types `names` (DescribeInstanceTypes).
    ///
    /// # Errors
    /// The failed call (`NotFound` when one does not exist).
    pub async fn describe_instance_types(&self, names: &[String]) -> Result<Vec<TypeInfo>, AwsError> {
        let wanted = names.iter().map(|t| aws_sdk_ec2::types::InstanceType::from(t.as_str())).collect();
        let call = self.ec2.describe_instance_types().set_instance_types(Some(wanted)).send();
        let out = self
            .call("DescribeInstanceTypes", async {
                call.await.map_err(|e| AwsError::from_sdk("DescribeInstanceTypes", &e))
            })
            .await?;
        Ok(super::ec2::type_infos(&out))
    }
}

/// Runs `call` within `timeout`.
///
/// # Errors
/// The call's error, or no answer in time (transient).
pub async fn within<T, F>(timeout: Duration, operation: &'static str, call: F) -> Result<T, AwsError>
where
    F: Future<Output = Result<T, AwsError>>,
{
    tokio::time::timeout(timeout, call).await.unwrap_or_else(|_| {
        Err(AwsError::new(operation, Failure::Transient, format!("no answer within {} s", timeout.as_secs())))
    })
}
