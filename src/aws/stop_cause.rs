//! Why a task stopped before it ran, read from what ECS wrote: the task's `stopCode` and
//! `stoppedReason` and its containers' `reason`s. ECS gives only text there, so — as for
//! RunTask's `failures` (`outcome::Placement`) — the documented texts of its "stopped task
//! error messages" are read here and nowhere else; callers match on [`StopCause`].

use super::task_view::TaskView;

/// The cause of a task that stopped before RUNNING, as an operator fixes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopCause {
    /// The image does not exist (`CannotPullContainerError`: not found, manifest unknown, a
    /// repository that does not exist).
    ImageNotFound,
    /// The registry refused the pull (`pull access denied`, `unauthorized`, a private image
    /// without registry credentials).
    ImageDenied,
    /// The task execution role lacks a permission it needs to start the task: ECR's
    /// authorization token, a secret, the registry credentials, the log group
    /// (`ResourceInitializationError` or a pull error naming `AccessDenied`).
    ExecutionRole,
    /// The task could not reach the registry or an AWS endpoint (timeouts, DNS, a connection
    /// refused): a route, NAT gateway, VPC endpoint or security group is missing.
    NoRoute,
    /// Anything else: ECS's text goes to the operator as is.
    Other,
}

impl StopCause {
    /// The cause of a stopped task, from its stop code and reasons.
    pub fn of(task: &TaskView) -> StopCause {
        let mut texts: Vec<&str> = task.stopped_reason.iter().map(String::as_str).collect();
        texts.extend(task.containers.iter().filter_map(|c| c.reason.as_deref()));
        let text = texts.join(" | ").to_ascii_lowercase();
        Self::of_text(&text)
    }

    /// The cause a lower-cased reason text names.
    fn of_text(text: &str) -> StopCause {
        let any = |needles: &[&str]| needles.iter().any(|n| text.contains(n));
        let denied = any(&["accessdenied", "access denied", "not authorized", "is not authorized"]);
        let unreachable = any(&[
            "i/o timeout",
            "dial tcp",
            "context deadline exceeded",
            "connection refused",
            "no such host",
            "timeout",
            "connection issue",
            "network is unreachable",
        ]);
        if text.contains("resourceinitializationerror") {
            // "unable to pull secrets or registry auth: ... AccessDeniedException", or the
            // logger's "failed to validate logger args: ... AccessDenied"; a connection issue
            // between the task and ECR, Secrets Manager or CloudWatch is a route.
            return if unreachable && !denied { StopCause::NoRoute } else { StopCause::ExecutionRole };
        }
        if text.contains("cannotpullcontainer") || text.contains("pull image") || text.contains("pull access") {
            if any(&["not found", "manifest unknown", "does not exist", "name unknown", "repository does not exist"]) {
                return StopCause::ImageNotFound;
            }
            if any(&["ecr:", "getauthorizationtoken", "batchgetimage", "getdownloadurlforlayer"]) && denied {
                return StopCause::ExecutionRole;
            }
            if any(&["pull access denied", "unauthorized", "denied", "authentication required", "forbidden"]) {
                return StopCause::ImageDenied;
            }
            if unreachable {
                return StopCause::NoRoute;
            }
        }
        StopCause::Other
    }
}

/// Whether a refusal's text is a quota of the account rather than the request ("You've reached
/// the limit on the number of tasks/vCPUs you can run concurrently").
pub fn is_quota_text(detail: &str) -> bool {
    let text = detail.to_ascii_lowercase();
    text.contains("reached the limit") || text.contains("limit on the number of") || text.contains("quota")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::task_view::ContainerView;

    fn stopped(reason: &str, container: Option<&str>) -> TaskView {
        TaskView {
            stopped_reason: Some(reason.to_string()),
            containers: container
                .map(|r| ContainerView {
                    name: "gocd-agent".into(),
                    image: None,
                    last_status: Some(crate::aws::status::TaskStatus::Stopped),
                    exit_code: None,
                    reason: Some(r.into()),
                })
                .into_iter()
                .collect(),
            ..TaskView::default()
        }
    }

    #[test]
    fn ecs_documented_stop_texts_map_to_their_causes() {
        let cases = [
            ("CannotPullContainerError: pull image manifest has been retried 1 time(s): failed to resolve ref docker.io/gocd/nope:v1: docker.io/gocd/nope:v1: not found", StopCause::ImageNotFound),
            ("CannotPullContainerError: Error response from daemon: manifest for gocd/agent:zz unknown: manifest unknown", StopCause::ImageNotFound),
            ("CannotPullContainerError: pull access denied for private/agent, repository does not exist or may require 'docker login'", StopCause::ImageNotFound),
            ("CannotPullContainerError: failed to authorize: failed to fetch anonymous token: unexpected status: 401 Unauthorized", StopCause::ImageDenied),
            ("ResourceInitializationError: unable to pull secrets or registry auth: execution resource retrieval failed: unable to retrieve ecr registry auth: service call has been retried 3 time(s): AccessDeniedException: User: arn:aws:sts::1:assumed-role/exec is not authorized to perform: ecr:GetAuthorizationToken", StopCause::ExecutionRole),
            ("ResourceInitializationError: failed to validate logger args: create stream has been retried 1 times: failed to create Cloudwatch log stream: AccessDeniedException", StopCause::ExecutionRole),
            ("ResourceInitializationError: unable to pull secrets or registry auth: There is a connection issue between the task and Amazon ECR. Check your task network configuration. RequestError: send request failed caused by: Post \"https://api.ecr.us-east-1.amazonaws.com/\": dial tcp 10.0.0.1:443: i/o timeout", StopCause::NoRoute),
            ("CannotPullContainerError: pull image manifest has been retried 5 time(s): failed to resolve ref docker.io/gocd/agent:v1: failed to do request: Head \"https://registry-1.docker.io/v2/\": dial tcp 54.1.2.3:443: i/o timeout", StopCause::NoRoute),
            ("Essential container in task exited", StopCause::Other),
        ];
        for (reason, cause) in cases {
            assert_eq!(StopCause::of(&stopped(reason, None)), cause, "{reason}");
        }
    }

    #[test]
    fn a_container_reason_counts_as_much_as_the_task_reason() {
        let task = stopped("Task failed to start", Some("CannotPullContainerError: ref gocd/nope:v1: not found"));
        assert_eq!(StopCause::of(&task), StopCause::ImageNotFound);
    }

    #[test]
    fn quota_texts_are_quotas() {
        assert!(is_quota_text("You've reached the limit on the number of vCPUs you can run concurrently"));
        assert!(!is_quota_text("Fargate requires task definition to have execution role ARN"));
    }
}
