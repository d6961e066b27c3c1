//! ECS and EC2 statuses are types (`aws::status`), read once where the port builds its views:
//! no code of the plugin compares a status as a string. This scans `src` for a string
//! comparison of a status AWS reports (a task's last or desired status, a stop code, a container
//! instance's, cluster's, task definition's or capacity provider's status, an EC2 instance's
//! state): `== "RUNNING"`, `!= "stopped"`, `Some("SpotInterruption")`, a match arm `"DRAINING" =>`,
//! a pattern `"STOPPING" | "STOPPED"`, `matches!` over such literals. Test code may keep the
//! literals: `#[cfg(test)]` items and modules, files named `tests.rs`, and folders `tests/`.

use std::path::Path;

use crate::source_scan::{non_test_lines, src};

/// The statuses ECS and EC2 report, as AWS spells them.
const STATUSES: &[&str] = &[
    // A task's lastStatus and desiredStatus.
    "PROVISIONING",
    "PENDING",
    "ACTIVATING",
    "RUNNING",
    "DEACTIVATING",
    "STOPPING",
    "DEPROVISIONING",
    "STOPPED",
    "DELETED",
    // A task's stopCode.
    "TaskFailedToStart",
    "EssentialContainerExited",
    "UserInitiated",
    "ServiceSchedulerInitiated",
    "SpotInterruption",
    "TerminationNotice",
    "InfrastructureHealth",
    // A container instance's, a cluster's, a task definition's, a capacity provider's status.
    "ACTIVE",
    "INACTIVE",
    "DRAINING",
    "REGISTERING",
    "DEREGISTERING",
    "REGISTRATION_FAILED",
    "DELETE_IN_PROGRESS",
    "FAILED",
    // An EC2 instance's state name.
    "pending",
    "running",
    "shutting-down",
    "terminated",
    "stopping",
    "stopped",
];

/// Where a status literal is a comparison: `(before the literal, after it)`.
const COMPARISONS: &[(&str, &str)] = &[
    ("==", ""),
    ("!=", ""),
    ("", "=="),
    ("", "!="),
    ("Some(", ")"),
    ("", "=>"),
    ("", "|"),
    ("|", ""),
    ("eq_ignore_ascii_case(", ""),
];

/// The status literal `line` compares, if any.
fn compared_status(line: &str) -> Option<&'static str> {
    let code = line.split("//").next().unwrap_or_default();
    STATUSES.iter().copied().find(|status| {
        let quoted = format!("\"{status}\"");
        code.match_indices(&quoted).any(|(at, _)| {
            let before = code[..at].trim_end();
            let after = code[at + quoted.len()..].trim_start();
            code.contains("matches!(") || COMPARISONS.iter().any(|(b, a)| before.ends_with(b) && after.starts_with(a))
        })
    })
}

/// Every string comparison of a status in the plugin's non-test code under `root`, as
/// `file:line: text`.
fn string_comparisons(root: &Path) -> Vec<String> {
    non_test_lines(root)
        .into_iter()
        .filter_map(|line| {
            let status = compared_status(&line.code)?;
            Some(format!("{}: compares \"{status}\" as a string: {}", line.at(), line.code.trim()))
        })
        .collect()
}

#[test]
fn no_status_is_compared_as_a_string_outside_tests() {
    let found = string_comparisons(&src());
    assert!(
        found.is_empty(),
        "statuses are types (src/aws/status/): match on them instead of their text:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_sees_comparisons() {
    for line in [
        r#"if c.status == "DRAINING" {"#,
        r#"t.last_status != "STOPPED" && ours"#,
        r#"stop_code.as_deref() == Some("SpotInterruption")"#,
        r#"    "ACTIVE" => true,"#,
        r#"matches!(s.as_str(), "DEACTIVATING" | "STOPPING")"#,
        r#"Some((_, state)) if state != "pending" && state != "running" => {"#,
    ] {
        assert!(compared_status(line).is_some(), "{line}");
    }
    for line in [
        r#"format!("ECS cluster {name} is {status}, not ACTIVE")"#,
        r#"if value == "RUNNINGX" {"#,
        r#"// a comment: status == "RUNNING""#,
        r#"let x = TaskStatus::Running;"#,
    ] {
        assert_eq!(compared_status(line), None, "{line}");
    }
}
