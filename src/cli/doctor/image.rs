//! `image`: an elastic profile's `Image` pulled anonymously from Docker Hub through a NAT
//! gateway. Every task behind the NAT shares its one public address, and Docker Hub limits
//! anonymous pulls per address, so a busy cluster is refused pulls (the task stops with
//! `CannotPullContainerError`); each pull is also billed as NAT data. A task with its own public
//! IP behind an internet gateway has its own address and is not warned about, nor is an image of
//! ECR, ECR Public or another registry, or one pulled with `RepositoryCredentialsArn`.
//! Profiles with a `TaskDefinitionArn` are skipped: that task definition names the image.

use std::io;

use super::network::{way_out, Network, Way};
use super::{Aws, Report};
use crate::aws::doctor_routes::RouteTableView;
use crate::settings::ElasticProfile;

/// A Docker Hub image, as an ECR pull-through cache names it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DockerHubImage {
    /// The repository, with `library/` for official images (`library/alpine`, `gocd/gocd-agent`).
    repository: String,
    /// `:tag` or `@digest` (`:latest` when the reference has neither).
    version: String,
}

/// The Docker Hub image `reference` names, or `None` when another registry serves it. Docker's
/// rules: the first path component is a registry host when it contains `.` or `:`, is
/// `localhost`, or has an upper-case letter; without one the registry is Docker Hub, and a
/// one-component name is an official image under `library/`.
fn docker_hub(reference: &str) -> Option<DockerHubImage> {
    let (named, digest) = match reference.split_once('@') {
        Some((named, digest)) => (named, Some(format!("@{digest}"))),
        None => (reference, None),
    };
    let last_slash = named.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match named[last_slash..].rfind(':') {
        Some(i) => (&named[..last_slash + i], Some(&named[last_slash + i..])),
        None => (named, None),
    };
    let version = digest.or(tag.map(str::to_string)).unwrap_or_else(|| ":latest".to_string());
    let path = match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':']) || first == "localhost" || first.chars().any(|c| c.is_ascii_uppercase()) =>
        {
            if !matches!(first, "docker.io" | "index.docker.io" | "registry-1.docker.io") {
                return None;
            }
            rest
        }
        _ => name,
    };
    if path.is_empty() {
        return None;
    }
    let repository = if path.contains('/') { path.to_string() } else { format!("library/{path}") };
    Some(DockerHubImage { repository, version })
}

/// The `image` lines: one warning per elastic profile whose Docker Hub image is pulled
/// anonymously through a NAT gateway; nothing otherwise.
pub(super) fn check(
    aws: &Aws,
    network: Option<&Network>,
    tables: Option<&[RouteTableView]>,
    elastic: &[(String, ElasticProfile)],
    r: &mut Report<'_>,
) -> io::Result<()> {
    let (Some(network), Some(tables)) = (network, tables) else {
        return Ok(());
    };
    for (shown, e) in elastic {
        if e.task_definition_arn.is_some() || e.repository_credentials_arn.is_some() {
            continue;
        }
        let Some(image) = docker_hub(&e.image) else {
            continue;
        };
        let subnets = if e.subnet_ids.is_empty() { &network.subnets } else { &e.subnet_ids };
        let mut nats: Vec<String> = Vec::new();
        let mut behind: Vec<&str> = Vec::new();
        for subnet in subnets {
            if let Way::Nat(nat) = way_out(subnet, tables) {
                behind.push(subnet);
                if !nats.contains(&nat) {
                    nats.push(nat);
                }
            }
        }
        if nats.is_empty() {
            continue;
        }
        r.warn(
            "image",
            format!(
                "{shown}: {} is pulled anonymously from Docker Hub through NAT gateway(s) {} (subnet(s) {}): every \
                 task behind a NAT shares its one public address, against Docker Hub's anonymous pull limit per \
                 address (tasks then stop with CannotPullContainerError), and each pull is billed as NAT data",
                e.image,
                nats.join(", "),
                behind.join(", ")
            ),
            format!(
                "pull through an ECR pull-through cache, Image {}.dkr.ecr.{}.amazonaws.com/docker-hub/{}{} (the \
                 cluster stack's DockerHubCredentialsSecretArn parameter creates the cache), or mirror the image \
                 into ECR, or set RepositoryCredentialsArn for authenticated pulls",
                aws.account, aws.region, image.repository, image.version
            ),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hub(repository: &str, version: &str) -> Option<DockerHubImage> {
        Some(DockerHubImage { repository: repository.into(), version: version.into() })
    }

    #[test]
    fn docker_hub_references() {
        for (reference, expected) in [
            ("alpine", hub("library/alpine", ":latest")),
            ("alpine:3.19", hub("library/alpine", ":3.19")),
            ("gocd/gocd-agent-alpine-3.19:v24.1.0", hub("gocd/gocd-agent-alpine-3.19", ":v24.1.0")),
            ("docker.io/gocd/gocd-agent:v24.1.0", hub("gocd/gocd-agent", ":v24.1.0")),
            ("docker.io/alpine", hub("library/alpine", ":latest")),
            ("index.docker.io/library/alpine:3", hub("library/alpine", ":3")),
            ("registry-1.docker.io/gocd/agent", hub("gocd/agent", ":latest")),
            ("team/tools/builder:1", hub("team/tools/builder", ":1")),
            ("alpine@sha256:abc123", hub("library/alpine", "@sha256:abc123")),
            ("gocd/agent:1@sha256:abc123", hub("gocd/agent", "@sha256:abc123")),
        ] {
            assert_eq!(docker_hub(reference), expected, "{reference}");
        }
    }

    #[test]
    fn other_registries() {
        for reference in [
            "123456789012.dkr.ecr.us-east-1.amazonaws.com/gocd/agent:1",
            "public.ecr.aws/docker/library/alpine:3",
            "quay.io/x/agent:1",
            "ghcr.io/org/agent",
            "localhost/agent:1",
            "localhost:5000/agent",
            "registry:5000/agent:1",
            "Registry/agent",
        ] {
            assert_eq!(docker_hub(reference), None, "{reference}");
        }
    }
}
