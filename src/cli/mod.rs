//! The command line: `serve` (what a GoCD-compatible server runs) and the operators' tools beside
//! it — `validate`, `iam-policy`, `doctor` and `prices` — for profiles kept in JSON files (flat maps of key
//! to string, exactly what GoCD's validate calls send; see `profiles/`).
//!
//! Each tool writes its answer to the `out` it is given (main hands it a locked stdout) and
//! returns whether everything was fine; `main` alone turns that into an exit code.

pub mod doctor;
pub mod files;
pub mod iam;
pub mod import;
pub mod leftovers;
pub mod prices;
pub mod profile;
pub mod trial;
pub mod validate;

#[cfg(test)]
mod cloudformation_tests;

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

const EXAMPLES: &str = "\
Examples:
  ecs-elastic-agent serve
  RUST_LOG=debug ecs-elastic-agent --log-format json serve --metrics-addr 127.0.0.1:9464
  ecs-elastic-agent validate --cluster-profile profiles/cluster-fargate.json --elastic-profile profiles/elastic-small.json
  ecs-elastic-agent iam-policy --cluster-profile profiles/cluster-fargate.json --elastic-profile profiles/elastic-small.json
  ecs-elastic-agent doctor --cluster-profile profiles/cluster-fargate.json
  ecs-elastic-agent prices --refresh --out prices.json
  ecs-elastic-agent profile --from-stack gocd-agents --region eu-west-1 > cluster.json
  ecs-elastic-agent try --cluster-profile cluster.json --elastic-profile profiles/elastic-small.json
  ecs-elastic-agent leftovers --region eu-west-1 --server-id 6f1c2a3e-... --remove
  ecs-elastic-agent import --out imported cluster-profiles.json elastic-profiles.json

Exit codes (`try` has its own, per class of failure: see `try --help`): 0 success; 1 a problem was found (validate, doctor) or the command failed; 2 bad arguments.";

const SERVE_EXAMPLES: &str = "\
Examples:
  ecs-elastic-agent serve < requests.jsonl
  ecs-elastic-agent serve --metrics-addr 127.0.0.1:9464     # Prometheus text at http://127.0.0.1:9464/metrics
  RUST_LOG=ecs_elastic_agent=debug ecs-elastic-agent --log-format json serve

stdin carries host→plugin lines and stdout plugin→host lines (one JSON object a line); logs go to
stderr. EOF on stdin, SIGTERM or SIGINT end it after the requests in flight (10 s at most).";

const VALIDATE_EXAMPLES: &str = "\
Examples:
  ecs-elastic-agent validate --cluster-profile profiles/cluster-fargate.json
  ecs-elastic-agent validate --cluster-profile profiles/cluster-ec2.json --elastic-profile profiles/elastic-ec2-docker.json

Output: `FILE: ok`, or one line `FILE: Key: message` per problem — the messages GoCD shows for
the v5 validate calls. Each elastic profile is also checked against the cluster profile (Fargate
sizes, EC2-only keys, AllowedImages, AllowedTaskRoleArns), as create-agent does.
Exit code 0 when every file is ok, 1 otherwise.";

const IAM_EXAMPLES: &str = "\
Examples:
  ecs-elastic-agent iam-policy --cluster-profile profiles/cluster-fargate.json --elastic-profile profiles/elastic-small.json
  ecs-elastic-agent iam-policy --cluster-profile profiles/cluster-fargate-spot-assume-role.json > policy.json
  aws iam put-role-policy --role-name gocd-agents --policy-name gocd-ecs --policy-document file://policy.json
  ecs-elastic-agent iam-policy --document trust-policy --cluster-profile profiles/cluster-fargate-spot-assume-role.json > trust.json

Output: one IAM policy document, as IAM takes it. --document policy (the default) is what the
plugin's identity needs (the role of RoleArn when it is set); trust-policy (RoleArn only) is the
role's trust policy with the sts:ExternalId condition; caller-policy (RoleArn only) lets the GoCD
server's own identity assume the role. Placeholders look like <GOCD_ACCOUNT_ID>. Notes about
assumptions go to stderr. Pass every elastic profile of the cluster profile so that iam:PassRole
covers their task and execution roles.";

const DOCTOR_EXAMPLES: &str = "\
Examples:
  ecs-elastic-agent doctor --cluster-profile profiles/cluster-fargate.json
  ecs-elastic-agent doctor --cluster-profile cluster.json --elastic-profile profiles/elastic-small.json
  AWS_PROFILE=ci ecs-elastic-agent doctor --cluster-profile prod.json --server-id 6f1c2a3e-...

Checks against AWS, with the credentials the plugin would use (the profile's keys or the SDK's
default chain, then RoleArn): credentials, role, cluster, subnets and security groups, the tasks'
way to the registry and to GoServerUrl (a URL a GoCD server answers at: http://host:8153/go, or
https://host/go behind a TLS proxy), the outbound ports builds check out over (SSH 22, git:// 9418,
HTTP 80, HTTPS 443; the cluster profile's groups and each elastic profile's own), Docker Hub images
pulled anonymously through a NAT gateway, a SOCI index of Fargate profiles' ECR images (without one,
the image's pulls measured in the last hour and what an index could save), capacity,
EC2 image and instance profile, log group, ListTasks, and the identity's own IAM policies against
the actions iam-policy lists (by action only; a warning, skipped when the policies cannot be read).
One line per check: `ok`, `warn` or `FAIL`, what was found and how to fix it.
Exit code 0 when nothing FAILed, 1 otherwise.";

const PRICES_EXAMPLES: &str = "\
Examples:
  ecs-elastic-agent prices                                   # the embedded table, as a price file
  ecs-elastic-agent prices --price-table prices.json         # a PriceTable file laid over it
  AWS_PROFILE=billing ecs-elastic-agent prices --refresh --out prices.json
  ecs-elastic-agent prices --refresh --out prices.json --instance-type c7i.xlarge

Output: the price table as JSON (its date, source and notes say where each figure comes from).
--refresh reads the AWS Price List Query API (pricing:GetProducts, us-east-1, the SDK's default
credentials): Fargate in every region AWS lists, gp3, and the EC2 types of the table plus those
named, Linux on demand; it writes FILE, which a cluster profile's PriceTable can name.
Exit code 0 when the table was printed or written, 1 otherwise.";
const PROFILE_EXAMPLES: &str = "\
Examples:
  ecs-elastic-agent profile --from-stack gocd-agents --region eu-west-1 > cluster.json
  ecs-elastic-agent profile --from-stack gocd-agents --from-stack gocd-role > cluster.json   # a member account: the cluster stack, then the role's

Output: the cluster profile (a JSON object of key to string, as `validate` takes it) made of the
stacks' outputs named after cluster profile keys (packaging/cloudformation/). The outputs named
after elastic profile keys (ExecutionRoleArn, TaskRoleArn) are noted on stderr. The SDK's default
credentials and region (AWS_PROFILE, AWS_REGION, ...) read the stacks. Exit code 0 when the
profile was printed and is valid, 1 otherwise.";

const TRY_EXAMPLES: &str = "\
Examples:
  ecs-elastic-agent try --cluster-profile cluster.json --elastic-profile profiles/elastic-small.json
  ecs-elastic-agent try --cluster-profile cluster.json --elastic-profile small.json --server-url http://gocd.example.com:8153/go
  ecs-elastic-agent try --cluster-profile cluster.json --elastic-profile small.json --material git@github.com:org/repo.git
  ecs-elastic-agent try --cluster-profile cluster.json --elastic-profile big.json --timeout 900
  ecs-elastic-agent try --cluster-profile member.json --elastic-profile small.json --server-id 6f1c2a3e-...

Starts one agent task as the plugin would (the same credentials, role, task definition,
networking and RunTask) and prints each status, the phases of its start and its image pull; for an
image in the account's ECR on Fargate, whether it has a SOCI index and what one would save of this
pull. With a GoCD server URL
(--server-url, else the cluster profile's GoServerUrl) the task proves the server is reachable from
where agents run: in place of the agent it runs a probe (sh and curl, which the GoCD agent images
have) that makes the agent's first request, GET <server>/admin/latest-agent.status, which only a GoCD
server answers with the agent's checksum headers, then connects to each --material host, and exits;
try reads the probe's exit status from ECS (no logs needed). Without a URL the task runs the agent,
which gets a fake registration key and does not register, and try stops it once RUNNING.
Then try removes the task definition it registered. The task carries the tags gocd:server-id=try (no
GoCD server's, so no plugin's cleanup takes it for its agent) and gocd:try=true; its task definition
is a family of its own, gocd-<cluster key>-try-<hash>. try creates no log group.
--server-id is only the external id's (RoleArn without ExternalId): the tags still say try.

On failure, one line: `FAIL <class>: what happened; fix: what to do (exit status N)`.
Exit status:
    0  ran                 the task ran (and the server and materials answered); everything try created is removed
    1  failed              another failure (AWS's text says which)
    2                      bad arguments
    3  profile             the profiles are not valid or do not fit (or LaunchType EC2)
    4  credentials         no region, credentials or role that do not work, a permission of the plugin's identity
    5  image               the image does not exist, or its registry refused the pull
    6  execution role      ExecutionRoleArn missing, or the role lacks a permission (ECR, secrets, logs)
    7  no route            the task could not reach its registry or AWS (routes, NAT, endpoints, security groups)
    8  no capacity         no capacity for the task now
    9  quota               an account quota or rate of AWS
   10  timeout             not RUNNING (or the probe not done) within --timeout
   11  leftover            the task ran, but something try created could not be removed (LEFT lines say what)
   12  server name         the server's host name does not resolve where the tasks run
   13  server unreachable  connection refused or timed out (security group, route, NAT, the server's firewall, port)
   14  server TLS          the tasks do not trust the server's certificate (give the agent your CA)
   15  server HTTP         the server answered with an HTTP error (the URL must end in /go)
   16  not GoCD            something answered, but not a GoCD server
   17  material            a --material host did not resolve, or refused or timed out
  130  interrupted         SIGINT or SIGTERM; what try knows it created was removed first";

const IMPORT_EXAMPLES: &str = "\
Examples:
  curl -u admin -H 'Accept: application/vnd.go.cd.v1+json' https://gocd.example.com/go/api/admin/elastic/cluster_profiles > clusters.json
  curl -u admin -H 'Accept: application/vnd.go.cd.v2+json' https://gocd.example.com/go/api/elastic/profiles > elastic.json
  ecs-elastic-agent import --out imported clusters.json elastic.json
  ecs-elastic-agent import --out imported /godata/config/cruise-config.xml
  GOCD_TOKEN=... ecs-elastic-agent import --out imported clusters.json elastic.json --apply --server https://gocd.example.com/go

Switching from GoCD's ECS elastic agent plugin (com.thoughtworks.gocd.elastic-agent.ecs): reads
their cluster and elastic agent profiles, as GoCD's API lists them (JSON) or from the <elastic>
section of cruise-config.xml, and writes ours under --out:
  gocd-api/cluster-profiles/<id>.json   bodies for POST /go/api/admin/elastic/cluster_profiles
  gocd-api/elastic-profiles/<id>.json   bodies for PUT /go/api/elastic/profiles/<id> (the same ids)
  profiles/cluster-<id>.json, profiles/elastic-<id>.json   flat files for `validate`
  report.md                             every key of theirs: where it went, what has no counterpart
Their launch type is per elastic profile (Fargate, RunAsSpotInstance), ours per cluster profile, so
one cluster profile of theirs becomes one of ours per launch type used: <id>-fargate,
<id>-fargate-spot, <id>-ec2, <id>-ec2-spot, <id>-ec2-windows. Sizes become MiB (2G: 2048), CPU
units stay CPU units, Fargate sizes Fargate refuses are rounded up. Secrets are never copied:
GoCD hands secure values out encrypted, and static AWS keys and registry passwords are left for a
role (RoleArn) or to be typed again. Profiles of other plugins are skipped. Every profile written
passes `validate`; one that would not is not written and the report says why. Nothing is sent to
AWS, and nothing to GoCD without --apply. With --apply and --server, the access token of a GoCD
administrator in GOCD_TOKEN (never printed) creates each cluster profile (or replaces one of this
plugin's with that id, with If-Match), then replaces each elastic profile under its same id (GET
for its ETag, PUT with If-Match), which moves its pipelines to this plugin; one line each:
`created|updated cluster profile ID`, `switched|created elastic profile ID`, or `FAIL ...`.
A cluster profile of another plugin with one of the new ids is left alone, with its elastic profiles.
Exit code 0 when every elastic profile of theirs was written (and applied), 1 otherwise.";

const LEFTOVERS_EXAMPLES: &str = "\
Examples:
  ecs-elastic-agent leftovers --region eu-west-1
  ecs-elastic-agent leftovers --region eu-west-1 --cluster ci --server-id 6f1c2a3e-...
  ecs-elastic-agent leftovers --region eu-west-1 --server-id 6f1c2a3e-... --remove
  ecs-elastic-agent leftovers --cluster-profile member.json --server-id 6f1c2a3e-...

Lists what the plugin created in one account and region, read by its tags: ECS tasks meant to
run (provisioning, pending, running) in every cluster of the region or in the --cluster ones,
EC2 instances not terminated (the stopped ones the plugin keeps too), and the ACTIVE revisions of
its task-definition families (gocd-*). Only what carries both gocd:server-id and
gocd:cluster-profile is the plugin's; nothing else is listed or touched. try's carry
gocd:server-id=try and gocd:try=true. --cluster narrows the tasks only: instances and task
definitions are the account's and region's. --server-id keeps what carries that server id.

Output: a first line naming the region and account, then one line per thing found:
  <task|instance|task-definition> <ARN or id> gocd:server-id=<id> gocd:cluster-profile=<key> [gocd:try=true] state=<state> age=<age> [cluster=<name>|type=<type>]
and a last line: `N tasks, N instances, N task definitions; run again with --remove to remove them`.
Without --remove nothing is changed. With --remove each task is stopped (StopTask, its reason
naming this command), each instance terminated (its tasks end with it) and each revision
deregistered, one line each (`stopped task ...`, `terminated instance ...`, `deregistered
task-definition ...`), then `removed N tasks, N instances, N task definitions`. A failure is one
line, `FAIL <what>: <AWS's reason>; fix: <what to do>`, and the rest goes on.

Credentials: the SDK's default chain (AWS_PROFILE, AWS_ACCESS_KEY_ID, ...) and --region, else
AWS_REGION or the AWS config file; with --cluster-profile, that profile's keys and RoleArn as the
plugin uses them (--server-id then gives the external id when the profile sets no ExternalId),
and its Region unless --region is given. Not the plugin's policy (`iam-policy`): an operator's.
Permissions: ecs:ListClusters, ecs:ListTasks, ecs:DescribeTasks, ec2:DescribeInstances,
ecs:ListTaskDefinitionFamilies, ecs:ListTaskDefinitions, ecs:DescribeTaskDefinition; with
--remove also ecs:StopTask, ec2:TerminateInstances, ecs:DeregisterTaskDefinition; sts:AssumeRole
on the profile's RoleArn.
Exit code 0 when everything was read (and removed), 1 when anything failed.";

/// GoCD elastic agents on AWS ECS (Fargate and EC2).
///
/// A GoCD-compatible server starts this binary as a child process and speaks the elastic-agent
/// extension v5 to it over stdio, one JSON message a line. Logs go to stderr. Beside `serve`,
/// operators' tools check profiles (`validate`), print the IAM policy they need (`iam-policy`) and
/// check an AWS account against a cluster profile (`doctor`).
#[derive(Debug, Parser)]
#[command(
    name = "ecs-elastic-agent",
    version,
    about,
    long_about,
    after_help = EXAMPLES,
    propagate_version = true
)]
pub struct Cli {
    /// Log format on stderr; levels come from RUST_LOG (default `info` for serve, `warn` for the tools).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    /// What to do (`serve` when none is given).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object a line, with the current span (request name and id).
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Speak the plugin protocol on stdin/stdout (what runs when no command is given).
    #[command(after_help = SERVE_EXAMPLES)]
    Serve(ServeArgs),
    /// Validate profiles kept in JSON files, with the messages of GoCD's validate calls.
    #[command(after_help = VALIDATE_EXAMPLES)]
    Validate(ProfileFiles),
    /// Print the least-privilege IAM policy (and trust policy) a cluster profile needs.
    #[command(name = "iam-policy", after_help = IAM_EXAMPLES)]
    IamPolicy(IamPolicyArgs),
    /// Check a cluster profile against AWS: credentials, role, cluster, networking, capacity.
    #[command(after_help = DOCTOR_EXAMPLES)]
    Doctor(DoctorArgs),
    /// Print the cluster profile a CloudFormation stack of packaging/cloudformation/ made.
    #[command(after_help = PROFILE_EXAMPLES)]
    Profile(ProfileArgs),
    /// Print the price table cost figures use, or refresh it from the AWS Price List.
    #[command(after_help = PRICES_EXAMPLES)]
    Prices(PricesArgs),
    /// Start one agent task for real, watch it until it runs, then remove it and what it needed.
    #[command(after_help = TRY_EXAMPLES)]
    Try(TryArgs),
    /// List what the plugin created in an account and region (tasks, instances, task
    /// definitions), and remove it with --remove.
    #[command(after_help = LEFTOVERS_EXAMPLES)]
    Leftovers(LeftoversArgs),
    /// Translate the profiles of GoCD's own ECS elastic agent plugin into this plugin's, with a report.
    #[command(after_help = IMPORT_EXAMPLES)]
    Import(import::ImportArgs),
}

/// Options of `leftovers`.
#[derive(Debug, Clone, Args)]
pub struct LeftoversArgs {
    /// The region. Default: the cluster profile's Region, else the SDK's default region
    /// (AWS_REGION, the AWS config file).
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
    /// A cluster whose tasks to look at, by name or ARN (repeatable). Default: every cluster of
    /// the region.
    #[arg(long = "cluster", value_name = "NAME")]
    pub clusters: Vec<String>,
    /// Only what carries this GoCD server id (Admin > Server Details; `try` for try's). With a
    /// cluster profile's RoleArn and no ExternalId, also the external id's.
    #[arg(long, value_name = "ID")]
    pub server_id: Option<String>,
    /// Stop the tasks, terminate the instances and deregister the task definitions found.
    #[arg(long)]
    pub remove: bool,
    /// Act with this cluster profile's credentials and role, as the plugin does.
    #[arg(long, value_name = "FILE")]
    pub cluster_profile: Option<PathBuf>,
}

/// Options of `try`.
#[derive(Debug, Clone, Args)]
pub struct TryArgs {
    /// The cluster profile: a JSON object of key to string (see profiles/).
    #[arg(long, value_name = "FILE")]
    pub cluster_profile: PathBuf,
    /// The elastic profile whose agent to start.
    #[arg(long, value_name = "FILE")]
    pub elastic_profile: PathBuf,
    /// GoCD's server id, for the external id of RoleArn when the profile sets no ExternalId
    /// (the task's tags say `try` whatever is given).
    #[arg(long, value_name = "ID")]
    pub server_id: Option<String>,
    /// The GoCD server URL to probe from the task (default: the cluster profile's GoServerUrl).
    #[arg(long, value_name = "URL")]
    pub server_url: Option<String>,
    /// A material host to probe from the task: git@host:repo, an ssh://, git://, https:// or
    /// http:// URL, or host:port (repeatable). Needs a server URL.
    #[arg(long = "material", value_name = "MATERIAL")]
    pub materials: Vec<String>,
    /// Seconds to wait for RUNNING (and, after, for STOPPED).
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub timeout: u64,
}

/// Options of `prices`.
#[derive(Debug, Clone, Args)]
pub struct PricesArgs {
    /// Read the AWS Price List (pricing:GetProducts) and write a price file to --out.
    #[arg(long, requires = "out")]
    pub refresh: bool,
    /// Where --refresh writes the price file.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// A price file laid over the embedded table (as a cluster profile's PriceTable).
    #[arg(long, value_name = "FILE")]
    pub price_table: Option<PathBuf>,
    /// An EC2 instance type to refresh beside the table's own (repeatable).
    #[arg(long = "instance-type", value_name = "TYPE")]
    pub instance_types: Vec<String>,
}

/// Options of `serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Serve Prometheus metrics (text format) at http://ADDR/metrics; off when not given.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// How long after start before unused task-definition revisions of ours may be
    /// deregistered (a process that just started has seen no elastic profile yet).
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = humantime::parse_duration)]
    pub task_definition_sweep_after: std::time::Duration,
}

impl Default for ServeArgs {
    /// `serve` with no options (what runs when no subcommand is given).
    fn default() -> Self {
        ServeArgs { metrics_addr: None, task_definition_sweep_after: std::time::Duration::from_secs(3600) }
    }
}

/// A cluster profile file and the elastic profile files that point at it.
#[derive(Debug, Clone, Args)]
pub struct ProfileFiles {
    /// The cluster profile: a JSON object of key to string (see profiles/).
    #[arg(long, value_name = "FILE")]
    pub cluster_profile: PathBuf,
    /// An elastic profile of that cluster profile (repeat for several).
    #[arg(long = "elastic-profile", value_name = "FILE")]
    pub elastic_profiles: Vec<PathBuf>,
}

/// Options of `iam-policy`.
#[derive(Debug, Clone, Args)]
pub struct IamPolicyArgs {
    /// The profiles.
    #[command(flatten)]
    pub files: ProfileFiles,
    /// Which policy document to print.
    #[arg(long, value_enum, default_value_t = PolicyDocument::Policy)]
    pub document: PolicyDocument,
}

/// The documents `iam-policy` prints, one per invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyDocument {
    /// What the plugin's identity needs (the role of RoleArn when set).
    Policy,
    /// The trust policy of RoleArn.
    TrustPolicy,
    /// What the GoCD server's own identity needs to assume RoleArn.
    CallerPolicy,
    /// What the elastic profiles' task role needs (EFS volumes with iam, ECS Exec).
    TaskRolePolicy,
    /// What their execution role needs (registry credentials, secrets, logs, private ECR images).
    ExecutionRolePolicy,
    /// The EventBridge rule's event pattern that feeds EventQueueUrl.
    EventRulePattern,
    /// The access policy of the EventQueueUrl queue (the rule may send to it).
    QueuePolicy,
}

/// Options of `doctor`.
#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    /// The cluster profile: a JSON object of key to string (see profiles/).
    #[arg(long, value_name = "FILE")]
    pub cluster_profile: PathBuf,
    /// GoCD's server id (Admin > Server Details): with RoleArn and no ExternalId, the external
    /// id is `gocd:server-id:<this>`.
    #[arg(long, value_name = "ID")]
    pub server_id: Option<String>,
    /// Elastic profiles that point at this cluster profile: each is checked to fit it as
    /// create-agent would (execution and task roles, sizes, allow-lists). Repeatable.
    #[arg(long = "elastic-profile", value_name = "FILE")]
    pub elastic_profiles: Vec<PathBuf>,
    /// Seconds each check may take.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub timeout: u64,
}

/// Options of `profile`.
#[derive(Debug, Clone, Args)]
pub struct ProfileArgs {
    /// A stack whose outputs fill the profile (repeat for several: a cluster stack and a
    /// member account's role stack).
    #[arg(long = "from-stack", value_name = "NAME", required = true)]
    pub from_stacks: Vec<String>,
    /// The stacks' region. Default: the SDK's default region (AWS_REGION, the AWS config file).
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
    /// Seconds each DescribeStacks may take.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    pub timeout: u64,
}
