//! The plugin's `go.processor.*` callbacks, answered from the host's state (`docs/protocol.md`, "Calls the plugin makes").

use std::sync::atomic::Ordering;

use serde_json::{json, Value};

use super::*;

impl GoCdHost {
    pub(super) fn handle_callback(&self, generation: u64, name: &str, version: &str, body: Value) -> (i64, Value) {
        *self.state().callbacks.entry(name.to_string()).or_insert(0) += 1;
        let bad_version = |host: &GoCdHost| {
            host.violation(format!("callback {name} with unsupported api version {version:?}"));
            (400, json!({"message": format!("Unsupported version {version} for {name}")}))
        };
        match name {
            "go.processor.elastic-agents.list-agents" => {
                if version != "1.0" {
                    return bad_version(self);
                }
                let st = self.state();
                let agents: Vec<Value> =
                    st.agents.iter().filter(|a| a.plugin_id == PLUGIN_ID).map(Agent::to_json).collect();
                (200, Value::Array(agents))
            }
            "go.processor.elastic-agents.disable-agents" | "go.processor.elastic-agents.delete-agents" => {
                if version != "1.0" {
                    return bad_version(self);
                }
                let Some(list) = agent_ids(&body) else {
                    self.violation(format!("{name} body is not an array of agent objects: {body}"));
                    return (400, json!({"message": "expected an array of agent objects"}));
                };
                if name.ends_with("disable-agents") {
                    self.disable_agents(&list);
                } else {
                    self.state().delete_calls.push(DeleteCall {
                        generation,
                        at: std::time::Instant::now(),
                        agent_ids: list.clone(),
                    });
                    self.delete_agents(&list);
                }
                (200, Value::Null)
            }
            "go.processor.server-info.get" => {
                let mut info = json!({
                    "server_id": self.inner.server_id,
                    "site_url": "http://gocd.test:8153/go",
                    "secure_site_url": "https://gocd.test/go",
                });
                match version {
                    "1.0" => {}
                    "2.0" => {
                        info["go_version"] = json!("25.1.0");
                        info["dist_version"] = json!("25.1.0 (20250101)");
                        info["git_revision"] = json!("0000000000000000000000000000000000000000");
                    }
                    _ => return bad_version(self),
                }
                (200, info)
            }
            "go.processor.server-health.add-messages" => {
                if version != "1.0" {
                    return bad_version(self);
                }
                let Some(items) = body.as_array() else {
                    self.violation(format!("server-health body is not an array: {body}"));
                    return (500, json!({"message": "expected an array"}));
                };
                let messages: Vec<HealthMessage> = items
                    .iter()
                    .map(|m| HealthMessage {
                        kind: if m["type"].as_str().is_some_and(|t| t.eq_ignore_ascii_case("warning")) {
                            "warning".into()
                        } else {
                            "error".into()
                        },
                        message: m["message"].as_str().unwrap_or("").to_string(),
                    })
                    .collect();
                let mut st = self.state();
                for m in &messages {
                    if !st.health_history.contains(m) {
                        st.health_history.push(m.clone());
                    }
                }
                st.health = messages;
                (200, Value::Null)
            }
            "go.processor.console-log.append" => {
                let (p, pc, s, sc, j) = match version {
                    "1.0" => ("pipelineName", "pipelineCounter", "stageName", "stageCounter", "jobName"),
                    "2.0" => ("pipeline_name", "pipeline_counter", "stage_name", "stage_counter", "job_name"),
                    _ => return bad_version(self),
                };
                let text_of = |v: &Value| match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    _ => String::new(),
                };
                let pipeline = text_of(&body[p]);
                let counter: i64 = text_of(&body[pc]).parse().unwrap_or(-1);
                let stage = text_of(&body[s]);
                let stage_counter = text_of(&body[sc]);
                let job_name = text_of(&body[j]);
                let Some(text) = body["text"].as_str() else {
                    self.violation(format!("console-log {version} body without text: {body}"));
                    return (500, json!({"message": "Error: no text"}));
                };
                let mut st = self.state();
                let job = st.job_by_names(&pipeline, counter, &stage, &stage_counter, &job_name);
                st.console.push(ConsoleLine {
                    job,
                    key: format!("{pipeline}/{counter}/{stage}/{stage_counter}/{job_name}"),
                    text: text.to_string(),
                });
                (200, Value::Null)
            }
            "go.processor.plugin-settings.get" => {
                if version != "1.0" {
                    return (
                        400,
                        json!({"message": format!("Error while processing get PluginSettings request - unsupported version {version}")}),
                    );
                }
                (200, Value::Null)
            }
            _ => (404, json!({"message": format!("unknown api {name}")})),
        }
    }

    pub(super) fn disable_agents(&self, ids: &[String]) {
        let mut st = self.state();
        for id in ids {
            if let Some(a) = st.agents.iter_mut().find(|a| &a.agent_id == id) {
                a.config_state = "Disabled";
                st.disabled_agents.push(id.clone());
            }
        }
    }

    pub(super) fn delete_agents(&self, ids: &[String]) {
        let mut reschedule = Vec::new();
        {
            let mut st = self.state();
            for id in ids {
                let Some(pos) = st.agents.iter().position(|a| &a.agent_id == id) else {
                    continue;
                };
                let agent = st.agents.remove(pos);
                st.deleted_agents.push(agent.agent_id.clone());
                if let Some(h) = agent.job {
                    if matches!(&st.jobs[h.0].state, JobState::Running { agent_id } if agent_id == id) {
                        let new_id = self.inner.next_job_id.fetch_add(1, Ordering::SeqCst);
                        let job = &mut st.jobs[h.0];
                        job.previous_job_ids.push(job.identifier.job_id);
                        job.deleted_while_running.push((id.clone(), Instant::now()));
                        job.identifier.job_id = new_id;
                        job.state = JobState::Waiting;
                        job.started_at = None;
                        reschedule.push(h);
                    }
                }
            }
        }
        for h in reschedule {
            self.post_create_agent(h);
        }
    }
}

fn agent_ids(body: &Value) -> Option<Vec<String>> {
    match body {
        Value::Null => Some(Vec::new()),
        Value::Array(items) => items.iter().map(|a| a["agent_id"].as_str().map(str::to_string)).collect(),
        _ => None,
    }
}
