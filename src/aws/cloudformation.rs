//! The port's one CloudFormation call, for `profile --from-stack`: DescribeStacks of one stack,
//! its status and outputs as plain data (packaging/cloudformation/ names the outputs after the
//! profile keys they fill). The SDK's default credential chain and region, as `doctor` without
//! a profile; `AWS_ENDPOINT_URL` points it elsewhere, as it does every client of the plugin.

use std::time::Duration;

use aws_config::{BehaviorVersion, Region, SdkConfig};

use super::doctor::within;
use super::{AwsError, Failure};

/// One stack as DescribeStacks shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackView {
    /// Its name.
    pub name: String,
    /// `CREATE_COMPLETE`, `UPDATE_ROLLBACK_COMPLETE`, ... (`UNKNOWN` when CloudFormation gave none).
    pub status: String,
    /// Its outputs, key and value, in CloudFormation's order.
    pub outputs: Vec<(String, String)>,
}

impl StackView {
    /// Whether the stack is in a state whose outputs are those of its template: created or
    /// updated (or an update rolled back to the previous ones), nothing in progress.
    pub fn settled(&self) -> bool {
        matches!(
            self.status.as_str(),
            "CREATE_COMPLETE"
                | "UPDATE_COMPLETE"
                | "UPDATE_ROLLBACK_COMPLETE"
                | "IMPORT_COMPLETE"
                | "IMPORT_ROLLBACK_COMPLETE"
        )
    }
}

/// The SDK config of the default chain, in `region` when given, else in the default region
/// chain's; `None` when neither names a region.
pub async fn default_config(region: Option<&str>) -> Option<SdkConfig> {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if let Some(region) = region {
        loader = loader.region(Region::new(region.to_string()));
    }
    let config = loader.load().await;
    config.region().is_some().then_some(config)
}

/// DescribeStacks of the stack `name` (a name or stack id), within `timeout`.
///
/// # Errors
/// The failed call; a stack that does not exist is [`Failure::NotFound`].
pub async fn describe_stack(config: &SdkConfig, name: &str, timeout: Duration) -> Result<StackView, AwsError> {
    let client = aws_sdk_cloudformation::Client::new(config);
    let call = client.describe_stacks().stack_name(name).send();
    let out = within(timeout, "DescribeStacks", async {
        call.await.map_err(|e| AwsError::from_sdk_chain("DescribeStacks", &e))
    })
    .await?;
    let Some(stack) = out.stacks().first() else {
        return Err(AwsError::new("DescribeStacks", Failure::NotFound, format!("no stack {name}")));
    };
    Ok(StackView {
        name: stack.stack_name().unwrap_or(name).to_string(),
        status: stack.stack_status().map_or_else(|| "UNKNOWN".to_string(), |s| s.as_str().to_string()),
        outputs: stack
            .outputs()
            .iter()
            .filter_map(|o| Some((o.output_key()?.to_string(), o.output_value().unwrap_or_default().to_string())))
            .collect(),
    })
}
