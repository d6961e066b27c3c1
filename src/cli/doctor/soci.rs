//! `soci`: whether a Fargate elastic profile's ECR image has a SOCI index, which lets Fargate
//! start the task before the whole image is pulled (lazy loading). Fargate keeps no image cache:
//! without an index every task pulls the whole image first.
//!
//! An index is found two ways. v2: the image's tag names an OCI image index whose manifests
//! include the SOCI index (`artifactType` [`SOCI_V2`]), or an image manifest annotated with
//! the index's digest ([`SOCI_V2_ANNOTATION`]): ECR's BatchGetImage with the index media types
//! accepted. v1: a referrer of the image of artifact type [`SOCI_V1`] (ECR's
//! ListImageReferrers); where ECR (or an emulator) does not answer it, the line says v1 was not
//! checked. Only images in the ECR registry of the profile's account and region are looked at
//! (Fargate lazily loads from ECR only); profiles with a `TaskDefinitionArn` are skipped.

use std::io;

use serde_json::Value;

use super::{Aws, Report};
use crate::aws::ecr::EcrImage;
use crate::aws::Failure;
use crate::settings::{ClusterProfile, ElasticProfile, LaunchType};

/// The artifact type of a SOCI index manifest v2, in a SOCI-enabled image's index.
pub const SOCI_V2: &str = "application/vnd.amazon.soci.index.v2+json";
/// The artifact type of a SOCI index manifest v1, a referrer of the image.
pub const SOCI_V1: &str = "application/vnd.amazon.soci.index.v1+json";
/// The annotation of an image manifest in a SOCI-enabled image that names its SOCI index.
pub const SOCI_V2_ANNOTATION: &str = "com.amazon.soci.index-digest";

/// What a manifest says of a SOCI index v2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SociV2 {
    /// A SOCI-enabled image: the index's digest, when the manifest names it.
    Found(Option<String>),
    /// No SOCI index v2 in this manifest.
    Absent,
    /// Not a manifest (not JSON).
    Unreadable,
}

/// Reads a manifest (an OCI image index, a Docker manifest list, or an image manifest).
pub fn soci_v2(manifest: &str) -> SociV2 {
    let Ok(v) = serde_json::from_str::<Value>(manifest) else {
        return SociV2::Unreadable;
    };
    let annotated = |m: &Value| m["annotations"][SOCI_V2_ANNOTATION].as_str().map(str::to_string);
    if let Some(manifests) = v["manifests"].as_array() {
        if let Some(index) = manifests.iter().find(|m| m["artifactType"].as_str() == Some(SOCI_V2)) {
            return SociV2::Found(index["digest"].as_str().map(str::to_string));
        }
        if let Some(digest) = manifests.iter().find_map(annotated) {
            return SociV2::Found(Some(digest));
        }
        return SociV2::Absent;
    }
    match annotated(&v) {
        Some(digest) => SociV2::Found(Some(digest)),
        None => SociV2::Absent,
    }
}

/// What lazy loading saves, and how to add an index: the fix of a `warn soci` line.
fn how_to_add(image: &str) -> String {
    format!(
        "add a SOCI index v2 with the SOCI CLI (soci convert {image} <new tag>, then push the new tag), or \
         deploy AWS's cfn-ecr-aws-soci-index-builder stack to index images as they are pushed; then set Image \
         (or the task definition) to the converted image: it is a new image index whose digest and tag differ \
         from the original's, and a task that names the original still pulls it whole"
    )
}

/// The `soci` lines: one per Fargate elastic profile whose image is in the profile's ECR.
pub(super) async fn check(
    aws: &Aws,
    profile: &ClusterProfile,
    elastic: &[(String, ElasticProfile)],
    r: &mut Report<'_>,
) -> io::Result<()> {
    if profile.launch_type == LaunchType::Ec2 {
        return Ok(());
    }
    let mut seen: Vec<&str> = Vec::new();
    for (shown, e) in elastic {
        if e.task_definition_arn.is_some() || seen.contains(&e.image.as_str()) {
            continue;
        }
        let Some(image) = EcrImage::parse(&e.image) else { continue };
        if !image.is_in(Some(aws.account.as_str()), &aws.region) {
            continue;
        }
        seen.push(&e.image);
        one(aws, shown, &e.image, &image, r).await?;
    }
    Ok(())
}

async fn one(aws: &Aws, shown: &str, reference: &str, image: &EcrImage, r: &mut Report<'_>) -> io::Result<()> {
    let manifest = match aws.ecr_manifest(image).await {
        Ok(Some(m)) => m,
        Ok(None) => {
            return r.warn(
                "soci",
                format!("{shown}: ECR has no image {reference}, so its SOCI index was not checked"),
                "push the image, or correct Image".to_string(),
            );
        }
        Err(e) => {
            let verb = if e.failure == Failure::NotFound { "found no" } else { "could not read" };
            return r.warn(
                "soci",
                format!("{shown}: {verb} image {reference} in ECR, so its SOCI index was not checked: {}", e.detail),
                Some("allow ecr:BatchGetImage and ecr:DescribeImages on the repository to this identity".to_string())
                    .filter(|_| e.failure == Failure::Denied),
            );
        }
    };
    match soci_v2(&manifest.body) {
        SociV2::Found(index) => {
            let index = index.map(|d| format!(" {d}")).unwrap_or_default();
            return r.ok(
                "soci",
                format!("{shown}: {reference} has a SOCI index v2{index}: Fargate loads its large layers lazily"),
            );
        }
        SociV2::Unreadable => {
            return r.warn(
                "soci",
                format!("{shown}: the manifest of {reference} could not be read, so its SOCI index was not checked"),
                None,
            );
        }
        SociV2::Absent => {}
    }
    let v1 = match manifest.digest.as_deref() {
        Some(digest) => match aws.ecr_referrers(image, digest, SOCI_V1).await {
            Ok(types) if types.iter().any(|t| t == SOCI_V1) => {
                return r.ok(
                    "soci",
                    format!(
                        "{shown}: {reference} has a SOCI index v1 (a referrer of the image): Fargate loads its large \
                         layers lazily; a SOCI index v2 (soci convert) binds the index to the image itself"
                    ),
                );
            }
            Ok(_) => "",
            Err(_) => " (a SOCI index v1 was not checked: ECR did not answer ListImageReferrers)",
        },
        None => " (a SOCI index v1 was not checked: ECR gave no digest of the image)",
    };
    r.warn(
        "soci",
        format!(
            "{shown}: {reference} has no SOCI index{v1}: every Fargate task pulls the whole image before it \
             starts. With an index Fargate starts the task first and loads the image lazily: AWS reports task \
             starts up to 60 % shorter for large images (the gain grows with the image; layers under 10 MiB are \
             not lazily loaded, and zstd-compressed layers are not indexed). The status report's Images table \
             shows this image's pull times"
        ),
        how_to_add(reference),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_index_with_a_soci_index_v2() {
        let index = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[
            {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:img","size":1,
             "platform":{"architecture":"amd64","os":"linux"},
             "annotations":{"com.amazon.soci.index-digest":"sha256:soci"}},
            {"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.amazon.soci.index.v2+json",
             "digest":"sha256:soci","size":2,"annotations":{"com.amazon.soci.image-manifest-digest":"sha256:img"}}]}"#;
        assert_eq!(soci_v2(index), SociV2::Found(Some("sha256:soci".into())));
        // An index naming it by annotation only.
        let annotated =
            r#"{"manifests":[{"digest":"sha256:img","annotations":{"com.amazon.soci.index-digest":"sha256:s"}}]}"#;
        assert_eq!(soci_v2(annotated), SociV2::Found(Some("sha256:s".into())));
    }

    #[test]
    fn images_without_a_soci_index_v2() {
        let plain_index = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[
            {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:amd","platform":{"architecture":"amd64","os":"linux"}},
            {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:arm","platform":{"architecture":"arm64","os":"linux"}}]}"#;
        assert_eq!(soci_v2(plain_index), SociV2::Absent);
        let manifest = r#"{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",
            "config":{"mediaType":"application/vnd.docker.container.image.v1+json","size":7023,"digest":"sha256:c"},
            "layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","size":32654,"digest":"sha256:l"}]}"#;
        assert_eq!(soci_v2(manifest), SociV2::Absent);
        // A SOCI index v1 is a referrer, never in the image's own manifest.
        let v1_type =
            r#"{"manifests":[{"digest":"sha256:x","artifactType":"application/vnd.amazon.soci.index.v1+json"}]}"#;
        assert_eq!(soci_v2(v1_type), SociV2::Absent);
        assert_eq!(soci_v2("not json"), SociV2::Unreadable);
    }

    #[test]
    fn the_fix_names_the_image_and_the_new_digest() {
        let fix = how_to_add("123456789012.dkr.ecr.eu-west-1.amazonaws.com/agent:v1");
        assert!(fix.contains("soci convert 123456789012.dkr.ecr.eu-west-1.amazonaws.com/agent:v1"), "{fix}");
        assert!(fix.contains("cfn-ecr-aws-soci-index-builder") && fix.contains("digest"), "{fix}");
    }
}
