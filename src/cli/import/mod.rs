//! `import`: profiles of GoCD's own ECS elastic agent plugin (`com.thoughtworks.gocd.elastic-agent.ecs`)
//! translated into ours, so that switching plugins is not retyping every profile.
//!
//! This module owns the whole command: [`input`] reads their profiles (GoCD's API JSON or the
//! `<elastic>` section of `cruise-config.xml`), [`units`] converts sizes, CPU units and launch
//! types, [`translate`] maps each key, [`plan`](plan()) splits one of their cluster profiles into ours
//! (our launch type is per cluster profile, theirs per elastic profile) and checks every profile
//! with the code `validate` uses, [`report`] writes `report.md`, [`output`] writes the files, and
//! with `--apply` [`apply`] puts them into a GoCD server through its API. It never calls AWS, and
//! never copies a secret.

mod apply;
mod input;
mod output;
mod report;
mod translate;
mod units;

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::PathBuf;

use clap::Args;

use crate::settings::{check_compatible, check_fits_some_cluster, ClusterProfile, ElasticProfile, Properties};
use input::Theirs;
use translate::{Note, THEIR_PLUGIN_ID};

/// Options of `import`.
#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// Where to write the profiles and report.md (created when missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Their profiles: GoCD API JSON (cluster profiles, elastic profiles) or cruise-config.xml.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Also create the cluster profiles and replace the elastic profiles (same ids) in the GoCD
    /// server at --server, with the access token in GOCD_TOKEN.
    #[arg(long, requires = "server")]
    pub apply: bool,
    /// The GoCD server for --apply, ending in /go (https://gocd.example.com/go).
    #[allow(rustdoc::bare_urls)] // clap prints this line as the option's help, as written
    #[arg(long, value_name = "URL", requires = "apply")]
    pub server: Option<String>,
}

/// One of our cluster profiles, made from one of theirs for one launch type.
#[derive(Debug, Clone)]
pub struct OurCluster {
    /// Its id: `<their id>-<variant>` (and `-<elastic id>` when that is taken by another).
    pub id: String,
    /// Their cluster profile it comes from.
    pub their_id: String,
    /// Its properties.
    pub properties: BTreeMap<String, String>,
    /// Problems our validation found (none for a profile that is written).
    pub problems: Vec<String>,
}

/// One of their elastic profiles, translated.
#[derive(Debug, Clone)]
pub struct OurElastic {
    /// Its id, the same as theirs.
    pub id: String,
    /// Our cluster profile's id.
    pub cluster_id: String,
    /// Their cluster profile's id.
    pub their_cluster_id: String,
    /// Our LaunchType.
    pub launch_type: &'static str,
    /// Its properties.
    pub properties: BTreeMap<String, String>,
    /// What became of each key.
    pub notes: Vec<Note>,
    /// Problems our validation found, of the profile or its cluster profile; written only when none.
    pub problems: Vec<String>,
}

/// Everything import decided, before anything is written.
#[derive(Debug, Default)]
pub struct Plan {
    /// Our cluster profiles.
    pub clusters: Vec<OurCluster>,
    /// Our elastic profiles.
    pub elastics: Vec<OurElastic>,
    /// Their cluster profiles and what became of each key.
    pub their_clusters: Vec<(String, Vec<Note>)>,
    /// Profiles not imported, and why: (`cluster profile`/`elastic profile`, id, why).
    pub skipped: Vec<(&'static str, String, String)>,
}

impl OurElastic {
    /// Written when it and its cluster profile are valid.
    pub fn written(&self) -> bool {
        self.problems.is_empty()
    }
}

/// A GoCD id that is also a safe file name.
fn safe_id(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('.')
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn properties(map: &BTreeMap<String, String>) -> Properties {
    map.iter().map(|(k, v)| (k.clone(), Some(v.clone()))).collect()
}

/// Translates their profiles and validates ours; writes nothing.
pub fn plan(theirs: &Theirs) -> Plan {
    let mut plan = Plan::default();
    let ours = |p: &input::Profile| p.plugin_id.as_deref() == Some(THEIR_PLUGIN_ID);
    for c in &theirs.clusters {
        if !ours(c) {
            let plugin = c.plugin_id.as_deref().unwrap_or("none");
            plan.skipped.push(("cluster profile", c.id.clone(), format!("plugin {plugin}, not {THEIR_PLUGIN_ID}")));
        } else if !safe_id(&c.id) {
            plan.skipped.push(("cluster profile", c.id.clone(), "an id that is not a safe file name".to_string()));
        } else {
            plan.their_clusters.push((c.id.clone(), translate::cluster_notes(c)));
        }
    }
    let mut privileged: BTreeMap<String, bool> = BTreeMap::new();
    for e in &theirs.elastics {
        let cluster = e.cluster_profile_id.as_deref().and_then(|id| theirs.clusters.iter().find(|c| c.id == id));
        let why = match (cluster, &e.plugin_id) {
            _ if !safe_id(&e.id) => Some("an id that is not a safe file name".to_string()),
            (_, Some(plugin)) if plugin != THEIR_PLUGIN_ID => Some(format!("plugin {plugin}, not {THEIR_PLUGIN_ID}")),
            (None, _) => Some(match &e.cluster_profile_id {
                Some(id) => format!("its cluster profile {id} is not in the input (give both files)"),
                None => "no cluster profile (GoCD before 19.3): give it one first".to_string(),
            }),
            (Some(c), _) if !ours(c) || !safe_id(&c.id) => {
                Some(format!("its cluster profile {} is not imported", c.id))
            }
            _ => None,
        };
        let (Some(cluster), None) = (cluster, why.clone()) else {
            plan.skipped.push(("elastic profile", e.id.clone(), why.unwrap_or_default()));
            continue;
        };
        let translated = translate::elastic(e, cluster);
        let props = translate::cluster_properties(cluster, e, translated.variant);
        let base = format!("{}-{}", cluster.id, translated.variant.suffix());
        let cluster_id = match plan.clusters.iter().find(|o| o.their_id == cluster.id && o.properties == props) {
            Some(o) => o.id.clone(),
            None => {
                let id = if plan.clusters.iter().any(|o| o.id == base) { format!("{base}-{}", e.id) } else { base };
                plan.clusters.push(OurCluster {
                    id: id.clone(),
                    their_id: cluster.id.clone(),
                    properties: props,
                    problems: Vec::new(),
                });
                id
            }
        };
        *privileged.entry(cluster_id.clone()).or_default() |= translated.needs_privileged;
        plan.elastics.push(OurElastic {
            id: e.id.clone(),
            cluster_id,
            their_cluster_id: cluster.id.clone(),
            launch_type: translated.variant.launch.launch_type(),
            properties: translated.properties,
            notes: translated.notes,
            problems: Vec::new(),
        });
    }
    for c in &mut plan.clusters {
        if privileged.get(&c.id).copied().unwrap_or_default() {
            c.properties.insert("AllowPrivileged".to_string(), "true".to_string());
        }
    }
    validate(&mut plan);
    plan
}

/// Checks every profile as `validate` does: each cluster profile alone, each elastic profile
/// alone, then against its cluster profile.
fn validate(plan: &mut Plan) {
    let mut parsed: BTreeMap<String, ClusterProfile> = BTreeMap::new();
    for c in &mut plan.clusters {
        match ClusterProfile::parse(&properties(&c.properties)) {
            Ok(profile) => {
                parsed.insert(c.id.clone(), profile);
            }
            Err(problems) => c.problems = problems.iter().map(|p| format!("{}: {}", p.key, p.message)).collect(),
        }
    }
    for e in &mut plan.elastics {
        let problems = match ElasticProfile::parse(&properties(&e.properties)) {
            Err(problems) => problems,
            Ok(elastic) => {
                let alone = check_fits_some_cluster(&elastic);
                match parsed.get(&e.cluster_id) {
                    Some(cluster) if alone.is_empty() => check_compatible(cluster, &elastic),
                    _ => alone,
                }
            }
        };
        e.problems = problems.iter().map(|p| format!("{}: {}", p.key, p.message.replace(['\n', '\r'], " "))).collect();
        if !parsed.contains_key(&e.cluster_id) {
            e.problems.push(format!("its cluster profile {} is not valid", e.cluster_id));
        }
    }
}

/// Runs `import`: reads, translates, validates, writes `--out`, and says what it did on `out`
/// (ids and keys only, never a value). `Ok(true)` when every elastic profile of theirs was written.
///
/// # Errors
/// Only when writing to `out` fails; a file that cannot be written is a line and `Ok(false)`.
pub async fn run(args: &ImportArgs, out: &mut dyn Write) -> io::Result<bool> {
    let mut theirs = Theirs::default();
    let mut ok = true;
    for file in &args.files {
        if let Err(why) = input::read_file(file, &mut theirs) {
            writeln!(out, "{}: {why}", file.display())?;
            ok = false;
        }
    }
    if !ok {
        return Ok(false);
    }
    let plan = plan(&theirs);
    if let Err(e) = output::write(&args.out, &plan, &report::markdown(&plan, &args.files, &args.out)) {
        writeln!(out, "{}: cannot write: {e}", args.out.display())?;
        return Ok(false);
    }
    for e in &plan.elastics {
        if e.written() {
            writeln!(
                out,
                "wrote elastic profile {} (cluster profile {}, LaunchType {})",
                e.id, e.cluster_id, e.launch_type
            )?;
        } else {
            ok = false;
            for p in &e.problems {
                writeln!(out, "NOT WRITTEN elastic profile {}: {}", e.id, p.replace(['\n', '\r'], " "))?;
            }
        }
    }
    for (kind, id, why) in &plan.skipped {
        writeln!(out, "skipped {kind} {id}: {why}")?;
    }
    writeln!(out, "report: {}", args.out.join("report.md").display())?;
    if let (true, Some(server)) = (args.apply, &args.server) {
        ok &= apply::apply(&plan, server, std::env::var(apply::TOKEN_VAR).ok(), out).await?;
    }
    Ok(ok)
}

#[cfg(test)]
mod tests;
