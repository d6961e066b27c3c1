//! The port's reads of an identity's own IAM policies, for `doctor`'s permissions check: who a
//! caller ARN of GetCallerIdentity names ([`Caller`]), and the documents of its managed and
//! inline policies (a user's with those of its groups), every list read to its last page and
//! every document decoded from the URL encoding IAM returns it in. Plain data out; what the
//! documents allow is the CLI's (`cli::doctor::permissions`).

use std::fmt;
use std::future::Future;

use super::doctor::CheckClients;
use super::{AwsError, Failure};

/// What reading a role's own policies needs (its managed policies' documents need
/// [`MANAGED_POLICY_READS`] too).
pub const ROLE_READS: &[&str] =
    &["iam:GetRole", "iam:ListAttachedRolePolicies", "iam:ListRolePolicies", "iam:GetRolePolicy"];

/// What reading a user's own policies and its groups' needs (their managed policies' documents
/// need [`MANAGED_POLICY_READS`] too).
pub const USER_READS: &[&str] = &[
    "iam:ListAttachedUserPolicies",
    "iam:ListUserPolicies",
    "iam:GetUserPolicy",
    "iam:ListGroupsForUser",
    "iam:ListAttachedGroupPolicies",
    "iam:ListGroupPolicies",
    "iam:GetGroupPolicy",
];

/// What reading a managed policy's document needs.
pub const MANAGED_POLICY_READS: &[&str] = &["iam:GetPolicy", "iam:GetPolicyVersion"];

/// More pages than any list of an identity's policies has: a marker that never ends is cut here.
const MAX_PAGES: usize = 100;

/// Who a caller ARN names, as far as its identity policies go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A session of an assumed role (`arn:PARTITION:sts::ACCOUNT:assumed-role/NAME/SESSION`):
    /// role NAME (the ARN leaves out the role's path).
    Role(String),
    /// An IAM user (`arn:PARTITION:iam::ACCOUNT:user/[PATH/]NAME`).
    User(String),
    /// The account's root user (`arn:PARTITION:iam::ACCOUNT:root`).
    Root,
    /// Anything else: a federated user's session, a form this binary does not know.
    Other,
}

impl Caller {
    /// Who `arn` names.
    pub fn of_arn(arn: &str) -> Caller {
        let parts: Vec<&str> = arn.splitn(6, ':').collect();
        let [prefix, _partition, service, _region, _account, resource] = parts[..] else {
            return Caller::Other;
        };
        if prefix != "arn" {
            return Caller::Other;
        }
        match (service, resource.split_once('/')) {
            ("sts", Some(("assumed-role", rest))) => match rest.split_once('/') {
                Some((name, _session)) if !name.is_empty() => Caller::Role(name.to_string()),
                _ => Caller::Other,
            },
            ("iam", Some(("user", rest))) => match rest.rsplit('/').next() {
                Some(name) if !name.is_empty() => Caller::User(name.to_string()),
                _ => Caller::Other,
            },
            ("iam", None) if resource == "root" => Caller::Root,
            _ => Caller::Other,
        }
    }
}

/// Where one policy document comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyOrigin {
    /// A managed policy attached to the identity (its default version).
    Managed {
        /// The policy's ARN.
        arn: String,
    },
    /// An inline policy of the identity.
    Inline {
        /// The policy's name.
        name: String,
    },
    /// A managed policy attached to a group the user is in.
    GroupManaged {
        /// The group's name.
        group: String,
        /// The policy's ARN.
        arn: String,
    },
    /// An inline policy of a group the user is in.
    GroupInline {
        /// The group's name.
        group: String,
        /// The policy's name.
        name: String,
    },
}

impl fmt::Display for PolicyOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyOrigin::Managed { arn } => write!(f, "managed policy {arn}"),
            PolicyOrigin::Inline { name } => write!(f, "inline policy {name}"),
            PolicyOrigin::GroupManaged { group, arn } => write!(f, "group {group}'s managed policy {arn}"),
            PolicyOrigin::GroupInline { group, name } => write!(f, "group {group}'s inline policy {name}"),
        }
    }
}

/// One policy of the identity: where it comes from and its JSON document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityPolicy {
    /// Where it comes from.
    pub origin: PolicyOrigin,
    /// The policy document as JSON text (decoded).
    pub document: String,
}

/// A document as IAM returns it: URL-encoded (RFC 3986). Text that is JSON already (some
/// emulators send it so) is kept as it is.
pub fn decoded(text: &str) -> String {
    if serde_json::from_str::<serde_json::Value>(text).is_ok() {
        return text.to_string();
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The marker of the next page, when the answer says there is one.
fn next(truncated: bool, marker: Option<&str>) -> Option<String> {
    marker.filter(|m| truncated && !m.is_empty()).map(str::to_string)
}

impl CheckClients {
    /// Every page of a list: `page` reads the page at a marker and gives its items and the next
    /// page's marker.
    async fn pages<T, F, Fut>(&self, operation: &'static str, mut page: F) -> Result<Vec<T>, AwsError>
    where
        F: FnMut(Option<String>) -> Fut,
        Fut: Future<Output = Result<(Vec<T>, Option<String>), AwsError>>,
    {
        let mut items = Vec::new();
        let mut marker = None;
        for _ in 0..MAX_PAGES {
            let (more, next) = page(marker).await?;
            items.extend(more);
            match next {
                Some(m) => marker = Some(m),
                None => return Ok(items),
            }
        }
        Err(AwsError::new(operation, Failure::Refused, format!("more than {MAX_PAGES} pages: the list was cut")))
    }

    /// The ARN of role `name`, with its path (GetRole).
    ///
    /// # Errors
    /// The failed call (`NotFound` when the role does not exist, `Denied` without iam:GetRole).
    pub async fn role_arn(&self, name: &str) -> Result<String, AwsError> {
        let call = self.iam.get_role().role_name(name).send();
        let out = self.call("GetRole", async { call.await.map_err(|e| AwsError::from_sdk("GetRole", &e)) }).await?;
        out.role()
            .map(|r| r.arn().to_string())
            .ok_or_else(|| AwsError::in_answer("GetRole", format!("IAM answered no role {name}")))
    }

    /// The policies of role `name`: its attached managed policies' default versions, then its
    /// inline policies.
    ///
    /// # Errors
    /// The first failed call.
    pub async fn role_policies(&self, name: &str) -> Result<Vec<IdentityPolicy>, AwsError> {
        let attached = self
            .pages("ListAttachedRolePolicies", |marker| async move {
                let call = self.iam.list_attached_role_policies().role_name(name).set_marker(marker).send();
                let out = self
                    .call("ListAttachedRolePolicies", async {
                        call.await.map_err(|e| AwsError::from_sdk("ListAttachedRolePolicies", &e))
                    })
                    .await?;
                let arns = out.attached_policies().iter().filter_map(|p| p.policy_arn()).map(str::to_string);
                Ok((arns.collect(), next(out.is_truncated(), out.marker())))
            })
            .await?;
        let mut policies = Vec::new();
        for arn in attached {
            let document = self.managed_document(&arn).await?;
            policies.push(IdentityPolicy { origin: PolicyOrigin::Managed { arn }, document });
        }
        let inline = self
            .pages("ListRolePolicies", |marker| async move {
                let call = self.iam.list_role_policies().role_name(name).set_marker(marker).send();
                let out = self
                    .call("ListRolePolicies", async {
                        call.await.map_err(|e| AwsError::from_sdk("ListRolePolicies", &e))
                    })
                    .await?;
                Ok((out.policy_names().to_vec(), next(out.is_truncated(), out.marker())))
            })
            .await?;
        for policy in inline {
            let call = self.iam.get_role_policy().role_name(name).policy_name(&policy).send();
            let out = self
                .call("GetRolePolicy", async { call.await.map_err(|e| AwsError::from_sdk("GetRolePolicy", &e)) })
                .await?;
            let document = decoded(out.policy_document());
            policies.push(IdentityPolicy { origin: PolicyOrigin::Inline { name: policy }, document });
        }
        Ok(policies)
    }

    /// The policies of user `name`: its attached managed and inline policies, then those of each
    /// group it is in.
    ///
    /// # Errors
    /// The first failed call.
    pub async fn user_policies(&self, name: &str) -> Result<Vec<IdentityPolicy>, AwsError> {
        let attached = self
            .pages("ListAttachedUserPolicies", |marker| async move {
                let call = self.iam.list_attached_user_policies().user_name(name).set_marker(marker).send();
                let out = self
                    .call("ListAttachedUserPolicies", async {
                        call.await.map_err(|e| AwsError::from_sdk("ListAttachedUserPolicies", &e))
                    })
                    .await?;
                let arns = out.attached_policies().iter().filter_map(|p| p.policy_arn()).map(str::to_string);
                Ok((arns.collect(), next(out.is_truncated(), out.marker())))
            })
            .await?;
        let mut policies = Vec::new();
        for arn in attached {
            let document = self.managed_document(&arn).await?;
            policies.push(IdentityPolicy { origin: PolicyOrigin::Managed { arn }, document });
        }
        let inline = self
            .pages("ListUserPolicies", |marker| async move {
                let call = self.iam.list_user_policies().user_name(name).set_marker(marker).send();
                let out = self
                    .call("ListUserPolicies", async {
                        call.await.map_err(|e| AwsError::from_sdk("ListUserPolicies", &e))
                    })
                    .await?;
                Ok((out.policy_names().to_vec(), next(out.is_truncated(), out.marker())))
            })
            .await?;
        for policy in inline {
            let call = self.iam.get_user_policy().user_name(name).policy_name(&policy).send();
            let out = self
                .call("GetUserPolicy", async { call.await.map_err(|e| AwsError::from_sdk("GetUserPolicy", &e)) })
                .await?;
            let document = decoded(out.policy_document());
            policies.push(IdentityPolicy { origin: PolicyOrigin::Inline { name: policy }, document });
        }
        let groups = self
            .pages("ListGroupsForUser", |marker| async move {
                let call = self.iam.list_groups_for_user().user_name(name).set_marker(marker).send();
                let out = self
                    .call("ListGroupsForUser", async {
                        call.await.map_err(|e| AwsError::from_sdk("ListGroupsForUser", &e))
                    })
                    .await?;
                let names = out.groups().iter().map(|g| g.group_name().to_string());
                Ok((names.collect(), next(out.is_truncated(), out.marker())))
            })
            .await?;
        for group in groups {
            policies.extend(self.group_policies(&group).await?);
        }
        Ok(policies)
    }

    /// The managed and inline policies of group `group`.
    async fn group_policies(&self, group: &str) -> Result<Vec<IdentityPolicy>, AwsError> {
        let attached = self
            .pages("ListAttachedGroupPolicies", |marker| async move {
                let call = self.iam.list_attached_group_policies().group_name(group).set_marker(marker).send();
                let out = self
                    .call("ListAttachedGroupPolicies", async {
                        call.await.map_err(|e| AwsError::from_sdk("ListAttachedGroupPolicies", &e))
                    })
                    .await?;
                let arns = out.attached_policies().iter().filter_map(|p| p.policy_arn()).map(str::to_string);
                Ok((arns.collect(), next(out.is_truncated(), out.marker())))
            })
            .await?;
        let mut policies = Vec::new();
        for arn in attached {
            let document = self.managed_document(&arn).await?;
            policies.push(IdentityPolicy {
                origin: PolicyOrigin::GroupManaged { group: group.to_string(), arn },
                document,
            });
        }
        let inline = self
            .pages("ListGroupPolicies", |marker| async move {
                let call = self.iam.list_group_policies().group_name(group).set_marker(marker).send();
                let out = self
                    .call("ListGroupPolicies", async {
                        call.await.map_err(|e| AwsError::from_sdk("ListGroupPolicies", &e))
                    })
                    .await?;
                Ok((out.policy_names().to_vec(), next(out.is_truncated(), out.marker())))
            })
            .await?;
        for name in inline {
            let call = self.iam.get_group_policy().group_name(group).policy_name(&name).send();
            let out = self
                .call("GetGroupPolicy", async { call.await.map_err(|e| AwsError::from_sdk("GetGroupPolicy", &e)) })
                .await?;
            let document = decoded(out.policy_document());
            policies.push(IdentityPolicy {
                origin: PolicyOrigin::GroupInline { group: group.to_string(), name },
                document,
            });
        }
        Ok(policies)
    }

    /// The document of the default version of managed policy `arn` (GetPolicy, GetPolicyVersion).
    async fn managed_document(&self, arn: &str) -> Result<String, AwsError> {
        let call = self.iam.get_policy().policy_arn(arn).send();
        let out = self.call("GetPolicy", async { call.await.map_err(|e| AwsError::from_sdk("GetPolicy", &e)) }).await?;
        let Some(version) = out.policy().and_then(|p| p.default_version_id()) else {
            return Err(AwsError::in_answer("GetPolicy", format!("IAM named no default version of {arn}")));
        };
        let call = self.iam.get_policy_version().policy_arn(arn).version_id(version).send();
        let out = self
            .call("GetPolicyVersion", async { call.await.map_err(|e| AwsError::from_sdk("GetPolicyVersion", &e)) })
            .await?;
        let document = out.policy_version().and_then(|v| v.document()).ok_or_else(|| {
            AwsError::in_answer("GetPolicyVersion", format!("IAM answered no document for {arn} version {version}"))
        })?;
        Ok(decoded(document))
    }
}

#[cfg(test)]
mod tests {
    use super::{decoded, Caller};

    #[test]
    fn a_caller_arn_names_a_role_a_user_or_the_root_user() {
        assert_eq!(
            Caller::of_arn("arn:aws:sts::123456789012:assumed-role/gocd-agents/gocd-ecs-elastic-agent"),
            Caller::Role("gocd-agents".into())
        );
        assert_eq!(
            Caller::of_arn("arn:aws-cn:sts::123456789012:assumed-role/AWSReservedSSO_Admin_0a1b/jane@example.com"),
            Caller::Role("AWSReservedSSO_Admin_0a1b".into())
        );
        assert_eq!(Caller::of_arn("arn:aws:iam::123456789012:user/gocd"), Caller::User("gocd".into()));
        assert_eq!(Caller::of_arn("arn:aws:iam::123456789012:user/ci/servers/gocd"), Caller::User("gocd".into()));
        assert_eq!(Caller::of_arn("arn:aws:iam::123456789012:root"), Caller::Root);
        assert_eq!(Caller::of_arn("arn:aws:sts::123456789012:federated-user/jane"), Caller::Other);
        // A user under sts: not an IAM user's ARN.
        assert_eq!(Caller::of_arn("arn:aws:sts::123456789012:user/moto"), Caller::Other);
        assert_eq!(Caller::of_arn("arn:aws:sts::123456789012:assumed-role/no-session"), Caller::Other);
        assert_eq!(Caller::of_arn("not an arn"), Caller::Other);
    }

    #[test]
    fn documents_are_url_decoded_unless_they_are_json_already() {
        let encoded = "%7B%22Version%22%3A%222012-10-17%22%2C%22Statement%22%3A%5B%7B%22Effect%22%3A%22Allow%22%2C%22Action%22%3A%22ecs%3A%2A%22%2C%22Resource%22%3A%22%2A%22%7D%5D%7D";
        assert_eq!(
            decoded(encoded),
            r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ecs:*","Resource":"*"}]}"#
        );
        let spaced = "%7B%22Statement%22%3A%20%5B%5D%7D";
        assert_eq!(decoded(spaced), r#"{"Statement": []}"#);
        // JSON with a percent sign in a value stays as it is.
        let json = r#"{"Statement":[{"Sid":"a%20b"}]}"#;
        assert_eq!(decoded(json), json);
        // A lone or broken escape is kept.
        assert_eq!(decoded("50%"), "50%");
        assert_eq!(decoded("%zz%4"), "%zz%4");
    }
}
