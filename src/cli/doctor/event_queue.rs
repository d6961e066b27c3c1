//! `doctor`'s event queue check (`EventQueueUrl`): the queue exists and the plugin's
//! identity may read it (GetQueueAttributes), and an EventBridge rule targets it
//! (ListRuleNamesByTarget). Reading a message is not tried: it would take an event from the
//! running plugin.

use std::io;

use super::fix::fix_for;
use super::{Aws, Report};
use crate::aws::Failure;
use crate::settings::ClusterProfile;

/// The check.
pub(super) async fn check(aws: &Aws, profile: &ClusterProfile, r: &mut Report<'_>) -> io::Result<()> {
    let Some(url) = &profile.event_queue_url else {
        return r.ok("event queue", "no EventQueueUrl: stopped tasks are noticed at server-ping");
    };
    let arn = match aws.queue_arn(url).await {
        Ok(arn) => arn,
        Err(e) => {
            let fix = if e.failure == Failure::NotFound {
                "create the queue, or correct EventQueueUrl (the queue's URL as SQS shows it)".to_string()
            } else {
                fix_for(
                    &e,
                    "sqs:GetQueueAttributes, sqs:ReceiveMessage and sqs:DeleteMessage",
                    "check EventQueueUrl and network access to SQS",
                )
            };
            return r.fail("event queue", format!("cannot read the event queue {url}: {}", e.detail), fix);
        }
    };
    let Some(arn) = arn.or_else(|| profile.event_queue_arn(&aws.region)) else {
        return r.warn("event queue", format!("the event queue {url} exists, but its ARN is unknown"), None);
    };
    r.ok("event queue", format!("the event queue {url} exists and may be read"))?;
    match aws.rules_targeting(&arn).await {
        Ok(rules) if !rules.is_empty() => {
            r.ok("event rule", format!("EventBridge rule {} sends events to the queue", rules.join(", ")))
        }
        Ok(_) => r.fail(
            "event rule",
            format!("no EventBridge rule targets the event queue {arn}: no event will arrive, and stopped tasks are noticed at server-ping only"),
            "create the rule `ecs-elastic-agent iam-policy --document event-rule-pattern` prints, targeting the queue, and set the queue policy it prints with --document queue-policy",
        ),
        Err(e) => r.warn(
            "event rule",
            format!("cannot tell whether an EventBridge rule targets the queue: {}", e.detail),
            fix_for(&e, "events:ListRuleNamesByTarget", "check network access to EventBridge"),
        ),
    }
}
