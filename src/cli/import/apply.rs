//! `import --apply --server URL`: the translated profiles put into a GoCD server through its API,
//! as an administrator would with curl: each cluster profile created (`POST`) or, when one of ours
//! with that id exists, replaced (`PUT` with the `If-Match` of its `ETag`); then each elastic
//! profile replaced under its same id (`GET` for the `ETag`, `PUT` with `If-Match`), which moves
//! its pipelines to this plugin, or created when GoCD has none with that id.
//!
//! Nothing is left half-changed when GoCD refuses: an elastic profile GoCD refuses (a 422 with
//! its validation message) stays as it was, and the line names GoCD's message; a cluster profile
//! this run created for elastic profiles that were all refused is deleted again (`DELETE` with the
//! `If-Match` of its `ETag`), so no cluster profile serving nothing is left behind. A cluster
//! profile that existed before the run is never deleted: when this run replaced it and GoCD
//! refused every elastic profile of it, its earlier properties are put back (`PUT` with the
//! `If-Match` of its new `ETag`).
//!
//! The access token comes from `GOCD_TOKEN` only, is sent as `Authorization: Bearer`, and is never
//! printed. Nothing is sent for a cluster profile of another plugin that has one of our ids.

use std::io::{self, Write};
use std::sync::Arc;
use std::time::Duration;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use opentelemetry_http::hyper::HyperClient;
use opentelemetry_http::{Bytes, HttpClient as _, Request};
use serde_json::{json, Value};

use super::output::api_properties;
use super::translate::OUR_PLUGIN_ID;
use super::Plan;

/// The environment variable the access token is read from.
pub const TOKEN_VAR: &str = "GOCD_TOKEN";
const CLUSTER_PROFILES_V1: &str = "application/vnd.go.cd.v1+json";
const ELASTIC_PROFILES_V2: &str = "application/vnd.go.cd.v2+json";

/// GoCD's API at one server.
struct Gocd {
    /// The server URL without a trailing slash, ending in `/go`.
    base: String,
    client: HyperClient<HttpsConnector<HttpConnector>>,
    /// `Bearer <token>`; never printed.
    authorization: String,
}

/// One answer: status, `ETag`, body (`Null` when not JSON).
type Answer = (u16, Option<String>, Value);

impl Gocd {
    async fn request(
        &self,
        method: &str,
        path: &str,
        accept: &str,
        if_match: Option<&str>,
        body: Option<&Value>,
    ) -> Result<Answer, String> {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("Accept", accept)
            .header("Authorization", &self.authorization);
        if let Some(etag) = if_match {
            request = request.header("If-Match", etag);
        }
        let bytes = match body {
            Some(body) => {
                request = request.header("Content-Type", "application/json");
                Bytes::from(body.to_string())
            }
            None => Bytes::new(),
        };
        let request = request.body(bytes).map_err(|e| format!("{method} {path}: {e}"))?;
        let response = self.client.send_bytes(request).await.map_err(|e| format!("{method} {path}: {e}"))?;
        let etag = response.headers().get("ETag").and_then(|v| v.to_str().ok()).map(str::to_string);
        let body = serde_json::from_slice(response.body()).unwrap_or(Value::Null);
        Ok((response.status().as_u16(), etag, body))
    }
}

/// A failed call in one line: the status and GoCD's message.
fn refused(what: &str, (status, _, body): &Answer) -> String {
    let message = body.get("message").and_then(Value::as_str).unwrap_or("no message");
    format!("{what}: HTTP {status}: {}", message.replace(['\n', '\r'], " "))
}

fn connector() -> Result<HttpsConnector<HttpConnector>, String> {
    let mut roots = rustls::RootCertStore::empty();
    let _ = roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS could not be set up: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(config).https_or_http().enable_http1().build())
}

/// Creates or replaces the plan's written profiles at `server`; one line each on `out`.
/// `Ok(true)` when every call succeeded.
///
/// # Errors
/// Only when writing to `out` fails.
pub async fn apply(plan: &Plan, server: &str, token: Option<String>, out: &mut dyn Write) -> io::Result<bool> {
    let Some(token) = token.filter(|t| !t.trim().is_empty()) else {
        writeln!(out, "FAIL apply: set {TOKEN_VAR} to an access token of a GoCD administrator (nothing was sent)")?;
        return Ok(false);
    };
    let client = match connector() {
        Ok(c) => HyperClient::new(c, Duration::from_secs(30), None),
        Err(e) => {
            writeln!(out, "FAIL apply: {e}")?;
            return Ok(false);
        }
    };
    let gocd = Gocd {
        base: server.trim_end_matches('/').to_string(),
        client,
        authorization: format!("Bearer {}", token.trim()),
    };
    let mut ok = true;
    let mut applied_clusters = Vec::new();
    // Cluster profiles this run created (none of that id existed before).
    let mut created_clusters = Vec::new();
    // Cluster profiles this run replaced, with the body GoCD had before.
    let mut replaced_clusters: Vec<(String, Value)> = Vec::new();
    // Cluster profiles with an elastic profile GoCD took.
    let mut serving = Vec::new();
    for c in &plan.clusters {
        if !plan.elastics.iter().any(|e| e.cluster_id == c.id && e.written()) {
            continue;
        }
        let body = json!({"id": c.id, "plugin_id": OUR_PLUGIN_ID, "properties": api_properties(&c.properties)});
        match put_cluster(&gocd, &c.id, &body).await {
            Ok(done) => {
                writeln!(out, "{} cluster profile {}", done.verb(), c.id)?;
                applied_clusters.push(c.id.clone());
                match done {
                    Put::Created => created_clusters.push(c.id.clone()),
                    Put::Replaced(before) => replaced_clusters.push((c.id.clone(), before)),
                }
            }
            Err(e) => {
                ok = false;
                writeln!(out, "FAIL cluster profile {e}")?;
            }
        }
    }
    for e in plan.elastics.iter().filter(|e| e.written()) {
        if !applied_clusters.contains(&e.cluster_id) {
            ok = false;
            writeln!(
                out,
                "FAIL elastic profile {}: its cluster profile {} was not applied; left as it is",
                e.id, e.cluster_id
            )?;
            continue;
        }
        let body = json!({"id": e.id, "cluster_profile_id": e.cluster_id, "properties": api_properties(&e.properties)});
        match put_elastic(&gocd, &e.id, &body).await {
            Ok(done) => {
                writeln!(out, "{done} elastic profile {} (cluster profile {})", e.id, e.cluster_id)?;
                serving.push(e.cluster_id.clone());
            }
            Err(why) => {
                ok = false;
                writeln!(out, "FAIL elastic profile {why}; left as it was")?;
            }
        }
    }
    // A cluster profile created for elastic profiles GoCD all refused serves nothing: deleted
    // again. One that existed before is left, whatever happened to its elastic profiles.
    for id in created_clusters.iter().filter(|id| !serving.contains(id)) {
        match delete_cluster(&gocd, id).await {
            Ok(()) => writeln!(
                out,
                "deleted cluster profile {id} again: created by this run, and every elastic profile of it failed"
            )?,
            Err(why) => {
                ok = false;
                writeln!(
                    out,
                    "FAIL cluster profile {why}: created by this run for elastic profiles that all failed, \
                     and not deleted again; delete it in GoCD"
                )?;
            }
        }
    }
    // One that existed before and now serves nothing gets its earlier properties back.
    for (id, before) in replaced_clusters.iter().filter(|(id, _)| !serving.contains(id)) {
        match restore_cluster(&gocd, id, before).await {
            Ok(()) => writeln!(
                out,
                "restored cluster profile {id}: every elastic profile of it failed, so it has its earlier properties again"
            )?,
            Err(why) => {
                ok = false;
                writeln!(
                    out,
                    "FAIL cluster profile {why}: replaced by this run for elastic profiles that all failed, and not \
                     restored; the report keeps what it had"
                )?;
            }
        }
    }
    Ok(ok)
}

/// What a cluster profile's `PUT` or `POST` did.
enum Put {
    Created,
    /// Replaced one of ours; GoCD's body of it before.
    Replaced(Value),
}

impl Put {
    fn verb(&self) -> &'static str {
        match self {
            Put::Created => "created",
            Put::Replaced(_) => "updated",
        }
    }
}

/// Puts a cluster profile's earlier properties back, with the `If-Match` of its current `ETag`.
async fn restore_cluster(gocd: &Gocd, id: &str, before: &Value) -> Result<(), String> {
    let path = format!("/api/admin/elastic/cluster_profiles/{id}");
    let etag = current_etag(gocd, &path, id).await?;
    // What GoCD's GET gave, less its links: the properties as it holds them (a secure one as its
    // `encrypted_value`, which the API takes back as it is).
    let body = json!({"id": id, "plugin_id": before["plugin_id"], "properties": before["properties"]});
    let answer = gocd
        .request("PUT", &path, CLUSTER_PROFILES_V1, etag.as_deref(), Some(&body))
        .await
        .map_err(|e| format!("{id}: {e}"))?;
    match answer {
        (200, ..) => Ok(()),
        other => Err(refused(id, &other)),
    }
}

/// The current `ETag` of the cluster profile at `path`, for the `If-Match` of a change to it.
async fn current_etag(gocd: &Gocd, path: &str, id: &str) -> Result<Option<String>, String> {
    match gocd.request("GET", path, CLUSTER_PROFILES_V1, None, None).await.map_err(|e| format!("{id}: {e}"))? {
        (200, etag, _) => Ok(etag),
        other => Err(refused(id, &other)),
    }
}

/// Deletes a cluster profile this run created, with the `If-Match` of its current `ETag`, so a
/// change made by someone else since is not deleted with it.
async fn delete_cluster(gocd: &Gocd, id: &str) -> Result<(), String> {
    let path = format!("/api/admin/elastic/cluster_profiles/{id}");
    let etag = current_etag(gocd, &path, id).await?;
    let answer = gocd
        .request("DELETE", &path, CLUSTER_PROFILES_V1, etag.as_deref(), None)
        .await
        .map_err(|e| format!("{id}: {e}"))?;
    match answer {
        (200 | 204, ..) => Ok(()),
        other => Err(refused(id, &other)),
    }
}

async fn put_cluster(gocd: &Gocd, id: &str, body: &Value) -> Result<Put, String> {
    let path = format!("/api/admin/elastic/cluster_profiles/{id}");
    let current =
        gocd.request("GET", &path, CLUSTER_PROFILES_V1, None, None).await.map_err(|e| format!("{id}: {e}"))?;
    let answer = match current {
        (404, ..) => {
            let answer = gocd
                .request("POST", "/api/admin/elastic/cluster_profiles", CLUSTER_PROFILES_V1, None, Some(body))
                .await
                .map_err(|e| format!("{id}: {e}"))?;
            (answer, Put::Created)
        }
        (200, etag, existing) => {
            let plugin = existing.get("plugin_id").and_then(Value::as_str).unwrap_or_default();
            if plugin != OUR_PLUGIN_ID {
                return Err(format!("{id}: GoCD has a cluster profile {id} of plugin {plugin}; left as it is"));
            }
            let answer = gocd
                .request("PUT", &path, CLUSTER_PROFILES_V1, etag.as_deref(), Some(body))
                .await
                .map_err(|e| format!("{id}: {e}"))?;
            (answer, Put::Replaced(existing))
        }
        other => return Err(refused(id, &other)),
    };
    match answer {
        ((200 | 201, ..), done) => Ok(done),
        (other, _) => Err(refused(id, &other)),
    }
}

async fn put_elastic(gocd: &Gocd, id: &str, body: &Value) -> Result<&'static str, String> {
    let path = format!("/api/elastic/profiles/{id}");
    let current =
        gocd.request("GET", &path, ELASTIC_PROFILES_V2, None, None).await.map_err(|e| format!("{id}: {e}"))?;
    let (answer, done) = match current {
        (404, ..) => (
            gocd.request("POST", "/api/elastic/profiles", ELASTIC_PROFILES_V2, None, Some(body))
                .await
                .map_err(|e| format!("{id}: {e}"))?,
            "created",
        ),
        (200, etag, _) => (
            gocd.request("PUT", &path, ELASTIC_PROFILES_V2, etag.as_deref(), Some(body))
                .await
                .map_err(|e| format!("{id}: {e}"))?,
            "switched",
        ),
        other => return Err(refused(id, &other)),
    };
    match answer {
        (200 | 201, ..) => Ok(done),
        other => Err(refused(id, &other)),
    }
}
