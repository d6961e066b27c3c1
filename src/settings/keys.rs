//! The one table of every profile key: name, flags, form group, label, help text and input kind.
//!
//! Metadata, the HTML views, the unknown-key check and the parsers' key lookups are all derived
//! from [`CLUSTER_KEYS`] and [`ELASTIC_KEYS`], so they cannot drift apart. The key names are
//! fixed (`docs/design.md`, "Profiles"): users, docs and tests depend on them.

/// How a key is entered in the profile form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// A one-line text box.
    Text,
    /// A one-line password box (secure keys).
    Password,
    /// A multi-line text area: one item per line.
    Lines,
    /// A drop-down of fixed values; the first one is the default, an empty choice means "default".
    Select(&'static [&'static str]),
    /// A checkbox that stores `true` or `false`.
    Checkbox,
}

/// Which of the two profiles a key belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileKind {
    /// The cluster profile: one AWS account or role, region and ECS cluster.
    Cluster,
    /// The elastic agent profile: what one agent container looks like.
    Elastic,
}

impl ProfileKind {
    /// Every key of this profile, in the stable order of metadata.
    pub fn keys(self) -> &'static [KeySpec] {
        match self {
            ProfileKind::Cluster => CLUSTER_KEYS,
            ProfileKind::Elastic => ELASTIC_KEYS,
        }
    }

    /// The form's fieldset legends, in display order.
    pub fn groups(self) -> &'static [&'static str] {
        match self {
            ProfileKind::Cluster => CLUSTER_GROUPS,
            ProfileKind::Elastic => ELASTIC_GROUPS,
        }
    }

    /// The fieldsets the form shows open; the others, whose keys all have defaults most profiles
    /// keep, start collapsed.
    pub fn open_groups(self) -> &'static [&'static str] {
        match self {
            ProfileKind::Cluster => CLUSTER_OPEN_GROUPS,
            ProfileKind::Elastic => ELASTIC_OPEN_GROUPS,
        }
    }

    /// The other profile (used to say "that is a cluster profile setting").
    pub fn other(self) -> ProfileKind {
        match self {
            ProfileKind::Cluster => ProfileKind::Elastic,
            ProfileKind::Elastic => ProfileKind::Cluster,
        }
    }

    /// The profile's name in messages.
    pub fn noun(self) -> &'static str {
        match self {
            ProfileKind::Cluster => "cluster profile",
            ProfileKind::Elastic => "elastic agent profile",
        }
    }

    /// The table entry for `key`, if the key belongs to this profile (exact, case-sensitive).
    pub fn spec(self, key: &str) -> Option<&'static KeySpec> {
        self.keys().iter().find(|spec| spec.key == key)
    }
}

/// Everything the plugin knows about one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySpec {
    /// The property key, exactly as GoCD stores it.
    pub key: &'static str,
    /// Marked required in metadata (and with an asterisk in the form).
    pub required: bool,
    /// Stored encrypted by GoCD; never echoed in messages.
    pub secure: bool,
    /// The fieldset legend this key is shown under.
    pub group: &'static str,
    /// The form label.
    pub label: &'static str,
    /// Help text shown under the input: what it is, the default, an example. Plain text.
    pub help: &'static str,
    /// How the value is entered.
    pub input: Input,
}

const fn spec(
    key: &'static str,
    group: &'static str,
    label: &'static str,
    input: Input,
    help: &'static str,
) -> KeySpec {
    KeySpec { key, required: false, secure: false, group, label, help, input }
}

const fn required(spec: KeySpec) -> KeySpec {
    KeySpec { required: true, ..spec }
}

const fn secure(spec: KeySpec) -> KeySpec {
    KeySpec { secure: true, input: Input::Password, ..spec }
}

/// `LaunchType` values; the first is the default.
pub const LAUNCH_TYPES: &[&str] = &["FARGATE", "FARGATE_SPOT", "EC2"];

/// `OperatingSystemFamily` values (ECS runtime platform); the first is the default.
pub const OPERATING_SYSTEM_FAMILIES: &[&str] = &[
    "LINUX",
    "WINDOWS_SERVER_2019_FULL",
    "WINDOWS_SERVER_2019_CORE",
    "WINDOWS_SERVER_2016_FULL",
    "WINDOWS_SERVER_2004_CORE",
    "WINDOWS_SERVER_2022_CORE",
    "WINDOWS_SERVER_2022_FULL",
    "WINDOWS_SERVER_2025_CORE",
    "WINDOWS_SERVER_2025_FULL",
    "WINDOWS_SERVER_20H2_CORE",
];

/// `CpuArchitecture` values (ECS runtime platform); the first is the default.
pub const CPU_ARCHITECTURES: &[&str] = &["X86_64", "ARM64"];

const ACCOUNT: &str = "AWS account and role";
const CLUSTER: &str = "Cluster and agents";
const NETWORK: &str = "Networking";
const LIMITS: &str = "Limits and guardrails";
const EC2: &str = "EC2 capacity";

/// Cluster profile fieldsets, in display order.
pub const CLUSTER_GROUPS: &[&str] = &[ACCOUNT, CLUSTER, NETWORK, LIMITS, EC2];

/// Cluster profile fieldsets shown open in the form: the account, the cluster and its network.
pub const CLUSTER_OPEN_GROUPS: &[&str] = &[ACCOUNT, CLUSTER, NETWORK];

/// Every cluster profile key.
#[rustfmt::skip]
pub const CLUSTER_KEYS: &[KeySpec] = &[
    required(spec("ClusterName", CLUSTER, "ECS cluster name or ARN", Input::Text,
        "The ECS cluster the agent tasks run in, by name or ARN. Example: gocd-agents or arn:aws:ecs:us-east-1:123456789012:cluster/gocd-agents.")),
    spec("Region", ACCOUNT, "AWS region", Input::Text,
        "The AWS region of the cluster. Default: the region of a cluster ARN, else the AWS SDK's default (AWS_REGION, the AWS config file, instance metadata). Example: eu-west-1."),
    spec("GoServerUrl", CLUSTER, "GoCD server URL", Input::Text,
        "The URL agents use to reach this GoCD server, ending in /go. Default: the server's secure site URL, else its site URL. Example: https://gocd.example.com/go."),
    secure(spec("AccessKeyId", ACCOUNT, "AWS access key id", Input::Text,
        "Static credentials, together with the secret access key. Default: the AWS SDK's default credential chain (environment, profile, SSO, web identity, ECS or EC2 role). Leave empty where possible.")),
    secure(spec("SecretAccessKey", ACCOUNT, "AWS secret access key", Input::Text,
        "The secret for the access key id above; give both or neither. Stored encrypted.")),
    spec("RoleArn", ACCOUNT, "IAM role to assume", Input::Text,
        "Every AWS call of this cluster profile runs as this role, for example in another account. Default: none. Example: arn:aws:iam::123456789012:role/gocd-ecs-agents."),
    spec("ExternalId", ACCOUNT, "External id", Input::Text,
        "The external id passed when assuming the role; needs a role ARN. Default: gocd:server-id:(this GoCD server's id)."),
    spec("RoleSessionName", ACCOUNT, "Role session name", Input::Text,
        "The session name when assuming the role, 2 to 64 characters; needs a role ARN. Default: gocd-ecs-(cluster name)."),
    spec("LaunchType", CLUSTER, "Launch type", Input::Select(LAUNCH_TYPES),
        "FARGATE, FARGATE_SPOT (falls back to FARGATE when spot capacity is short) or EC2 (instances this plugin launches and retires). Default: FARGATE."),
    spec("CapacityProviderStrategy", CLUSTER, "Capacity provider strategy", Input::Lines,
        "Instead of LaunchType (leave it out): start agents through ECS capacity providers, one per line as NAME, NAME:WEIGHT or NAME:WEIGHT:BASE (weight 0 to 1000, default 1; base on one provider at most; at most 20), or 'default' for the cluster's default strategy. The plugin launches no instance. Example: FARGATE:1:2 and FARGATE_SPOT:3 on two lines."),
    spec("SubnetIds", NETWORK, "Subnet ids", Input::Text,
        "Comma-separated subnets for the agent tasks, at most 16. Default: the default VPC's default subnets. Example: subnet-0a1b2c3d, subnet-4e5f6a7b."),
    spec("SecurityGroupIds", NETWORK, "Security group ids", Input::Text,
        "Comma-separated security groups for the agent tasks, at most 5. Default: the default VPC's default group. Example: sg-0123abcd."),
    spec("AssignPublicIp", NETWORK, "Assign public IP", Input::Checkbox,
        "Give each task (with EC2: each container instance) a public IP, needed in public subnets without a NAT gateway. Default: off, whatever the subnet's own setting."),
    spec("MaxAgents", LIMITS, "Maximum agents", Input::Text,
        "Running plus pending agents of this cluster profile, 1 to 1000; never exceeded. Default: 10."),
    spec("AgentRegisterTimeoutMinutes", LIMITS, "Agent register timeout (minutes)", Input::Text,
        "A task whose agent has not registered with GoCD by then is stopped, 1 to 120. Default: 10."),
    spec("EnvironmentVariables", CLUSTER, "Environment variables", Input::Lines,
        "KEY=VALUE, one per line, set in every agent container; the elastic profile wins on a clash. Default: none. Example: HTTP_PROXY=http://proxy.internal:3128."),
    spec("Tags", CLUSTER, "Tags", Input::Lines,
        "KEY=VALUE, one per line, put on every task and instance; keys starting with aws: or gocd: are reserved. At most 40. Example: team=platform."),
    spec("LogGroup", CLUSTER, "CloudWatch log group", Input::Text,
        "Agent logs go to this CloudWatch log group (awslogs driver), one stream per agent. Default: no log configuration. Example: /gocd/agents."),
    spec("EventQueueUrl", CLUSTER, "Event queue URL", Input::Text,
        "An SQS queue that an EventBridge rule feeds with this cluster's ECS task state changes (and, with EC2, the plugin's instances' spot warnings and state changes): agents of stopped tasks are removed within seconds instead of at the next server-ping. One queue per GoCD server and account; `iam-policy` prints the rule and the queue policy. Default: none (server-ping only). Example: https://sqs.us-east-1.amazonaws.com/123456789012/gocd-ecs-events."),
    spec("PriceTable", CLUSTER, "Price table file", Input::Text,
        "A price file on the GoCD server (the format `ecs-elastic-agent prices` prints; `prices --refresh --out FILE` writes one from the AWS Price List) laid over the plugin's embedded table for this profile's cost figures: its prices replace or add to the embedded ones, figure by figure. Checked when the profile is saved. Default: the embedded table (its date and source in README \"Cost\"). Example: config/ecs-prices.json."),
    spec("AllowedImages", LIMITS, "Allowed images", Input::Lines,
        "Glob patterns, one per line: an elastic profile (or any container of the task definition it names) whose image matches none is refused. Default: any image. Example: 123456789012.dkr.ecr.us-east-1.amazonaws.com/gocd/*."),
    spec("AllowedTaskRoleArns", LIMITS, "Allowed task role ARNs", Input::Lines,
        "Glob patterns, one per line: an elastic profile (or the task definition it names) whose task role matches none is refused. Default: any role. Example: arn:aws:iam::123456789012:role/gocd-task-*."),
    spec("AllowedExecutionRoleArns", LIMITS, "Allowed execution role ARNs", Input::Lines,
        "Glob patterns, one per line: an elastic profile (or the task definition it names) whose execution role matches none is refused. Default: any role. Example: arn:aws:iam::123456789012:role/gocd-execution-*."),
    spec("AllowedSecretArns", LIMITS, "Allowed secret ARNs", Input::Lines,
        "Glob patterns, one per line: an elastic profile (or the task definition it names) reading a secret whose ARN matches none is refused. Default: any secret. Example: arn:aws:secretsmanager:us-east-1:123456789012:secret:ci/*."),
    spec("AllowedFileSystemIds", LIMITS, "Allowed EFS file systems", Input::Lines,
        "Glob patterns, one per line: an elastic profile (or the task definition it names) mounting an EFS file system whose id matches none is refused. Default: any file system. Example: fs-0a1b2c3d."),
    spec("AllowPrivileged", LIMITS, "Allow privileged agents", Input::Checkbox,
        "Lets elastic profiles (and the task definitions they name) run privileged or mount the Docker socket, which controls the whole EC2 instance and the other teams' tasks on it. Default: off: such profiles are refused."),
    spec("Ec2InstanceType", EC2, "Instance type", Input::Text,
        "Required when the launch type is EC2: one instance type, or several separated by commas or one per line; each waiting task gets the smallest listed type (vCPUs, then memory) of its CPU architecture that holds it, and spot requests are spread over the fitting types. Example: c5.xlarge, c6g.xlarge."),
    spec("Ec2InstanceProfile", EC2, "Instance profile", Input::Text,
        "Required when the launch type is EC2: the IAM instance profile (name or ARN) of the container instances. Example: ecsInstanceRole."),
    spec("Ec2AmiId", EC2, "AMI id", Input::Text,
        "Required when the launch type is EC2: an ECS-optimised AMI in the cluster's region, one per CPU architecture of the instance types (comma-separated or one per line). Example: ami-0abcdef1234567890."),
    spec("Ec2MinInstances", EC2, "Minimum instances", Input::Text,
        "Instances kept running even when idle, 0 to 100. Default: 0."),
    spec("Ec2MaxInstances", EC2, "Maximum instances", Input::Text,
        "At most this many instances, 1 to 100, not less than the minimum. Default: 5."),
    spec("Ec2IdleMinutes", EC2, "Idle minutes", Input::Text,
        "An instance with no task for this long is terminated (down to the minimum), 0 to 1440. Default: 10. \
         When several are idle, only the last to run a task waits this long: the others go after 2 minutes; and \
         while busy instances have a quarter of an instance free between them, idle ones go at once. 0: an \
         instance goes as soon as it runs no task, so no idle time is paid, but there is no warm spare: a job \
         that finds no room waits for an instance to launch and register (about a minute and a half; tens of \
         seconds for a stopped one, Ec2StoppedInstances)."),
    spec("Ec2ScaleOutWaitSeconds", EC2, "Scale-out wait (seconds)", Input::Text,
        "How long at most a task that does not fit waits for room to free on a busy instance before an instance is \
         launched for it, 0 to 1800; 0 launches at once. Default: 0 (a job never waits for room while an instance \
         could start for it; a wait trades the slowest jobs' waits for fewer instance-hours). With a wait set, tasks \
         wait, oldest first, only while the work waiting is at most three quarters of the work running on the busy \
         instances; the rest, and a task no busy instance could take, launch at once."),
    spec("Ec2StoppedInstances", EC2, "Stopped instances kept", Input::Text,
        "How many idle on-demand instances are stopped instead of terminated, 0 to 50; a stopped one of the same \
         launch settings is started again before a new instance is launched, and registers in tens of seconds with \
         the images it pulled. A stopped instance costs its root volume only (gp3, about 0.08 USD per GiB-month: \
         2.40 USD a month at 30 GiB). Spot instances are always terminated. Default: 5; 0 terminates every idle \
         instance."),
    spec("Ec2RegisterTimeoutMinutes", EC2, "Instance register timeout (minutes)", Input::Text,
        "An instance not registered with the cluster by then is terminated, 1 to 60. Default: 5."),
    spec("Ec2Spot", EC2, "Spot instances", Input::Checkbox,
        "Launch spot instances, on-demand when spot capacity is short. Default: off."),
    spec("Ec2KeyPair", EC2, "Key pair", Input::Text,
        "An EC2 key pair name for SSH access to the instances. Default: none."),
    spec("Ec2RootVolumeGiB", EC2, "Root volume (GiB)", Input::Text,
        "Size of each instance's root volume, 8 to 16384 GiB. Default: 30."),
    spec("Ec2UserData", EC2, "Extra user data", Input::Lines,
        "Shell lines appended to the generated user data script, at most 15 KiB (15360 bytes). Default: none."),
];

const BASICS: &str = "Basics";
const RESOURCES: &str = "Resources";
const STORAGE: &str = "Storage";
const SECURITY: &str = "Security";
const ADVANCED: &str = "Advanced";

/// Elastic agent profile fieldsets, in display order.
pub const ELASTIC_GROUPS: &[&str] = &[BASICS, RESOURCES, STORAGE, NETWORK, SECURITY, ADVANCED];

/// Elastic agent profile fieldsets shown open in the form: the image and what the task gets.
pub const ELASTIC_OPEN_GROUPS: &[&str] = &[BASICS, RESOURCES];

/// Every elastic agent profile key.
#[rustfmt::skip]
pub const ELASTIC_KEYS: &[KeySpec] = &[
    required(spec("Image", BASICS, "Docker image", Input::Text,
        "The GoCD agent image to run. Example: gocd/gocd-agent-ubuntu-22.04:v24.1.0 or 123456789012.dkr.ecr.us-east-1.amazonaws.com/gocd-agent:latest.")),
    spec("Cpu", RESOURCES, "CPU units", Input::Text,
        "CPU units for the task (1024 = 1 vCPU), 2 to 16384; on Fargate a valid Fargate size. Default: 1024."),
    spec("Memory", RESOURCES, "Memory (MiB)", Input::Text,
        "Memory for the task in MiB, 6 to 122880; on Fargate it must pair with the CPU units. Default: 2048."),
    spec("MemoryReservation", RESOURCES, "Memory reservation (MiB)", Input::Text,
        "Soft memory limit in MiB, at most the memory; EC2 only. Default: none."),
    spec("PlacementStrategy", ADVANCED, "Placement strategy", Input::Lines,
        "How ECS places the task on a capacity provider's EC2 instances (CapacityProviderStrategy naming an Auto Scaling group's provider), at most 5 lines: spread:attribute:ecs.availability-zone, spread:instanceId, binpack:memory, binpack:cpu or random."),
    spec("PlacementConstraints", ADVANCED, "Placement constraints", Input::Lines,
        "Where ECS may place the task on a capacity provider's EC2 instances, at most 10 lines: distinctInstance, or memberOf:EXPRESSION like memberOf:attribute:ecs.cpu-architecture == arm64."),
    spec("Command", BASICS, "Command", Input::Lines,
        "The container command, one argument per line. Default: the image's own command."),
    spec("Environment", BASICS, "Environment variables", Input::Lines,
        "KEY=VALUE, one per line; these win over the cluster profile's. Example: JAVA_OPTS=-Xmx1g."),
    spec("Secrets", SECURITY, "Secrets", Input::Lines,
        "NAME=ARN, one per line: environment variables filled from Secrets Manager or SSM Parameter Store; needs an execution role. Example: NPM_TOKEN=arn:aws:ssm:us-east-1:123456789012:parameter/ci/npm-token."),
    spec("TaskRoleArn", SECURITY, "Task role ARN", Input::Text,
        "The IAM role the build's AWS calls run as. Default: none. Example: arn:aws:iam::123456789012:role/gocd-build."),
    spec("ExecutionRoleArn", SECURITY, "Execution role ARN", Input::Text,
        "The IAM role ECS uses to pull the image, write logs and read secrets. Default: none. Example: arn:aws:iam::123456789012:role/ecsTaskExecutionRole."),
    spec("OperatingSystemFamily", RESOURCES, "Operating system family", Input::Select(OPERATING_SYSTEM_FAMILIES),
        "The task's operating system. Default: LINUX."),
    spec("CpuArchitecture", RESOURCES, "CPU architecture", Input::Select(CPU_ARCHITECTURES),
        "X86_64 or ARM64 (Linux only). Default: X86_64."),
    spec("EphemeralStorageGiB", STORAGE, "Ephemeral storage (GiB)", Input::Text,
        "Task storage on Fargate, 21 to 200 GiB. Default: Fargate's 20 GiB."),
    spec("Privileged", SECURITY, "Privileged", Input::Checkbox,
        "Run the container privileged; EC2 only. Default: off."),
    spec("MountDockerSocket", SECURITY, "Mount Docker socket", Input::Checkbox,
        "Mount the instance's /var/run/docker.sock into the container; EC2 only. Default: off."),
    spec("SubnetIds", NETWORK, "Subnet ids", Input::Text,
        "Comma-separated subnets, at most 16. Default: the cluster profile's. Example: subnet-0a1b2c3d."),
    spec("SecurityGroupIds", NETWORK, "Security group ids", Input::Text,
        "Comma-separated security groups, at most 5. Default: the cluster profile's. Example: sg-0123abcd."),
    spec("Tags", BASICS, "Tags", Input::Lines,
        "KEY=VALUE, one per line, put on the task; keys starting with aws: or gocd: are reserved. Example: cost-center=ci."),
    spec("EnableExecuteCommand", SECURITY, "Enable ECS Exec", Input::Checkbox,
        "Allow ECS Exec into the agent container (the task role needs the SSM permissions). Default: off."),
    spec("TaskDefinitionArn", ADVANCED, "Task definition", Input::Text,
        "Use this task definition as it is instead of one generated from this profile: an ARN, family:revision or family. Default: none."),
    spec("AgentContainerName", ADVANCED, "Agent container name", Input::Text,
        "Which container of the task definition is the GoCD agent; needs a task definition. Default: its first container."),
    spec("EfsVolumes", STORAGE, "EFS volumes", Input::Lines,
        "One EFS file system per line, mounted into the agent container: fs-ID[:/directory] /container/path, then any of read-only, iam (IAM authorization with the task role), access-point=fsap-ID, no-transit-encryption. Transit encryption is on unless switched off. Linux only. Example: fs-0a1b2c3d:/ci/gradle /home/go/.gradle."),
    spec("BindMounts", STORAGE, "Host directories (EC2)", Input::Lines,
        "One instance directory per line, mounted into the agent container: /host/path /container/path [read-only]; EC2 only. System paths (/, /etc, /var/run, the Docker socket ...) need AllowPrivileged in the cluster profile. Example: /var/cache/gocd-m2 /home/go/.m2."),
    spec("RepositoryCredentialsArn", SECURITY, "Registry credentials secret ARN", Input::Text,
        "A Secrets Manager secret with the username and password of a private (non-ECR) registry, used to pull the agent image and sidecar images from the same registry; needs an execution role that may read it. Example: arn:aws:secretsmanager:us-east-1:123456789012:secret:ci/registry-AbCdEf."),
    spec("StopTimeoutSeconds", ADVANCED, "Stop timeout (seconds)", Input::Text,
        "Seconds between SIGTERM and SIGKILL when the task stops, 2 to 120: time to upload artifacts (Fargate Spot gives 2 minutes' notice). Default: ECS's 30."),
    spec("Ulimits", RESOURCES, "Ulimits", Input::Lines,
        "NAME=SOFT[:HARD], one per line, for the agent container (core, cpu, data, fsize, locks, memlock, msgqueue, nice, nofile, nproc, rss, rtprio, rttime, sigpending, stack); Linux only. Example: nofile=65536:1048576."),
    spec("InitProcessEnabled", ADVANCED, "Run an init process", Input::Checkbox,
        "Run an init process as PID 1 in the agent container, which reaps the zombie processes builds leave behind; Linux only. Default: off."),
    spec("SharedMemoryMiB", RESOURCES, "Shared memory (MiB)", Input::Text,
        "Size of /dev/shm in the agent container (browsers in tests need more than Docker's 64 MiB), at most the container's memory; EC2 only. Default: Docker's."),
    spec("HealthCheck", ADVANCED, "Health check", Input::Lines,
        "KEY=VALUE, one per line: command (a shell command, exit 0 means healthy; required), interval (5-300 s, default 30), timeout (2-60 s, default 5), retries (1-10, default 3), startPeriod (0-300 s, default 0). Example: command=pgrep -f agent-bootstrapper."),
    spec("PlatformVersion", RESOURCES, "Fargate platform version", Input::Text,
        "The Fargate platform version of the task: LATEST or a version like 1.4.0 (EFS volumes need 1.4.0 or later); Fargate only. Default: LATEST."),
    spec("LogOptions", ADVANCED, "Log options", Input::Lines,
        "KEY=VALUE, one per line. With the cluster profile's LogGroup: awslogs options awslogs-create-group, awslogs-datetime-format, awslogs-multiline-pattern, mode, max-buffer-size. With a FireLens sidecar: that router's output options (Name=cloudwatch_logs, region=...). Log retention is set on the log group itself. Example: awslogs-create-group=true."),
    spec("ReuseIdleMinutes", ADVANCED, "Reuse idle agents (minutes)", Input::Text,
        "Keep an agent after its job completes, idle for up to this many minutes, and give it the next job of this elastic profile, cluster profile and environment instead of starting a new task (warm starts); 0 to 120. Idle agents count against MaxAgents. Default: 0, one job per agent."),
    spec("ReuseMaxJobs", ADVANCED, "Jobs per reused agent", Input::Text,
        "With ReuseIdleMinutes: how many jobs one agent runs before it is stopped, 1 to 1000. Default: 10."),
    spec("WarmAgents", ADVANCED, "Warm agents", Input::Text,
        "Idle agents kept ready for the next jobs of this elastic profile, cluster profile and environment, so a job starts without waiting for a task: a number (0 to 1000, within MaxAgents) or auto (sized from the last hour's arrivals and those of the coming hour on the last three days). Warm agents start only with the unused registration keys of jobs that a warm or kept agent served, so a pool forms from agents kept after their jobs. Default: 0, none."),
    spec("WarmSchedule", ADVANCED, "Warm agents' schedule", Input::Text,
        "When warm agents are kept: windows DAYS HH:MM-HH:MM ZONE separated by ;, for example Mon-Fri 07:00-19:00 Europe/Berlin. Outside them none is kept. Default: empty, always."),
    spec("WarmLaunchType", ADVANCED, "Warm agents' launch type", Input::Text,
        "Where warm agents run on a Fargate cluster profile: FARGATE or FARGATE_SPOT. FARGATE_SPOT bills their idle time at the Fargate Spot price; a warm agent Spot takes back while idle is replaced, and a job whose warm agent Spot interrupts reruns on FARGATE. Not for EC2 or a CapacityProviderStrategy. Default: the cluster profile's LaunchType."),
    spec("Sidecars", ADVANCED, "Sidecar containers", Input::Lines,
        "A JSON list of extra containers: name, image, memory (MiB, required), cpu, essential (default true), environment (an object), command (a list), privileged (EC2 with AllowPrivileged only), firelens (fluentbit or fluentd: the log router). Their cpu and memory come out of the task's; the GoCD agent stays essential. Images must pass AllowedImages. Example: [{\"name\": \"postgres\", \"image\": \"postgres:16\", \"memory\": 512}]."),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique_and_grouped_in_known_fieldsets() {
        for kind in [ProfileKind::Cluster, ProfileKind::Elastic] {
            let keys = kind.keys();
            for (i, spec) in keys.iter().enumerate() {
                assert!(keys[..i].iter().all(|s| s.key != spec.key), "{} twice", spec.key);
                assert!(kind.groups().contains(&spec.group), "{} in unknown group", spec.key);
                assert!(!spec.help.is_empty() && !spec.label.is_empty());
            }
            for group in kind.groups() {
                assert!(keys.iter().any(|s| s.group == *group), "empty fieldset {group}");
            }
            for group in kind.open_groups() {
                assert!(kind.groups().contains(group), "open group {group} is no fieldset");
            }
            // The required keys are in open groups.
            for spec in keys.iter().filter(|s| s.required) {
                assert!(kind.open_groups().contains(&spec.group), "{} in a collapsed group", spec.key);
            }
        }
    }

    #[test]
    fn only_the_documented_keys_are_required_or_secure() {
        let required: Vec<_> = CLUSTER_KEYS.iter().chain(ELASTIC_KEYS).filter(|s| s.required).map(|s| s.key).collect();
        assert_eq!(required, ["ClusterName", "Image"]);
        let secure: Vec<_> = CLUSTER_KEYS.iter().chain(ELASTIC_KEYS).filter(|s| s.secure).map(|s| s.key).collect();
        assert_eq!(secure, ["AccessKeyId", "SecretAccessKey"]);
        assert_eq!(CLUSTER_KEYS.len(), 39);
        assert_eq!(ELASTIC_KEYS.len(), 38);
    }

    #[test]
    fn the_elastic_form_groups_basics_resources_storage_networking_security_advanced() {
        assert_eq!(ELASTIC_GROUPS, ["Basics", "Resources", "Storage", "Networking", "Security", "Advanced"]);
        let group = |key: &str| ProfileKind::Elastic.spec(key).map(|s| s.group);
        for (key, want) in [
            ("Image", "Basics"),
            ("Sidecars", "Advanced"),
            ("EfsVolumes", "Storage"),
            ("BindMounts", "Storage"),
            ("EphemeralStorageGiB", "Storage"),
            ("Ulimits", "Resources"),
            ("SharedMemoryMiB", "Resources"),
            ("PlatformVersion", "Resources"),
            ("RepositoryCredentialsArn", "Security"),
            ("Secrets", "Security"),
            ("SubnetIds", "Networking"),
            ("StopTimeoutSeconds", "Advanced"),
            ("HealthCheck", "Advanced"),
            ("LogOptions", "Advanced"),
            ("InitProcessEnabled", "Advanced"),
            ("ReuseIdleMinutes", "Advanced"),
            ("ReuseMaxJobs", "Advanced"),
            ("WarmAgents", "Advanced"),
            ("WarmSchedule", "Advanced"),
            ("WarmLaunchType", "Advanced"),
            ("PlacementStrategy", "Advanced"),
            ("PlacementConstraints", "Advanced"),
        ] {
            assert_eq!(group(key), Some(want), "{key}");
        }
    }

    #[test]
    fn lookup_is_exact() {
        assert!(ProfileKind::Cluster.spec("ClusterName").is_some());
        assert!(ProfileKind::Cluster.spec("clustername").is_none());
        assert!(ProfileKind::Elastic.spec("ClusterName").is_none());
        assert_eq!(ProfileKind::Cluster.other(), ProfileKind::Elastic);
    }
}
