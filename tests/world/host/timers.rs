//! GoCD's timers: server-ping, create-agent re-sends for waiting jobs, agents polling for work
//! (should-assign-work), and jobs finishing (job-completion).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::*;

impl GoCdHost {
    /// Starts server-ping, create-agent re-sends and the assignment loop.
    pub fn start_loops(&self) {
        let mut loops = self.inner.loops.lock().unwrap();
        if !loops.is_empty() {
            return;
        }
        let host = self.clone();
        loops.push(tokio::spawn(async move {
            loop {
                tokio::time::sleep(host.inner.config.ping_interval).await;
                if !host.inner.pings_paused.load(Ordering::SeqCst) && host.plugin_ready() {
                    let _ = host.server_ping().await;
                }
            }
        }));
        let host = self.clone();
        loops.push(tokio::spawn(async move {
            let tick = (host.inner.config.starvation_interval / 4)
                .clamp(Duration::from_millis(50), Duration::from_millis(500));
            loop {
                tokio::time::sleep(tick).await;
                if !host.plugin_ready() {
                    continue;
                }
                let one_in_flight = host.inner.config.one_create_agent_in_flight;
                let due: Vec<JobHandle> = host.with_state(|s| {
                    s.jobs
                        .iter()
                        .filter(|j| j.state == JobState::Waiting)
                        .filter(|j| {
                            !one_in_flight || j.create_agent_posted <= j.create_agent_answered + j.create_agent_failed
                        })
                        .filter(|j| {
                            j.last_create_posted.is_none_or(|t| t.elapsed() >= host.inner.config.starvation_interval)
                        })
                        .map(|j| j.handle)
                        .collect()
                });
                for h in due {
                    host.post_create_agent(h);
                }
            }
        }));
        // Jobs finish and agents poll only while the plugin is there to hear about it; a job
        // finishes on its own clock, however long a round of agents polling takes.
        let host = self.clone();
        loops.push(tokio::spawn(async move {
            loop {
                tokio::time::sleep(host.inner.config.assign_interval).await;
                if host.plugin_ready() {
                    host.complete_due_jobs();
                }
            }
        }));
        let host = self.clone();
        loops.push(tokio::spawn(async move {
            loop {
                tokio::time::sleep(host.inner.config.assign_interval).await;
                if host.plugin_ready() {
                    host.assign_work().await;
                }
            }
        }));
    }

    /// Stops the timers (also done by shutdown).
    pub fn stop_loops(&self) {
        for l in self.inner.loops.lock().unwrap().drain(..) {
            l.abort();
        }
    }

    pub(super) fn complete_due_jobs(&self) {
        let mut completions = Vec::new();
        {
            let mut st = self.state();
            let now = Instant::now();
            let due: Vec<(JobHandle, String)> = st
                .jobs
                .iter()
                .filter_map(|j| match &j.state {
                    JobState::Running { agent_id }
                        if j.failure.is_some() || j.started_at.is_some_and(|t| now >= t + j.spec.duration) =>
                    {
                        Some((j.handle, agent_id.clone()))
                    }
                    _ => None,
                })
                .collect();
            for (h, agent_id) in due {
                st.jobs[h.0].state = JobState::Completed { agent_id: agent_id.clone() };
                st.jobs[h.0].completed_at = Some(now);
                if let Some(a) = st.agents.iter_mut().find(|a| a.agent_id == agent_id) {
                    a.agent_state = "Idle";
                    a.build_state = "Idle";
                    a.job = None;
                }
                let job = &st.jobs[h.0];
                let ep = self.elastic_profile(&job.spec.elastic_profile);
                let cp = self.cluster_profile(&ep.cluster_profile_id);
                completions.push((
                    h,
                    json!({
                        "elastic_agent_id": agent_id,
                        "job_identifier": job.identifier.to_json(),
                        "elastic_agent_profile_properties": ep.properties,
                        "cluster_profile_properties": cp.properties,
                    }),
                ));
            }
        }
        for (h, body) in completions {
            let host = self.clone();
            tokio::spawn(async move {
                let code = host.request("job-completion", body).await.ok().map(|r| r.code);
                host.state().jobs[h.0].completion_code = code;
            });
        }
    }

    /// One round of agents polling for work: for each idle, enabled agent, the waiting jobs of its
    /// environment in schedule order, until the plugin says `true` (GoCD does this under one lock).
    pub(super) async fn assign_work(&self) {
        let (agents, jobs) = self.with_state(|s| {
            let agents: Vec<(String, Value, Vec<String>)> = s
                .agents
                .iter()
                .filter(|a| a.agent_state == "Idle" && a.config_state == "Enabled")
                .map(|a| (a.agent_id.clone(), a.to_json(), a.environments.clone()))
                .collect();
            let jobs: Vec<(JobHandle, i64, Option<String>)> = s
                .jobs
                .iter()
                .filter(|j| j.state == JobState::Waiting)
                .map(|j| (j.handle, j.identifier.job_id, j.spec.environment.clone()))
                .collect();
            (agents, jobs)
        });
        let reask = self.inner.config.reask_interval;
        self.inner.asked.lock().unwrap().retain(|_, t| t.elapsed() < reask);
        let limited = self.inner.config.asks_per_agent_round < usize::MAX;
        for (agent_id, agent_json, envs) in agents {
            let mut asks = 0;
            // With a limit, an agent goes on round after round from where it stopped, so every
            // waiting job is offered to it in turn however long the queue.
            let start = if limited && !jobs.is_empty() {
                self.inner.cursors.lock().unwrap().get(&agent_id).copied().unwrap_or(0) % jobs.len()
            } else {
                0
            };
            let mut walked = 0;
            for (h, job_id, env) in jobs[start..].iter().chain(&jobs[..start]) {
                if limited {
                    // The next round starts after the last job this one looked at.
                    walked += 1;
                    self.inner.cursors.lock().unwrap().insert(agent_id.clone(), start + walked);
                }
                if !env_matches(env.as_deref(), &envs) {
                    continue;
                }
                let pair = (agent_id.clone(), *job_id);
                if self.inner.asked.lock().unwrap().get(&pair).is_some_and(|t| t.elapsed() < reask) {
                    continue;
                }
                if asks >= self.inner.config.asks_per_agent_round {
                    if limited {
                        // Not looked at after all: the next round offers this one first.
                        self.inner.cursors.lock().unwrap().insert(agent_id.clone(), start + walked - 1);
                    }
                    break;
                }
                asks += 1;
                let body = self.with_state(|s| {
                    let job = s.job(*h);
                    if job.state != JobState::Waiting || job.identifier.job_id != *job_id {
                        return None;
                    }
                    let ep = self.elastic_profile(&job.spec.elastic_profile);
                    let cp = self.cluster_profile(&ep.cluster_profile_id);
                    let mut body = json!({
                        "agent": agent_json,
                        "job_identifier": job.identifier.to_json(),
                        "elastic_agent_profile_properties": ep.properties,
                        "cluster_profile_properties": cp.properties,
                    });
                    if let Some(e) = &job.spec.environment {
                        body["environment"] = json!(e);
                    }
                    Some(body)
                });
                let Some(body) = body else { continue };
                let asked = Instant::now();
                let reply = self.request("should-assign-work", body).await;
                if reply.is_ok() {
                    self.state().assign_latencies.push((asked, asked.elapsed()));
                }
                let answer = match reply {
                    Ok(r) if r.code == 200 => r.body == json!(true) || r.body == json!("true"),
                    _ => break,
                };
                if !answer {
                    self.inner.asked.lock().unwrap().insert(pair, Instant::now());
                    continue;
                }
                let mut st = self.state();
                let agent_ok = st
                    .agents
                    .iter()
                    .any(|a| a.agent_id == agent_id && a.agent_state == "Idle" && a.config_state == "Enabled");
                let job = &st.jobs[h.0];
                if agent_ok && job.state == JobState::Waiting && job.identifier.job_id == *job_id {
                    let job = &mut st.jobs[h.0];
                    job.state = JobState::Running { agent_id: agent_id.clone() };
                    job.started_at = Some(Instant::now());
                    if let Some(a) = st.agents.iter_mut().find(|a| a.agent_id == agent_id) {
                        a.agent_state = "Building";
                        a.build_state = "Building";
                        a.job = Some(*h);
                    }
                }
                break;
            }
        }
    }
}
