//! Accounts: base credentials (the SDK default chain or a profile's static keys), optionally
//! through AssumeRole, turned into SDK clients once per (base identity, role, external id,
//! region) and reused. The SDK's identity cache holds each assumed session and refreshes it
//! before it expires, so one role costs one AssumeRole per session lifetime however many
//! requests arrive.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use aws_config::meta::region::ProvideRegion;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::BehaviorVersion;
use aws_credential_types::provider::{future, ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use aws_sdk_ecs::config::Region;
use tokio::sync::OnceCell;

use super::budget::Budget;
use super::calls::CallStats;
use super::NoRegion;
use crate::settings::ClusterProfile;

/// The clients of one account and region.
#[derive(Debug)]
pub struct AwsClients {
    /// ECS.
    pub ecs: aws_sdk_ecs::Client,
    /// EC2 (networking lookups, EC2 capacity).
    pub ec2: aws_sdk_ec2::Client,
    /// SQS (the event queue, `EventQueueUrl`): its attempts may take a 20 s long poll.
    pub sqs: aws_sdk_sqs::Client,
    /// ECR (the size of an agent image in the account's registry).
    pub ecr: aws_sdk_ecr::Client,
    /// The Price List (in us-east-1), for a price the table lacks.
    pub pricing: aws_sdk_pricing::Client,
    /// The region the clients call.
    pub region: String,
    /// The role these clients act as, if any.
    pub role_arn: Option<String>,
    /// AssumeRole bookkeeping for status reports.
    pub role: Arc<RoleStats>,
    /// Calls made with these clients, by operation (shared by the account's profiles), against
    /// the budget of the account and region.
    pub calls: Arc<CallStats>,
    /// The account the clients act in (the role's, else the base credentials'), when known.
    pub account_id: Option<String>,
}

/// What we know about an assumed-role session.
#[derive(Debug, Default)]
pub struct RoleStats {
    /// AssumeRole calls made (each credential refresh is one).
    pub assume_role_calls: AtomicU64,
    state: Mutex<RoleState>,
}

#[derive(Debug, Default, Clone)]
struct RoleState {
    expires: Option<SystemTime>,
    last_error: Option<String>,
}

impl RoleStats {
    /// When the current session expires.
    pub fn expires(&self) -> Option<SystemTime> {
        self.lock().expires
    }

    /// Why the last AssumeRole failed, if it did.
    pub fn last_error(&self) -> Option<String> {
        self.lock().last_error.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RoleState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Wraps AssumeRole to count its calls and remember expiry and failures.
#[derive(Debug)]
struct ObservedRole {
    inner: aws_config::sts::AssumeRoleProvider,
    stats: Arc<RoleStats>,
}

impl ProvideCredentials for ObservedRole {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(async move {
            self.stats.assume_role_calls.fetch_add(1, Ordering::Relaxed);
            let result = self.inner.provide_credentials().await;
            let mut state = self.stats.lock();
            match &result {
                Ok(creds) => {
                    state.expires = creds.expiry();
                    state.last_error = None;
                }
                Err(e) => {
                    state.last_error = Some(aws_smithy_types::error::display::DisplayErrorContext(e).to_string());
                }
            }
            result
        })
    }
}

/// Identifies one set of clients. `base` holds the static access key id and `external_id` the
/// role's external id: its `Debug` shows neither.
#[derive(Clone, PartialEq, Eq, Hash)]
struct AccountKey {
    base: String,
    role_arn: Option<String>,
    external_id: Option<String>,
    session_name: Option<String>,
    region: String,
}

impl std::fmt::Debug for AccountKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let base = if self.base.starts_with("static:") { "static:REDACTED" } else { self.base.as_str() };
        f.debug_struct("AccountKey")
            .field("base", &base)
            .field("role_arn", &self.role_arn)
            .field("external_id", &self.external_id.as_ref().map(|_| "REDACTED"))
            .field("session_name", &self.session_name)
            .field("region", &self.region)
            .finish()
    }
}

/// The cache of clients per account, and the API budget per (account id, region).
#[derive(Debug, Default)]
pub struct Accounts {
    clients: Mutex<HashMap<AccountKey, Arc<OnceCell<Arc<AwsClients>>>>>,
    default_region: OnceCell<Option<String>>,
    budgets: Budgets,
}

/// One [`Budget`] per (account id, region): two roles or two key pairs in one account share it,
/// as they share AWS's quotas.
#[derive(Debug, Default)]
struct Budgets(Mutex<HashMap<(String, String), Arc<Budget>>>);

impl Budgets {
    fn of(&self, account: &str, region: &str) -> Arc<Budget> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry((account.to_string(), region.to_string())).or_default().clone()
    }
}

impl Accounts {
    /// The region a profile calls: its `Region`, else the SDK's default region chain.
    ///
    /// # Errors
    /// [`NoRegion`] when neither names a region.
    pub async fn region_of(&self, profile: &ClusterProfile) -> Result<String, NoRegion> {
        if let Some(region) = &profile.region {
            return Ok(region.clone());
        }
        let default = self
            .default_region
            .get_or_init(|| async {
                aws_config::default_provider::region::default_provider().region().await.map(|r| r.to_string())
            })
            .await;
        default.clone().ok_or_else(|| NoRegion { cluster: profile.cluster_name.clone() })
    }

    /// The clients for `profile`, built on first use and shared after.
    ///
    /// # Errors
    /// [`NoRegion`] when no region can be found.
    pub async fn clients_for(&self, profile: &ClusterProfile, server_id: &str) -> Result<Arc<AwsClients>, NoRegion> {
        let region = self.region_of(profile).await?;
        let key = AccountKey {
            base: profile
                .static_credentials
                .as_ref()
                .map_or_else(|| "default-chain".to_string(), |c| format!("static:{}", c.access_key_id.expose())),
            role_arn: profile.role_arn.clone(),
            external_id: profile.external_id(server_id),
            session_name: profile.role_arn.as_ref().map(|_| profile.role_session_name()),
            region,
        };
        let cell = {
            let mut map = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
            map.entry(key.clone()).or_default().clone()
        };
        let clients = cell.get_or_init(|| build_clients(profile, key, &self.budgets)).await;
        Ok(clients.clone())
    }

    /// Drops the clients built for `profile` (its credentials or role changed).
    pub fn forget(&self, profile: &ClusterProfile) {
        let mut map = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|k, _| {
            !(k.role_arn == profile.role_arn
                && profile.region.as_ref().is_none_or(|r| *r == k.region)
                && profile
                    .static_credentials
                    .as_ref()
                    .is_none_or(|c| k.base == format!("static:{}", c.access_key_id.expose())))
        });
    }
}

/// The SDK config loader for a profile's base identity: its static keys, else the SDK's
/// default chain (env, profile, SSO, web identity, ECS/EC2 roles). `doctor` uses it too, so it
/// checks exactly the credentials the plugin uses.
///
/// It sets no HTTP client: every client built from it, the credential providers' and
/// AssumeRole's included, gets the SDK's default one, which at `BehaviorVersion::latest()` goes
/// through the proxy that `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY` name, except to the hosts of
/// `NO_PROXY` (`packaging/INSTALL.md`, "Through an HTTP proxy"). A client set here would have to
/// keep that.
pub fn base_loader(profile: &ClusterProfile, region: &str) -> aws_config::ConfigLoader {
    let mut loader = aws_config::defaults(BehaviorVersion::latest()).region(Region::new(region.to_string()));
    if let Some(creds) = &profile.static_credentials {
        loader = loader.credentials_provider(Credentials::new(
            creds.access_key_id.expose().clone(),
            creds.secret_access_key.expose().clone(),
            None,
            None,
            "cluster-profile",
        ));
    }
    loader
}

/// AssumeRole from `base` into `role_arn`, with the profile's external id and session name.
pub async fn assume_role_provider(
    base: &aws_config::SdkConfig,
    role_arn: &str,
    external_id: Option<String>,
    session_name: String,
) -> aws_config::sts::AssumeRoleProvider {
    let mut builder = aws_config::sts::AssumeRoleProvider::builder(role_arn).configure(base).session_name(session_name);
    if let Some(region) = base.region() {
        builder = builder.region(region.clone());
    }
    if let Some(external_id) = external_id {
        builder = builder.external_id(external_id);
    }
    builder.build().await
}

/// The account a role ARN names (`arn:aws:iam::<account>:role/...`).
pub fn account_of_role(role_arn: &str) -> Option<String> {
    let account = role_arn.split(':').nth(4)?;
    (account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit())).then(|| account.to_string())
}

/// The account of the base credentials, asked once (STS GetCallerIdentity, which needs no
/// permission), counted and retried in `calls` like every other call; `None` when STS cannot
/// say.
async fn caller_account(base: &aws_config::SdkConfig, calls: &CallStats) -> Option<String> {
    let sts = aws_sdk_sts::Client::from_conf(
        aws_sdk_sts::config::Builder::from(base).retry_config(RetryConfig::disabled()).build(),
    );
    let asked = calls.call("GetCallerIdentity", || sts.get_caller_identity().send());
    match tokio::time::timeout(Duration::from_secs(60), asked).await {
        Ok(Ok(identity)) => identity.account().map(str::to_string),
        Ok(Err(e)) => {
            tracing::info!(error = %e, "could not learn the account of the base credentials; their budget is their own");
            None
        }
        Err(_) => None,
    }
}

async fn build_clients(profile: &ClusterProfile, key: AccountKey, budgets: &Budgets) -> Arc<AwsClients> {
    let base = base_loader(profile, &key.region).load().await;
    let identity_calls = CallStats::default();
    let account_id = match &key.role_arn {
        Some(role_arn) => account_of_role(role_arn),
        None => caller_account(&base, &identity_calls).await,
    };
    // An account we could not learn: a budget of these credentials' own.
    let budget_key = account_id.clone().unwrap_or_else(|| format!("credentials {}", short_key(&key)));
    let budget = budgets.of(&budget_key, &key.region);
    let role = Arc::new(RoleStats::default());
    let config = match &key.role_arn {
        None => base,
        Some(role_arn) => {
            let session_name = key.session_name.clone().unwrap_or_else(|| profile.role_session_name());
            let inner = assume_role_provider(&base, role_arn, key.external_id.clone(), session_name).await;
            let provider = ObservedRole { inner, stats: role.clone() };
            base.into_builder().credentials_provider(SharedCredentialsProvider::new(provider)).build()
        }
    };
    let calls = Arc::new(CallStats::new(budget));
    calls.absorb(&identity_calls);
    // Our own retry loop paces and counts every attempt (aws::calls); the SDK's is off.
    let retry = RetryConfig::disabled();
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(5))
        .operation_attempt_timeout(Duration::from_secs(20))
        .build();
    let ecs = aws_sdk_ecs::config::Builder::from(&config)
        .retry_config(retry.clone())
        .timeout_config(timeouts.clone())
        .build();
    let ec2 = aws_sdk_ec2::config::Builder::from(&config)
        .retry_config(retry.clone())
        .timeout_config(timeouts.clone())
        .build();
    let ecr = aws_sdk_ecr::config::Builder::from(&config)
        .retry_config(retry.clone())
        .timeout_config(timeouts.clone())
        .build();
    let pricing =
        super::pricing::client_of(&config.to_builder().retry_config(retry.clone()).timeout_config(timeouts).build());
    // A long poll waits up to 20 s for a message before SQS answers: room for it, and for the answer.
    let long_poll = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(5))
        .operation_attempt_timeout(Duration::from_secs(35))
        .build();
    let sqs = aws_sdk_sqs::config::Builder::from(&config).retry_config(retry).timeout_config(long_poll).build();
    Arc::new(AwsClients {
        ecs: aws_sdk_ecs::Client::from_conf(ecs),
        ec2: aws_sdk_ec2::Client::from_conf(ec2),
        sqs: aws_sdk_sqs::Client::from_conf(sqs),
        ecr: aws_sdk_ecr::Client::from_conf(ecr),
        pricing,
        region: key.region,
        role_arn: key.role_arn,
        role,
        calls,
        account_id,
    })
}

/// A name for a credential set that shows no part of its keys.
fn short_key(key: &AccountKey) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.base.hash(&mut hasher);
    key.role_arn.hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::AccountKey;

    #[test]
    fn an_account_key_prints_neither_the_access_key_nor_the_external_id() {
        let key = AccountKey {
            base: "static:AKIAEXAMPLESECRET1234".into(),
            role_arn: Some("arn:aws:iam::123456789012:role/r".into()),
            external_id: Some("ext-id-secret-value".into()),
            session_name: None,
            region: "eu-west-1".into(),
        };
        let text = format!("{key:?}");
        assert!(!text.contains("AKIAEXAMPLESECRET1234") && !text.contains("ext-id-secret-value"), "{text}");
        assert!(text.contains("eu-west-1") && text.contains("role/r"), "{text}");
    }
}
