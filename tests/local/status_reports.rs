//! The status reports rendered with realistic data full of hostile strings (`<script>`, quotes,
//! newlines, very long values in job names, profile values, tags, stop reasons, events): every
//! value is escaped, every link stays a link to AWS's console or GoCD, nothing remote is loaded,
//! and the markup stays balanced.
//!
//! With `STATUS_REPORTS_DIR=DIR` the rendered pages are also written there (`scripts/screenshots`
//! photographs them).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use aws_sdk_ecs::types::{Container, Tag, Task, TaskStopCode};
use aws_smithy_types::DateTime;
use ecs_elastic_agent::aws::calls::OpCounts;
use ecs_elastic_agent::cluster::agents::tasks::Capacity;
use ecs_elastic_agent::cluster::agents::tasks::{TaskStatus, TaskView};
use ecs_elastic_agent::cluster::agents::{AgentRecord, NewAgent, Phase, Registry};
use ecs_elastic_agent::cluster::base::recent::Event;
use ecs_elastic_agent::protocol::host_calls::HealthKind;
use ecs_elastic_agent::protocol::types::JobIdentifier;
use ecs_elastic_agent::settings::{ClusterProfile, Properties};
use ecs_elastic_agent::status::{self, ClusterFacts};

const SCRIPT: &str = "<script>alert(\"x\")</script>";

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_790_000_000 + secs)
}

fn dt(secs: u64) -> DateTime {
    DateTime::from_secs(1_790_000_000 + secs as i64)
}

fn long_value() -> String {
    "a-very-long-value-without-any-space-".repeat(140)
}

fn cluster_profile() -> ClusterProfile {
    let props: Properties = [
        ("ClusterName", "ci-shared"),
        ("Region", "us-east-1"),
        ("RoleArn", "arn:aws:iam::111111111111:role/gocd-agents"),
        ("LogGroup", "/gocd/agents"),
        ("Tags", "team=platform\ncost-center=ci"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), Some(v.to_string())))
    .collect();
    ClusterProfile::parse(&props).expect("a valid cluster profile")
}

fn job(id: i64, name: &str) -> JobIdentifier {
    JobIdentifier {
        pipeline_name: format!("build\"><img src=x onerror=alert(1)>{id}"),
        pipeline_label: "7".into(),
        pipeline_counter: 7,
        stage_name: "test'stage".into(),
        stage_counter: "1".into(),
        job_name: name.to_string(),
        job_id: id,
    }
}

/// An ECS task as DescribeTasks returns it, with every timestamp and hostile tags and reasons.
fn task(id: &str, stopped: bool) -> TaskView {
    let mut t = Task::builder()
        .task_arn(format!("arn:aws:ecs:us-east-1:111111111111:task/ci-shared/{id}"))
        .cluster_arn("arn:aws:ecs:us-east-1:111111111111:cluster/ci-shared")
        .last_status(if stopped { "STOPPED" } else { "RUNNING" })
        .desired_status(if stopped { "STOPPED" } else { "RUNNING" })
        .launch_type(aws_sdk_ecs::types::LaunchType::Fargate)
        .task_definition_arn("arn:aws:ecs:us-east-1:111111111111:task-definition/gocd-abc:1")
        .created_at(dt(0))
        .pull_started_at(dt(4))
        .pull_stopped_at(dt(21))
        .started_at(dt(26))
        .availability_zone("us-east-1a")
        .cpu("512")
        .memory("1024")
        .tags(Tag::builder().key("gocd:elastic-agent-id").value(format!("ea-{id}")).build())
        .tags(Tag::builder().key("team").value(SCRIPT).build())
        .tags(Tag::builder().key("note\"><svg onload=alert(1)>").value(long_value()).build());
    let container = Container::builder().name("gocd-agent").image("gocd/gocd-agent-alpine-3.19:v24.1.0");
    if stopped {
        t = t
            .stopped_at(dt(400))
            .stop_code(TaskStopCode::EssentialContainerExited)
            .stopped_reason("Essential container in task exited: <b>OOM</b> & \"killed\"\nsecond line")
            .containers(
                container.last_status("STOPPED").exit_code(137).reason("OutOfMemoryError: <iframe src=//evil>").build(),
            );
    } else {
        t = t.containers(container.last_status("RUNNING").build());
    }
    TaskView::from_sdk(&t.build())
}

/// The agents of a registry with a building agent, a stopped one, one starting and one
/// launching (records are changed only through the registry's transitions; the times GoCD saw
/// them are set on the copies a status report reads).
fn registry() -> Agents {
    let mut r = Registry::default();
    let jobs = [
        (101, "ea-building", format!("unit tests {SCRIPT}\nwith a newline")),
        (102, "ea-stopped", long_value()),
        (103, "ea-starting", "integration 'quoted' \"double\"".to_string()),
        (104, "ea-launching", "lint".to_string()),
    ];
    for (id, agent, name) in &jobs {
        let reserved = r.reserve(
            &job(*id, name),
            agent.to_string().into(),
            10,
            NewAgent {
                image: format!("gocd/gocd-agent-alpine-3.19:v24.1.0{SCRIPT}"),
                elastic_profile: "3f2a9c1b7d4e".into(),
                settings: "team-a".into(),
                environment: Some(format!("prod{SCRIPT}")),
                reuse: None,
            },
            at(0),
        );
        assert!(matches!(reserved, ecs_elastic_agent::cluster::agents::Reservation::Reserved { .. }));
    }
    r.launched("ea-building", task("building", false), Capacity::Fargate);
    r.launched("ea-stopped", task("stopped", true), Capacity::Fargate);
    r.launched("ea-starting", task("starting", false), Capacity::Fargate);
    r.stopped(
        "ea-stopped",
        "the task of agent ea-stopped stopped before the job completed: Essential container in task exited: <b>OOM</b>",
        at(400),
    );
    assert_eq!(r.get("ea-stopped").unwrap().phase, Phase::Stopped);
    let mut agents: Vec<AgentRecord> = r.all().cloned().collect();
    for a in &mut agents {
        match a.agent_id.as_str() {
            "ea-building" => (a.registered_at, a.assigned_at) = (Some(at(48)), Some(at(50))),
            "ea-stopped" => (a.registered_at, a.attempt) = (Some(at(52)), 2),
            "ea-launching" => a.capacity = Some(Capacity::Fargate),
            _ => {}
        }
    }
    Agents(agents)
}

/// A status report's copy of a registry's agents.
struct Agents(Vec<AgentRecord>);

impl Agents {
    fn get(&self, agent_id: &str) -> Option<&AgentRecord> {
        self.0.iter().find(|a| a.agent_id == agent_id)
    }
}

fn facts<'a>(profile: &'a ClusterProfile, registry: &Agents) -> ClusterFacts<'a> {
    let mut calls = BTreeMap::new();
    calls.insert("DescribeTasks", OpCounts { calls: 120, throttled: 3, retries: 3, failed: 0 });
    calls.insert("RunTask", OpCounts { calls: 9, throttled: 0, retries: 0, failed: 1 });
    ClusterFacts {
        key: "3f2a9c1b7d4e",
        profile,
        region: "us-east-1",
        agents: registry.0.clone(),
        events: vec![
            Event {
                at: at(400),
                kind: HealthKind::Error,
                message: format!("job {SCRIPT} failed: <iframe src=//evil></iframe>"),
            },
            Event {
                at: at(300),
                kind: HealthKind::Warning,
                message: format!("FARGATE_SPOT capacity was refused; {}", long_value()),
            },
        ],
        calls,
        role_expires: Some(at(3600)),
        role_error: Some("AccessDenied: not authorized <script>".into()),
        assume_role_calls: 2,
        swept_orphans: 1,
    }
}

/// Every link target, with the HTML escaping undone (minijinja also escapes `/`).
fn hrefs(html: &str) -> Vec<String> {
    html.split("href=\"")
        .skip(1)
        .map(|rest| {
            let raw = rest.split('"').next().unwrap_or("");
            raw.replace("&#x2f;", "/")
                .replace("&#x27;", "'")
                .replace("&quot;", "\"")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&")
        })
        .collect()
}

/// Escaping, links, assets and balance: what every report must satisfy.
#[track_caller]
fn check_safe(name: &str, html: &str) {
    let lower = html.to_lowercase();
    for raw in ["<script", "<img", "<iframe", "<svg", "<b>", "<object", "<embed", "<link", "<base", "<form"] {
        assert!(!lower.contains(raw), "{name}: {raw:?} reached the HTML unescaped:\n{html}");
    }
    // Escaped text has no `<`, so every `<...>` is one of our tags: none loads or runs anything.
    for tag in lower.split('<').skip(1).map(|rest| rest.split('>').next().unwrap_or("")) {
        let attributes = tag.split_whitespace().skip(1);
        for attribute in attributes {
            let bad = attribute.starts_with("src=") || attribute.starts_with("on") || attribute.starts_with("srcset=");
            assert!(!bad, "{name}: tag <{tag}> has attribute {attribute}");
        }
    }
    let style = lower.split("<style>").nth(1).and_then(|s| s.split("</style>").next()).unwrap_or("");
    assert!(!style.contains("url(") && !style.contains("@import"), "{name}: the style loads something");
    for (open, close) in [
        ("<div", "</div>"),
        ("<table", "</table>"),
        ("<tr", "</tr>"),
        ("<td", "</td>"),
        ("<a ", "</a>"),
        ("<span", "</span>"),
    ] {
        assert_eq!(html.matches(open).count(), html.matches(close).count(), "{name}: unbalanced {open}");
    }
    for href in hrefs(html) {
        let ok =
            href.starts_with("https://us-east-1.console.aws.amazon.com/") || href.starts_with("/go/tab/build/detail/");
        assert!(ok, "{name}: link {href:?} goes somewhere unexpected");
        assert!(!href.contains(['<', '>', ' ', '\n']), "{name}: link {href:?} is not encoded");
    }
    if let Some(dir) = std::env::var_os("STATUS_REPORTS_DIR") {
        let page = format!("<!doctype html><html><head><meta charset=\"utf-8\"></head><body style=\"margin:0\"><div style=\"padding:20px 28px\">{html}</div></body></html>\n");
        std::fs::write(std::path::Path::new(&dir).join(format!("hostile-{name}.html")), page).expect("write the page");
    }
}

#[test]
fn cluster_report_escapes_everything_and_shows_the_summary_first() {
    let profile = cluster_profile();
    let registry = registry();
    let mut snapshot = status::build_snapshot(&facts(&profile, &registry), at(500));
    // The cost section shows pipeline and stage names as GoCD sent them, escaped.
    let mut ledger = ecs_elastic_agent::cost::ledger::Ledger::default();
    ledger.job(at(400), "build\"><img src=x onerror=alert(1)>", "test'stage<script>", "h<b>", 0.0123);
    ledger.pool_idle(at(450), "h<b>", 0.001);
    snapshot.cost = status::cost::cost_view(&ledger.summary(at(500), 10));
    // The Images table shows the image as the elastic profile names it, escaped.
    let mut pulls = ecs_elastic_agent::cluster::accounting::image_pulls::ImagePulls::default();
    pulls.observe("h<b>", "agent\"><script>alert(1)</script>", std::time::Duration::from_millis(14_200), at(450));
    snapshot.images = status::image_rows(&pulls);
    let counts: Vec<(&str, usize)> = snapshot.states.iter().map(|s| (s.label, s.count)).collect();
    assert_eq!(
        counts,
        vec![("launching", 1), ("starting", 1), ("idle", 0), ("building", 1), ("stopping", 0), ("stopped", 1)]
    );
    assert_eq!((snapshot.live, snapshot.throttled_total, snapshot.retries_total), (3, 3, 3));
    let html = status::render_cluster(&snapshot);
    check_safe("cluster", &html);
    assert!(html.contains("&lt;script&gt;"), "hostile text is shown escaped");
    assert!(html.contains("test&#x27;stage&lt;script&gt;") && html.contains("$0.0123"), "the cost rows, escaped");
    assert!(
        html.contains("agent&quot;&gt;&lt;script&gt;alert(1)&lt;&#x2f;script&gt;") && html.contains("14.2 s"),
        "the Images row, escaped"
    );
    assert!(html.contains(&long_value()), "long values are shown whole (CSS wraps them)");
    let cards = html.find("class=\"cards\"").expect("summary cards");
    let agents = html.find("<h3>Agents</h3>").expect("agents table");
    assert!(cards < agents, "summary counts come before the tables");
    let links = hrefs(&html);
    assert!(
        links
            .iter()
            .any(|l| l == "https://us-east-1.console.aws.amazon.com/ecs/v2/clusters/ci-shared/tasks?region=us-east-1"),
        "{links:?}"
    );
    assert!(links.iter().any(|l| l.ends_with("#logsV2:log-groups/log-group/$252Fgocd$252Fagents")), "CloudWatch link");
    assert!(
        links.iter().any(|l| l.starts_with(
            "/go/tab/build/detail/build%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E101/7/test%27stage/1/"
        )),
        "job link encoded"
    );
}

#[test]
fn agent_report_shows_the_whole_timeline_escaped() {
    let profile = cluster_profile();
    let registry = registry();
    let record = registry.get("ea-stopped").unwrap();
    let row = status::agent_row(record, "us-east-1", "ci-shared", Some("/gocd/agents"), at(500));
    let steps: Vec<(&str, &str, Option<&str>)> =
        row.timeline.iter().map(|s| (s.name, s.state, s.after.as_deref())).collect();
    assert_eq!(
        steps,
        vec![
            ("asked for (create-agent)", "done", None),
            ("task accepted", "done", Some("0 s")),
            ("image pull started", "done", Some("4 s")),
            ("image pulled", "done", Some("17 s")),
            ("running", "done", Some("5 s")),
            ("registered", "done", Some("26 s")),
            ("took its job", "never", None),
            ("stopped", "failed", Some("5 min 48 s")),
        ]
    );
    assert!(row.failed, "exit code 137 is a failure");
    assert_eq!(row.timeline[0].at.as_ref().unwrap().relative, "8 min 20 s ago");
    let html = status::render_agent(Some(&row), &profile.cluster_name, "us-east-1", Some("ea-stopped"), None);
    check_safe("agent", &html);
    assert!(html.contains("2026-09-21 14:13:20 UTC"), "absolute times are shown");
    assert!(
        hrefs(&html).iter().any(|l| l.ends_with("log-events/gocd$252Fgocd-agent$252Fstopped")),
        "the agent's own log stream"
    );
    assert!(html.contains("exit code") || html.contains("Exit code"));
    assert!(
        html.contains("&lt;b&gt;OOM&lt;&#x2f;b&gt;") || html.contains("&lt;b&gt;OOM&lt;/b&gt;"),
        "stop reason escaped"
    );

    let starting = status::agent_row(registry.get("ea-starting").unwrap(), "us-east-1", "ci-shared", None, at(500));
    let states: Vec<&str> = starting.timeline.iter().map(|s| s.state).collect();
    assert_eq!(states, vec!["done", "done", "done", "done", "done", "pending", "pending", "pending"]);
    assert!(html.contains("not reached"), "a stopped agent never takes its job: not reached, not \"not yet\"");
}

#[test]
fn plugin_report_and_unknown_agent_escape_what_they_are_given() {
    let profile = cluster_profile();
    let registry = registry();
    let snapshot = status::build_snapshot(&facts(&profile, &registry), at(500));
    let bad: Properties = [("ClusterName".to_string(), Some(SCRIPT.to_string()))].into_iter().collect();
    let broken: Vec<String> =
        ClusterProfile::parse(&bad).unwrap_err().into_iter().map(|e| format!("{}: {}", e.key, e.message)).collect();
    let html = status::render_plugin(&format!("server-{SCRIPT}"), &[snapshot], &broken);
    check_safe("plugin", &html);
    assert!(html.contains("cannot be served"), "broken profiles are called out");
    let cards = html.find("class=\"cards\"").unwrap();
    let table = html.find("<h3>Cluster profiles</h3>").unwrap();
    assert!(cards < table);

    let html = status::render_agent(None, "", "", Some(&format!("ea-{SCRIPT}")), Some(&format!("p/1/s/1/{SCRIPT}")));
    check_safe("agent-unknown", &html);
    assert!(html.contains("Agent not known"));

    let empty = status::render_plugin("server-1", &[], &[]);
    check_safe("plugin-empty", &empty);
    assert!(empty.contains("No cluster profile uses this plugin yet"));
}

#[test]
fn cluster_report_counts_tasks_waiting_in_provisioning() {
    let profile = cluster_profile();
    let mut registry = registry();
    let quiet = status::build_snapshot(&facts(&profile, &registry), at(500));
    assert_eq!(quiet.provisioning.count, 0);
    assert!(!status::render_cluster(&quiet).contains("waiting in PROVISIONING"), "no card while none waits");
    for a in registry.0.iter_mut().filter(|a| a.agent_id == "ea-starting") {
        if let Some(t) = a.task.as_mut() {
            t.last_status = TaskStatus::Provisioning;
        }
    }
    let snapshot = status::build_snapshot(&facts(&profile, &registry), at(500));
    assert_eq!(snapshot.provisioning.count, 1);
    assert_eq!(snapshot.provisioning.oldest.as_ref().map(|w| w.relative.as_str()), Some("8 min 20 s ago"));
    let html = status::render_cluster(&snapshot);
    check_safe("cluster", &html);
    assert!(html.contains("waiting in PROVISIONING · oldest created"), "the card says it");
}
