//! `doctor --elastic-profile`: an elastic profile's `TaskDefinitionArn` checked as create-agent
//! checks it, with the plugin's own functions — the task definition exists and has the agent
//! container, what it runs meets the cluster profile's allow-lists, it has a task role if the
//! profile turns ECS Exec on, and it suits every capacity provider the strategy may send it to
//! (one DescribeTaskDefinition per profile; the providers' kinds learned once).

use std::io;

use super::fix::fix_for;
use super::{Aws, Report};
use crate::aws::AwsClients;
use crate::cluster::launch::providers::{self, ProviderKinds};
use crate::cluster::launch::{guardrails, task_definition};
use crate::settings::{ClusterProfile, ElasticProfile};

/// Each elastic profile that names a task definition.
pub(super) async fn check(
    aws: &Aws,
    profile: &ClusterProfile,
    elastic: &[(String, ElasticProfile)],
    r: &mut Report<'_>,
) -> io::Result<()> {
    let given: Vec<(&String, &ElasticProfile, &str)> =
        elastic.iter().filter_map(|(shown, e)| Some((shown, e, e.task_definition_arn.as_deref()?))).collect();
    if given.is_empty() {
        return Ok(());
    }
    let clients = clients(aws, profile);
    // A strategy whose providers cannot be described is the capacity check's FAIL already.
    let kinds: Option<ProviderKinds> = match &profile.capacity_providers {
        Some(strategy) => providers::learn(&clients, &aws.cluster_name, strategy).await.ok(),
        None => None,
    };
    for (shown, e, arn) in given {
        let described = task_definition::describe_given(&clients, arn, e.agent_container_name.as_deref()).await;
        let td = match described {
            Ok(td) => td,
            Err(err) => {
                let fix = format!(
                    "fix TaskDefinitionArn or AgentContainerName (aws ecs describe-task-definition --task-definition {arn} --region {})",
                    aws.region
                );
                r.fail(
                    "task definition",
                    format!("{shown}: {}", err.detail),
                    fix_for(&err, "ecs:DescribeTaskDefinition", fix),
                )?;
                continue;
            }
        };
        let mut problems: Vec<guardrails::GuardrailError> = guardrails::check(profile, &td).err().into_iter().collect();
        problems.extend(guardrails::check_exec(e, &td).err());
        if let Some(kinds) = &kinds {
            problems.extend(guardrails::check_providers(kinds, &td).err());
        }
        if problems.is_empty() {
            let providers = if kinds.is_some() { " and suits every capacity provider of the strategy" } else { "" };
            r.ok("task definition", format!("{shown}: {} meets the allow-lists{providers}", td.arn))?;
        }
        for problem in problems {
            r.fail(
                "task definition",
                format!("{shown}: {problem}"),
                "register a task definition revision that fits, or widen the cluster profile's allow-lists",
            )?;
        }
    }
    Ok(())
}

/// The plugin's client set over doctor's clients (its calls counted apart from any engine's).
fn clients(aws: &Aws, profile: &ClusterProfile) -> AwsClients {
    aws.engine_clients(profile.role_arn.clone())
}
