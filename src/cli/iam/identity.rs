//! `doctor`'s reads of the plugin identity's own policies (its permissions check): with
//! `RoleArn`, that role's policies; without, the identity is not known here, so any role's,
//! user's and group's of the account. The managed policies' documents may be AWS's
//! (`arn:aws:iam::aws:policy/...`) or the account's.

use serde_json::Value;

use super::{statement, Scope};
use crate::aws::doctor_identity::{MANAGED_POLICY_READS, ROLE_READS, USER_READS};
use crate::settings::ClusterProfile;

/// The statements (read-only; IAM takes these resource ARNs for them).
pub fn statements(cluster: &ClusterProfile, scope: &Scope) -> Vec<Value> {
    let (actions, resources): (Vec<&str>, Vec<String>) = match &cluster.role_arn {
        Some(role) => (ROLE_READS.to_vec(), vec![role.clone()]),
        None => (
            ROLE_READS.iter().chain(USER_READS).copied().collect(),
            ["role/*", "user/*", "group/*"].iter().map(|r| scope.iam(&scope.account, r)).collect(),
        ),
    };
    vec![
        statement("DoctorReadsTheIdentitysOwnPolicies", &actions, resources, None),
        statement("DoctorReadsItsManagedPolicies", MANAGED_POLICY_READS, vec![scope.iam("*", "policy/*")], None),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::policies;
    use crate::settings::ClusterProfile;

    fn cluster(pairs: &[(&str, &str)]) -> ClusterProfile {
        let props = pairs.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect();
        ClusterProfile::parse(&props).expect("valid")
    }

    fn find(p: &serde_json::Value, sid: &str) -> serde_json::Value {
        p["Statement"].as_array().into_iter().flatten().find(|s| s["Sid"] == sid).cloned().expect(sid)
    }

    #[test]
    fn with_role_arn_doctor_reads_that_roles_policies_only() {
        let role = "arn:aws:iam::210987654321:role/gocd-agents";
        let p = policies(&cluster(&[("ClusterName", "ci"), ("Region", "eu-west-1"), ("RoleArn", role)]), &[]).policy;
        let own = find(&p, "DoctorReadsTheIdentitysOwnPolicies");
        assert_eq!(
            own["Action"],
            json!(["iam:GetRole", "iam:ListAttachedRolePolicies", "iam:ListRolePolicies", "iam:GetRolePolicy"])
        );
        assert_eq!(own["Resource"], role);
        let managed = find(&p, "DoctorReadsItsManagedPolicies");
        assert_eq!(managed["Action"], json!(["iam:GetPolicy", "iam:GetPolicyVersion"]));
        assert_eq!(managed["Resource"], "arn:aws:iam::*:policy/*");
    }

    #[test]
    fn without_role_arn_doctor_reads_any_role_user_or_group_of_the_account() {
        let p = policies(
            &cluster(&[("ClusterName", "arn:aws:ecs:us-east-1:123456789012:cluster/ci"), ("Region", "us-east-1")]),
            &[],
        )
        .policy;
        let own = find(&p, "DoctorReadsTheIdentitysOwnPolicies");
        assert_eq!(
            own["Resource"],
            json!([
                "arn:aws:iam::123456789012:role/*",
                "arn:aws:iam::123456789012:user/*",
                "arn:aws:iam::123456789012:group/*"
            ])
        );
        let actions = own["Action"].as_array().expect("actions").len();
        assert_eq!(actions, 11, "the role's, the user's and its groups' reads: {own}");
    }
}
