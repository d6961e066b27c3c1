//! What an identity policy document allows and denies, by action only: `Statement` as one
//! object or an array, `Action`/`NotAction` as a string or an array, `Effect` Allow or Deny,
//! and actions matched as IAM matches them (case-insensitively, `*` for any run of characters,
//! `?` for one). Resources (`Resource`, `NotResource`) and `Condition` are not evaluated: a
//! statement counts for every resource and under every condition, and a Deny that carries a
//! condition or names resources is marked so, as it may apply to some calls only.

use serde_json::Value;

/// One statement, as far as actions go.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Statement {
    allow: bool,
    /// `true`: `NotAction` (every action but these); `false`: `Action`.
    not: bool,
    patterns: Vec<String>,
    /// A Condition, or resources other than `*`.
    narrowed: bool,
}

impl Statement {
    fn matches(&self, action: &str) -> bool {
        self.patterns.iter().any(|p| action_matches(p, action)) != self.not
    }
}

/// A policy document, read for its actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Policy {
    statements: Vec<Statement>,
}

/// A Deny statement that matches an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Denial {
    /// The statement has a condition or names resources: it may deny some calls only.
    pub narrowed: bool,
}

/// A string or a non-empty array of strings.
fn strings(v: &Value, key: &str) -> Result<Vec<String>, String> {
    match v {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .map(|i| i.as_str().map(str::to_string).ok_or_else(|| format!("{key} holds {i}, not a string")))
            .collect(),
        other => Err(format!("{key} is {other}, not a string or an array of strings")),
    }
}

impl Policy {
    /// The document in `text` (JSON).
    ///
    /// # Errors
    /// Not JSON, or not a policy's grammar; says what is wrong.
    pub(super) fn parse(text: &str) -> Result<Policy, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        Policy::of(&v)
    }

    /// The document `v`.
    ///
    /// # Errors
    /// Not a policy's grammar; says what is wrong.
    pub(super) fn of(v: &Value) -> Result<Policy, String> {
        let statements = match v.get("Statement") {
            Some(Value::Array(items)) => items.iter().collect(),
            Some(one @ Value::Object(_)) => vec![one],
            Some(other) => return Err(format!("Statement is {other}, not an object or an array")),
            None => return Err("no Statement".into()),
        };
        let statements = statements.into_iter().map(Self::statement).collect::<Result<_, _>>()?;
        Ok(Policy { statements })
    }

    fn statement(s: &Value) -> Result<Statement, String> {
        let Some(map) = s.as_object() else { return Err(format!("a statement is {s}, not an object")) };
        let allow = match map.get("Effect").and_then(Value::as_str) {
            Some("Allow") => true,
            Some("Deny") => false,
            other => return Err(format!("Effect is {other:?}, not Allow or Deny")),
        };
        let (not, patterns) = match (map.get("Action"), map.get("NotAction")) {
            (Some(a), None) => (false, strings(a, "Action")?),
            (None, Some(n)) => (true, strings(n, "NotAction")?),
            (Some(_), Some(_)) => return Err("a statement has both Action and NotAction".into()),
            (None, None) => return Err("a statement has neither Action nor NotAction".into()),
        };
        let every_resource = map.get("Resource").is_some_and(|r| strings(r, "Resource").is_ok_and(|r| r == ["*"]));
        let narrowed = map.contains_key("Condition") || !every_resource;
        Ok(Statement { allow, not, patterns, narrowed })
    }

    /// The actions the Allow statements name, in order, each once (for a document that names
    /// its actions, such as `iam-policy`'s).
    pub(super) fn named_actions(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for s in self.statements.iter().filter(|s| s.allow && !s.not) {
            for p in &s.patterns {
                if !out.iter().any(|o| o.eq_ignore_ascii_case(p)) {
                    out.push(p.clone());
                }
            }
        }
        out
    }

    /// Whether an Allow statement matches `action`.
    pub(super) fn allows(&self, action: &str) -> bool {
        self.statements.iter().any(|s| s.allow && s.matches(action))
    }

    /// The Deny statement that matches `action`, an unconditional one first.
    pub(super) fn denies(&self, action: &str) -> Option<Denial> {
        let mut found: Option<Denial> = None;
        for s in self.statements.iter().filter(|s| !s.allow && s.matches(action)) {
            if !s.narrowed {
                return Some(Denial { narrowed: false });
            }
            found = Some(Denial { narrowed: true });
        }
        found
    }
}

/// Whether IAM's action pattern `pattern` (`ecs:*`, `ecs:Describe*`, `ec2:?escribe*`, `*`)
/// matches `action`: case-insensitive, `*` any run of characters, `?` one character.
pub(super) fn action_matches(pattern: &str, action: &str) -> bool {
    let (p, a) = (pattern.as_bytes(), action.as_bytes());
    let (mut i, mut j) = (0, 0);
    // Where the last `*` was, and the part of `action` it has taken so far.
    let mut star: Option<(usize, usize)> = None;
    while j < a.len() {
        if i < p.len() && p[i] == b'*' {
            star = Some((i, j));
            i += 1;
        } else if i < p.len() && (p[i] == b'?' || p[i].eq_ignore_ascii_case(&a[j])) {
            i += 1;
            j += 1;
        } else if let Some((si, sj)) = star {
            // Let the last `*` take one more character.
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == b'*')
}

/// What the policies say of the actions needed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Evaluation {
    /// Actions no Allow statement of any policy matches, in the order needed.
    pub missing: Vec<String>,
    /// Actions a Deny statement matches, with the index of the policy and the Deny.
    pub denied: Vec<(String, usize, Denial)>,
}

/// The needed actions against the identity's policies (all of them count together, as IAM
/// joins an identity's policies).
pub(super) fn evaluate(needed: &[String], policies: &[Policy]) -> Evaluation {
    let mut out = Evaluation::default();
    for action in needed {
        if !policies.iter().any(|p| p.allows(action)) {
            out.missing.push(action.clone());
        }
        let denial = policies.iter().enumerate().filter_map(|(i, p)| p.denies(action).map(|d| (i, d)));
        // An unconditional Deny anywhere outweighs a narrowed one.
        if let Some((i, d)) = denial.min_by_key(|(_, d)| d.narrowed) {
            out.denied.push((action.clone(), i, d));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{action_matches, evaluate, Denial, Policy};

    fn policy(v: serde_json::Value) -> Policy {
        Policy::of(&v).unwrap_or_else(|e| panic!("{e}: {v}"))
    }

    fn needed(actions: &[&str]) -> Vec<String> {
        actions.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn wildcards_match_as_iam_matches_them() {
        for (pattern, action) in [
            ("*", "ecs:RunTask"),
            ("ecs:*", "ecs:RunTask"),
            ("ecs:Describe*", "ecs:DescribeTasks"),
            ("ecs:*Task", "ecs:RunTask"),
            ("ecs:*Task*", "ecs:ListTaskDefinitions"),
            ("ec2:?escribeVpcs", "ec2:DescribeVpcs"),
            ("ECS:runtask", "ecs:RunTask"),
            ("ecs:RunTask", "ECS:RUNTASK"),
            ("ecs:*:*", "ecs:a:b"),
            ("ecs:RunTask*", "ecs:RunTask"),
        ] {
            assert!(action_matches(pattern, action), "{pattern} should match {action}");
        }
        for (pattern, action) in [
            ("ecs:Describe*", "ecs:ListTasks"),
            ("ecs:*", "ec2:RunInstances"),
            ("ecs:RunTask", "ecs:RunTasks"),
            ("ecs:RunTasks", "ecs:RunTask"),
            ("ec2:?escribeVpcs", "ec2:escribeVpcs"),
            ("ecs:*Task", "ecs:RunTasks"),
            ("", "ecs:RunTask"),
            ("e*s:Stop", "ecs:StopTask"),
        ] {
            assert!(!action_matches(pattern, action), "{pattern} should not match {action}");
        }
    }

    #[test]
    fn statement_and_action_may_each_be_one_or_many() {
        let one = policy(
            json!({"Version": "2012-10-17", "Statement": {"Effect": "Allow", "Action": "ecs:RunTask", "Resource": "*"}}),
        );
        assert!(one.allows("ecs:RunTask") && !one.allows("ecs:StopTask"));
        let many = policy(json!({"Statement": [
            {"Effect": "Allow", "Action": ["ecs:RunTask", "ecs:StopTask"], "Resource": "*"},
            {"Effect": "Allow", "Action": "ec2:Describe*", "Resource": ["*"]},
        ]}));
        assert!(many.allows("ecs:StopTask") && many.allows("ec2:DescribeSubnets") && !many.allows("ec2:RunInstances"));
        assert_eq!(many.named_actions(), ["ecs:RunTask", "ecs:StopTask", "ec2:Describe*"]);
    }

    #[test]
    fn not_action_allows_everything_but_what_it_names() {
        let p = policy(
            json!({"Statement": [{"Effect": "Allow", "NotAction": ["iam:*", "ec2:RunInstances"], "Resource": "*"}]}),
        );
        assert!(p.allows("ecs:RunTask"));
        assert!(!p.allows("iam:PassRole") && !p.allows("IAM:passrole") && !p.allows("ec2:RunInstances"));
        assert!(p.named_actions().is_empty(), "NotAction names what is not allowed");
        let e = evaluate(&needed(&["ecs:RunTask", "iam:PassRole", "ec2:RunInstances"]), &[p]);
        assert_eq!(e.missing, ["iam:PassRole", "ec2:RunInstances"]);
    }

    #[test]
    fn a_deny_is_reported_even_where_an_allow_matches_and_a_narrowed_one_is_marked() {
        let admin = policy(json!({"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*"}}));
        let guard = policy(json!({"Statement": [
            {"Effect": "Deny", "Action": "ec2:TerminateInstances", "Resource": "*"},
            {"Effect": "Deny", "NotAction": ["ecs:*", "ec2:*", "iam:PassRole"], "Resource": "*"},
            {"Sid": "OnlyInOneRegion", "Effect": "Deny", "Action": "ecs:RunTask", "Resource": "*",
             "Condition": {"StringNotEquals": {"aws:RequestedRegion": "eu-west-1"}}},
            {"Effect": "Deny", "Action": "ecs:StopTask", "Resource": "arn:aws:ecs:*:*:task/prod/*"},
        ]}));
        let e = evaluate(
            &needed(&["ec2:TerminateInstances", "pricing:GetProducts", "ecs:RunTask", "ecs:StopTask", "ecs:ListTasks"]),
            &[admin, guard],
        );
        assert!(e.missing.is_empty(), "{e:?}");
        assert_eq!(
            e.denied,
            [
                ("ec2:TerminateInstances".to_string(), 1, Denial { narrowed: false }),
                ("pricing:GetProducts".to_string(), 1, Denial { narrowed: false }),
                ("ecs:RunTask".to_string(), 1, Denial { narrowed: true }),
                ("ecs:StopTask".to_string(), 1, Denial { narrowed: true }),
            ]
        );
    }

    #[test]
    fn the_policies_count_together() {
        let ecs = policy(json!({"Statement": {"Effect": "Allow", "Action": "ecs:*", "Resource": "*"}}));
        let ec2 = policy(json!({"Statement": {"Effect": "Allow", "Action": ["ec2:Describe*"], "Resource": "*"}}));
        let e =
            evaluate(&needed(&["ecs:RunTask", "ec2:DescribeVpcs", "ec2:RunInstances", "iam:PassRole"]), &[ecs, ec2]);
        assert_eq!(e.missing, ["ec2:RunInstances", "iam:PassRole"]);
        assert_eq!(evaluate(&needed(&["ecs:RunTask"]), &[]).missing, ["ecs:RunTask"], "no policy allows nothing");
    }

    #[test]
    fn what_is_not_a_policy_is_said() {
        for (text, says) in [
            ("{", "not JSON"),
            (r#"{"Version": "2012-10-17"}"#, "no Statement"),
            (r#"{"Statement": "x"}"#, "not an object or an array"),
            (r#"{"Statement": [{"Effect": "allow", "Action": "*"}]}"#, "not Allow or Deny"),
            (r#"{"Statement": [{"Effect": "Allow", "Resource": "*"}]}"#, "neither Action nor NotAction"),
            (r#"{"Statement": [{"Effect": "Allow", "Action": "*", "NotAction": "iam:*"}]}"#, "both"),
            (r#"{"Statement": [{"Effect": "Allow", "Action": [1]}]}"#, "not a string"),
            (r#"{"Statement": [{"Effect": "Allow", "Action": []}]}"#, "not a string or an array"),
        ] {
            let e = Policy::parse(text).expect_err(text);
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
