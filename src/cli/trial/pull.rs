//! What `try` says of its task's image pull once the task runs: how long the pull took (ECS's
//! `pullStartedAt` to `pullStoppedAt`) and, for a Fargate profile whose image is in the
//! account's ECR, `doctor`'s SOCI verdict (`cli::doctor::soci`): the index found (v2 or v1), or
//! none, with what one could take off a start like this one and how to add one. These lines
//! only say: they never change how the run ends.

use std::io;
use std::time::Duration;

use super::watch::secs;
use super::Report;
use crate::aws::task_view::TaskView;
use crate::aws::AwsClients;
use crate::cli::doctor::soci::{self, Finding, Measured};
use crate::settings::{ClusterProfile, ElasticProfile};

/// The longest each ECR read of the SOCI check may take.
const ECR_READ_LIMIT: Duration = Duration::from_secs(20);

/// The `pull` line, then, for an ECR image of a Fargate profile, the `soci` line.
///
/// # Errors
/// Only when writing a line fails.
pub(super) async fn report(
    aws: &AwsClients,
    cluster: &ClusterProfile,
    elastic: &ElasticProfile,
    task: &TaskView,
    r: &mut Report<'_>,
) -> io::Result<()> {
    let pull = soci::pull_time(task);
    r.line("pull", pull_line(pull))?;
    let Some(image) = soci::checked_image(cluster, elastic, aws.account_id.as_deref(), &aws.region) else {
        return Ok(());
    };
    let index = soci::index(&aws.ecr_reads(ECR_READ_LIMIT), &image).await;
    let found = soci::finding(&elastic.image, &index, &Measured::ThisTask(pull));
    r.line("soci", soci_line(found))
}

/// What the `pull` line says.
fn pull_line(pull: Option<Duration>) -> String {
    match pull {
        Some(d) => format!("the image pull took {} (ECS's pullStartedAt to pullStoppedAt)", secs(d)),
        None => {
            "ECS gave no pull times for this task (pullStartedAt, pullStoppedAt): the pull was not measured".to_string()
        }
    }
}

/// What the `soci` line says: the finding, and the fix of a warning.
fn soci_line(found: Finding) -> String {
    match found.fix {
        Some(fix) => format!("{}; fix: {fix}", found.finding),
        None => found.finding,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::doctor::soci::Index;

    #[test]
    fn the_pull_line_says_the_pull_or_that_ecs_gave_none() {
        assert_eq!(
            pull_line(Some(Duration::from_millis(12_340))),
            "the image pull took 12.3 s (ECS's pullStartedAt to pullStoppedAt)"
        );
        assert!(pull_line(None).contains("not measured"));
    }

    #[test]
    fn the_soci_line_says_what_this_pull_would_save_and_how_to_add_an_index() {
        let image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/gocd/agent:v1";
        let absent = Index::Absent { v1_unchecked: "" };
        let line = soci_line(soci::finding(image, &absent, &Measured::ThisTask(Some(Duration::from_secs(20)))));
        assert!(line.starts_with(&format!("{image} has no SOCI index: ")), "{line}");
        assert!(line.contains("This task's pull took 20.0 s: a SOCI index could take up to 12.0 s off each start"));
        assert!(line.contains("; fix: add a SOCI index v2 with the SOCI CLI (soci convert "), "{line}");
        let found = soci_line(soci::finding(image, &Index::V2(None), &Measured::ThisTask(Some(Duration::ZERO))));
        assert_eq!(found, format!("{image} has a SOCI index v2: Fargate loads its large layers lazily"));
    }
}
