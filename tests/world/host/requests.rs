//! Host→plugin requests: ids and waiters, the load sequence, server-ping, status reports.

use std::sync::atomic::Ordering;
use std::time::Instant;

use serde_json::{json, Value};

use super::*;

impl GoCdHost {
    /// Sends a v5 request (`name` without or with the `cd.go.elastic-agent.` prefix) and awaits its answer.
    pub async fn request(&self, name: &str, body: Value) -> Result<Reply, HostError> {
        let full = if name.starts_with(PREFIX) || name.starts_with("go.") {
            name.to_string()
        } else {
            format!("{PREFIX}{name}")
        };
        let short = full.trim_start_matches(PREFIX).to_string();
        *self.state().requests.entry(short.clone()).or_insert(0) += 1;
        let Some(conn) = self.current_conn() else {
            self.state().host_errors.push(format!("{short}: no plugin running"));
            return Err(HostError::PluginDown);
        };
        let id = self.inner.next_request_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        conn.pending.lock().unwrap().insert(id, tx);
        let line = json!({"type": "request", "id": id, "name": full, "version": "5.0", "body": body}).to_string();
        if !conn.send_line(line) {
            conn.pending.lock().unwrap().remove(&id);
            self.state().host_errors.push(format!("{short}: stdin closed"));
            return Err(HostError::PluginDown);
        }
        let result = match tokio::time::timeout(self.inner.config.request_timeout, rx).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err(HostError::Gone),
            Err(_) => {
                conn.pending.lock().unwrap().remove(&id);
                Err(HostError::Timeout)
            }
        };
        match &result {
            Ok(r) if r.code != 200 => {
                self.state().error_responses.push(ErrorResponse { name: short, code: r.code, body: r.body.clone() })
            }
            Ok(_) => {}
            Err(e) => self.state().host_errors.push(format!("{short} (request {id}): {e:?}")),
        }
        result
    }

    pub(super) async fn expect_200(&self, name: &str, body: Value) -> Result<Value, String> {
        match self.request(name, body).await {
            Ok(r) if r.code == 200 => Ok(r.body),
            Ok(r) => Err(format!("{name} answered {}: {}", r.code, r.body)),
            Err(e) => Err(format!("{name} got no answer: {e:?}")),
        }
    }

    /// The load sequence of `docs/protocol.md`, "Plugin load sequence": migrate-config, then the six plugin-info calls in
    /// GoCD's order, then the tolerated plugin-settings calls. Checks shapes GoCD relies on.
    pub async fn try_load(&self) -> Result<LoadReport, String> {
        let cfg = &self.inner.config;
        let migrate = json!({
            "plugin_settings": {},
            "cluster_profiles": cfg.cluster_profiles.iter().map(|c| json!({
                "id": c.id, "plugin_id": PLUGIN_ID, "properties": c.properties,
            })).collect::<Vec<_>>(),
            "elastic_agent_profiles": cfg.elastic_profiles.iter().map(|e| json!({
                "id": e.id, "plugin_id": PLUGIN_ID, "cluster_profile_id": e.cluster_profile_id, "properties": e.properties,
            })).collect::<Vec<_>>(),
        });
        let migrated = self.expect_200("migrate-config", migrate).await?;
        for key in ["cluster_profiles", "elastic_agent_profiles"] {
            if !migrated[key].is_array() {
                return Err(format!("migrate-config answer has no {key} array: {migrated}"));
            }
        }
        let elastic_profile_metadata = self.expect_200("get-elastic-agent-profile-metadata", Value::Null).await?;
        let elastic_profile_view = self.expect_200("get-elastic-agent-profile-view", Value::Null).await?;
        let cluster_profile_metadata = self.expect_200("get-cluster-profile-metadata", Value::Null).await?;
        let cluster_profile_view = self.expect_200("get-cluster-profile-view", Value::Null).await?;
        let icon = self.expect_200("get-icon", Value::Null).await?;
        let capabilities = self.expect_200("get-capabilities", Value::Null).await?;
        for (what, v) in [("elastic", &elastic_profile_metadata), ("cluster", &cluster_profile_metadata)] {
            if !v.is_array() {
                return Err(format!("{what} profile metadata is not an array: {v}"));
            }
        }
        for (what, v) in [("elastic", &elastic_profile_view), ("cluster", &cluster_profile_view)] {
            if v["template"].as_str().is_none_or(|t| t.trim().is_empty()) {
                return Err(format!("{what} profile view has a blank template (GoCD: \"Template was blank!\")"));
            }
        }
        if !(icon["content_type"].is_string() && icon["data"].is_string()) {
            return Err(format!("get-icon answer is not {{content_type, data}} strings: {icon}"));
        }
        if !capabilities.is_object() {
            return Err(format!("get-capabilities answer is not an object: {capabilities}"));
        }
        // GoCD sends these to every plugin and tolerates any failure.
        let _ = self.request("go.plugin-settings.get-configuration", Value::Null).await;
        let _ = self.request("go.plugin-settings.get-view", Value::Null).await;
        self.state().error_responses.retain(|e| !e.name.starts_with("go.plugin-settings."));
        self.inner.loaded.store(true, Ordering::SeqCst);
        Ok(LoadReport {
            hello: self.inner.hello.lock().unwrap().clone(),
            migrate_config: migrated,
            elastic_profile_metadata,
            elastic_profile_view,
            cluster_profile_metadata,
            cluster_profile_view,
            icon,
            capabilities,
        })
    }

    /// [`GoCdHost::try_load`], panicking on failure.
    pub async fn load(&self) -> LoadReport {
        match self.try_load().await {
            Ok(r) => r,
            Err(e) => panic!("plugin load sequence failed: {e}\n{}", self.with_state(|s| s.summary())),
        }
    }

    /// Cluster profile `id` as configured, with the administrator's edits.
    pub(super) fn cluster_profile(&self, id: &str) -> ClusterProfile {
        let configured = self
            .inner
            .config
            .cluster_profiles
            .iter()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("no cluster profile {id:?}"));
        let mut profile = configured.clone();
        if let Some(edited) = self.inner.edited.lock().unwrap().get(id) {
            profile.properties = edited.clone();
        }
        profile
    }

    pub(super) fn elastic_profile(&self, id: &str) -> ElasticProfile {
        let configured = self
            .inner
            .config
            .elastic_profiles
            .iter()
            .find(|e| e.id == id)
            .unwrap_or_else(|| panic!("no elastic profile {id:?}"));
        let mut profile = configured.clone();
        if let Some(edited) = self.inner.edited_elastic.lock().unwrap().get(id) {
            profile.properties = edited.clone();
        }
        profile
    }

    /// An administrator edits elastic profile `id` to `properties`: GoCD tells no plugin, and
    /// sends the new properties with every request about its jobs from then on.
    pub fn edit_elastic_profile(&self, id: &str, properties: Props) {
        self.inner.edited_elastic.lock().unwrap().insert(id.to_string(), properties);
    }

    pub(super) fn all_cluster_properties(&self) -> Vec<Props> {
        let deleted = self.with_state(|s| s.deleted_cluster_profiles.clone());
        let live = self.inner.config.cluster_profiles.iter().filter(|c| !deleted.contains(&c.id));
        live.map(|c| self.cluster_profile(&c.id).properties).collect()
    }

    /// An administrator edits cluster profile `id` to `properties`, as GoCD reports it:
    /// cluster-profile-changed with status `updated` and the old and new properties; every
    /// request sends the new ones from then on.
    pub async fn edit_cluster_profile(&self, id: &str, properties: Props) -> Result<Reply, HostError> {
        let old = self.cluster_profile(id).properties;
        self.inner.edited.lock().unwrap().insert(id.to_string(), properties.clone());
        let body = json!({"status": "updated", "old_cluster_profiles_properties": old, "cluster_profiles_properties": properties});
        self.request("cluster-profile-changed", body).await
    }

    /// An administrator deletes cluster profile `id`, as GoCD reports it: cluster-profile-changed
    /// with status `deleted`, and no server-ping sends it from now on.
    pub async fn delete_cluster_profile(&self, id: &str) -> Result<Reply, HostError> {
        let properties = self.cluster_profile(id).properties.clone();
        self.state().deleted_cluster_profiles.insert(id.to_string());
        let body = json!({"status": "deleted", "cluster_profiles_properties": properties});
        self.request("cluster-profile-changed", body).await
    }

    /// An administrator deletes cluster profile `id` while no plugin process runs to hear it:
    /// no cluster-profile-changed, and no server-ping sends it from now on.
    pub fn delete_cluster_profile_unheard(&self, id: &str) {
        self.state().deleted_cluster_profiles.insert(id.to_string());
    }

    /// One server-ping with every cluster profile, awaited.
    pub async fn server_ping(&self) -> Result<Reply, HostError> {
        let idx = {
            let mut st = self.state();
            st.pings.push(PingRecord { started: Instant::now(), finished: None, code: None });
            st.pings.len() - 1
        };
        let body = json!({"all_cluster_profile_properties": self.all_cluster_properties()});
        let r = self.request("server-ping", body).await;
        let mut st = self.state();
        st.pings[idx].finished = Some(Instant::now());
        st.pings[idx].code = r.as_ref().ok().map(|r| r.code);
        r
    }

    /// Stops (or resumes) the server-ping timer; explicit [`GoCdHost::server_ping`] still works.
    pub fn pause_pings(&self, paused: bool) {
        self.inner.pings_paused.store(paused, Ordering::SeqCst);
    }

    /// A status report request (`kind` = `plugin`, `cluster` or `agent`) with a raw body.
    pub async fn status_report(&self, kind: &str, body: Value) -> Result<Reply, HostError> {
        let r = self.request(&format!("{kind}-status-report"), body).await;
        if let Ok(reply) = &r {
            if let Some(view) = reply.body["view"].as_str() {
                self.state().views.push(view.to_string());
            }
        }
        r
    }

    /// The plugin status report (all cluster profiles).
    pub async fn plugin_status_report(&self) -> Result<Reply, HostError> {
        self.status_report("plugin", json!({"all_cluster_profiles_properties": self.all_cluster_properties()})).await
    }

    /// The cluster status report of a cluster profile.
    pub async fn cluster_status_report(&self, cluster_profile_id: &str) -> Result<Reply, HostError> {
        let props = self.cluster_profile(cluster_profile_id).properties;
        self.status_report("cluster", json!({"cluster_profile_properties": props})).await
    }

    /// The agent status report, by agent id and/or job (keys omitted when absent, as GoCD does).
    pub async fn agent_status_report(
        &self,
        cluster_profile_id: &str,
        agent_id: Option<&str>,
        job: Option<JobHandle>,
    ) -> Result<Reply, HostError> {
        let mut body = json!({"cluster_profile_properties": self.cluster_profile(cluster_profile_id).properties});
        if let Some(a) = agent_id {
            body["elastic_agent_id"] = json!(a);
        }
        if let Some(j) = job {
            body["job_identifier"] = self.with_state(|s| s.job(j).identifier.to_json());
        }
        self.status_report("agent", body).await
    }
}
