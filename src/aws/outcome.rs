//! The port's vocabulary for calls that did not succeed, and the one classifier that reads it
//! from what AWS sent: the error code (`ProvideErrorMetadata::code`), the HTTP status of the raw
//! response, the kind of transport failure, and — where AWS gives nothing but text — the
//! documented texts of its messages and of RunTask's and StartTask's `failures[].reason`.
//! Nothing outside `aws/` reads a code or a message to decide anything: it matches on
//! [`Failure`] and [`Placement`].

use super::status::ContainerInstanceStatus;

/// What became of an AWS call that did not succeed, decided once, here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Failure {
    /// AWS said we are calling too fast: AWS did not act; try again after a pause.
    Throttled,
    /// A 5xx, a timeout, a dropped connection or an answer that could not be read: AWS may or
    /// may not have acted (the outcome is unknown); trying again may succeed.
    Transient,
    /// No capacity for what was asked right now (EC2's `InsufficientInstanceCapacity` and
    /// kin, ECS's placement failures): another subnet, type or later may succeed.
    NoCapacity,
    /// The identity may not make the call (`AccessDenied…`, `UnauthorizedOperation`): grant it.
    Denied,
    /// What the call names does not exist (a task ECS forgot, a family without a revision, an
    /// instance type, a queue, an AMI): an ordinary answer for a lookup.
    NotFound,
    /// A `DryRun` call that would have succeeded (EC2's `DryRunOperation`).
    DryRunPassed,
    /// What the call names is not in a state that allows it (EC2's `IncorrectInstanceState`:
    /// starting an instance still stopping, stopping one already stopped): look again and decide
    /// anew; the same call as is will not help now.
    WrongState,
    /// AWS refused the request as it stands (a bad parameter, a rule of AWS): trying again as
    /// is will not help; the operator must change something.
    Refused,
    /// The call could not be made at all (credentials, a role that cannot be assumed, a bad
    /// endpoint): nothing changes until the profile or the environment does.
    NotSent,
}

impl Failure {
    /// Whether sending the same call again after a backoff may succeed (what the call budget
    /// retries). No capacity is not: the caller tries elsewhere or later, as it decides.
    pub fn transient(self) -> bool {
        matches!(self, Failure::Throttled | Failure::Transient)
    }
}

/// Codes AWS uses to say "too fast" (ECS, EC2, SQS, STS, IAM, EventBridge).
const THROTTLE_CODES: &[&str] = &[
    "ThrottlingException",
    "Throttling",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "RequestThrottled",
    "RequestThrottledException",
];

/// EC2's codes for "no capacity here, now" (RunInstances; see docs/aws-rules.md): each means
/// "try another subnet, type or market".
const CAPACITY_CODES: &[&str] = &[
    "InsufficientInstanceCapacity",
    "InsufficientCapacity",
    "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity",
    "SpotMaxPriceTooLow",
    "MaxSpotInstanceCountExceeded",
    // Not capacity as such, but "try another subnet" all the same.
    "InsufficientFreeAddressesInSubnet",
    "Unsupported",
    "capacity-not-available",
    "capacity-oversubscribed",
];

/// EC2's codes for "not in a state that allows this" (StopInstances, StartInstances).
const WRONG_STATE_CODES: &[&str] = &["IncorrectInstanceState", "IncorrectState", "IncorrectSpotRequestState"];

/// Classifies an error answer of `operation`: its `code`, `message` and the HTTP `status`.
pub fn classify(operation: &str, code: Option<&str>, message: &str, status: Option<u16>) -> Failure {
    let Some(code) = code else {
        return match status {
            Some(s) if s >= 500 => Failure::Transient,
            _ => Failure::Refused,
        };
    };
    if THROTTLE_CODES.contains(&code) {
        return Failure::Throttled;
    }
    if CAPACITY_CODES.contains(&code) {
        return Failure::NoCapacity;
    }
    if code == "DryRunOperation" {
        return Failure::DryRunPassed;
    }
    if WRONG_STATE_CODES.contains(&code) {
        return Failure::WrongState;
    }
    if code.contains("AccessDenied") || code.contains("Unauthorized") {
        return Failure::Denied;
    }
    if not_found(operation, code, message) {
        return Failure::NotFound;
    }
    match status {
        Some(s) if s >= 500 => Failure::Transient,
        _ => Failure::Refused,
    }
}

/// Whether the error says the thing the call names does not exist.
fn not_found(operation: &str, code: &str, message: &str) -> bool {
    match (operation, code) {
        // "The referenced task was not found.": a task stopped long enough ago to be forgotten
        // (AWS keeps a stopped task about an hour), or never in this cluster.
        ("StopTask", "InvalidParameterException") => message.contains("referenced task was not found"),
        // A family without a revision ("Unable to describe task definition."), or a name ECS
        // cannot parse.
        ("DescribeTaskDefinition", "ClientException" | "InvalidParameterException") => true,
        // CloudFormation says "Stack with id NAME does not exist" as a ValidationError.
        ("DescribeStacks", "ValidationError") => message.contains("does not exist"),
        _ => {
            code.ends_with("NotFound")
                || code.ends_with("NotFoundException")
                || code == "InvalidInstanceType"
                || code == "NoSuchEntity"
                || code.contains("NonExistentQueue")
                || code.contains("QueueDoesNotExist")
        }
    }
}

/// The instance types DescribeInstanceTypes says do not exist, out of `asked`: EC2 names them
/// only in its message ("The following supplied instance types do not exist: [zz9.huge]"); a
/// message without that list names them as it may.
pub fn unknown_instance_types<'a>(message: &str, asked: &'a [String]) -> Vec<&'a String> {
    let Some((_, list)) = message.rsplit_once('[') else {
        return asked.iter().filter(|a| message.contains(a.as_str())).collect();
    };
    let list = list.split(']').next().unwrap_or(list);
    let names: Vec<&str> = list.split(',').map(|n| n.trim().trim_matches(['\'', '"'])).collect();
    asked.iter().filter(|a| names.contains(&a.as_str())).collect()
}

/// Why RunTask or StartTask placed no task, from one entry of its `failures` (`reason`, and
/// `detail` when ECS gave one); see ECS's "API failure reasons".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Placement {
    /// No room: `RESOURCE:CPU`, `RESOURCE:MEMORY`, `RESOURCE:PORTS…`, `RESOURCE:ENI`,
    /// `RESOURCE:GPU`, Fargate's "Capacity is unavailable at this time…", a capacity provider
    /// with no instances, or no reason at all. Later, or elsewhere, may succeed.
    NoCapacity,
    /// The container instance's agent is disconnected (`AGENT`).
    AgentDisconnected,
    /// The container instance lacks an attribute the task needs (`ATTRIBUTE`), or a placement
    /// constraint excludes every instance.
    Unsuitable,
    /// The container instance (or cluster) does not exist (`MISSING`), or is not active
    /// (`INACTIVE`, `DRAINING`).
    Missing,
    /// Anything else ECS says: the text goes to the operator as is.
    Other,
}

impl Placement {
    /// Classifies one entry of `failures`.
    pub fn of(reason: &str, detail: &str) -> Placement {
        let upper = reason.trim().to_ascii_uppercase();
        let text = format!("{reason} {detail}").to_ascii_lowercase();
        if upper.starts_with("RESOURCE:")
            || text.contains("capacity is unavailable")
            || text.contains("insufficient capacity")
            || text.contains("no capacity")
            || text.contains("no container instances were found")
        {
            return Placement::NoCapacity;
        }
        // `INACTIVE` and `DRAINING` name the container instance's status: it takes no task.
        if matches!(
            ContainerInstanceStatus::from(upper.as_str()),
            ContainerInstanceStatus::Inactive | ContainerInstanceStatus::Draining
        ) {
            return Placement::Missing;
        }
        match upper.as_str() {
            "AGENT" => Placement::AgentDisconnected,
            "ATTRIBUTE" => Placement::Unsuitable,
            "MISSING" => Placement::Missing,
            _ if text.contains("placement constraint") => Placement::Unsuitable,
            _ => Placement::Other,
        }
    }

    /// The failure of a launch that placed nothing, for these reasons: no capacity when ECS gave
    /// no reason or any reason is capacity, else the first reason's.
    pub fn failure_of_all(placements: &[Placement]) -> Failure {
        if placements.is_empty() || placements.contains(&Placement::NoCapacity) {
            return Failure::NoCapacity;
        }
        placements[0].failure()
    }

    /// The failure a launch that placed nothing for this reason is.
    pub fn failure(self) -> Failure {
        match self {
            Placement::NoCapacity | Placement::AgentDisconnected => Failure::NoCapacity,
            Placement::Unsuitable | Placement::Missing | Placement::Other => Failure::Refused,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_in_the_wrong_state_and_a_start_without_capacity_are_told_apart() {
        let m = "The instance 'i-0abc' is not in a state from which it can be started.";
        assert_eq!(classify("StartInstances", Some("IncorrectInstanceState"), m, Some(400)), Failure::WrongState);
        let m = "We currently do not have sufficient m5.large capacity in the Availability Zone you requested.";
        assert_eq!(classify("StartInstances", Some("InsufficientInstanceCapacity"), m, Some(500)), Failure::NoCapacity);
        assert!(!Failure::WrongState.transient(), "not retried as is: the next pass looks again");
    }

    #[test]
    fn throttle_codes_are_throttles_whatever_the_status() {
        for code in ["ThrottlingException", "Throttling", "RequestLimitExceeded", "TooManyRequestsException"] {
            assert_eq!(classify("RunTask", Some(code), "Rate exceeded", Some(400)), Failure::Throttled, "{code}");
        }
        assert_eq!(classify("DescribeInstances", Some("RequestLimitExceeded"), "", Some(503)), Failure::Throttled);
    }

    #[test]
    fn a_server_error_is_transient_and_a_client_error_is_refused() {
        assert_eq!(classify("ListTasks", Some("ServerException"), "boom", Some(500)), Failure::Transient);
        assert_eq!(classify("ListTasks", None, "", Some(503)), Failure::Transient);
        assert_eq!(classify("RunTask", Some("InvalidParameterException"), "bad", Some(400)), Failure::Refused);
        assert_eq!(classify("RunTask", None, "", Some(400)), Failure::Refused);
        assert_eq!(classify("RunTask", Some("ClientException"), "no such family", Some(400)), Failure::Refused);
    }

    #[test]
    fn ec2_capacity_codes_are_no_capacity_even_as_server_errors() {
        for code in CAPACITY_CODES {
            assert_eq!(classify("RunInstances", Some(code), "", Some(500)), Failure::NoCapacity, "{code}");
        }
        assert!(!Failure::NoCapacity.transient(), "the caller moves on, the budget does not retry");
    }

    #[test]
    fn permission_codes_are_denied() {
        for code in ["AccessDeniedException", "AccessDenied", "UnauthorizedOperation", "UnauthorizedException"] {
            assert_eq!(classify("DescribeSubnets", Some(code), "", Some(403)), Failure::Denied, "{code}");
        }
        assert!(!Failure::Denied.transient());
    }

    #[test]
    fn stop_task_of_a_forgotten_task_is_not_found() {
        let forgotten = "The referenced task was not found.";
        assert_eq!(classify("StopTask", Some("InvalidParameterException"), forgotten, Some(400)), Failure::NotFound);
        // The same code for another reason is a refusal.
        let other = "Invalid identifier: Unexpected number of separators";
        assert_eq!(classify("StopTask", Some("InvalidParameterException"), other, Some(400)), Failure::Refused);
    }

    #[test]
    fn a_family_without_a_revision_is_not_found() {
        let text = "Unable to describe task definition.";
        assert_eq!(classify("DescribeTaskDefinition", Some("ClientException"), text, Some(400)), Failure::NotFound);
        let parse = "Invalid revision number";
        let code = Some("InvalidParameterException");
        assert_eq!(classify("DescribeTaskDefinition", code, parse, Some(400)), Failure::NotFound);
    }

    #[test]
    fn a_stack_that_does_not_exist_is_not_found() {
        let missing = "Stack with id gocd-ci does not exist";
        assert_eq!(classify("DescribeStacks", Some("ValidationError"), missing, Some(400)), Failure::NotFound);
        let other = "1 validation error detected: Value 'a b' at 'stackName' failed to satisfy constraint";
        assert_eq!(classify("DescribeStacks", Some("ValidationError"), other, Some(400)), Failure::Refused);
    }

    #[test]
    fn not_found_codes_of_ec2_iam_sqs_and_eventbridge() {
        for (op, code) in [
            ("DescribeImages", "InvalidAMIID.NotFound"),
            ("DescribeInstances", "InvalidInstanceID.NotFound"),
            ("DescribeKeyPairs", "InvalidKeyPair.NotFound"),
            ("DescribeInstanceTypes", "InvalidInstanceType"),
            ("GetInstanceProfile", "NoSuchEntity"),
            ("GetQueueAttributes", "AWS.SimpleQueueService.NonExistentQueue"),
            ("GetQueueAttributes", "QueueDoesNotExist"),
            ("ListRuleNamesByTarget", "ResourceNotFoundException"),
            ("DescribeClusters", "ClusterNotFoundException"),
        ] {
            assert_eq!(classify(op, Some(code), "", Some(400)), Failure::NotFound, "{code}");
        }
    }

    #[test]
    fn a_dry_run_that_would_succeed_is_its_own_answer() {
        let text = "Request would have succeeded, but DryRun flag is set.";
        assert_eq!(classify("RunInstances", Some("DryRunOperation"), text, Some(412)), Failure::DryRunPassed);
    }

    #[test]
    fn ec2_names_unknown_instance_types_in_its_message() {
        let asked: Vec<String> = ["c5.xlarge", "zz9.huge", "qq1.tiny"].map(String::from).into();
        let one = "The following supplied instance types do not exist: [zz9.huge]";
        assert_eq!(unknown_instance_types(one, &asked), [&asked[1]]);
        let two = "The following supplied instance types do not exist: [zz9.huge, qq1.tiny]";
        assert_eq!(unknown_instance_types(two, &asked), [&asked[1], &asked[2]]);
        let with_id = "InvalidInstanceType: ... do not exist: [zz9.huge] (request id 1-2-3)";
        assert_eq!(unknown_instance_types(with_id, &asked), [&asked[1]]);
        assert!(unknown_instance_types("something else", &asked).is_empty());
    }

    #[test]
    fn resource_reasons_are_no_capacity() {
        for reason in ["RESOURCE:CPU", "RESOURCE:MEMORY", "RESOURCE:PORTS", "RESOURCE:PORTS_TCP", "RESOURCE:ENI"] {
            assert_eq!(Placement::of(reason, ""), Placement::NoCapacity, "{reason}");
        }
    }

    #[test]
    fn fargate_capacity_text_is_no_capacity() {
        let text = "Capacity is unavailable at this time. Please try again later or in a different availability zone";
        assert_eq!(Placement::of(text, ""), Placement::NoCapacity);
        assert_eq!(Placement::NoCapacity.failure(), Failure::NoCapacity);
    }

    #[test]
    fn capacity_provider_texts_are_no_capacity() {
        let none = "No Container Instances were found in your capacity provider";
        assert_eq!(Placement::of(none, ""), Placement::NoCapacity);
        assert_eq!(Placement::of("insufficient capacity", "in us-east-1a"), Placement::NoCapacity);
    }

    #[test]
    fn agent_attribute_and_missing_reasons() {
        assert_eq!(Placement::of("AGENT", ""), Placement::AgentDisconnected);
        assert_eq!(Placement::of("ATTRIBUTE", "ecs.cpu-architecture"), Placement::Unsuitable);
        assert_eq!(Placement::of("MemberOf placement constraint unsatisfied", ""), Placement::Unsuitable);
        assert_eq!(Placement::of("MISSING", ""), Placement::Missing);
        assert_eq!(Placement::of("INACTIVE", ""), Placement::Missing);
        assert_eq!(Placement::of("something new", ""), Placement::Other);
        assert_eq!(Placement::Missing.failure(), Failure::Refused);
    }

    #[test]
    fn a_launch_that_placed_nothing_is_no_capacity_unless_every_reason_says_otherwise() {
        assert_eq!(Placement::failure_of_all(&[]), Failure::NoCapacity, "no reason given");
        assert_eq!(Placement::failure_of_all(&[Placement::Missing, Placement::NoCapacity]), Failure::NoCapacity);
        assert_eq!(Placement::failure_of_all(&[Placement::Missing]), Failure::Refused);
    }
}
