//! Jobs (create-agent with fresh single-use keys) and the agent registry (GoCD's registration checks).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::json;

use super::*;

impl GoCdHost {
    /// Schedules a job and posts its first create-agent at once.
    pub async fn add_job(&self, spec: JobSpec) -> JobHandle {
        let _ = self.elastic_profile(&spec.elastic_profile);
        let handle = {
            let mut st = self.state();
            let n = st.jobs.len();
            let job_id = self.inner.next_job_id.fetch_add(1, Ordering::SeqCst);
            let identifier = JobIdentifier {
                pipeline_name: format!("pipeline-{n}"),
                pipeline_label: "1".into(),
                pipeline_counter: 1,
                stage_name: "build".into(),
                stage_counter: "1".into(),
                job_name: format!("job-{n}"),
                job_id,
            };
            st.jobs.push(Job {
                handle: JobHandle(n),
                spec,
                identifier,
                state: JobState::Waiting,
                create_agent_posted: 0,
                create_agent_answered: 0,
                create_agent_failed: 0,
                create_agent_errors: Vec::new(),
                last_create_posted: None,
                keys: Vec::new(),
                added_at: Instant::now(),
                started_at: None,
                completed_at: None,
                previous_job_ids: Vec::new(),
                deleted_while_running: Vec::new(),
                completion_code: None,
                materials_checked: false,
                failure: None,
            });
            JobHandle(n)
        };
        self.post_create_agent(handle);
        handle
    }

    /// Schedules several jobs.
    pub async fn add_jobs(&self, spec: JobSpec, n: usize) -> Vec<JobHandle> {
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.add_job(spec.clone()).await);
        }
        v
    }

    /// Cancels a waiting job (no more create-agent; GoCD sends the plugin nothing).
    pub fn cancel_job(&self, h: JobHandle) {
        let mut st = self.state();
        if st.jobs[h.0].state == JobState::Waiting {
            st.jobs[h.0].state = JobState::Cancelled;
        }
    }

    /// Changes GoCD's state as an administrator or GoCD itself would behind the plugin's back
    /// (an agent deleted by hand, an agent that lost contact, a job rescheduled or cancelled).
    pub fn as_operator(&self, f: impl FnOnce(&mut HostState)) {
        f(&mut self.state());
    }

    /// A job's current state.
    pub fn job_state(&self, h: JobHandle) -> JobState {
        self.with_state(|s| s.job(h).state.clone())
    }

    /// A job's current identifier.
    pub fn job_identifier(&self, h: JobHandle) -> JobIdentifier {
        self.with_state(|s| s.job(h).identifier.clone())
    }

    /// How many create-agent calls the plugin answered for this job.
    pub fn create_agent_answered(&self, h: JobHandle) -> u32 {
        self.with_state(|s| s.job(h).create_agent_answered)
    }

    /// Issues a fresh single-use auto-register key (valid `key_validity`).
    pub fn issue_key(&self, job: Option<JobHandle>) -> String {
        let key = uuid::Uuid::new_v4().to_string();
        let mut st = self.state();
        st.keys.insert(key.clone(), KeyInfo { job, issued_at: Instant::now(), used: false });
        st.issued_keys.push(key.clone());
        key
    }

    /// Every auto-register key issued so far.
    pub fn issued_keys(&self) -> Vec<String> {
        self.with_state(|s| s.issued_keys.clone())
    }

    /// Posts a create-agent for a waiting job with a new key (no-op for other states).
    pub(super) fn post_create_agent(&self, h: JobHandle) {
        let key = self.issue_key(Some(h));
        let body = {
            let mut st = self.state();
            let job = &mut st.jobs[h.0];
            if job.state != JobState::Waiting {
                return;
            }
            job.create_agent_posted += 1;
            job.last_create_posted = Some(Instant::now());
            job.keys.push(key.clone());
            let ep = self.elastic_profile(&job.spec.elastic_profile);
            let cp = self.cluster_profile(&ep.cluster_profile_id);
            let mut body = json!({
                "auto_register_key": key,
                "elastic_agent_profile_properties": ep.properties,
                "cluster_profile_properties": cp.properties,
                "job_identifier": job.identifier.to_json(),
            });
            if let Some(env) = &job.spec.environment {
                body["environment"] = json!(env);
            }
            body
        };
        let host = self.clone();
        let slots = self.inner.create_agent_slots.clone();
        tokio::spawn(async move {
            let _permit = slots.acquire_owned().await;
            let r = host.request("create-agent", body).await;
            let mut st = host.state();
            let job = &mut st.jobs[h.0];
            match r {
                Ok(reply) if reply.code == 200 => job.create_agent_answered += 1,
                Ok(_) => {
                    job.create_agent_answered += 1;
                    job.create_agent_failed += 1;
                    job.create_agent_errors.push(Instant::now());
                }
                Err(_) => job.create_agent_failed += 1,
            }
        });
    }

    // ----- the agent registry -----

    /// An agent auto-registers (GoCD's `AgentRegistrationController` checks, §B5). `environments`
    /// is the comma-separated `GO_EA_AUTO_REGISTER_ENVIRONMENT`. Refusals are recorded too.
    pub fn register_agent(
        &self,
        agent_id: &str,
        plugin_id: &str,
        key: &str,
        environments: Option<&str>,
    ) -> Result<(), String> {
        let mut st = self.state();
        let verdict = (|| {
            if agent_id.is_empty() || plugin_id.is_empty() {
                return Err("Elastic agents must submit both elasticAgentId and elasticPluginId".to_string());
            }
            let validity = self.inner.config.key_validity;
            match st.keys.get_mut(key) {
                Some(k) if !k.used && k.issued_at.elapsed() <= validity => k.used = true,
                Some(k) if k.used => {
                    return Err(
                        "Elastic agent registration requires an auto-register agent key: key already used".into()
                    )
                }
                Some(_) => {
                    return Err("Elastic agent registration requires an auto-register agent key: key expired".into())
                }
                None => {
                    return Err("Elastic agent registration requires an auto-register agent key: unknown key".into())
                }
            }
            if plugin_id != PLUGIN_ID {
                return Err(format!("agent registered for plugin {plugin_id:?}, not {PLUGIN_ID}"));
            }
            if st.agents.iter().any(|a| a.agent_id == agent_id) {
                return Err(format!("Duplicate Elastic agent Id used to register elastic agent: {agent_id}"));
            }
            Ok(())
        })();
        match verdict {
            Ok(()) => {
                let environments = environments
                    .unwrap_or("")
                    .split(',')
                    .map(str::trim)
                    .filter(|e| !e.is_empty())
                    .map(str::to_string)
                    .collect();
                st.registrations += 1;
                st.agents.push(Agent {
                    agent_id: agent_id.to_string(),
                    plugin_id: plugin_id.to_string(),
                    environments,
                    agent_state: "Idle",
                    build_state: "Idle",
                    config_state: "Enabled",
                    registered_at: Instant::now(),
                    job: None,
                });
                Ok(())
            }
            Err(reason) => {
                st.rejections.push(Rejection { agent_id: agent_id.to_string(), reason: reason.clone() });
                Err(reason)
            }
        }
    }

    /// The registry as list-agents would answer it.
    pub fn registry(&self) -> Vec<Agent> {
        self.with_state(|s| s.agents.clone())
    }

    /// The plugin's current server-health messages.
    pub fn health_messages(&self) -> Vec<HealthMessage> {
        self.with_state(|s| s.health.clone())
    }

    /// Console-log lines appended for a job.
    pub fn console_log(&self, h: JobHandle) -> Vec<String> {
        self.with_state(|s| s.console.iter().filter(|c| c.job == Some(h)).map(|c| c.text.clone()).collect())
    }

    /// The job's cost line (the plugin's "this job's agent ran …" at its completion), read once
    /// the plugin answered the job's job-completion (it writes the line while it handles it).
    ///
    /// # Panics
    /// When job-completion is not answered within a minute, or the job's console has no cost
    /// line then, showing the console.
    pub async fn cost_line(&self, h: JobHandle) -> String {
        self.wait_until("job-completion answered", Duration::from_secs(60), |s| s.job(h).completion_code.is_some())
            .await;
        let console = self.console_log(h);
        let line = console.iter().find(|l| l.contains("this job's agent ran")).cloned();
        line.unwrap_or_else(|| panic!("no cost line in the job's console: {console:#?}"))
    }

    /// The build on the job's agent failed: its console gets `lines` (as the agent would send
    /// them), and the job ends now (GoCD then sends job-completion, as for every job).
    pub fn fail_job(&self, h: JobHandle, reason: &str, lines: &[String]) {
        let mut st = self.state();
        if !matches!(st.jobs[h.0].state, JobState::Running { .. }) {
            return;
        }
        st.jobs[h.0].materials_checked = true;
        st.jobs[h.0].failure = Some(reason.to_string());
        for line in lines {
            st.console.push(ConsoleLine::from_agent(h, line));
        }
    }

    /// The agent checked out the job's materials.
    pub fn materials_checked(&self, h: JobHandle) {
        self.state().jobs[h.0].materials_checked = true;
    }

    /// Registrations refused so far.
    pub fn rejections(&self) -> Vec<Rejection> {
        self.with_state(|s| s.rejections.clone())
    }

    /// Everything the plugin wrote to stderr (all its processes).
    pub fn stderr_text(&self) -> String {
        self.with_state(|s| s.stderr.clone())
    }

    /// Polls the state until `pred` holds.
    ///
    /// # Panics
    /// After `timeout`, with `what` and a summary of the state.
    pub async fn wait_until(&self, what: &str, timeout: Duration, pred: impl Fn(&HostState) -> bool) {
        let deadline = Instant::now() + timeout;
        loop {
            if self.with_state(&pred) {
                return;
            }
            if Instant::now() > deadline {
                panic!("timed out after {timeout:?} waiting for {what}\n{}", self.with_state(|s| s.summary()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
