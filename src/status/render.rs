//! The templates and the three render functions. minijinja escapes every value for HTML because
//! the templates are named `*.html` (its default auto-escape rule); nothing is marked safe.

use std::sync::OnceLock;
use std::time::SystemTime;

use minijinja::{context, Environment};
use serde::Serialize;

use super::{AgentRow, ClusterSnapshot, EventRow, StateCount, When};

fn env() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        for (name, source) in [
            ("base.html", include_str!("templates/base.html")),
            ("macros.html", include_str!("templates/macros.html")),
            ("plugin.html", include_str!("templates/plugin.html")),
            ("cluster.html", include_str!("templates/cluster.html")),
            ("agent.html", include_str!("templates/agent.html")),
        ] {
            if let Err(e) = env.add_template(name, source) {
                tracing::error!(template = name, error = %e, "status template does not compile");
            }
        }
        env
    })
}

fn render(name: &str, ctx: minijinja::Value) -> String {
    env().get_template(name).and_then(|t| t.render(ctx)).unwrap_or_else(|e| {
        tracing::error!(template = name, error = %e, "status report could not be rendered");
        format!("<div>The {name} status report could not be rendered: {}</div>", escape(&e.to_string()))
    })
}

/// Totals over every cluster profile, for the plugin report's cards.
#[derive(Debug, Serialize)]
struct Totals {
    profiles: usize,
    live: usize,
    max: usize,
    capacity_percent: usize,
    states: Vec<StateCount>,
    errors: usize,
    warnings: usize,
    calls: u64,
    throttled: u64,
    retries: u64,
}

/// An event with the cluster it happened to.
#[derive(Debug, Serialize)]
struct ClusterEvent<'a> {
    cluster: &'a str,
    event: &'a EventRow,
}

/// The plugin report: every cluster profile at a glance.
pub fn render_plugin(server_id: &str, clusters: &[ClusterSnapshot], broken: &[String]) -> String {
    let live: usize = clusters.iter().map(|c| c.live).sum();
    let max: usize = clusters.iter().map(|c| c.max_agents as usize).sum();
    let mut states: Vec<StateCount> = clusters.first().map(|c| c.states.clone()).unwrap_or_default();
    for s in &mut states {
        s.count = clusters.iter().flat_map(|c| &c.states).filter(|x| x.label == s.label).map(|x| x.count).sum();
    }
    let totals = Totals {
        profiles: clusters.len(),
        live,
        max,
        capacity_percent: (live.min(max) * 100).checked_div(max).unwrap_or(0),
        states,
        errors: clusters.iter().map(|c| c.errors).sum::<usize>() + broken.len(),
        warnings: clusters.iter().map(|c| c.warnings).sum(),
        calls: clusters.iter().map(|c| c.calls_total).sum(),
        throttled: clusters.iter().map(|c| c.throttled_total).sum(),
        retries: clusters.iter().map(|c| c.retries_total).sum(),
    };
    let mut problems: Vec<ClusterEvent<'_>> = clusters
        .iter()
        .flat_map(|c| c.events.iter().map(move |event| ClusterEvent { cluster: &c.cluster_name, event }))
        .collect();
    problems.sort_by(|a, b| b.event.at.iso.cmp(&a.event.at.iso));
    problems.truncate(10);
    let now = When::at(SystemTime::now(), SystemTime::now());
    render(
        "plugin.html",
        context! { version => env!("CARGO_PKG_VERSION"), server_id, clusters, broken, totals, problems, now },
    )
}

/// The cluster report.
pub fn render_cluster(c: &ClusterSnapshot) -> String {
    let now = When::at(SystemTime::now(), SystemTime::now());
    render("cluster.html", context! { c, now, version => env!("CARGO_PKG_VERSION") })
}

/// The agent report (`a` is `None` when the agent is unknown).
pub fn render_agent(
    a: Option<&AgentRow>,
    cluster_name: &str,
    region: &str,
    asked_agent: Option<&str>,
    asked_job: Option<&str>,
) -> String {
    let now = When::at(SystemTime::now(), SystemTime::now());
    render(
        "agent.html",
        context! { a, cluster_name, region, asked_agent, asked_job, now, version => env!("CARGO_PKG_VERSION") },
    )
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}
