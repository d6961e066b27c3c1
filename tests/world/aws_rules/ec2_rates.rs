//! EC2's request throttling ("Request throttling for the Amazon EC2 API",
//! docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html), per account and region,
//! answered as EC2 answers it: `RequestLimitExceeded`, "Request limit exceeded.", HTTP 503.
//!
//! - Request rate (`ec2.request_rate`): every action has a bucket of its own, sized by its
//!   category: non-mutating `Describe*`/`List*`/`Search*`/`Get*` 100, refilled 20 a second;
//!   the same actions of the "unfiltered and unpaginated" list (`DescribeInstances`,
//!   `DescribeSecurityGroups`, ...) asked with no filter and no paging, 50 and 10, from a bucket
//!   apart; other mutating actions 50 and 5; and the page's own figures where it gives them:
//!   `RunInstances` and `StartInstances` 5 and 2, `TerminateInstances` 100 and 5, `CreateTags`
//!   and `DeleteTags` 100 and 10.
//! - Resource rate (`ec2.resource_rate`): instances, on top of the request buckets:
//!   `RunInstances` takes its `MaxCount` from a bucket of 1000 refilled 2 a second,
//!   `TerminateInstances` one token per instance id from 1000 refilled 20 a second.

use super::*;

/// EC2's answer to a throttled call.
fn limit_exceeded(rule: &'static str) -> Broken {
    Broken { rule, status: 503, code: "RequestLimitExceeded", message: "Request limit exceeded.".into() }
}

const NON_MUTATING: Quota = Quota { burst: 100.0, per_second: 20.0 };
const UNFILTERED_UNPAGINATED: Quota = Quota { burst: 50.0, per_second: 10.0 };
const MUTATING: Quota = Quota { burst: 50.0, per_second: 5.0 };
pub const RUN_INSTANCES_QUOTA: Quota = Quota { burst: 5.0, per_second: 2.0 };
const TERMINATE_INSTANCES_QUOTA: Quota = Quota { burst: 100.0, per_second: 5.0 };
const TAGS_QUOTA: Quota = Quota { burst: 100.0, per_second: 10.0 };
pub const INSTANCES_LAUNCHED_QUOTA: Quota = Quota { burst: 1000.0, per_second: 2.0 };
const INSTANCES_TERMINATED_QUOTA: Quota = Quota { burst: 1000.0, per_second: 20.0 };

/// The non-mutating actions that draw on the smaller bucket when asked unfiltered and unpaged.
const UNFILTERED_UNPAGINATED_ACTIONS: &[&str] = &[
    "DescribeInstances",
    "DescribeInstanceStatus",
    "DescribeNetworkInterfaces",
    "DescribeSecurityGroups",
    "DescribeSnapshots",
    "DescribeSpotInstanceRequests",
    "DescribeVolumes",
];

fn non_mutating(op: &str) -> bool {
    ["Describe", "List", "Search", "Get"].iter().any(|p| op.starts_with(p))
}

/// Whether a query call names a filter or pages (`Filter.N.*`, `MaxResults`, `NextToken`).
fn filtered_or_paged(call: &Call) -> bool {
    call.form.iter().any(|(k, _)| k.starts_with("Filter.") || k == "MaxResults" || k == "NextToken")
}

impl AwsRules {
    pub(super) fn ec2_quotas(&self, call: &Call) -> Result<(), Broken> {
        let op = call.operation.as_str();
        let (bucket, quota) = match op {
            "RunInstances" | "StartInstances" => (op.to_string(), RUN_INSTANCES_QUOTA),
            "TerminateInstances" => (op.to_string(), TERMINATE_INSTANCES_QUOTA),
            "CreateTags" | "DeleteTags" => (op.to_string(), TAGS_QUOTA),
            _ if UNFILTERED_UNPAGINATED_ACTIONS.contains(&op) && !filtered_or_paged(call) => {
                (format!("{op} unfiltered"), UNFILTERED_UNPAGINATED)
            }
            _ if non_mutating(op) => (op.to_string(), NON_MUTATING),
            _ => (op.to_string(), MUTATING),
        };
        let mut spends = vec![Spend { rule: EC2_REQUEST_RATE, bucket, quota, n: 1.0 }];
        let instances = match op {
            "RunInstances" => {
                Some((INSTANCES_LAUNCHED_QUOTA, call.form_param("MaxCount").and_then(|n| n.parse().ok())))
            }
            "TerminateInstances" => {
                let ids = call.form.iter().filter(|(k, _)| k.starts_with("InstanceId.")).count();
                Some((INSTANCES_TERMINATED_QUOTA, Some(ids as f64)))
            }
            _ => None,
        };
        if let Some((quota, n)) = instances {
            let bucket = format!("{op} instances");
            spends.push(Spend { rule: EC2_RESOURCE_RATE, bucket, quota, n: n.unwrap_or(1.0) });
        }
        self.spend(call, spends).map_err(limit_exceeded)
    }
}
