//! The port's SQS calls on the event queue (`EventQueueUrl`): one long-poll ReceiveMessage and
//! DeleteMessageBatch, each through the account's budget, with plain messages in and out.

use aws_sdk_sqs::types::DeleteMessageBatchRequestEntry;

use super::{AwsClients, AwsError};

/// SQS's most messages per ReceiveMessage and entries per DeleteMessageBatch.
pub const BATCH: i32 = 10;

/// One message of the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueMessage {
    /// Its body (an EventBridge event, as JSON).
    pub body: String,
    /// What deletes it, once handled.
    pub receipt: Option<String>,
}

impl AwsClients {
    /// One ReceiveMessage of up to [`BATCH`] messages, waiting up to `wait_seconds` for one.
    ///
    /// # Errors
    /// The failed call.
    pub async fn receive_messages(&self, url: &str, wait_seconds: i32) -> Result<Vec<QueueMessage>, AwsError> {
        let request =
            self.sqs.receive_message().queue_url(url).max_number_of_messages(BATCH).wait_time_seconds(wait_seconds);
        let out = self.calls.call("ReceiveMessage", || request.clone().send()).await?;
        Ok(out
            .messages
            .unwrap_or_default()
            .into_iter()
            .map(|m| QueueMessage { body: m.body.unwrap_or_default(), receipt: m.receipt_handle })
            .collect())
    }

    /// One DeleteMessageBatch of up to [`BATCH`] receipts. Returns how many SQS could not delete.
    ///
    /// # Errors
    /// The failed call.
    pub async fn delete_messages(&self, url: &str, receipts: &[String]) -> Result<usize, AwsError> {
        let entries: Vec<DeleteMessageBatchRequestEntry> = receipts
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                DeleteMessageBatchRequestEntry::builder().id(i.to_string()).receipt_handle(r).build().ok()
            })
            .collect();
        let request = self.sqs.delete_message_batch().queue_url(url).set_entries(Some(entries));
        let out = self.calls.call("DeleteMessageBatch", || request.clone().send()).await?;
        Ok(out.failed().len())
    }
}
