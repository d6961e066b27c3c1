//! Links out of the reports: the ECS console (cluster, task), CloudWatch Logs (group, the agent's
//! stream) and GoCD's own job page. Every part that comes from a profile, AWS or GoCD is
//! percent-encoded, so a link can never leave its URL (the template escapes it for HTML again).

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub fn encode(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    for b in part.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The AWS console's own escaping inside `#logsV2:` fragments: `encode`, then `%` as `$25`.
fn console_fragment(part: &str) -> String {
    encode(part).replace('%', "$25")
}

fn console(region: &str) -> String {
    format!("https://{}.console.aws.amazon.com", encode(region))
}

/// The cluster's tasks in the ECS console.
pub fn ecs_cluster(region: &str, cluster: &str) -> String {
    format!("{}/ecs/v2/clusters/{}/tasks?region={}", console(region), encode(cluster), encode(region))
}

/// One task in the ECS console.
pub fn ecs_task(region: &str, cluster: &str, task_id: &str) -> String {
    format!(
        "{}/ecs/v2/clusters/{}/tasks/{}/configuration?region={}",
        console(region),
        encode(cluster),
        encode(task_id),
        encode(region)
    )
}

/// A log group in CloudWatch Logs.
pub fn log_group(region: &str, group: &str) -> String {
    format!(
        "{}/cloudwatch/home?region={}#logsV2:log-groups/log-group/{}",
        console(region),
        encode(region),
        console_fragment(group)
    )
}

/// One log stream of a group in CloudWatch Logs.
pub fn log_stream(region: &str, group: &str, stream: &str) -> String {
    format!("{}/log-events/{}", log_group(region, group), console_fragment(stream))
}

/// GoCD's job details page (relative: the report is shown inside GoCD).
pub fn gocd_job(pipeline: &str, pipeline_counter: i64, stage: &str, stage_counter: &str, job: &str) -> String {
    format!(
        "/go/tab/build/detail/{}/{pipeline_counter}/{}/{}/{}",
        encode(pipeline),
        encode(stage),
        encode(stage_counter),
        encode(job)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_encoded() {
        assert_eq!(encode("a b/\"<x>"), "a%20b%2F%22%3Cx%3E");
        assert_eq!(
            log_stream("us-east-1", "/gocd/agents", "gocd/gocd-agent/abc"),
            "https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1#logsV2:log-groups/log-group/$252Fgocd$252Fagents/log-events/gocd$252Fgocd-agent$252Fabc"
        );
        assert_eq!(gocd_job("build", 4, "test", "1", "unit tests"), "/go/tab/build/detail/build/4/test/1/unit%20tests");
    }
}
