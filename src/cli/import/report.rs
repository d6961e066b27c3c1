//! `report.md`: what import wrote, what it skipped, and for every key of every profile of theirs
//! where it went (old → new, with unit conversions), what has no counterpart and what to do, and
//! which values it could not carry over. Keys and conversions only: no secret, and no free-text
//! value (environment variables, commands, scripts) is repeated here.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::translate::{Note, Outcome, THEIR_PLUGIN_ID};
use super::Plan;

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

fn table(out: &mut String, notes: &[Note]) {
    out.push_str("| their key | becomes | how / what to do |\n|---|---|---|\n");
    for n in notes {
        let (to, how) = match &n.outcome {
            Outcome::Mapped { to, detail } => (format!("`{to}`"), cell(detail)),
            Outcome::NoCounterpart(what) => ("no counterpart".to_string(), cell(what)),
            Outcome::NotCarried(what) => ("**not carried over**".to_string(), cell(what)),
        };
        let _ = writeln!(out, "| `{}` | {to} | {how} |", n.key);
    }
    out.push('\n');
}

/// The report's Markdown.
pub fn markdown(plan: &Plan, inputs: &[PathBuf], out_dir: &Path) -> String {
    let flat = out_dir.join("profiles");
    let flat = flat.display();
    let mut out = String::from("# Import from GoCD's ECS elastic agent plugin\n\n");
    let _ = writeln!(out, "Profiles of `{THEIR_PLUGIN_ID}` translated into this plugin's, from:\n");
    for f in inputs {
        let _ = writeln!(out, "- `{}`", f.display());
    }
    let written: Vec<_> = plan.elastics.iter().filter(|e| e.written()).collect();
    let _ = writeln!(
        out,
        "\n{} of {} elastic profiles written. Our launch type belongs to the cluster profile, theirs to each elastic profile: each of their cluster profiles becomes one of ours per launch type its elastic profiles use (`-fargate`, `-fargate-spot`, `-ec2`, `-ec2-spot`, `-ec2-windows`, ...). Elastic profiles keep their ids, so pipelines keep working once the new ones replace the old.\n",
        written.len(),
        plan.elastics.len()
    );
    out.push_str("## Written\n\n| elastic profile | cluster profile | LaunchType | check with |\n|---|---|---|---|\n");
    for e in &written {
        let _ = writeln!(
            out,
            "| `{}` | `{}` (from `{}`) | {} | `ecs-elastic-agent validate --cluster-profile {flat}/cluster-{}.json --elastic-profile {flat}/elastic-{}.json` |",
            e.id, e.cluster_id, e.their_cluster_id, e.launch_type, e.cluster_id, e.id
        );
    }
    let failed: Vec<_> = plan.elastics.iter().filter(|e| !e.written()).collect();
    if !failed.is_empty() {
        out.push_str("\n## Not written: fix these by hand\n\n");
        for e in failed {
            let _ = writeln!(out, "- elastic profile `{}` (cluster profile `{}`):", e.id, e.cluster_id);
            for p in &e.problems {
                let _ = writeln!(out, "  - {}", cell(p));
            }
            if let Some(c) = plan.clusters.iter().find(|c| c.id == e.cluster_id) {
                for p in &c.problems {
                    let _ = writeln!(out, "  - cluster profile `{}`: {}", c.id, cell(p));
                }
            }
        }
    }
    if !plan.skipped.is_empty() {
        out.push_str("\n## Skipped\n\n");
        for (kind, id, why) in &plan.skipped {
            let _ = writeln!(out, "- {kind} `{id}`: {why}");
        }
    }
    for (id, notes) in &plan.their_clusters {
        let made: Vec<String> =
            plan.clusters.iter().filter(|c| &c.their_id == id).map(|c| format!("`{}`", c.id)).collect();
        let made =
            if made.is_empty() { "none (no elastic profile of theirs uses it)".to_string() } else { made.join(", ") };
        let _ = writeln!(out, "\n## Cluster profile `{id}` → {made}\n");
        table(&mut out, notes);
        for c in plan.clusters.iter().filter(|c| &c.their_id == id) {
            if c.properties.contains_key("AllowPrivileged") {
                let _ = writeln!(out, "`{}` has `AllowPrivileged` true because an elastic profile of it runs privileged, mounts the Docker socket or a system directory: decide whether that should stay.\n", c.id);
            }
        }
    }
    for e in &plan.elastics {
        let _ =
            writeln!(out, "\n## Elastic profile `{}` → cluster profile `{}` ({})\n", e.id, e.cluster_id, e.launch_type);
        table(&mut out, &e.notes);
    }
    out
}
