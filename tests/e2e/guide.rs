//! `docs/getting-started.md`, followed as a GoCD administrator new to the plugin follows it, in
//! the test world: the commands and files come from the guide's own fenced code blocks, so the
//! guide and this test cannot drift apart.
//!
//! In the guide's order: the Docker Hub secret and the stack (`aws cloudformation deploy`, with
//! its `--parameter-overrides`, through CreateStack into moto: the test has no AWS CLI), the
//! server's firewall opened to the stack's `NatPublicIps` (layout (a)), then every
//! `bin/ecs-elastic-agent` command the guide shows, run with the real binary in a directory
//! holding the files the guide has the user write: `profile --from-stack` (`cluster.json`), the
//! elastic profile of the guide's JSON block with the execution role `profile` printed
//! (`small.json`), `validate`, `doctor` (no FAIL), `try` (the probe reaches the server and the
//! materials); the jar is put aside (the world's GoCD host speaks to the binary directly), and
//! step 6's first job, with the two files as the profiles and an SSH material, runs green and
//! its console shows the line the guide says it shows. Last, the removal section's `leftovers`
//! commands, once GoCD no longer runs the plugin: listed, removed, and nothing left.
//!
//! A command of the guide this test does not know fails it: a new step in the guide is a new
//! step here.
//!
//! Needs `MOTO_SERVER` (see `scripts/moto.sh`).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use aws_config::SdkConfig;
use serde_json::Value;

use crate::world::http::{self, HttpRequest};
use crate::world::moto::{self, TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY};
use crate::world::network::{Internet, NetworkWorld, Service, Tls, GIT_HOST, GOCD_HOST};
use crate::world::probes::ProbeRunner;
use crate::world::stack;
use crate::world::*;

const GUIDE: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/getting-started.md"));
/// The command the guide names the binary by.
const GUIDE_BIN: &str = "bin/ecs-elastic-agent";

/// One fenced code block of the guide: its language, its text, and the section it is in.
#[derive(Debug, Clone)]
struct Block {
    lang: String,
    text: String,
    section: String,
}

/// The guide's fenced code blocks, in order (a block indented under a list item loses its
/// indentation).
fn blocks(markdown: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut section = String::new();
    let mut open: Option<(String, usize, Vec<String>)> = None;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match open.take() {
            None if trimmed.starts_with("```") => {
                open = Some((trimmed.trim_start_matches('`').trim().to_string(), indent, Vec::new()));
            }
            None => {
                if line.starts_with('#') {
                    section = line.trim_start_matches('#').trim().to_string();
                }
            }
            Some((lang, _, lines)) if trimmed.starts_with("```") => {
                found.push(Block { lang, text: lines.join("\n"), section: section.clone() });
            }
            Some((lang, indent, mut lines)) => {
                let cut = line.char_indices().take_while(|(i, c)| *i < indent && *c == ' ').count();
                lines.push(line[cut..].to_string());
                open = Some((lang, indent, lines));
            }
        }
    }
    assert!(open.is_none(), "the guide has a code block that is never closed");
    found
}

/// The commands of a shell block: continuation lines joined, each split into words as `sh`
/// splits them (quotes; a `#` starting a word begins a comment).
fn commands(block: &str) -> Vec<Vec<String>> {
    let mut logical = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        match line.trim_end().strip_suffix('\\') {
            Some(head) => {
                current.push_str(head);
                current.push(' ');
            }
            None => {
                current.push_str(line);
                logical.push(std::mem::take(&mut current));
            }
        }
    }
    logical.iter().map(|l| words(l)).filter(|w| !w.is_empty()).collect()
}

fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if let Some(w) = word.take() {
                    out.push(w);
                }
            }
            '#' if word.is_none() => break,
            '\'' | '"' => {
                let w = word.get_or_insert_with(String::new);
                for q in chars.by_ref() {
                    if q == c {
                        break;
                    }
                    w.push(q);
                }
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    out.extend(word);
    out
}

/// The value of `flag` in a command.
fn flag<'a>(command: &'a [String], name: &str) -> Option<&'a str> {
    command.iter().position(|w| w == name).and_then(|i| command.get(i + 1)).map(String::as_str)
}

/// The words after `flag`, up to the next flag.
fn flag_list<'a>(command: &'a [String], name: &str) -> Vec<&'a str> {
    let Some(i) = command.iter().position(|w| w == name) else { return Vec::new() };
    command[i + 1..].iter().take_while(|w| !w.starts_with("--")).map(String::as_str).collect()
}

/// The guide's shell commands that start with `prefix`, with the section each is in.
fn guide_commands(guide: &[Block], prefix: &[&str]) -> Vec<(String, Vec<String>)> {
    guide
        .iter()
        .filter(|b| b.lang == "sh")
        .flat_map(|b| commands(&b.text).into_iter().map(|c| (b.section.clone(), c)))
        .filter(|(_, c)| c.len() >= prefix.len() && c.iter().zip(prefix).all(|(w, p)| w == p))
        .collect()
}

fn only_command(guide: &[Block], prefix: &[&str]) -> Vec<String> {
    let mut found = guide_commands(guide, prefix);
    assert_eq!(found.len(), 1, "the guide shows one `{}`: {found:?}", prefix.join(" "));
    found.remove(0).1
}

/// What one run of the binary said.
#[derive(Debug)]
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs one of the guide's `bin/ecs-elastic-agent` commands in `dir`, as an operator whose
/// credentials are in the environment and who has no region configured beyond what the
/// guide's commands and files give (AWS is the world's proxy). `> FILE` writes stdout there.
async fn run_guide_command(dir: &Path, endpoint: &str, command: &[String]) -> Ran {
    assert_eq!(command[0], GUIDE_BIN, "{command:?}");
    let (args, into) = match command.iter().position(|w| w == ">") {
        Some(i) => (&command[1..i], command.get(i + 1).cloned()),
        None => (&command[1..], None),
    };
    let mut cmd = crate::world::moto::operator_command(endpoint, None);
    cmd.args(args).current_dir(dir);
    let out = tokio::time::timeout(Duration::from_secs(240), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{command:?} finished in time"))
        .expect("run the binary");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let ran = Ran { code: out.status.code(), stdout: text(&out.stdout), stderr: text(&out.stderr) };
    eprintln!("$ {}\n{}{}(exit {:?})", command.join(" "), ran.stdout, ran.stderr, ran.code);
    if let Some(file) = into {
        std::fs::write(dir.join(file), &ran.stdout).expect("write the redirected output");
    }
    for secret in [TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY] {
        assert!(!ran.stdout.contains(secret) && !ran.stderr.contains(secret), "{command:?} printed a secret");
    }
    ran
}

/// `aws secretsmanager create-secret` as the guide gives it (Secrets Manager is not among the
/// SDK crates: one JSON call to moto); returns the secret's ARN, which the command prints.
async fn create_secret(moto: &Moto, command: &[String]) -> String {
    let region = flag(command, "--region").expect("--region");
    let body = serde_json::json!({
        "Name": flag(command, "--name").expect("--name"),
        "SecretString": flag(command, "--secret-string").expect("--secret-string"),
    });
    let request = HttpRequest {
        method: "POST".into(),
        target: "/".into(),
        version: "HTTP/1.1".into(),
        headers: vec![
            ("Host".into(), moto.addr().to_string()),
            ("Content-Type".into(), "application/x-amz-json-1.1".into()),
            ("X-Amz-Target".into(), "secretsmanager.CreateSecret".into()),
            (
                "Authorization".into(),
                format!("AWS4-HMAC-SHA256 Credential={TEST_ACCESS_KEY_ID}/20260101/{region}/secretsmanager/aws4_request, SignedHeaders=host, Signature=0"),
            ),
        ],
        body: body.to_string().into_bytes(),
    };
    let response = http::send(moto.addr(), &request).await.expect("CreateSecret");
    assert_eq!(response.status, 200, "CreateSecret: {}", response.text());
    let answer: Value = serde_json::from_str(&response.text()).expect("JSON");
    answer["ARN"].as_str().expect("the secret's ARN").to_string()
}

/// The GoCD server's role, which the guide's reader has (`PluginRoleName`): a role EC2
/// instances run as.
async fn create_server_role(cfg: &SdkConfig, name: &str) {
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    aws_sdk_iam::Client::new(cfg)
        .create_role()
        .role_name(name)
        .assume_role_policy_document(trust)
        .send()
        .await
        .expect("CreateRole");
}

/// The output a guide's `aws cloudformation describe-stacks --query ...` prints.
fn queried_output(command: &[String], outputs: &BTreeMap<String, String>) -> (String, String) {
    let query = flag(command, "--query").expect("--query");
    let key = query.split("OutputKey==").nth(1).and_then(|rest| rest.split('\'').nth(1)).expect("an OutputKey");
    let value = outputs.get(key).unwrap_or_else(|| panic!("the stack has no output {key}: {outputs:?}"));
    (key.to_string(), value.clone())
}

/// Waits until every job completed and job-completion was answered.
async fn until_completed(host: &GoCdHost) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !host.with_state(|s| s.all_completed()) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if !host.with_state(|s| s.all_completed()) {
        let console: Vec<String> = host.with_state(|s| s.console.iter().map(|c| c.text.clone()).collect());
        eprintln!("consoles: {console:#?}\nhealth: {:#?}", host.health_messages());
    }
    host.wait_until("the job completed", Duration::from_secs(120), |s| s.all_completed()).await;
    host.wait_until("its agent deleted", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    host.wait_until("job-completion answered", Duration::from_secs(30), |s| {
        s.jobs.iter().all(|j| j.completion_code.is_some())
    })
    .await;
}

fn read_props(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is a JSON object of strings: {e}", path.display()))
}

/// The guide, from the stack to the first green job and back to nothing left.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_getting_started_guide_takes_a_new_user_to_a_green_job() {
    let guide = blocks(GUIDE);
    let mut w = Scenario::new("guide_getting_started").await;

    // 1. The AWS side. The Docker Hub secret, named as the guide names it.
    let secret_command = only_command(&guide, &["aws", "secretsmanager", "create-secret"]);
    let secret_arn = create_secret(&w.moto, &secret_command).await;

    let deploy = only_command(&guide, &["aws", "cloudformation", "deploy"]);
    let region = flag(&deploy, "--region").expect("--region").to_string();
    let stack_name = flag(&deploy, "--stack-name").expect("--stack-name").to_string();
    let template = flag(&deploy, "--template-file").expect("--template-file");
    assert_eq!(template, "packaging/cloudformation/cluster.yaml");
    assert!(Path::new(env!("CARGO_MANIFEST_DIR")).join(template).is_file(), "{template}");
    assert_eq!(flag(&deploy, "--capabilities"), Some("CAPABILITY_NAMED_IAM"));
    let mut parameters: Vec<(String, String)> = flag_list(&deploy, "--parameter-overrides")
        .iter()
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or_else(|| panic!("K=V: {kv}"));
            (k.to_string(), v.to_string())
        })
        .collect();
    assert!(parameters.iter().any(|(k, _)| k == "GoServerUrl"), "{parameters:?}");
    for (key, value) in &mut parameters {
        match key.as_str() {
            // The guide's server is the world's: `gocd.example.com`, plain HTTP on 8153 as GoCD
            // ships. Were the guide's example host another, it would be replaced here by it.
            "GoServerUrl" => {
                let host = value.split("://").nth(1).and_then(|r| r.split([':', '/']).next()).expect("a host");
                if host != GOCD_HOST {
                    eprintln!("the guide's server {host} is the world's {GOCD_HOST} here");
                    *value = value.replacen(host, GOCD_HOST, 1);
                }
            }
            // The secret's ARN is the one create-secret printed (the guide's ends in an
            // example of the random suffix AWS adds).
            "DockerHubCredentialsSecretArn" => {
                let name = flag(&secret_command, "--name").unwrap();
                assert!(value.contains(&format!(":secret:{name}-")), "the guide's ARN is its secret's: {value}");
                assert!(secret_arn.contains(&format!(":secret:{name}-")), "{secret_arn}");
                value.clone_from(&secret_arn);
            }
            _ => {}
        }
    }
    let cfg = moto::sdk_config_for(&w.moto.endpoint(), &moto::test_credentials(), &region).await;
    if let Some((_, role)) = parameters.iter().find(|(k, _)| k == "PluginRoleName") {
        create_server_role(&cfg, role).await;
    }
    let given: Vec<(&str, &str)> = parameters.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let outputs = stack::deploy(&cfg, &stack_name, &given).await;
    eprintln!("the stack's outputs: {outputs:#?}");
    let private: Vec<String> = outputs["SubnetIds"].split(',').map(str::to_string).collect();
    let vpc = stack::vpc_of(&cfg, &private).await;
    stack::as_cloudformation_makes_the_vpc(&cfg, &vpc, &private).await;
    if let Some((_, role)) = parameters.iter().find(|(k, _)| k == "PluginRoleName") {
        let attached = aws_sdk_iam::Client::new(&cfg)
            .list_attached_role_policies()
            .role_name(role)
            .send()
            .await
            .expect("ListAttachedRolePolicies");
        let arns: Vec<&str> = attached.attached_policies().iter().filter_map(|p| p.policy_arn()).collect();
        assert_eq!(arns, [outputs["PluginPolicyArn"].as_str()], "the plugin's policy on {role}");
    }

    // The world's network: the guide's server, its git host, and the host of the guide's second
    // example material (a team's own git server on HTTPS).
    let internet = Internet::stock();
    internet.add_host("git.example.com", "203.0.113.30", &[(443, Service::WebPage(Tls::Trusted))]);

    // Layout (a): the server lets in the address the guide's describe-stacks prints.
    let mut queried = BTreeMap::new();
    for (_, command) in guide_commands(&guide, &["aws", "cloudformation", "describe-stacks"]) {
        assert_eq!(flag(&command, "--stack-name"), Some(stack_name.as_str()));
        let (key, value) = queried_output(&command, &outputs);
        queried.insert(key, value);
    }
    let nat = queried.get("NatPublicIps").expect("the guide shows how to read NatPublicIps");
    internet.admit_only(GOCD_HOST, &[&format!("{nat}/32")]);

    // 2-4. Every command of the binary before the jar, in the guide's order, in the directory
    // of the files the guide has the user write.
    let dir = std::env::temp_dir().join(format!("ecs-ea-guide-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let endpoint = w.proxy.endpoint();
    let bin_commands = guide_commands(&guide, &[GUIDE_BIN]);
    let (before, after): (Vec<_>, Vec<_>) =
        bin_commands.into_iter().partition(|(section, _)| section != "How it goes away");
    let elastic_block = guide
        .iter()
        .find(|b| b.lang == "json" && b.text.contains("\"Image\""))
        .expect("the guide's elastic profile")
        .text
        .clone();
    let mut elastic_file: Option<String> = None;
    let mut runner: Option<ProbeRunner> = None;
    let mut ran_subcommands = Vec::new();
    for (_, command) in &before {
        let subcommand = command[1].clone();
        if let Some(file) = flag(command, "--elastic-profile") {
            assert!(dir.join(file).is_file(), "the guide had {file} written before `{}`", command.join(" "));
        }
        if subcommand == "try" && runner.is_none() {
            let cluster = read_props(&dir.join(flag(command, "--cluster-profile").unwrap()));
            runner = Some(ProbeRunner::start(&w.proxy, &cfg, &cluster["ClusterName"], internet.clone()));
        }
        let ran = run_guide_command(&dir, &endpoint, command).await;
        match subcommand.as_str() {
            "profile" => {
                assert_eq!(ran.code, Some(0), "profile --from-stack: {}", ran.stderr);
                let cluster_file = command.last().unwrap();
                let cluster = read_props(&dir.join(cluster_file));
                assert_eq!(cluster.get("GoServerUrl"), outputs.get("GoServerUrl"), "{cluster:?}");
                // The elastic profile: the guide's block, with the execution role printed.
                let printed = ran
                    .stderr
                    .lines()
                    .find_map(|l| l.strip_prefix("note: for the elastic profiles: ExecutionRoleArn = "))
                    .unwrap_or_else(|| panic!("profile printed no ExecutionRoleArn:\n{}", ran.stderr));
                let mut elastic: BTreeMap<String, String> =
                    serde_json::from_str(&elastic_block).expect("the guide's elastic profile is JSON of strings");
                assert!(elastic.contains_key("ExecutionRoleArn"), "{elastic:?}");
                elastic.insert("ExecutionRoleArn".into(), printed.to_string());
                // The image is the cache's Docker Hub prefix, as the guide has it read, followed
                // by the agent image's Docker Hub name.
                let prefix = queried.get("DockerHubCachePrefix").expect("the guide shows how to read the cache prefix");
                assert!(
                    elastic["Image"].starts_with(&format!("{prefix}/gocd/gocd-agent-")),
                    "the guide's image {} is {prefix}/ followed by the Docker Hub name",
                    elastic["Image"]
                );
                let name = guide
                    .iter()
                    .filter(|b| b.lang == "sh")
                    .find_map(|b| {
                        commands(&b.text).into_iter().find_map(|c| flag(&c, "--elastic-profile").map(str::to_string))
                    })
                    .expect("the guide names the elastic profile's file");
                std::fs::write(dir.join(&name), serde_json::to_string_pretty(&elastic).unwrap()).unwrap();
                elastic_file = Some(name);
            }
            "validate" => assert_eq!(ran.code, Some(0), "validate: {}{}", ran.stdout, ran.stderr),
            "doctor" => {
                let fails: Vec<&str> = ran.stdout.lines().filter(|l| l.starts_with("FAIL")).collect();
                assert!(fails.is_empty(), "doctor: {fails:#?}\n{}", ran.stdout);
                assert_eq!(ran.code, Some(0), "doctor: {}{}", ran.stdout, ran.stderr);
            }
            "try" => {
                assert_eq!(ran.code, Some(0), "try: {}{}", ran.stdout, ran.stderr);
                assert!(ran.stdout.contains("answered as a GoCD server"), "{}", ran.stdout);
                assert!(ran.stdout.contains("the probe exited with status 0"), "{}", ran.stdout);
                let materials = flag_values(command, "--material");
                let took = ran.stdout.lines().find(|l| l.contains("took a connection")).unwrap_or("");
                assert!(materials.is_empty() || !took.is_empty(), "{}", ran.stdout);
                for material in materials {
                    let (host, port) = crate::world::network::material_host(&material);
                    assert!(took.contains(&format!("{host}:{port}")), "{material}: {took}");
                }
            }
            other => panic!("the guide shows `{GUIDE_BIN} {other}`, which this test does not follow"),
        }
        ran_subcommands.push(subcommand);
    }
    assert_eq!(ran_subcommands, ["profile", "validate", "doctor", "try", "try"], "the guide's steps 2 to 4");
    let runner = runner.expect("try ran");
    assert_eq!(runner.exits().values().filter(|c| **c == 0).count(), 2, "{:?}", runner.exits());
    drop(runner);

    // 5. The jar is put aside: the world's GoCD host speaks to the binary directly.
    // 6. The profiles in GoCD: the cluster profile of cluster.json, the elastic profile `small`
    // of small.json; a job on it whose material is fetched over SSH.
    let cluster = read_props(&dir.join("cluster.json"));
    let elastic_file = elastic_file.expect("small.json written");
    let elastic = read_props(&dir.join(&elastic_file));
    let profile_name = elastic_file.trim_end_matches(".json");
    w.fleets.push(Fleet::new("stack", &cfg, &cluster["ClusterName"]));
    let mut config = w.host_config().cluster_profile("ecs", cluster).elastic_profile(profile_name, "ecs", elastic);
    config.region.clone_from(&region);
    let host = GoCdHost::launch(config).await;
    let network = NetworkWorld::new(internet.clone(), &w.proxy);
    let policy =
        SimPolicy { register_delay: Duration::from_millis(300), network: Some(network), ..SimPolicy::default() };
    let sim = w.agents(&host, policy);
    let job = host
        .add_job(
            JobSpec::new(profile_name, Duration::from_secs(2)).with_material(&format!("git@{GIT_HOST}:gocd/gocd.git")),
        )
        .await;
    until_completed(&host).await;
    let (failure, checked) = host.with_state(|s| (s.job(job).failure.clone(), s.job(job).materials_checked));
    let console = host.console_log(job);
    assert_eq!(failure, None, "the job is green: {console:#?}");
    assert!(checked, "the agent checked the material out over SSH");
    // The console line the guide quotes, `...` standing for what varies.
    let said = GUIDE
        .split("The job's console shows `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .expect("the guide says what the job's console shows");
    let parts: Vec<&str> = said.split("...").map(str::trim).filter(|p| !p.is_empty()).collect();
    let shows = |line: &str| {
        let mut at = 0;
        parts.iter().all(|p| match line[at..].find(p) {
            Some(i) => {
                at += i + p.len();
                true
            }
            None => false,
        })
    };
    assert!(console.iter().any(|l| shows(l)), "no console line like `{said}`: {console:#?}");
    w.assert_no_live_tasks(Duration::from_secs(60)).await;

    // How it goes away: GoCD stops running the plugin (the jar removed), then the guide's
    // `leftovers` commands; the plugin's task definitions are what outlives the profiles.
    drop(sim);
    host.shutdown().await;
    let server_id = host.server_id().to_string();
    let mut listed_after_removal = false;
    let mut removed = false;
    for (_, command) in &after {
        assert_eq!(command[1], "leftovers", "the guide's removal section shows {command:?}");
        assert_eq!(flag(command, "--region"), Some(region.as_str()), "{command:?}");
        // The guide's server id is an example: this GoCD server's.
        let command: Vec<String> = command
            .iter()
            .map(|w| {
                if w.ends_with("...") && command.iter().any(|f| f == "--server-id") {
                    server_id.clone()
                } else {
                    w.clone()
                }
            })
            .collect();
        let ran = run_guide_command(&dir, &endpoint, &command).await;
        assert_eq!(ran.code, Some(0), "{command:?}: {}", ran.stdout);
        let last = ran.stdout.lines().last().unwrap_or("");
        if command.iter().any(|w| w == "--remove") {
            assert!(last.starts_with("removed "), "{last}");
            assert!(!ran.stdout.contains("FAIL"), "{}", ran.stdout);
            removed = true;
        } else if removed {
            listed_after_removal = true;
            assert!(last.ends_with("nothing of the plugin's is left"), "{}", ran.stdout);
        } else {
            assert!(
                last.ends_with("nothing of the plugin's is left")
                    || last.ends_with("run again with --remove to remove them"),
                "{}",
                ran.stdout
            );
            assert!(!ran.stdout.contains(" state=RUNNING"), "no task runs after the job: {}", ran.stdout);
        }
    }
    assert!(removed, "the guide shows `leftovers --remove`");
    if !listed_after_removal {
        let again = after.iter().find(|(_, c)| c.len() == 4).expect("the plain listing").1.clone();
        let ran = run_guide_command(&dir, &endpoint, &again).await;
        assert_eq!(ran.code, Some(0), "{}", ran.stdout);
        assert!(ran.stdout.trim_end().ends_with("nothing of the plugin's is left"), "{}", ran.stdout);
    }
}

/// Every value of a repeatable flag.
fn flag_values(command: &[String], name: &str) -> Vec<String> {
    command.windows(2).filter(|p| p[0] == name).map(|p| p[1].clone()).collect()
}
