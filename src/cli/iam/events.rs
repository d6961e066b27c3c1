//! The event queue's side of `iam-policy` (`EventQueueUrl`): the plugin's SQS
//! permissions on the queue, the EventBridge rule's event pattern (this cluster's task state
//! changes, and with EC2 the Spot warnings and instance state changes), and the queue policy
//! that lets the rule's target send to the queue.

use serde_json::{json, Value};

use super::{statement, Scope};
use crate::settings::{ClusterProfile, LaunchType};

/// The rule's name `iam-policy` suggests (the queue policy names it).
pub fn rule_name(scope: &Scope) -> String {
    format!("gocd-ecs-events-{}", scope.cluster)
}

/// The plugin's statements for the queue: read and delete (DeleteMessageBatch is authorised as
/// sqs:DeleteMessage), its attributes and the rules targeting it for `doctor`.
pub fn statements(cluster: &ClusterProfile, scope: &Scope) -> Vec<Value> {
    let Some(queue) = cluster.event_queue_arn(&scope.region) else { return Vec::new() };
    vec![
        statement(
            "ReadTheEventQueue",
            &["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"],
            vec![queue],
            None,
        ),
        statement(
            "DoctorFindsTheRuleTargetingTheQueue",
            &["events:ListRuleNamesByTarget"],
            vec![scope.arn("events", "rule/*")],
            None,
        ),
    ]
}

/// The EventBridge rule's event pattern: the cluster's task state changes of tasks a GoCD
/// server started (their `startedBy` begins `gocd-`); with EC2, the account's Spot warnings and
/// instance state changes (EventBridge cannot filter on tags: the plugin ignores instances that
/// are not its own).
pub fn rule_pattern(cluster: &ClusterProfile, scope: &Scope) -> Option<Value> {
    cluster.event_queue_url.as_ref()?;
    // An event pattern has no wildcards: with the account or region unknown, the ARN's end.
    let cluster_arn = if scope.account == "*" || scope.region == "*" {
        json!({ "suffix": format!(":cluster/{}", scope.cluster) })
    } else {
        json!(scope.cluster_arn())
    };
    let tasks = json!({
        "source": ["aws.ecs"],
        "detail-type": ["ECS Task State Change"],
        "detail": {
            "clusterArn": [cluster_arn],
            "startedBy": [{ "prefix": "gocd-" }],
        },
    });
    if cluster.launch_type != LaunchType::Ec2 {
        return Some(tasks);
    }
    let instances = json!({
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Spot Instance Interruption Warning", "EC2 Instance State-change Notification"],
    });
    Some(json!({ "$or": [tasks, instances] }))
}

/// The queue's access policy: the rule (and only it) may send to the queue.
pub fn queue_policy(cluster: &ClusterProfile, scope: &Scope) -> Option<Value> {
    let queue = cluster.event_queue_arn(&scope.region)?;
    let rule = scope.arn("events", &format!("rule/{}", rule_name(scope)));
    Some(json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "TheGoCdRuleSendsItsEvents",
            "Effect": "Allow",
            "Principal": { "Service": "events.amazonaws.com" },
            "Action": "sqs:SendMessage",
            "Resource": queue,
            "Condition": { "ArnEquals": { "aws:SourceArn": rule } },
        }],
    }))
}

/// How to put the pieces together, for the notes.
pub fn notes(cluster: &ClusterProfile, scope: &Scope) -> Vec<String> {
    let Some(queue) = cluster.event_queue_arn(&scope.region) else { return Vec::new() };
    let rule = rule_name(scope);
    vec![
        format!(
            "EventQueueUrl: create the rule with `aws events put-rule --name {rule} --event-pattern file://rule.json` \
             (--document event-rule-pattern), target the queue with `aws events put-targets --rule {rule} \
             --targets Id=gocd,Arn={queue}`, and set the queue's Policy attribute to --document queue-policy"
        ),
        "EventQueueUrl: one queue per GoCD server and account: servers sharing a queue would each delete the other's events"
            .into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::policies;
    use crate::settings::ClusterProfile;

    fn cluster(pairs: &[(&str, &str)]) -> ClusterProfile {
        let props = pairs.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect();
        ClusterProfile::parse(&props).expect("valid")
    }

    const QUEUE: &str = "https://sqs.eu-west-1.amazonaws.com/123456789012/gocd-events";

    #[test]
    fn the_queue_brings_sqs_permissions_a_rule_pattern_and_a_queue_policy() {
        let p = policies(
            &cluster(&[
                ("ClusterName", "arn:aws:ecs:eu-west-1:123456789012:cluster/ci"),
                ("Region", "eu-west-1"),
                ("EventQueueUrl", QUEUE),
            ]),
            &[],
        );
        let text = p.policy.to_string();
        assert!(
            text.contains("sqs:ReceiveMessage") && text.contains("arn:aws:sqs:eu-west-1:123456789012:gocd-events"),
            "{text}"
        );
        let pattern = p.event_rule_pattern.expect("a rule pattern");
        assert_eq!(pattern["detail"]["clusterArn"][0], "arn:aws:ecs:eu-west-1:123456789012:cluster/ci");
        assert_eq!(pattern["detail-type"][0], "ECS Task State Change");
        let policy = p.queue_policy.expect("a queue policy");
        let statement = &policy["Statement"][0];
        assert_eq!(statement["Principal"]["Service"], "events.amazonaws.com");
        assert_eq!(
            statement["Condition"]["ArnEquals"]["aws:SourceArn"],
            "arn:aws:events:eu-west-1:123456789012:rule/gocd-ecs-events-ci"
        );
        assert!(p.notes.iter().any(|n| n.contains("one queue per GoCD server")));

        let without = policies(&cluster(&[("ClusterName", "ci"), ("Region", "eu-west-1")]), &[]);
        assert!(!without.policy.to_string().contains("sqs:") && without.event_rule_pattern.is_none());
    }

    #[test]
    fn ec2_profiles_also_get_spot_warnings_and_instance_state_changes() {
        let p = policies(
            &cluster(&[
                ("ClusterName", "ci"),
                ("Region", "eu-west-1"),
                ("LaunchType", "EC2"),
                ("Ec2InstanceType", "c5.xlarge"),
                ("Ec2InstanceProfile", "ecsInstanceRole"),
                ("Ec2AmiId", "ami-0abcdef1234567890"),
                ("EventQueueUrl", QUEUE),
            ]),
            &[],
        );
        let pattern = p.event_rule_pattern.expect("a rule pattern").to_string();
        assert!(pattern.contains("$or") && pattern.contains("EC2 Spot Instance Interruption Warning"), "{pattern}");
        // No account in ClusterName: the ARN's end (a pattern has no wildcards).
        assert!(pattern.contains(r#"{"suffix":":cluster/ci"}"#), "{pattern}");
    }
}
