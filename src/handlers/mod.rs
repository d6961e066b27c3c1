//! One file per request family; `dispatcher()` is the list of every request we answer, and
//! [`dispatch::Dispatcher`] the registry that parses each body and calls its handler.
//! Start here to follow a request: `create_agent.rs` goes from the parsed body to RunTask.

mod capabilities;
mod cluster_profile_changed;
mod create_agent;
pub mod dispatch;
mod job_completion;
mod migrate_config;
mod plugin_settings;
mod profiles;
mod server_ping;
mod should_assign_work;
mod status_reports;

pub use self::dispatch::Dispatcher;
use crate::protocol::requests::*;

/// Every v5 request this plugin answers, name → handler.
pub fn dispatcher() -> Dispatcher {
    Dispatcher::new()
        .on::<GetIcon, _, _>(capabilities::icon)
        .on::<GetCapabilities, _, _>(capabilities::capabilities)
        .on::<GetElasticAgentProfileMetadata, _, _>(profiles::elastic_metadata)
        .on::<GetElasticAgentProfileView, _, _>(profiles::elastic_view)
        .on::<ValidateElasticAgentProfile, _, _>(profiles::validate_elastic)
        .on::<GetClusterProfileMetadata, _, _>(profiles::cluster_metadata)
        .on::<GetClusterProfileView, _, _>(profiles::cluster_view)
        .on::<ValidateClusterProfile, _, _>(profiles::validate_cluster)
        .on::<MigrateConfiguration, _, _>(migrate_config::migrate)
        .on::<ClusterProfileChanged, _, _>(cluster_profile_changed::changed)
        .on::<PluginSettingsConfiguration, _, _>(plugin_settings::configuration)
        .on::<PluginSettingsView, _, _>(plugin_settings::view)
        .on::<CreateAgent, _, _>(create_agent::create_agent)
        .on::<ServerPing, _, _>(server_ping::server_ping)
        .on::<ShouldAssignWork, _, _>(should_assign_work::should_assign_work)
        .on::<JobCompletion, _, _>(job_completion::job_completion)
        .on::<PluginStatusReport, _, _>(status_reports::plugin_status_report)
        .on::<AgentStatusReport, _, _>(status_reports::agent_status_report)
        .on::<ClusterStatusReport, _, _>(status_reports::cluster_status_report)
}
