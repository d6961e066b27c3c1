//! What arrives on the event queue, read: the EventBridge events AWS documents ("ECS Task State
//! Change", "EC2 Spot Instance Interruption Warning", "EC2 Instance State-change Notification"),
//! as SQS message bodies. Pure: no I/O, no clock. Anything else, or anything unreadable, is
//! told apart so the poller can count it and move on. The statuses the events carry as text
//! (a task's, its stop code, an instance's state) are read into the port's types here, as
//! DescribeTasks' and DescribeInstances' are in the port.

use std::time::SystemTime;

use serde_json::Value;

use crate::aws::status::Ec2State;
use crate::cluster::agents::tasks::{ContainerView, StopCode, TaskStatus, TaskView};

/// One event from the queue.
#[derive(Debug, Clone, PartialEq)]
pub enum QueueEvent {
    /// "ECS Task State Change": the task as the event describes it (no tags: events carry none).
    Task {
        /// The task (boxed: the other kinds are a few strings).
        task: Box<TaskView>,
        /// Its `startedBy`, which tells ours from anyone else's.
        started_by: Option<String>,
    },
    /// "EC2 Spot Instance Interruption Warning": the instance goes in two minutes.
    SpotWarning {
        /// The instance id.
        instance_id: String,
        /// `terminate`, `stop` or `hibernate`.
        action: String,
    },
    /// "EC2 Instance State-change Notification".
    InstanceState {
        /// The instance id.
        instance_id: String,
        /// `pending`, `running`, `stopping`, `stopped`, `shutting-down`, `terminated`.
        state: Ec2State,
    },
    /// An event of another kind (another rule's, or a test message): ignored.
    Other {
        /// Its `detail-type`.
        detail_type: String,
    },
}

/// Why a message body is not an event we can read (it is then dropped); each reads as a
/// sentence for the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    /// The body is not JSON (the parser's reason).
    #[error("not JSON: {0}")]
    NotJson(String),
    /// JSON without a `detail-type`.
    #[error("no detail-type: not an EventBridge event")]
    NoDetailType,
    /// A task state change whose task cannot be told.
    #[error("an ECS Task State Change without taskArn or clusterArn")]
    TaskWithoutArn,
    /// A spot warning whose instance cannot be told.
    #[error("a spot warning without instance-id")]
    SpotWarningWithoutInstance,
    /// A state-change notification whose instance cannot be told.
    #[error("a state-change notification without instance-id")]
    StateChangeWithoutInstance,
}

/// Reads one SQS message body.
///
/// # Errors
/// Why the body is not an event we can read (it is then dropped).
pub fn parse(body: &str) -> Result<QueueEvent, Unreadable> {
    let event: Value = serde_json::from_str(body).map_err(|e| Unreadable::NotJson(e.to_string()))?;
    let detail_type = event["detail-type"].as_str().ok_or(Unreadable::NoDetailType)?;
    let detail = &event["detail"];
    let text = |v: &Value| v.as_str().map(str::to_string);
    match (event["source"].as_str().unwrap_or_default(), detail_type) {
        ("aws.ecs", "ECS Task State Change") => {
            let task = task_view(detail).ok_or(Unreadable::TaskWithoutArn)?;
            Ok(QueueEvent::Task { task: Box::new(task), started_by: text(&detail["startedBy"]) })
        }
        ("aws.ec2", "EC2 Spot Instance Interruption Warning") => Ok(QueueEvent::SpotWarning {
            instance_id: text(&detail["instance-id"]).ok_or(Unreadable::SpotWarningWithoutInstance)?,
            action: text(&detail["instance-action"]).unwrap_or_default(),
        }),
        ("aws.ec2", "EC2 Instance State-change Notification") => Ok(QueueEvent::InstanceState {
            instance_id: text(&detail["instance-id"]).ok_or(Unreadable::StateChangeWithoutInstance)?,
            state: text(&detail["state"]).map(Ec2State::from).unwrap_or_default(),
        }),
        (_, other) => Ok(QueueEvent::Other { detail_type: other.to_string() }),
    }
}

/// The event's task in the shape DescribeTasks gives (the event's `detail` is a Task).
fn task_view(detail: &Value) -> Option<TaskView> {
    let text = |key: &str| detail[key].as_str().map(str::to_string);
    let capacity = text("capacityProviderName").or_else(|| text("launchType").filter(|s| !s.is_empty()));
    Some(TaskView {
        arn: text("taskArn")?,
        cluster_arn: text("clusterArn")?,
        last_status: text("lastStatus").map(TaskStatus::from).unwrap_or_default(),
        desired_status: text("desiredStatus").map(TaskStatus::from).unwrap_or_default(),
        capacity: capacity.unwrap_or_default(),
        task_definition: text("taskDefinitionArn").unwrap_or_default(),
        tags: std::collections::HashMap::new(),
        stop_code: text("stopCode").map(StopCode::from),
        stopped_reason: text("stoppedReason"),
        containers: detail["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| ContainerView {
                name: c["name"].as_str().unwrap_or_default().to_string(),
                image: c["image"].as_str().map(str::to_string),
                last_status: c["lastStatus"].as_str().map(TaskStatus::from),
                exit_code: c["exitCode"].as_i64().and_then(|c| i32::try_from(c).ok()),
                reason: c["reason"].as_str().map(str::to_string),
            })
            .collect(),
        created_at: time(&detail["createdAt"]),
        pull_started_at: time(&detail["pullStartedAt"]),
        pull_stopped_at: time(&detail["pullStoppedAt"]),
        started_at: time(&detail["startedAt"]),
        stopped_at: time(&detail["stoppedAt"]),
        availability_zone: text("availabilityZone"),
        cpu: text("cpu"),
        memory: text("memory"),
        container_instance_arn: text("containerInstanceArn"),
    })
}

/// An RFC 3339 time as the events write them (`2016-12-06T16:41:05.702Z`).
fn time(v: &Value) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(v.as_str()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The "ECS Task State Change" example of the ECS developer guide ("Amazon ECS task state
    /// change events"), with the fields a Fargate Spot interruption sets.
    const SPOT_STOPPED: &str = r#"{
      "version": "0",
      "id": "9bcdac79-b31f-4d3d-9410-fbd727c29fab",
      "detail-type": "ECS Task State Change",
      "source": "aws.ecs",
      "account": "111122223333",
      "time": "2016-12-06T16:41:06Z",
      "region": "us-east-1",
      "resources": ["arn:aws:ecs:us-east-1:111122223333:task/ci/b99d40b3-5176-4f71-9a52-9dbd6f1cebef"],
      "detail": {
        "clusterArn": "arn:aws:ecs:us-east-1:111122223333:cluster/ci",
        "containers": [{
          "containerArn": "arn:aws:ecs:us-east-1:111122223333:container/3305bea1-bd16-4217-803d-3e0482170a17",
          "exitCode": 143,
          "lastStatus": "STOPPED",
          "name": "gocd-agent",
          "image": "gocd/gocd-agent-alpine-3.19:v24.1.0",
          "taskArn": "arn:aws:ecs:us-east-1:111122223333:task/ci/b99d40b3-5176-4f71-9a52-9dbd6f1cebef"
        }],
        "createdAt": "2016-12-06T16:41:05.702Z",
        "desiredStatus": "STOPPED",
        "group": "family:gocd",
        "lastStatus": "STOPPED",
        "capacityProviderName": "FARGATE_SPOT",
        "launchType": "FARGATE",
        "overrides": {"containerOverrides": [{"name": "gocd-agent"}]},
        "pullStartedAt": "2016-12-06T16:41:06.100Z",
        "pullStoppedAt": "2016-12-06T16:41:09.250Z",
        "startedAt": "2016-12-06T16:41:10.000Z",
        "startedBy": "gocd-0123456789abcdef",
        "stopCode": "SpotInterruption",
        "stoppedAt": "2016-12-06T16:43:06.000Z",
        "stoppedReason": "Your Spot Task was interrupted.",
        "updatedAt": "2016-12-06T16:43:06.000Z",
        "taskArn": "arn:aws:ecs:us-east-1:111122223333:task/ci/b99d40b3-5176-4f71-9a52-9dbd6f1cebef",
        "taskDefinitionArn": "arn:aws:ecs:us-east-1:111122223333:task-definition/gocd:1",
        "version": 4
      }
    }"#;

    #[test]
    fn reads_an_ecs_task_state_change() {
        let QueueEvent::Task { task, started_by } = parse(SPOT_STOPPED).expect("an event") else {
            panic!("not a task event")
        };
        assert_eq!(started_by.as_deref(), Some("gocd-0123456789abcdef"));
        assert!(task.is_stopping());
        assert_eq!(task.capacity, "FARGATE_SPOT");
        assert_eq!(task.stop_code, Some(StopCode::SpotInterruption));
        assert_eq!(
            task.stop_summary(),
            "Your Spot Task was interrupted.; stop code SpotInterruption; container gocd-agent exited 143"
        );
        let pulled = task.pull_stopped_at.unwrap().duration_since(task.pull_started_at.unwrap()).unwrap();
        assert_eq!(pulled.as_millis(), 3150);
        assert!(task.started_at.is_some() && task.stopped_at.is_some() && task.created_at.is_some());
    }

    #[test]
    fn reads_the_ec2_events() {
        let warning = r#"{"version":"0","id":"1e5527d7-bb36-4607-3370-4164db56a40e",
          "detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"123456789012",
          "time":"1970-01-01T00:00:00Z","region":"us-east-1",
          "resources":["arn:aws:ec2:us-east-1b:instance/i-0b662ef9931388ba0"],
          "detail":{"instance-id":"i-0b662ef9931388ba0","instance-action":"terminate"}}"#;
        assert_eq!(
            parse(warning),
            Ok(QueueEvent::SpotWarning { instance_id: "i-0b662ef9931388ba0".into(), action: "terminate".into() })
        );
        let state = r#"{"version":"0","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2",
          "detail":{"instance-id":"i-abcd1111","state":"terminated"}}"#;
        assert_eq!(
            parse(state),
            Ok(QueueEvent::InstanceState { instance_id: "i-abcd1111".into(), state: Ec2State::Terminated })
        );
    }

    #[test]
    fn tells_other_and_unreadable_messages_apart() {
        let other = r#"{"detail-type":"ECS Container Instance State Change","source":"aws.ecs","detail":{}}"#;
        assert_eq!(parse(other), Ok(QueueEvent::Other { detail_type: "ECS Container Instance State Change".into() }));
        let not_json = parse("hello").unwrap_err();
        assert!(matches!(not_json, Unreadable::NotJson(_)), "{not_json:?}");
        assert!(not_json.to_string().starts_with("not JSON"), "{not_json}");
        assert_eq!(parse(r#"{"a":1}"#), Err(Unreadable::NoDetailType));
        assert!(parse(r#"{"a":1}"#).unwrap_err().to_string().contains("detail-type"));
        let no_arn = r#"{"detail-type":"ECS Task State Change","source":"aws.ecs","detail":{"lastStatus":"STOPPED"}}"#;
        assert_eq!(parse(no_arn), Err(Unreadable::TaskWithoutArn));
        assert!(parse(no_arn).unwrap_err().to_string().contains("taskArn"));
    }
}
