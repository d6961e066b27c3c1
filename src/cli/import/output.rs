//! Writing the translated profiles: for GoCD's API (`gocd-api/cluster-profiles/<id>.json`,
//! `gocd-api/elastic-profiles/<id>.json`: the bodies its create calls take), as flat files
//! `validate` reads (`profiles/cluster-<id>.json`, `profiles/elastic-<id>.json`), and
//! `report.md`. Only profiles that passed validation are written.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use serde_json::{json, Value};

use super::translate::OUR_PLUGIN_ID;
use super::Plan;

/// Properties as GoCD's API takes them: `[{"key": ..., "value": ...}]`.
pub fn api_properties(map: &BTreeMap<String, String>) -> Value {
    Value::Array(map.iter().map(|(k, v)| json!({"key": k, "value": v})).collect())
}

fn put(path: &Path, value: &Value) -> io::Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    std::fs::write(path, text + "\n")
}

/// Writes the plan's valid profiles and the report under `dir`.
///
/// # Errors
/// When a directory or file cannot be written.
pub fn write(dir: &Path, plan: &Plan, report: &str) -> io::Result<()> {
    let api_clusters = dir.join("gocd-api").join("cluster-profiles");
    let api_elastics = dir.join("gocd-api").join("elastic-profiles");
    let flat = dir.join("profiles");
    for d in [&api_clusters, &api_elastics, &flat] {
        std::fs::create_dir_all(d)?;
    }
    for c in &plan.clusters {
        if !plan.elastics.iter().any(|e| e.cluster_id == c.id && e.written()) {
            continue;
        }
        let body = json!({"id": c.id, "plugin_id": OUR_PLUGIN_ID, "properties": api_properties(&c.properties)});
        put(&api_clusters.join(format!("{}.json", c.id)), &body)?;
        put(&flat.join(format!("cluster-{}.json", c.id)), &json!(c.properties))?;
    }
    for e in plan.elastics.iter().filter(|e| e.written()) {
        let body = json!({"id": e.id, "cluster_profile_id": e.cluster_id, "properties": api_properties(&e.properties)});
        put(&api_elastics.join(format!("{}.json", e.id)), &body)?;
        put(&flat.join(format!("elastic-{}.json", e.id)), &json!(e.properties))?;
    }
    std::fs::write(dir.join("report.md"), report)
}
