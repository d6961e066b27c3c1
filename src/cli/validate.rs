//! `validate`: profiles in JSON files checked with the messages of GoCD's v5 validate calls, and
//! each elastic profile against the cluster profile as create-agent checks it.
//!
//! Output: `FILE: ok`, or `FILE: Key: message` per problem (`FILE: message` when the file itself
//! cannot be used).

use std::io::{self, Write};
use std::path::Path;

use super::files::{load_cluster, load_elastic};
use super::ProfileFiles;
use crate::settings::{check_compatible, check_fits_some_cluster, ClusterProfile, FieldError};

/// Validates the files; `Ok(true)` when every one is fine.
///
/// # Errors
/// Only when writing to `out` fails.
pub fn run(args: &ProfileFiles, out: &mut dyn Write) -> io::Result<bool> {
    let mut all_ok = true;
    let cluster_path = &args.cluster_profile;
    let cluster: Option<ClusterProfile> = match load_cluster(cluster_path) {
        Ok(loaded) => match loaded.parsed {
            Ok(profile) => {
                writeln!(out, "{}: ok", cluster_path.display())?;
                Some(profile)
            }
            Err(problems) => {
                all_ok = false;
                report(out, cluster_path, &problems)?;
                None
            }
        },
        Err(why) => {
            all_ok = false;
            writeln!(out, "{}: {why}", cluster_path.display())?;
            None
        }
    };
    for path in &args.elastic_profiles {
        all_ok &= elastic(out, path, cluster.as_ref())?;
    }
    Ok(all_ok)
}

/// One elastic profile: alone, then with the cluster profile when that one is valid. Every pair
/// create-agent refuses for the profiles themselves is refused here; what only AWS knows (which
/// capacity providers are ECS Managed Instances, a `TaskDefinitionArn`'s contents) is not.
fn elastic(out: &mut dyn Write, path: &Path, cluster: Option<&ClusterProfile>) -> io::Result<bool> {
    let loaded = match load_elastic(path) {
        Ok(loaded) => loaded,
        Err(why) => {
            writeln!(out, "{}: {why}", path.display())?;
            return Ok(false);
        }
    };
    // As GoCD's validate call, then as create-agent: what no cluster profile runs is refused
    // even when the cluster profile is not valid.
    let problems = match &loaded.parsed {
        Err(problems) => problems.clone(),
        Ok(elastic) => {
            let alone = check_fits_some_cluster(elastic);
            match cluster {
                Some(cluster) if alone.is_empty() => check_compatible(cluster, elastic),
                _ => alone,
            }
        }
    };
    if problems.is_empty() {
        let note =
            if cluster.is_none() { " (not checked against the cluster profile, which is not valid)" } else { "" };
        writeln!(out, "{}: ok{note}", path.display())?;
        return Ok(true);
    }
    report(out, path, &problems)?;
    Ok(false)
}

fn report(out: &mut dyn Write, path: &Path, problems: &[FieldError]) -> io::Result<()> {
    for p in problems {
        // One line per problem: a message with a newline in it would look like two.
        let message = p.message.replace(['\n', '\r'], " ");
        writeln!(out, "{}: {}: {message}", path.display(), p.key)?;
    }
    Ok(())
}
