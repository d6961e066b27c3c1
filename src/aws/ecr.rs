//! The port's ECR reads: which images are ECR's ([`EcrImage::parse`]), an image's size and
//! manifest media type (DescribeImages), its manifest (BatchGetImage, for the SOCI check of
//! `doctor` and `try`) and the artifact types of its referrers (ListImageReferrers). Plain data
//! out; what the figures mean is the engine's (`cluster::image_pulls`) and the SOCI check's
//! (`cli::doctor::soci`).

use std::time::Duration;

use aws_sdk_ecr::types::{ImageIdentifier, ListImageReferrersFilter, SubjectIdentifier};

use super::doctor::{within, CheckClients};
use super::{AwsClients, AwsError};

/// The manifest media types `doctor` accepts from BatchGetImage: an image index or manifest
/// list first, so a tag that names one answers with it rather than with one of its manifests.
pub const MANIFEST_MEDIA_TYPES: [&str; 4] = [
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
];

/// An image in a private ECR registry, as an `Image` names it:
/// `<account>.dkr.ecr.<region>.amazonaws.com/<repository>[:tag][@digest]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EcrImage {
    /// The registry's account.
    pub account: String,
    /// The registry's region.
    pub region: String,
    /// The repository (may contain `/`).
    pub repository: String,
    /// The tag (`latest` when the reference names neither tag nor digest).
    pub tag: Option<String>,
    /// The digest, when the reference names one.
    pub digest: Option<String>,
}

impl EcrImage {
    /// The ECR image `reference` names, or `None` for another registry (ECR Public included).
    pub fn parse(reference: &str) -> Option<EcrImage> {
        let (host, path) = reference.split_once('/')?;
        let mut parts = host.split('.');
        let account = parts.next()?;
        if account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if parts.next()? != "dkr" || !matches!(parts.next()?, "ecr" | "ecr-fips") {
            return None;
        }
        let region = parts.next()?;
        if region.is_empty() || parts.next()? != "amazonaws" {
            return None;
        }
        let (named, digest) = match path.split_once('@') {
            Some((named, digest)) => (named, Some(digest.to_string())),
            None => (path, None),
        };
        let last_slash = named.rfind('/').map_or(0, |i| i + 1);
        let (repository, tag) = match named[last_slash..].rfind(':') {
            Some(i) => (&named[..last_slash + i], Some(named[last_slash + i + 1..].to_string())),
            None => (named, None),
        };
        if repository.is_empty() {
            return None;
        }
        let tag = if tag.is_none() && digest.is_none() { Some("latest".to_string()) } else { tag };
        Some(EcrImage {
            account: account.to_string(),
            region: region.to_string(),
            repository: repository.to_string(),
            tag,
            digest,
        })
    }

    /// Whether the image is in the registry of `account` in `region`.
    pub fn is_in(&self, account: Option<&str>, region: &str) -> bool {
        account == Some(self.account.as_str()) && self.region == region
    }

    fn id(&self) -> ImageIdentifier {
        // The digest when named: a tag may have moved since.
        match &self.digest {
            Some(d) => ImageIdentifier::builder().image_digest(d).build(),
            None => ImageIdentifier::builder().set_image_tag(self.tag.clone()).build(),
        }
    }
}

/// What DescribeImages says of one image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EcrImageFacts {
    /// `imageSizeInBytes`: the compressed layers' size (none for an image index).
    pub size_bytes: Option<u64>,
    /// `imageManifestMediaType`.
    pub manifest_media_type: Option<String>,
    /// `imageDigest`.
    pub digest: Option<String>,
}

/// One manifest as BatchGetImage answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EcrManifest {
    /// Its digest.
    pub digest: Option<String>,
    /// Its media type.
    pub media_type: Option<String>,
    /// The manifest itself (JSON).
    pub body: String,
}

impl AwsClients {
    /// DescribeImages of one image, through the account's budget; counted as
    /// `ecr:DescribeImages`, apart from EC2's DescribeImages (AMIs).
    ///
    /// # Errors
    /// The failed call (`NotFound` for a repository or image that does not exist).
    pub async fn ecr_image(&self, image: &EcrImage) -> Result<EcrImageFacts, AwsError> {
        let request = self
            .ecr
            .describe_images()
            .registry_id(&image.account)
            .repository_name(&image.repository)
            .image_ids(image.id());
        let not_found = |e: &AwsError| e.failure == super::Failure::NotFound;
        let out = self.calls.call_unless("ecr:DescribeImages", not_found, || request.clone().send()).await?;
        Ok(out.image_details().first().map(facts).unwrap_or_default())
    }
}

fn facts(d: &aws_sdk_ecr::types::ImageDetail) -> EcrImageFacts {
    EcrImageFacts {
        size_bytes: d.image_size_in_bytes().and_then(|s| u64::try_from(s).ok()),
        manifest_media_type: d.image_manifest_media_type().map(str::to_string),
        digest: d.image_digest().map(str::to_string),
    }
}

/// The ECR reads of the SOCI check (BatchGetImage, ListImageReferrers), each within a time
/// limit: over `doctor`'s clients ([`CheckClients::ecr_reads`]) or the plugin's, for `try`
/// ([`AwsClients::ecr_reads`]).
#[derive(Debug, Clone, Copy)]
pub struct EcrReads<'a> {
    ecr: &'a aws_sdk_ecr::Client,
    timeout: Duration,
}

impl CheckClients {
    /// The SOCI check's ECR reads, within the check's time limit.
    pub fn ecr_reads(&self) -> EcrReads<'_> {
        EcrReads { ecr: &self.ecr, timeout: self.timeout }
    }
}

impl AwsClients {
    /// The SOCI check's ECR reads over these clients, each within `timeout`.
    pub fn ecr_reads(&self, timeout: Duration) -> EcrReads<'_> {
        EcrReads { ecr: &self.ecr, timeout }
    }
}

impl EcrReads<'_> {
    /// Runs one call within the time limit.
    async fn call<T, F>(&self, operation: &'static str, call: F) -> Result<T, AwsError>
    where
        F: std::future::Future<Output = Result<T, AwsError>>,
    {
        within(self.timeout, operation, call).await
    }

    /// The image's manifest as BatchGetImage answers it, index media types accepted first;
    /// `None` when ECR has no such image.
    ///
    /// # Errors
    /// The failed call (`NotFound` for a repository that does not exist).
    pub async fn manifest(&self, image: &EcrImage) -> Result<Option<EcrManifest>, AwsError> {
        let mut request = self
            .ecr
            .batch_get_image()
            .registry_id(&image.account)
            .repository_name(&image.repository)
            .image_ids(image.id());
        for t in MANIFEST_MEDIA_TYPES {
            request = request.accepted_media_types(t);
        }
        let out = self
            .call("BatchGetImage", async { request.send().await.map_err(|e| AwsError::from_sdk("BatchGetImage", &e)) })
            .await?;
        Ok(out.images().first().map(|i| EcrManifest {
            digest: i.image_id().and_then(|id| id.image_digest()).map(str::to_string),
            media_type: i.image_manifest_media_type().map(str::to_string),
            body: i.image_manifest().unwrap_or_default().to_string(),
        }))
    }

    /// The artifact types of the referrers of the manifest `digest` of `image`
    /// (ListImageReferrers, first page), filtered to `artifact_type`.
    ///
    /// # Errors
    /// The failed call (an endpoint that does not know the operation among them).
    pub async fn referrers(
        &self,
        image: &EcrImage,
        digest: &str,
        artifact_type: &str,
    ) -> Result<Vec<String>, AwsError> {
        let subject = SubjectIdentifier::builder()
            .image_digest(digest)
            .build()
            .map_err(|e| AwsError::new("ListImageReferrers", super::Failure::NotSent, e.to_string()))?;
        let filter = ListImageReferrersFilter::builder().artifact_types(artifact_type).build();
        let request = self
            .ecr
            .list_image_referrers()
            .registry_id(&image.account)
            .repository_name(&image.repository)
            .subject_id(subject)
            .filter(filter);
        let out = self
            .call("ListImageReferrers", async {
                request.send().await.map_err(|e| AwsError::from_sdk("ListImageReferrers", &e))
            })
            .await?;
        Ok(out.referrers().iter().filter_map(|r| r.artifact_type().map(str::to_string)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::EcrImage;

    fn ecr(repository: &str, tag: Option<&str>, digest: Option<&str>) -> Option<EcrImage> {
        Some(EcrImage {
            account: "123456789012".into(),
            region: "eu-west-1".into(),
            repository: repository.into(),
            tag: tag.map(str::to_string),
            digest: digest.map(str::to_string),
        })
    }

    #[test]
    fn ecr_references() {
        let host = "123456789012.dkr.ecr.eu-west-1.amazonaws.com";
        assert_eq!(EcrImage::parse(&format!("{host}/gocd/agent:v1")), ecr("gocd/agent", Some("v1"), None));
        assert_eq!(EcrImage::parse(&format!("{host}/agent")), ecr("agent", Some("latest"), None));
        assert_eq!(EcrImage::parse(&format!("{host}/agent@sha256:ab")), ecr("agent", None, Some("sha256:ab")));
        assert_eq!(
            EcrImage::parse(&format!("{host}/a/b:1@sha256:ab")),
            ecr("a/b", Some("1"), Some("sha256:ab")),
            "a digest and a tag"
        );
        for other in [
            "gocd/agent:v1",
            "public.ecr.aws/docker/library/alpine:3",
            "quay.io/x/agent:1",
            "12345.dkr.ecr.eu-west-1.amazonaws.com/agent",
            "123456789012.dkr.ecr.eu-west-1.amazonaws.com/",
        ] {
            assert_eq!(EcrImage::parse(other), None, "{other}");
        }
        let image = EcrImage::parse(&format!("{host}/agent")).expect("ECR");
        assert!(image.is_in(Some("123456789012"), "eu-west-1"));
        assert!(!image.is_in(Some("123456789012"), "us-east-1"));
        assert!(!image.is_in(None, "eu-west-1"));
    }
}
