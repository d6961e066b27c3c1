//! The CloudFormation templates of `packaging/cloudformation/` against the code: for every
//! combination of the cluster stack's options, the plugin's policy in the template is exactly
//! what `iam-policy` prints for the cluster profile the stack's outputs make (through the same
//! mapping as `profile --from-stack`); the event rule and queue policy are `iam-policy`'s; the
//! member-account role trusts as `iam-policy --document trust-policy` says and holds the policy
//! the cluster stack exports.
//!
//! The templates are evaluated here as CloudFormation would for one account, region and stack
//! name: parameters (with their `AllowedValues`), conditions, rules, `Ref`, `Fn::Sub`,
//! `Fn::GetAtt`, `Fn::If`, `Fn::Join`, `Fn::Select`, `Fn::Split`, `Fn::GetAZs` and the condition
//! functions, with each resource's name and ARN made as CloudFormation makes them (and a `Ref` or
//! `Fn::GetAtt` of a resource whose condition is false an error, as in CloudFormation).
//! When this test fails after a change to `iam-policy`, change the template to match (the
//! message shows both policies).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};
use serde_norway::Value as Yaml;

use super::iam::policies;
use super::profile::from_outputs;
use crate::settings::ClusterProfile;

const REGION: &str = "eu-west-1";
const ACCOUNT: &str = "123456789012";
const STACK: &str = "gocd-ci";
/// The `GoServerUrl` every cluster stack here is given (the parameter has no default).
const GO_SERVER_URL: &str = "http://gocd.example.com:8153/go";

fn template(name: &str) -> Yaml {
    let path = format!("{}/packaging/cloudformation/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// One template, evaluated for one set of parameters.
struct Stack<'a> {
    template: &'a Yaml,
    params: BTreeMap<String, Value>,
    conditions: BTreeMap<String, bool>,
}

impl<'a> Stack<'a> {
    fn new(template: &'a Yaml, given: &[(&str, Value)]) -> Stack<'a> {
        let mut params = BTreeMap::new();
        if let Some(Yaml::Mapping(declared)) = template.get("Parameters") {
            for (name, spec) in declared {
                let name = name.as_str().expect("a parameter name").to_string();
                let list = spec.get("Type").and_then(Yaml::as_str).is_some_and(|t| t.contains("List"));
                let default = spec.get("Default").map(plain);
                let value = given.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone()).or(default);
                // A CommaDelimitedList has one member more than it has commas, each trimmed of
                // spaces: "" is [""], "a,,b" is ["a", "", "b"].
                let value = match value {
                    Some(Value::String(s)) if list => json!(s.split(',').map(str::trim).collect::<Vec<_>>()),
                    Some(v) => v,
                    None => panic!("parameter {name} has no default: give it"),
                };
                if let Some(Yaml::Sequence(allowed)) = spec.get("AllowedValues") {
                    let allowed: Vec<String> = allowed.iter().map(|a| scalar(&plain(a))).collect();
                    let members = match &value {
                        Value::Array(members) => members.clone(),
                        one => vec![one.clone()],
                    };
                    for member in members.iter().map(scalar) {
                        assert!(allowed.contains(&member), "parameter {name}: {member} is not one of {allowed:?}");
                    }
                }
                params.insert(name, value);
            }
        }
        let mut stack = Stack { template, params, conditions: BTreeMap::new() };
        if let Some(Yaml::Mapping(conditions)) = template.get("Conditions") {
            for (name, body) in conditions {
                let value = stack.eval(body).and_then(|v| v.as_bool()).expect("a condition is true or false");
                stack.conditions.insert(name.as_str().unwrap().to_string(), value);
            }
        }
        // The rules: CloudFormation makes no stack whose parameters fail an assertion.
        if let Some(Yaml::Mapping(rules)) = template.get("Rules") {
            for (name, rule) in rules {
                let holds = |c: &Yaml| stack.eval(c).and_then(|v| v.as_bool()).expect("a rule condition");
                if !rule.get("RuleCondition").is_none_or(holds) {
                    continue;
                }
                for assertion in rule.get("Assertions").and_then(Yaml::as_sequence).into_iter().flatten() {
                    let why = assertion.get("AssertDescription").and_then(Yaml::as_str).unwrap_or("");
                    assert!(holds(&assertion["Assert"]), "rule {name:?} fails: {why}");
                }
            }
        }
        stack
    }

    /// A resource the stack makes: CloudFormation rejects a `Ref` or `Fn::GetAtt` of one whose
    /// condition is false.
    fn made(&self, id: &str) -> &Yaml {
        let resource = self.resource(id);
        if let Some(condition) = resource.get("Condition").and_then(Yaml::as_str) {
            assert!(self.conditions[condition], "{id} is not made with these parameters");
        }
        resource
    }

    fn resource(&self, id: &str) -> &Yaml {
        self.template.get("Resources").and_then(|r| r.get(id)).unwrap_or_else(|| panic!("no resource {id}"))
    }

    fn property(&self, id: &str, name: &str) -> Option<String> {
        let value = self.resource(id).get("Properties")?.get(name)?;
        Some(self.eval(value)?.as_str().expect("a string property").to_string())
    }

    /// What `Ref` of a resource gives.
    fn reference(&self, id: &str) -> String {
        let kind = self.made(id).get("Type").and_then(Yaml::as_str).unwrap();
        let generated = || format!("{STACK}-{id}-0A1B2C3D4E5F");
        match kind {
            "AWS::ECS::Cluster" => self.property(id, "ClusterName").unwrap_or_else(generated),
            "AWS::IAM::Role" => self.property(id, "RoleName").unwrap_or_else(generated),
            "AWS::Logs::LogGroup" => self.property(id, "LogGroupName").unwrap_or_else(generated),
            "AWS::SQS::Queue" => {
                let name = self.property(id, "QueueName").unwrap_or_else(generated);
                format!("https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}")
            }
            "AWS::IAM::ManagedPolicy" => format!("arn:aws:iam::{ACCOUNT}:policy/{}", generated()),
            "AWS::EC2::Subnet" => format!("subnet-{}", fake_id(id)),
            "AWS::EC2::VPC" => format!("vpc-{}", fake_id(id)),
            "AWS::EC2::SecurityGroup" => format!("sg-{}", fake_id(id)),
            // An Elastic IP's Ref is its public address (here one of TEST-NET-3, 203.0.113.0/24).
            "AWS::EC2::EIP" => format!("203.0.113.{}", u32::from_str_radix(&fake_id(id), 16).unwrap() % 254 + 1),
            other => panic!("Ref of a {other} ({id}) is not made here"),
        }
    }

    /// What `Fn::GetAtt` of a resource gives.
    fn attribute(&self, id: &str, attribute: &str) -> String {
        let kind = self.made(id).get("Type").and_then(Yaml::as_str).unwrap();
        match (kind, attribute) {
            ("AWS::ECS::Cluster", "Arn") => format!("arn:aws:ecs:{REGION}:{ACCOUNT}:cluster/{}", self.reference(id)),
            ("AWS::IAM::Role", "Arn") => format!("arn:aws:iam::{ACCOUNT}:role/{}", self.reference(id)),
            ("AWS::SQS::Queue", "Arn") => {
                let url = self.reference(id);
                format!("arn:aws:sqs:{REGION}:{ACCOUNT}:{}", url.rsplit('/').next().unwrap())
            }
            ("AWS::Events::Rule", "Arn") => {
                let name = self.property(id, "Name").expect("the rule is named");
                format!("arn:aws:events:{REGION}:{ACCOUNT}:rule/{name}")
            }
            ("AWS::EC2::SecurityGroup", "GroupId") => self.reference(id),
            ("AWS::EC2::EIP", "AllocationId") => format!("eipalloc-{}", fake_id(id)),
            (kind, attribute) => panic!("GetAtt {attribute} of a {kind} ({id}) is not made here"),
        }
    }

    fn name(&self, name: &str) -> Value {
        match name {
            "AWS::Region" => json!(REGION),
            "AWS::AccountId" => json!(ACCOUNT),
            "AWS::Partition" => json!("aws"),
            "AWS::StackName" => json!(STACK),
            "AWS::URLSuffix" => json!("amazonaws.com"),
            _ => match self.params.get(name) {
                Some(v) => v.clone(),
                None => json!(self.reference(name)),
            },
        }
    }

    fn sub(&self, text: &str, vars: &Map<String, Value>) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let end = rest[start..].find('}').expect("a closed ${...}") + start;
            let name = &rest[start + 2..end];
            let value = match vars.get(name) {
                Some(v) => v.clone(),
                None => match name.split_once('.') {
                    Some((id, attribute)) if !name.starts_with("AWS::") => json!(self.attribute(id, attribute)),
                    _ => self.name(name),
                },
            };
            out.push_str(&scalar(&value));
            rest = &rest[end + 1..];
        }
        out.push_str(rest);
        out
    }

    /// The value CloudFormation makes of `v`; `None` for `AWS::NoValue`.
    fn eval(&self, v: &Yaml) -> Option<Value> {
        if let Some((function, argument)) = intrinsic(v) {
            return self.call(&function, argument);
        }
        Some(match v {
            Yaml::Sequence(items) => Value::Array(items.iter().filter_map(|i| self.eval(i)).collect()),
            Yaml::Mapping(map) => Value::Object(
                map.iter()
                    .filter_map(|(k, v)| Some((k.as_str().expect("a string key").to_string(), self.eval(v)?)))
                    .collect(),
            ),
            other => plain(other),
        })
    }

    fn call(&self, function: &str, argument: &Yaml) -> Option<Value> {
        let args = || match argument {
            Yaml::Sequence(items) => items.iter().collect::<Vec<_>>(),
            other => panic!("{function} takes a list, not {other:?}"),
        };
        let text = |v: &Yaml| self.eval(v).map(|v| scalar(&v)).unwrap_or_default();
        Some(match function {
            "Ref" => {
                let name = argument.as_str().expect("Ref of a name");
                if name == "AWS::NoValue" {
                    return None;
                }
                self.name(name)
            }
            "Fn::GetAtt" => {
                let (id, attribute) = match argument {
                    Yaml::String(s) => s.split_once('.').map(|(a, b)| (a.to_string(), b.to_string())).unwrap(),
                    _ => (text(args()[0]), text(args()[1])),
                };
                json!(self.attribute(&id, &attribute))
            }
            "Fn::Sub" => match argument {
                Yaml::String(s) => json!(self.sub(s, &Map::new())),
                _ => {
                    let a = args();
                    let vars = self.eval(a[1]).and_then(|v| v.as_object().cloned()).unwrap_or_default();
                    json!(self.sub(a[0].as_str().expect("a Sub string"), &vars))
                }
            },
            "Fn::Join" => {
                let a = args();
                let parts = self.eval(a[1]).expect("a list to join");
                let parts: Vec<String> = parts.as_array().expect("a list to join").iter().map(scalar).collect();
                json!(parts.join(a[0].as_str().expect("a separator")))
            }
            "Fn::Select" => {
                let a = args();
                let index = match self.eval(a[0]).expect("a Select index") {
                    Value::Number(n) => n.as_u64().expect("a Select index from 0"),
                    Value::String(s) => s.parse().expect("a Select index from 0"),
                    other => panic!("Fn::Select index {other}"),
                };
                let list = self.eval(a[1]).expect("a list to select from");
                let list = list.as_array().expect("a list to select from");
                // Out of range is a template error in CloudFormation, not a null.
                let member = usize::try_from(index).ok().and_then(|i| list.get(i));
                member.unwrap_or_else(|| panic!("Fn::Select index {index} is out of range of {list:?}")).clone()
            }
            "Fn::Split" => {
                let a = args();
                let delimiter = a[0].as_str().expect("a Split delimiter");
                let source = self.eval(a[1]).expect("a string to split");
                let source = source.as_str().expect("a string to split");
                json!(source.split(delimiter).collect::<Vec<_>>())
            }
            "Fn::GetAZs" => {
                let region = text(argument);
                let region = if region.is_empty() { REGION.to_string() } else { region };
                json!(["a", "b", "c"].map(|z| format!("{region}{z}")))
            }
            "Fn::If" => {
                let a = args();
                let which = self.conditions[a[0].as_str().expect("a condition name")];
                return self.eval(if which { a[1] } else { a[2] });
            }
            "Condition" => json!(self.conditions[argument.as_str().expect("a condition name")]),
            "Fn::Equals" => {
                let a = args();
                json!(self.eval(a[0]) == self.eval(a[1]))
            }
            "Fn::Not" => json!(!self.eval(args()[0]).and_then(|v| v.as_bool()).expect("a condition")),
            "Fn::And" => json!(args().iter().all(|c| self.eval(c).and_then(|v| v.as_bool()).expect("a condition"))),
            "Fn::Or" => json!(args().iter().any(|c| self.eval(c).and_then(|v| v.as_bool()).expect("a condition"))),
            other => panic!("{other} is not evaluated here"),
        })
    }

    /// The outputs CloudFormation shows (those whose condition holds), as strings.
    fn outputs(&self) -> Vec<(String, String, String)> {
        let Some(Yaml::Mapping(outputs)) = self.template.get("Outputs") else { return Vec::new() };
        outputs
            .iter()
            .filter(|(_, o)| o.get("Condition").and_then(Yaml::as_str).is_none_or(|c| self.conditions[c]))
            .map(|(k, o)| {
                let value = self.eval(o.get("Value").expect("an output value")).expect("a value");
                (STACK.to_string(), k.as_str().unwrap().to_string(), scalar(&value))
            })
            .collect()
    }

    fn properties_of(&self, id: &str, name: &str) -> Value {
        let resource = self.made(id);
        self.eval(resource.get("Properties").and_then(|p| p.get(name)).unwrap()).unwrap()
    }
}

/// `(function, argument)` of an intrinsic function, short form (`!Sub ...`) or long (`Fn::Sub: ...`).
fn intrinsic(v: &Yaml) -> Option<(String, &Yaml)> {
    match v {
        Yaml::Tagged(tagged) => {
            let tag = tagged.tag.to_string();
            let tag = tag.trim_start_matches('!');
            let name = if tag == "Ref" || tag == "Condition" { tag.to_string() } else { format!("Fn::{tag}") };
            Some((name, &tagged.value))
        }
        Yaml::Mapping(map) if map.len() == 1 => {
            let (k, v) = map.iter().next()?;
            let k = k.as_str()?;
            (k == "Ref" || k == "Condition" || k.starts_with("Fn::")).then(|| (k.to_string(), v))
        }
        _ => None,
    }
}

/// A YAML value without functions, as JSON.
fn plain(v: &Yaml) -> Value {
    serde_json::to_value(v).expect("plain YAML is JSON")
}

/// A scalar as CloudFormation writes it into a string.
fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(scalar).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

fn fake_id(id: &str) -> String {
    let n = id.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    format!("{n:08x}")
}

fn cluster_profile(stack: &Stack) -> ClusterProfile {
    let made = from_outputs(&stack.outputs()).expect("the outputs agree");
    ClusterProfile::parse(&made.properties())
        .unwrap_or_else(|e| panic!("the stack's outputs make no valid cluster profile: {e:?}\n{made:#?}"))
}

const DOCKER_HUB_SECRET: &str =
    "arn:aws:secretsmanager:eu-west-1:123456789012:secret:ecr-pullthroughcache/docker-hub-AbCdEf";

/// Every combination of the cluster stack's options.
fn cluster_stacks(template: &Yaml) -> Vec<(String, Stack<'_>)> {
    let mut out = Vec::new();
    for vpc in [true, false] {
        for task_role in ["true", "false"] {
            for events in ["true", "false"] {
                for (cache, docker_hub) in [("true", ""), ("true", DOCKER_HUB_SECRET), ("false", "")] {
                    let mut given = vec![
                        ("CreateTaskRole", json!(task_role)),
                        ("EnableEvents", json!(events)),
                        ("ImageCache", json!(cache)),
                        ("DockerHubCredentialsSecretArn", json!(docker_hub)),
                    ];
                    if vpc {
                        given.push(("GoServerUrl", json!(GO_SERVER_URL)));
                    } else {
                        given.push(("VpcId", json!("vpc-0a1b2c3d")));
                        given.push(("SubnetIds", json!("subnet-0a1b2c3d,subnet-4e5f6a7b")));
                        given.push(("AssignPublicIp", json!("true")));
                        given.push(("GoServerUrl", json!("https://gocd.example.com/go")));
                        given.push(("AgentEgressPorts", json!("22,443,9418")));
                    }
                    let label = format!(
                        "new VPC {vpc}, task role {task_role}, events {events}, image cache {cache}, \
                         Docker Hub {}",
                        !docker_hub.is_empty()
                    );
                    out.push((label, Stack::new(template, &given)));
                }
            }
        }
    }
    out
}

#[test]
fn the_cluster_stacks_policy_is_what_iam_policy_prints_for_its_profile() {
    let template = template("cluster.yaml");
    for (label, stack) in cluster_stacks(&template) {
        let profile = cluster_profile(&stack);
        let want = policies(&profile, &[]).policy;
        let got = stack.properties_of("PluginPolicy", "PolicyDocument");
        if got == want {
            continue;
        }
        // The first statement that differs, and both documents.
        let statements = |d: &Value| d["Statement"].as_array().cloned().unwrap_or_default();
        let (g, w) = (statements(&got), statements(&want));
        let at = (0..g.len().max(w.len())).find(|&i| g.get(i) != w.get(i)).unwrap_or(0);
        let pretty = |v: Option<&Value>| v.map_or("(none)".into(), |v| serde_json::to_string_pretty(v).unwrap());
        panic!(
            "{label}: the template's policy differs from iam-policy's for the stack's profile, first at statement {at}\n\
             --- template\n{}\n--- iam-policy\n{}\n--- whole template policy\n{}\n--- whole iam-policy\n{}",
            pretty(g.get(at)),
            pretty(w.get(at)),
            pretty(Some(&got)),
            pretty(Some(&want))
        );
    }
}

#[test]
fn the_cluster_stacks_outputs_fill_the_profile_keys() {
    let template = template("cluster.yaml");
    for (label, stack) in cluster_stacks(&template) {
        let made = from_outputs(&stack.outputs()).unwrap();
        let profile = cluster_profile(&stack);
        assert_eq!(profile.cluster_name, "gocd-agents", "{label}");
        assert_eq!(profile.region.as_deref(), Some(REGION), "{label}");
        assert_eq!(profile.subnet_ids.len(), 2, "{label}");
        assert_eq!(profile.security_group_ids.len(), 1, "{label}");
        assert_eq!(profile.log_group.as_deref(), Some(format!("/gocd/{STACK}/agents").as_str()), "{label}");
        let execution = format!("arn:aws:iam::{ACCOUNT}:role/{STACK}-execution");
        assert_eq!(made.cluster["AllowedExecutionRoleArns"], execution, "{label}");
        assert_eq!(made.elastic["ExecutionRoleArn"], execution, "{label}");
        let events = stack.conditions["Events"];
        assert_eq!(profile.event_queue_url.is_some(), events, "{label}");
        assert_eq!(made.elastic.contains_key("TaskRoleArn"), stack.conditions["HasTaskRole"], "{label}");
        let go_server_url = stack.params["GoServerUrl"].as_str().unwrap();
        assert_eq!(profile.go_server_url.as_deref(), Some(go_server_url), "{label}");

        // The outputs that fill no profile key, by name: the policy's ARN, the NAT gateway's
        // address (with a new VPC) and the cache's image prefixes (with their rules).
        let mut fill_none = vec!["PluginPolicyArn"];
        if stack.conditions["CreateVpc"] {
            fill_none.push("NatPublicIps");
        }
        if stack.conditions["CacheImages"] {
            fill_none.push("EcrPublicCachePrefix");
        }
        if stack.conditions["CacheDockerHub"] {
            fill_none.push("DockerHubCachePrefix");
        }
        let mut left_out: Vec<&str> =
            made.left_out.iter().map(|why| why.split_once(' ').map_or(why.as_str(), |(key, _)| key)).collect();
        left_out.sort_unstable();
        fill_none.sort_unstable();
        assert_eq!(left_out, fill_none, "{label}: {:?}", made.left_out);
        for why in &made.left_out {
            assert!(why.ends_with(": fills no profile key"), "{label}: {why}");
        }

        let outputs: BTreeMap<String, String> = stack.outputs().into_iter().map(|(_, k, v)| (k, v)).collect();
        let nat = outputs.get("NatPublicIps");
        assert_eq!(nat, stack.conditions["CreateVpc"].then(|| stack.reference("NatAddress")).as_ref(), "{label}");
        if let Some(nat) = nat {
            assert!(nat.parse::<std::net::Ipv4Addr>().is_ok(), "{label}: NatPublicIps {nat}");
        }
        let prefix = |registry: &str| format!("{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/{registry}");
        let ecr_public = stack.conditions["CacheImages"].then(|| prefix("ecr-public"));
        assert_eq!(outputs.get("EcrPublicCachePrefix"), ecr_public.as_ref(), "{label}");
        let docker_hub = stack.conditions["CacheDockerHub"].then(|| prefix("docker-hub"));
        assert_eq!(outputs.get("DockerHubCachePrefix"), docker_hub.as_ref(), "{label}");
    }
}

/// The agents' security group's egress rules, as `(protocol, from port, to port, CIDR)`, with a
/// port given as a string (what `Fn::Select` makes) read as CloudFormation reads it, a number.
fn egress_rules(stack: &Stack) -> Vec<(String, Option<u16>, Option<u16>, String)> {
    let port = |v: Option<&Value>| {
        v.map(|p| match p {
            Value::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()).expect("a port"),
            Value::String(s) => s.parse().unwrap_or_else(|_| panic!("port {s:?} is not a number")),
            other => panic!("port {other}"),
        })
    };
    let egress = stack.properties_of("AgentSecurityGroup", "SecurityGroupEgress");
    egress
        .as_array()
        .expect("a list of egress rules")
        .iter()
        .map(|rule| {
            (scalar(&rule["IpProtocol"]), port(rule.get("FromPort")), port(rule.get("ToPort")), scalar(&rule["CidrIp"]))
        })
        .collect()
}

#[test]
fn the_agents_egress_is_all_traffic_or_only_the_agent_egress_ports() {
    let template = template("cluster.yaml");
    let all = |rule: &str| ("-1".to_string(), None, None, rule.to_string());
    let tcp = |port: u16| ("tcp".to_string(), Some(port), Some(port), "0.0.0.0/0".to_string());
    let url = ("GoServerUrl", json!(GO_SERVER_URL));

    // AgentEgressPorts empty (its default, or given so): all traffic, anywhere.
    for given in [vec![url.clone()], vec![url.clone(), ("AgentEgressPorts", json!(""))]] {
        let stack = Stack::new(&template, &given);
        assert!(stack.conditions["AllEgress"]);
        assert_eq!(egress_rules(&stack), vec![all("0.0.0.0/0")], "{given:?}");
    }

    // Ports given: only TCP to each of them, anywhere, and no rule for all traffic.
    let stack = Stack::new(&template, &[url.clone(), ("AgentEgressPorts", json!("22,443"))]);
    assert!(!stack.conditions["AllEgress"]);
    assert_eq!(egress_rules(&stack), vec![tcp(22), tcp(443)]);

    // All eight positions, spaces trimmed as CloudFormation trims a CommaDelimitedList's members.
    let eight = "22, 80,443,8153 ,9418,2222,3128,8443";
    let stack = Stack::new(&template, &[url.clone(), ("AgentEgressPorts", json!(eight))]);
    let want: Vec<_> = [22, 80, 443, 8153, 9418, 2222, 3128, 8443].map(tcp).into();
    assert_eq!(egress_rules(&stack), want);

    // Nothing in.
    let group = &template["Resources"]["AgentSecurityGroup"]["Properties"];
    assert!(group.get("SecurityGroupIngress").is_none(), "the agents' group lets nothing in");
}

#[test]
fn the_cluster_template_names_no_port_8154() {
    let template = template("cluster.yaml");
    let text = |v: &Yaml| serde_norway::to_string(v).unwrap();
    let description = template["Description"].as_str().unwrap();
    assert!(!description.contains("8154"), "the template's description names 8154");
    for (name, spec) in template["Parameters"].as_mapping().unwrap() {
        for field in ["Default", "Description", "ConstraintDescription"] {
            if let Some(v) = spec.get(field) {
                assert!(!text(v).contains("8154"), "parameter {name:?}'s {field} names 8154: {v:?}");
            }
        }
    }
    // The outputs as written, and as every stack shows them.
    for (name, output) in template["Outputs"].as_mapping().unwrap() {
        assert!(!text(output).contains("8154"), "output {name:?} names 8154: {output:?}");
    }
    for (label, stack) in cluster_stacks(&template) {
        for (_, key, value) in stack.outputs() {
            assert!(!value.contains("8154"), "{label}: output {key} is {value}");
        }
    }
}

#[test]
fn the_event_rule_and_queue_policy_are_what_iam_policy_prints() {
    let template = template("cluster.yaml");
    let stack = Stack::new(&template, &[("GoServerUrl", json!(GO_SERVER_URL))]);
    let profile = cluster_profile(&stack);
    let p = policies(&profile, &[]);
    let cluster_arn = stack.attribute("Cluster", "Arn");

    // The same pattern, with the cluster's ARN where iam-policy (no account known) matches its end.
    let mut want = p.event_rule_pattern.expect("a rule pattern with EventQueueUrl");
    let suffix = want["detail"]["clusterArn"][0]["suffix"].as_str().expect("a suffix").to_string();
    assert!(cluster_arn.ends_with(&suffix), "{cluster_arn} does not end with {suffix}");
    want["detail"]["clusterArn"] = json!([cluster_arn]);
    assert_eq!(stack.properties_of("EventRule", "EventPattern"), want);

    // The same queue policy, naming the stack's rule by its ARN (iam-policy's has * for the account).
    let mut want = p.queue_policy.expect("a queue policy with EventQueueUrl");
    let rule = stack.attribute("EventRule", "Arn");
    let source = &mut want["Statement"][0]["Condition"]["ArnEquals"]["aws:SourceArn"];
    assert_eq!(source.as_str().unwrap().replace(":*:", &format!(":{ACCOUNT}:")), rule);
    *source = json!(rule);
    assert_eq!(stack.properties_of("EventQueuePolicy", "PolicyDocument"), want);
    let targets = stack.properties_of("EventRule", "Targets");
    assert_eq!(targets[0]["Arn"], json!(stack.attribute("EventQueue", "Arn")));
}

#[test]
fn the_member_role_trusts_as_iam_policy_says_and_holds_the_cluster_stacks_policy() {
    let cluster_template = template("cluster.yaml");
    let member_template = template("member-account.yaml");
    let cluster = Stack::new(&cluster_template, &[("GoServerUrl", json!(GO_SERVER_URL))]);
    let member = Stack::new(
        &member_template,
        &[
            ("ClusterStackName", json!(STACK)),
            ("GoCdAccountId", json!("111111111111")),
            ("GoCdServerId", json!("6f1c2a3e-server")),
        ],
    );
    let mut outputs = cluster.outputs();
    outputs.extend(member.outputs());
    let made = from_outputs(&outputs).unwrap();
    assert_eq!(made.cluster["RoleArn"], format!("arn:aws:iam::{ACCOUNT}:role/gocd-ecs-agents"));
    let profile = ClusterProfile::parse(&made.properties()).expect("a valid profile with RoleArn");
    let trust = policies(&profile, &[]).trust_policy.expect("a trust policy with RoleArn");
    let want: Value = serde_json::from_str(
        &trust.to_string().replace("<GOCD_ACCOUNT_ID>", "111111111111").replace("<SERVER_ID>", "6f1c2a3e-server"),
    )
    .unwrap();
    assert_eq!(member.properties_of("PluginRole", "AssumeRolePolicyDocument"), want);

    // The role holds the policy the cluster stack exports.
    let imports =
        member_template["Resources"]["PluginRole"]["Properties"]["ManagedPolicyArns"][0]["Fn::ImportValue"].clone();
    let imported = member.eval(&imports).unwrap();
    let export = &cluster_template["Outputs"]["PluginPolicyArn"];
    assert_eq!(export["Value"], serde_norway::from_str::<Yaml>("!Ref PluginPolicy").unwrap());
    assert_eq!(cluster.eval(&export["Export"]["Name"]), Some(imported));
}

#[test]
fn the_evaluator_splits_selects_and_reads_lists_as_cloudformation_does() {
    let template: Yaml = serde_norway::from_str(
        "Parameters:\n  Ports:\n    Type: CommaDelimitedList\n    Default: \"\"\n\
         Conditions:\n  NoPorts: !Equals [!Join [\"\", !Ref Ports], \"\"]\n",
    )
    .unwrap();
    let eval = |stack: &Stack, text: &str| stack.eval(&serde_norway::from_str::<Yaml>(text).unwrap()).unwrap();
    let empty = Stack::new(&template, &[]);
    assert_eq!(empty.params["Ports"], json!([""]), "an empty CommaDelimitedList is one empty member");
    assert!(empty.conditions["NoPorts"]);
    let given = Stack::new(&template, &[("Ports", json!("22, ,443"))]);
    assert_eq!(given.params["Ports"], json!(["22", "", "443"]));
    assert!(!given.conditions["NoPorts"]);
    assert_eq!(eval(&given, "!Split [\",\", \"a,,b,\"]"), json!(["a", "", "b", ""]));
    assert_eq!(eval(&given, "!Split [\",\", \"\"]"), json!([""]));
    assert_eq!(eval(&given, "!Select [2, !Ref Ports]"), json!("443"));
    assert_eq!(eval(&given, "!Select [\"1\", [x, y]]"), json!("y"));
    assert_eq!(eval(&given, "!Select [0, !GetAZs \"\"]"), json!(format!("{REGION}a")));
}

#[test]
#[should_panic(expected = "out of range")]
fn the_evaluator_rejects_a_select_out_of_range_as_cloudformation_does() {
    let template: Yaml = serde_norway::from_str("Parameters: {}").unwrap();
    let stack = Stack::new(&template, &[]);
    stack.eval(&serde_norway::from_str::<Yaml>("!Select [2, [a, b]]").unwrap());
}

#[test]
#[should_panic(expected = "With VpcId, SubnetIds names the agents' subnets")]
fn the_cluster_stacks_rule_rejects_a_vpc_without_subnets() {
    let template = template("cluster.yaml");
    Stack::new(&template, &[("GoServerUrl", json!(GO_SERVER_URL)), ("VpcId", json!("vpc-0a1b2c3d"))]);
}
