//! `doctor` against moto (reached through `AWS_ENDPOINT_URL`, as the SDK reaches AWS): a healthy
//! profile passes, and a missing cluster, a bad subnet, a security group of another VPC, a role
//! that cannot be assumed (refused by the proxy, as STS refuses it), FARGATE_SPOT without its
//! capacity provider, a capacity provider strategy naming providers the cluster lacks (or ECS
//! does not know) and a broken EC2 set-up each FAIL with a fix; an ECS Managed Instances provider
//! is named by its kind; tasks that could reach neither the registry nor the server (no public
//! IP behind an internet gateway, no NAT and no endpoints, outbound rules) FAIL the reach
//! check; security groups that block the ports builds check out over warn, per profile; a Docker
//! Hub image pulled anonymously through a NAT gateway warns; a GoServerUrl no GoCD server answers
//! at FAILs; an ECR image without a SOCI index warns with its pulls measured in the last hour; the
//! identity's own IAM policies are compared with the actions `iam-policy` lists (a missing action
//! warns, an unreadable policy is a skipped check); no secret is ever printed.
//!
//! Needs `MOTO_SERVER` (see `scripts/moto.sh`).

use crate::world;
use std::path::PathBuf;
use std::time::Duration;

use crate::world::moto::{self, Moto, REGION, TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY};
use crate::world::proxy::rules;
use crate::world::starts::TaskStarts;
use crate::world::Proxy;
use aws_config::SdkConfig;
use ecs_elastic_agent::cluster::base::identity::{cluster_key, TAG_CLUSTER_PROFILE, TAG_SERVER_ID};

const ROLE_ARN: &str = "arn:aws:iam::111111111111:role/gocd-agents";

/// What one doctor run said.
#[derive(Debug)]
struct Doctor {
    code: Option<i32>,
    lines: Vec<String>,
    stderr: String,
}

impl Doctor {
    /// The line of a check.
    #[track_caller]
    fn line(&self, check: &str) -> &str {
        self.lines
            .iter()
            .find(|l| l.get(5..).is_some_and(|rest| rest.starts_with(&format!("{check}: "))))
            .unwrap_or_else(|| panic!("no {check} line in:\n{}", self.lines.join("\n")))
    }

    #[track_caller]
    fn verdict(&self, check: &str) -> &str {
        self.line(check).split_whitespace().next().unwrap_or("")
    }

    fn fails(&self) -> Vec<&String> {
        self.lines.iter().filter(|l| l.starts_with("FAIL")).collect()
    }
}

fn profile_file(props: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ecs-ea-doctor-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cluster.json");
    let map: serde_json::Map<String, serde_json::Value> =
        props.iter().map(|(k, v)| (k.to_string(), (*v).into())).collect();
    std::fs::write(&path, serde_json::Value::Object(map).to_string()).unwrap();
    path
}

/// Runs `doctor` with the test keys and `endpoint` as AWS, like the host starts the plugin.
/// Tasks in moto's default VPC reach the internet through its internet gateway, so the profile
/// gets `AssignPublicIp` `true` unless the test sets it (`reach_...` tests the rest).
async fn doctor(endpoint: &str, props: &[(&str, &str)], extra: &[&str]) -> Doctor {
    doctor_as(endpoint, props, extra, None).await
}

/// [`doctor`] with other keys than the test keys, when given.
async fn doctor_as(
    endpoint: &str,
    props: &[(&str, &str)],
    extra: &[&str],
    keys: Option<&moto::StaticCredentials>,
) -> Doctor {
    let mut props = props.to_vec();
    if !props.iter().any(|(k, _)| *k == "AssignPublicIp") {
        props.push(("AssignPublicIp", "true"));
    }
    let path = profile_file(&props);
    let mut cmd = crate::world::moto::operator_command(endpoint, Some(REGION));
    if let Some(keys) = keys {
        cmd.env("AWS_ACCESS_KEY_ID", &keys.access_key_id).env("AWS_SECRET_ACCESS_KEY", &keys.secret_access_key);
    }
    cmd.arg("doctor").arg("--cluster-profile").arg(&path).args(["--timeout", "20"]).args(extra);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("doctor finished in time")
        .expect("run doctor");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("doctor {props:?}:\n{stdout}{stderr}");
    let given = keys.map(|k| k.secret_access_key.as_str());
    for secret in [TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY].into_iter().chain(given) {
        assert!(!stdout.contains(secret) && !stderr.contains(secret), "doctor printed a secret");
    }
    let lines: Vec<String> = stdout.lines().map(str::to_string).collect();
    for l in &lines {
        let verdict = l.split_whitespace().next().unwrap_or("");
        assert!(["ok", "warn", "FAIL"].contains(&verdict), "every line starts with a verdict: {l:?}");
        if verdict == "FAIL" {
            assert!(l.contains("; fix: "), "every FAIL says how to fix it: {l:?}");
        }
    }
    Doctor { code: out.status.code(), lines, stderr }
}

async fn world() -> (Moto, SdkConfig) {
    let moto = Moto::start().await;
    let base = moto.base_config().await;
    internet_gateway_of_the_default_vpc(&base).await;
    (moto, base)
}

/// AWS makes every default VPC with an internet gateway and a default route to it in its main
/// route table; moto makes neither. Adds them, as AWS has them.
async fn internet_gateway_of_the_default_vpc(base: &SdkConfig) {
    let net = moto::default_network(base).await;
    let ec2 = aws_sdk_ec2::Client::new(base);
    let igw = ec2.create_internet_gateway().send().await.unwrap();
    let igw = igw.internet_gateway().unwrap().internet_gateway_id().unwrap().to_string();
    ec2.attach_internet_gateway().internet_gateway_id(&igw).vpc_id(&net.vpc_id).send().await.unwrap();
    let main = ec2
        .describe_route_tables()
        .filters(aws_sdk_ec2::types::Filter::builder().name("vpc-id").values(&net.vpc_id).build())
        .filters(aws_sdk_ec2::types::Filter::builder().name("association.main").values("true").build())
        .send()
        .await
        .unwrap();
    let main = main.route_tables()[0].route_table_id().unwrap().to_string();
    ec2.create_route().route_table_id(&main).destination_cidr_block("0.0.0.0/0").gateway_id(&igw).send().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_fargate_profile_passes() {
    let (moto, base) = world().await;
    moto::create_cluster(&base, "ci").await;
    let d = doctor(
        &moto.endpoint(),
        &[
            ("ClusterName", "ci"),
            ("Region", REGION),
            ("LogGroup", "/gocd/agents"),
            ("GoServerUrl", "https://gocd.example.com/go"),
        ],
        &[],
    )
    .await;
    assert_eq!(d.code, Some(0), "{:?}", d.fails());
    for check in ["profile", "region", "credentials", "role", "cluster", "network", "reach", "server", "tasks"] {
        assert_eq!(d.verdict(check), "ok", "{}", d.line(check));
    }
    assert!(d.line("credentials").contains("account 123456789012"));
    assert!(d.line("cluster").contains("ECS cluster ci is ACTIVE in us-east-1"));
    assert!(d.line("network").contains("the default VPC"), "{}", d.line("network"));
    // moto reports FARGATE as MISSING: a warning that says so.
    assert_eq!(d.verdict("capacity"), "warn");
    assert!(d.line("capacity").contains("MISSING"));
    assert_eq!(d.verdict("log group"), "warn");
    assert!(d.line("log group").contains("not checked"));
    assert!(d.line("launch").contains("checked by ListTasks only"));
    assert!(!d.stderr.contains("ERROR"), "{}", d.stderr);
}

/// Tasks that could reach neither the registry nor the server: a public subnet without a public
/// IP, a private subnet with no NAT and no endpoints (then with them), a security group that lets
/// nothing out, a server port the group does not allow; and a private subnet through NAT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reach_fails_where_tasks_could_not_pull_or_register() {
    let (moto, base) = world().await;
    moto::create_cluster(&base, "ci").await;
    let net = moto::default_network(&base).await;
    let ec2 = aws_sdk_ec2::Client::new(&base);
    let base_props = [("ClusterName", "ci"), ("Region", REGION)];
    let with = |extra: &[(&'static str, &str)]| -> Vec<(&'static str, String)> {
        base_props.iter().chain(extra).map(|(k, v)| (*k, v.to_string())).collect()
    };
    let run = |props: Vec<(&'static str, String)>| {
        let endpoint = moto.endpoint();
        async move {
            let props: Vec<(&str, &str)> = props.iter().map(|(k, v)| (*k, v.as_str())).collect();
            doctor(&endpoint, &props, &[]).await
        }
    };

    // The default VPC's subnets route to its internet gateway: no public IP, no way out.
    let d = run(with(&[("AssignPublicIp", "false")])).await;
    assert_eq!(d.code, Some(1));
    assert_eq!(d.verdict("reach"), "FAIL");
    assert!(d.line("reach").contains("internet gateway igw-"), "{}", d.line("reach"));
    assert!(d.line("reach").contains("fix: set AssignPublicIp to true"), "{}", d.line("reach"));
    assert_eq!(d.verdict("server"), "warn", "GoServerUrl unset: {}", d.line("server"));
    assert!(d.line("server").contains("agents get the GoCD server's site URL"), "{}", d.line("server"));
    assert!(d.line("server").contains("ecs-elastic-agent try ... --server-url URL"), "{}", d.line("server"));

    // A private subnet: its own route table, no default route, no endpoints.
    let subnet = ec2
        .create_subnet()
        .vpc_id(&net.vpc_id)
        .cidr_block("172.31.200.0/24")
        .availability_zone(format!("{REGION}a"))
        .send()
        .await
        .unwrap();
    let subnet = subnet.subnet().unwrap().subnet_id().unwrap().to_string();
    let table = ec2.create_route_table().vpc_id(&net.vpc_id).send().await.unwrap();
    let table = table.route_table().unwrap().route_table_id().unwrap().to_string();
    ec2.associate_route_table().route_table_id(&table).subnet_id(&subnet).send().await.unwrap();
    let private =
        with(&[("SubnetIds", &subnet), ("SecurityGroupIds", &net.security_group_id), ("AssignPublicIp", "false")]);
    let d = run(private.clone()).await;
    assert_eq!(d.verdict("reach"), "FAIL");
    assert!(d.line("reach").contains(&format!("subnet(s) {subnet} have no default route")), "{}", d.line("reach"));
    assert!(d.line("reach").contains(&format!("com.amazonaws.{REGION}.ecr.dkr")), "{}", d.line("reach"));

    // With ECR's and S3's endpoints it works, with a warning about what endpoints cannot reach.
    for service in ["ecr.api", "ecr.dkr", "s3"] {
        ec2.create_vpc_endpoint()
            .vpc_id(&net.vpc_id)
            .service_name(format!("com.amazonaws.{REGION}.{service}"))
            .send()
            .await
            .unwrap();
    }
    let d = run(private.clone()).await;
    assert_eq!(d.verdict("reach"), "warn", "{}", d.line("reach"));
    assert!(d.line("reach").contains("through VPC endpoints only"), "{}", d.line("reach"));

    // Through a NAT gateway: fine.
    let nat = ec2.create_nat_gateway().subnet_id(&net.subnet_ids[0]).send().await.unwrap();
    let nat = nat.nat_gateway().unwrap().nat_gateway_id().unwrap().to_string();
    ec2.create_route()
        .route_table_id(&table)
        .destination_cidr_block("0.0.0.0/0")
        .nat_gateway_id(&nat)
        .send()
        .await
        .unwrap();
    let d = run(private.clone()).await;
    assert_eq!(d.verdict("reach"), "ok", "{}", d.line("reach"));
    assert!(d.line("reach").contains(&format!("through NAT gateway {nat}")), "{}", d.line("reach"));

    // A group that lets only TCP 443 out: the registry yes, a server on 8153 no.
    let group = ec2
        .create_security_group()
        .group_name("https-only")
        .description("test")
        .vpc_id(&net.vpc_id)
        .send()
        .await
        .unwrap();
    let group = group.group_id().unwrap().to_string();
    ec2.revoke_security_group_egress()
        .group_id(&group)
        .ip_permissions(
            aws_sdk_ec2::types::IpPermission::builder()
                .ip_protocol("-1")
                .ip_ranges(aws_sdk_ec2::types::IpRange::builder().cidr_ip("0.0.0.0/0").build())
                .build(),
        )
        .send()
        .await
        .unwrap();
    let d = run(with(&[("SubnetIds", &subnet), ("SecurityGroupIds", &group)])).await;
    assert_eq!(d.verdict("reach"), "FAIL");
    assert!(d.line("reach").contains("let no TCP 443 out"), "{}", d.line("reach"));
    ec2.authorize_security_group_egress()
        .group_id(&group)
        .ip_permissions(
            aws_sdk_ec2::types::IpPermission::builder()
                .ip_protocol("tcp")
                .from_port(443)
                .to_port(443)
                .ip_ranges(aws_sdk_ec2::types::IpRange::builder().cidr_ip("0.0.0.0/0").build())
                .build(),
        )
        .send()
        .await
        .unwrap();
    let d = run(with(&[
        ("SubnetIds", &subnet),
        ("SecurityGroupIds", &group),
        ("GoServerUrl", "http://gocd.example.com:8153/go"),
    ]))
    .await;
    assert_eq!(d.verdict("reach"), "ok", "{}", d.line("reach"));
    assert_eq!(d.verdict("server"), "FAIL");
    assert!(d.line("server").contains("let no TCP 8153 out"), "{}", d.line("server"));
}

/// A security group of `vpc` that lets only TCP 443 out to the internet, its rule described
/// "HTTPS".
async fn https_only_group(ec2: &aws_sdk_ec2::Client, vpc: &str, name: &str) -> String {
    let group = ec2.create_security_group().group_name(name).description("test").vpc_id(vpc).send().await.unwrap();
    let group = group.group_id().unwrap().to_string();
    ec2.revoke_security_group_egress()
        .group_id(&group)
        .ip_permissions(
            aws_sdk_ec2::types::IpPermission::builder()
                .ip_protocol("-1")
                .ip_ranges(aws_sdk_ec2::types::IpRange::builder().cidr_ip("0.0.0.0/0").build())
                .build(),
        )
        .send()
        .await
        .unwrap();
    ec2.authorize_security_group_egress()
        .group_id(&group)
        .ip_permissions(
            aws_sdk_ec2::types::IpPermission::builder()
                .ip_protocol("tcp")
                .from_port(443)
                .to_port(443)
                .ip_ranges(aws_sdk_ec2::types::IpRange::builder().cidr_ip("0.0.0.0/0").description("HTTPS").build())
                .build(),
        )
        .send()
        .await
        .unwrap();
    group
}

/// The lines of one check.
fn lines_of<'a>(d: &'a Doctor, check: &str) -> Vec<&'a String> {
    d.lines.iter().filter(|l| l.get(5..).is_some_and(|r| r.starts_with(&format!("{check}: ")))).collect()
}

/// The ports builds check out over, per set of security groups: the cluster profile's group lets
/// only HTTPS out (a warning naming SSH and git://, the group and its rule, shared by the elastic
/// profile that sets no groups of its own), an elastic profile's own group lets all traffic out
/// (ok, on its own line). A GoServerUrl on the TLS port GoCD servers no longer open FAILs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn egress_warns_of_blocked_checkout_ports_per_set_of_groups() {
    let (moto, base) = world().await;
    moto::create_cluster(&base, "ci").await;
    let net = moto::default_network(&base).await;
    let ec2 = aws_sdk_ec2::Client::new(&base);
    let https_only = https_only_group(&ec2, &net.vpc_id, "https-only").await;
    let image = ("Image", "gocd/gocd-agent-alpine-3.19:v24.1.0");
    let shares = profile_file(&[image]).display().to_string();
    let own = profile_file(&[image, ("SecurityGroupIds", net.security_group_id.as_str())]).display().to_string();
    let cluster = [
        ("ClusterName", "ci"),
        ("Region", REGION),
        ("SecurityGroupIds", https_only.as_str()),
        ("GoServerUrl", "https://gocd.example.com:8154/go"),
    ];
    let d = doctor(&moto.endpoint(), &cluster, &["--elastic-profile", &shares, "--elastic-profile", &own]).await;
    assert_eq!(d.code, Some(1));
    let egress = lines_of(&d, "egress");
    assert_eq!(egress.len(), 2, "{egress:#?}");
    let blocked = egress[0];
    assert!(blocked.starts_with(&format!("warn egress: the cluster profile, {shares}: ")), "{blocked}");
    for said in [
        format!("security group(s) {https_only} let no TCP 22, 9418 and 80 out to the internet (0.0.0.0/0)"),
        "builds that check out over SSH (22) will fail".to_string(),
        "git:// (9418)".to_string(),
        "plain HTTP (80)".to_string(),
        format!(r#"their outbound rules: {https_only}: tcp 443 to 0.0.0.0/0 ("HTTPS")"#),
        "the VPC's default security group lets all traffic out".to_string(),
    ] {
        assert!(blocked.contains(&said), "{said:?} in {blocked}");
    }
    assert!(
        egress[1].starts_with(&format!(
            "ok   egress: {own}: security group(s) {} let all traffic out",
            net.security_group_id
        )),
        "{egress:#?}"
    );
    assert_eq!(d.verdict("server"), "FAIL", "{}", d.line("server"));
    assert!(d.line("server").contains("before 20.6"), "{}", d.line("server"));
    assert!(
        d.line("server").contains(
            "fix: a stock GoCD server answers plain HTTP on 8153: http://gocd.example.com:8153/go; TLS is a \
             reverse proxy's, usually https://gocd.example.com/go"
        ),
        "{}",
        d.line("server")
    );
    assert!(lines_of(&d, "image").is_empty(), "public IPs behind an internet gateway: {:#?}", lines_of(&d, "image"));

    // The default group lets all traffic out: one ok line for the cluster profile and both.
    let cluster = [("ClusterName", "ci"), ("Region", REGION), ("GoServerUrl", "http://gocd.example.com:8153/go")];
    let d = doctor(&moto.endpoint(), &cluster, &["--elastic-profile", &shares, "--elastic-profile", &own]).await;
    let egress = lines_of(&d, "egress");
    assert_eq!(egress.len(), 1, "{egress:#?}");
    assert!(egress[0].starts_with(&format!("ok   egress: the cluster profile, {shares}, {own}: ")), "{egress:#?}");
    assert!(egress[0].ends_with("let all traffic out"), "{egress:#?}");
    assert_eq!(d.verdict("server"), "ok", "{}", d.line("server"));
}

/// Tasks in subnets routed through a NAT gateway pulling a Docker Hub image anonymously share
/// the NAT's one address against Docker Hub's pull limit: a warning with the ECR pull-through
/// cache to use. An ECR image, and a profile with registry credentials, are not warned about.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_hub_image_behind_a_nat_gateway_warns() {
    let (moto, base) = world().await;
    moto::create_cluster(&base, "ci").await;
    let net = moto::default_network(&base).await;
    let ec2 = aws_sdk_ec2::Client::new(&base);
    let subnet = ec2
        .create_subnet()
        .vpc_id(&net.vpc_id)
        .cidr_block("172.31.201.0/24")
        .availability_zone(format!("{REGION}a"))
        .send()
        .await
        .unwrap();
    let subnet = subnet.subnet().unwrap().subnet_id().unwrap().to_string();
    let table = ec2.create_route_table().vpc_id(&net.vpc_id).send().await.unwrap();
    let table = table.route_table().unwrap().route_table_id().unwrap().to_string();
    ec2.associate_route_table().route_table_id(&table).subnet_id(&subnet).send().await.unwrap();
    let nat = ec2.create_nat_gateway().subnet_id(&net.subnet_ids[0]).send().await.unwrap();
    let nat = nat.nat_gateway().unwrap().nat_gateway_id().unwrap().to_string();
    ec2.create_route()
        .route_table_id(&table)
        .destination_cidr_block("0.0.0.0/0")
        .nat_gateway_id(&nat)
        .send()
        .await
        .unwrap();
    let hub = profile_file(&[("Image", "gocd/gocd-agent-alpine-3.19:v24.1.0")]).display().to_string();
    let ecr = profile_file(&[
        ("Image", "123456789012.dkr.ecr.us-east-1.amazonaws.com/gocd/gocd-agent:v24.1.0"),
        ("ExecutionRoleArn", "arn:aws:iam::123456789012:role/ecsTaskExecutionRole"),
    ])
    .display()
    .to_string();
    let credentials = profile_file(&[
        ("Image", "gocd/gocd-agent-alpine-3.19:v24.1.0"),
        ("RepositoryCredentialsArn", "arn:aws:secretsmanager:us-east-1:123456789012:secret:ci/hub-AbCdEf"),
        ("ExecutionRoleArn", "arn:aws:iam::123456789012:role/ecsTaskExecutionRole"),
    ])
    .display()
    .to_string();
    let cluster = [("ClusterName", "ci"), ("Region", REGION), ("SubnetIds", &subnet), ("AssignPublicIp", "false")];
    let args = ["--elastic-profile", &hub, "--elastic-profile", &ecr, "--elastic-profile", &credentials];
    let d = doctor(&moto.endpoint(), &cluster, &args).await;
    assert_eq!(d.verdict("reach"), "ok", "{}", d.line("reach"));
    let image = lines_of(&d, "image");
    assert_eq!(image.len(), 1, "only the anonymous Docker Hub pull: {image:#?}");
    let line = image[0];
    assert!(line.starts_with(&format!("warn image: {hub}: gocd/gocd-agent-alpine-3.19:v24.1.0 is pulled anonymously from Docker Hub through NAT gateway(s) {nat} (subnet(s) {subnet})")), "{line}");
    assert!(line.contains("anonymous pull limit per address"), "{line}");
    assert!(line.contains("billed as NAT data"), "{line}");
    assert!(
        line.contains(
            "fix: pull through an ECR pull-through cache, Image \
             123456789012.dkr.ecr.us-east-1.amazonaws.com/docker-hub/gocd/gocd-agent-alpine-3.19:v24.1.0"
        ),
        "{line}"
    );
    assert!(line.contains("DockerHubCredentialsSecretArn"), "{line}");
    assert!(line.contains("set RepositoryCredentialsArn"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_cluster_and_bad_networking_fail_with_fixes() {
    let (moto, base) = world().await;
    let d = doctor(&moto.endpoint(), &[("ClusterName", "nope"), ("Region", REGION)], &[]).await;
    assert_eq!(d.code, Some(1));
    assert_eq!(d.verdict("cluster"), "FAIL");
    assert!(
        d.line("cluster").contains("ECS cluster nope does not exist in us-east-1 of account 123456789012"),
        "{}",
        d.line("cluster")
    );
    assert!(d.line("cluster").contains("aws ecs create-cluster --cluster-name nope"));
    assert_eq!(d.verdict("network"), "ok", "the other checks still run");

    moto::create_cluster(&base, "ci").await;
    let d = doctor(
        &moto.endpoint(),
        &[("ClusterName", "ci"), ("Region", REGION), ("SubnetIds", "subnet-0123456789abcdef0")],
        &[],
    )
    .await;
    assert_eq!(d.code, Some(1));
    assert_eq!(d.verdict("cluster"), "ok");
    assert_eq!(d.verdict("network"), "FAIL");
    assert!(d.line("network").contains("subnet-0123456789abcdef0"), "{}", d.line("network"));

    // A security group of another VPC than the subnets.
    let net = moto::default_network(&base).await;
    let ec2 = aws_sdk_ec2::Client::new(&base);
    let vpc =
        ec2.create_vpc().cidr_block("10.99.0.0/16").send().await.unwrap().vpc().unwrap().vpc_id().unwrap().to_string();
    let group =
        ec2.create_security_group().group_name("elsewhere").description("test").vpc_id(&vpc).send().await.unwrap();
    let group = group.group_id().unwrap().to_string();
    let subnet = net.subnet_ids[0].clone();
    let d = doctor(
        &moto.endpoint(),
        &[("ClusterName", "ci"), ("Region", REGION), ("SubnetIds", &subnet), ("SecurityGroupIds", &group)],
        &[],
    )
    .await;
    assert_eq!(d.verdict("network"), "FAIL");
    assert!(
        d.line("network")
            .contains(&format!("security group {group} is in {vpc} but the subnets are in {}", net.vpc_id)),
        "{}",
        d.line("network")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_role_is_assumed_as_the_plugin_assumes_it() {
    let (moto, _base) = world().await;
    let proxy = Proxy::start(moto.addr()).await;
    let role = moto.assume_role_config(ROLE_ARN).await;
    moto::create_cluster(&role.config, "team-b").await;
    internet_gateway_of_the_default_vpc(&role.config).await;
    let props = [("ClusterName", "team-b"), ("Region", REGION), ("RoleArn", ROLE_ARN)];
    let d = doctor(&proxy.endpoint(), &props, &["--server-id", "server-1"]).await;
    assert_eq!(d.code, Some(0), "{:?}", d.fails());
    assert!(d.line("role").contains("external id gocd:server-id:server-1"), "{}", d.line("role"));
    assert!(d.line("cluster").contains("account 111111111111"), "the checks act in the role's account");
    let assumed = proxy.log().iter().filter(|r| r.key() == "sts:AssumeRole").count();
    assert!(assumed >= 1);

    proxy.add_rule("deny", rules::deny_assume_role(ROLE_ARN));
    let d = doctor(&proxy.endpoint(), &props, &[]).await;
    assert_eq!(d.code, Some(1));
    assert_eq!(d.verdict("role"), "FAIL");
    assert!(d.line("role").contains("cannot assume arn:aws:iam::111111111111:role/gocd-agents"), "{}", d.line("role"));
    assert!(
        d.line("role").contains("AccessDenied: User: arn:aws:iam::123456789012:user/gocd is not authorized"),
        "{}",
        d.line("role")
    );
    assert!(d.line("role").len() < 600, "one readable sentence: {}", d.line("role"));
    assert_eq!(d.verdict("external id"), "warn", "without --server-id it says which external id it used");
    assert!(d.line("other checks").contains("skipped"));
}

/// The policy `iam-policy` prints for `props` (written as doctor gets them).
fn printed_policy(props: &[(&str, &str)]) -> serde_json::Value {
    let out = std::process::Command::new(crate::world::host::plugin_binary())
        .arg("iam-policy")
        .arg("--cluster-profile")
        .arg(profile_file(props))
        .env("RUST_LOG", "off")
        .output()
        .expect("run iam-policy");
    assert!(out.status.success(), "iam-policy: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("iam-policy prints JSON")
}

/// The actions a statement names (a string or an array).
fn statement_actions(s: &serde_json::Value) -> Vec<String> {
    match &s["Action"] {
        serde_json::Value::String(a) => vec![a.clone()],
        other => other.as_array().into_iter().flatten().filter_map(|a| a.as_str().map(str::to_string)).collect(),
    }
}

/// `{"Version": .., "Statement": statements}`.
fn policy_of(statements: Vec<serde_json::Value>) -> String {
    serde_json::json!({"Version": "2012-10-17", "Statement": statements}).to_string()
}

/// The managed policy `name` made of `document`, attached to role `role`.
async fn attach_managed(iam: &aws_sdk_iam::Client, role: &str, name: &str, document: &str) {
    let made = iam
        .create_policy()
        .policy_name(name)
        .policy_document(document)
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreatePolicy {name}: {}", moto::aws_error_text(&e)));
    let arn = made.policy().and_then(|p| p.arn()).expect("a policy ARN");
    iam.attach_role_policy().role_name(role).policy_arn(arn).send().await.expect("AttachRolePolicy");
}

async fn create_role(iam: &aws_sdk_iam::Client, name: &str) {
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"Action":"sts:AssumeRole"}]}"#;
    iam.create_role()
        .role_name(name)
        .assume_role_policy_document(trust)
        .send()
        .await
        .unwrap_or_else(|e| panic!("CreateRole {name}: {}", moto::aws_error_text(&e)));
}

/// `permissions`: the identity's own policies (read through IAM: GetRole,
/// ListAttachedRolePolicies, GetPolicy, GetPolicyVersion, ListRolePolicies, GetRolePolicy; a
/// user's with its groups') against the actions `iam-policy` lists for the profile. A role
/// holding the printed policy passes; a role whose managed and inline policies (with a wildcard
/// and an action in other case) lack `ecs:RunTask` and `ec2:RunInstances` of an EC2 profile is
/// warned of exactly those; a user whose group holds the policy passes; a caller that may not
/// read IAM gets the skipped line naming the reads it needs, and doctor still passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permissions_compare_the_identitys_policies_with_what_iam_policy_lists() {
    let (moto, base) = world().await;
    const FULL: &str = "arn:aws:iam::111111111111:role/gocd-full";
    const SHORT: &str = "arn:aws:iam::111111111111:role/gocd-short";
    let role = moto.assume_role_config(FULL).await;
    moto::create_cluster(&role.config, "team-b").await;
    internet_gateway_of_the_default_vpc(&role.config).await;
    let iam = aws_sdk_iam::Client::new(&role.config);

    // The printed policy, as a managed policy of the role.
    let fargate = [("ClusterName", "team-b"), ("Region", REGION), ("RoleArn", FULL), ("AssignPublicIp", "true")];
    create_role(&iam, "gocd-full").await;
    attach_managed(&iam, "gocd-full", "gocd-full", &printed_policy(&fargate).to_string()).await;
    let d = doctor(&moto.endpoint(), &fargate, &["--server-id", "server-1"]).await;
    assert_eq!(d.code, Some(0), "{:?}", d.fails());
    let line = d.line("permissions");
    assert!(line.starts_with("ok   permissions: the policies of role arn:aws:iam::111111111111:role/gocd-full (managed policy arn:aws:iam::111111111111:policy/gocd-full) allow all "), "{line}");
    assert!(line.contains("actions only: resources, conditions, permission boundaries, SCPs"), "{line}");

    // An EC2 profile's policy without ecs:RunTask and ec2:RunInstances, the ECS part managed and
    // the rest inline, the networking reads as ec2:Describe* and ecs:ListTasks in lower case.
    let ec2 = [
        ("ClusterName", "team-b"),
        ("Region", REGION),
        ("LaunchType", "EC2"),
        ("Ec2InstanceType", "c5.xlarge"),
        ("Ec2InstanceProfile", "gocd-ecs-instance"),
        ("Ec2AmiId", "ami-0abcdef1234567890"),
        ("RoleArn", SHORT),
        ("AssignPublicIp", "true"),
    ];
    let printed = printed_policy(&ec2);
    let (mut ecs_part, mut rest) = (Vec::new(), Vec::new());
    for s in printed["Statement"].as_array().expect("statements") {
        let mut s = s.clone();
        let mut actions: Vec<String> =
            statement_actions(&s).into_iter().filter(|a| a != "ecs:RunTask" && a != "ec2:RunInstances").collect();
        if s["Sid"] == "DescribeNetworking" {
            actions = vec!["ec2:Describe*".into()];
        }
        if s["Sid"] == "ListTasksOfTheCluster" {
            actions = vec!["ECS:listtasks".into()];
        }
        if actions.is_empty() {
            continue;
        }
        s["Action"] = serde_json::json!(actions);
        if actions.iter().all(|a| a.to_ascii_lowercase().starts_with("ecs:")) {
            ecs_part.push(s);
        } else {
            rest.push(s);
        }
    }
    create_role(&iam, "gocd-short").await;
    attach_managed(&iam, "gocd-short", "gocd-short-ecs", &policy_of(ecs_part)).await;
    iam.put_role_policy()
        .role_name("gocd-short")
        .policy_name("gocd-short-rest")
        .policy_document(policy_of(rest))
        .send()
        .await
        .unwrap_or_else(|e| panic!("PutRolePolicy: {}", moto::aws_error_text(&e)));
    let d = doctor(&moto.endpoint(), &ec2, &["--server-id", "server-1"]).await;
    let line = d.line("permissions");
    assert!(line.starts_with("warn permissions: the policies of role arn:aws:iam::111111111111:role/gocd-short (managed policy arn:aws:iam::111111111111:policy/gocd-short-ecs, inline policy gocd-short-rest) do not allow "), "{line}");
    let named = line.split(" do not allow ").nth(1).and_then(|r| r.split(" (").next()).expect("the actions named");
    assert_eq!(named, "ecs:RunTask, ec2:RunInstances", "{line}");
    assert!(line.contains("actions only"), "{line}");
    assert!(
        line.contains("fix: add these actions, or attach the policy `ecs-elastic-agent iam-policy` prints; with the CloudFormation stack, update it to this version's template"),
        "{line}"
    );
    assert_eq!(lines_of(&d, "permissions").len(), 1, "no Deny, nothing else to say");

    // A user whose group holds the policy: the group's policies count.
    let base_iam = aws_sdk_iam::Client::new(&base);
    base_iam.create_user().user_name("gocd").send().await.expect("CreateUser");
    let key = base_iam.create_access_key().user_name("gocd").send().await.expect("CreateAccessKey");
    let key = key.access_key().expect("an access key");
    let keys = moto::StaticCredentials {
        access_key_id: key.access_key_id().to_string(),
        secret_access_key: key.secret_access_key().to_string(),
        session_token: None,
    };
    base_iam.create_group().group_name("gocd-servers").send().await.expect("CreateGroup");
    base_iam.add_user_to_group().group_name("gocd-servers").user_name("gocd").send().await.expect("AddUserToGroup");
    moto::create_cluster(&base, "ci").await;
    let plain = [("ClusterName", "ci"), ("Region", REGION), ("AssignPublicIp", "true")];
    base_iam
        .put_group_policy()
        .group_name("gocd-servers")
        .policy_name("gocd")
        .policy_document(printed_policy(&plain).to_string())
        .send()
        .await
        .unwrap_or_else(|e| panic!("PutGroupPolicy: {}", moto::aws_error_text(&e)));
    let d = doctor_as(&moto.endpoint(), &plain, &[], Some(&keys)).await;
    assert!(d.line("credentials").contains("arn:aws:iam::123456789012:user/gocd"), "{}", d.line("credentials"));
    let line = d.line("permissions");
    assert!(line.starts_with("ok   permissions: the policies of user arn:aws:iam::123456789012:user/gocd (group gocd-servers's inline policy gocd) allow all "), "{line}");

    // A caller that may not read IAM: skipped, with the reads it needs; doctor passes.
    let proxy = Proxy::start(moto.addr()).await;
    proxy.add_rule("no IAM reads", |call: &crate::world::proxy::Call| {
        if call.service == "iam" {
            let message = format!(
                "User: arn:aws:sts::111111111111:assumed-role/gocd-full/gocd is not authorized to perform: iam:{}",
                call.operation
            );
            crate::world::proxy::Verdict::sts_error(403, "AccessDenied", &message)
        } else {
            crate::world::proxy::Verdict::Forward
        }
    });
    let d = doctor(&proxy.endpoint(), &fargate, &["--server-id", "server-1"]).await;
    assert_eq!(d.code, Some(0), "an unreadable policy never fails doctor: {:?}", d.fails());
    let line = d.line("permissions");
    assert!(
        line.starts_with(
            "warn permissions: not checked: reading the policies of role gocd-full was refused (AccessDenied: "
        ),
        "{line}"
    );
    assert!(
        line.contains("the check needs iam:GetRole, iam:ListAttachedRolePolicies, iam:ListRolePolicies, iam:GetRolePolicy, iam:GetPolicy, iam:GetPolicyVersion on the identity itself"),
        "{line}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fargate_spot_needs_its_capacity_provider_on_the_cluster() {
    let (moto, base) = world().await;
    moto::create_cluster(&base, "spot").await;
    let props = [("ClusterName", "spot"), ("Region", REGION), ("LaunchType", "FARGATE_SPOT")];
    let d = doctor(&moto.endpoint(), &props, &[]).await;
    assert_eq!(d.code, Some(1));
    let capacity: Vec<&String> = d.lines.iter().filter(|l| l.contains(" capacity: ")).collect();
    assert!(
        capacity.iter().any(|l| l.starts_with("FAIL") && l.contains("put-cluster-capacity-providers")),
        "{capacity:?}"
    );

    let ecs = aws_sdk_ecs::Client::new(&base);
    ecs.put_cluster_capacity_providers()
        .cluster("spot")
        .capacity_providers("FARGATE")
        .capacity_providers("FARGATE_SPOT")
        .set_default_capacity_provider_strategy(Some(vec![]))
        .send()
        .await
        .expect("PutClusterCapacityProviders");
    let d = doctor(&moto.endpoint(), &props, &[]).await;
    assert_eq!(d.code, Some(0), "{:?}", d.fails());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capacity_provider_strategy_needs_its_providers_on_the_cluster() {
    let (moto, base) = world().await;
    moto::create_cluster(&base, "cp").await;
    let props = [("ClusterName", "cp"), ("Region", REGION), ("CapacityProviderStrategy", "FARGATE_SPOT:1\nFARGATE:0")];
    let d = doctor(&moto.endpoint(), &props, &[]).await;
    assert_eq!(d.code, Some(1));
    let capacity: Vec<&String> = d.lines.iter().filter(|l| l.contains(" capacity: ")).collect();
    assert!(
        capacity.iter().any(|l| l.starts_with("FAIL") && l.contains("FARGATE_SPOT, FARGATE not a capacity provider")),
        "{capacity:?}"
    );
    let default = [("ClusterName", "cp"), ("Region", REGION), ("CapacityProviderStrategy", "default")];
    let d = doctor(&moto.endpoint(), &default, &[]).await;
    assert!(
        d.lines.iter().any(|l| l.starts_with("FAIL") && l.contains("no default capacity provider strategy")),
        "{:?}",
        d.lines
    );

    let ecs = aws_sdk_ecs::Client::new(&base);
    let fargate = aws_sdk_ecs::types::CapacityProviderStrategyItem::builder()
        .capacity_provider("FARGATE")
        .weight(1)
        .build()
        .expect("an item");
    ecs.put_cluster_capacity_providers()
        .cluster("cp")
        .capacity_providers("FARGATE")
        .capacity_providers("FARGATE_SPOT")
        .default_capacity_provider_strategy(fargate)
        .send()
        .await
        .expect("PutClusterCapacityProviders");
    let d = doctor(&moto.endpoint(), &props, &[]).await;
    assert_eq!(d.code, Some(0), "{:?}", d.fails());
    let d = doctor(&moto.endpoint(), &default, &[]).await;
    assert_eq!(d.code, Some(0), "{:?}", d.fails());
}

/// The capacity lines of a doctor run.
fn capacity_lines(d: &Doctor) -> Vec<&String> {
    d.lines.iter().filter(|l| l.contains(" capacity: ")).collect()
}

/// An ECS Managed Instances provider (the world's stand-in: the proxy describes it as AWS does,
/// moto's cluster lists it) is named by its kind and ACTIVE; a strategy naming a provider the
/// cluster lacks fails with the `put-cluster-capacity-providers` fix, and one the cluster lists
/// but ECS does not know fails with the fix to create it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managed_instances_provider_is_named_by_kind_and_a_missing_one_fails_with_the_fix() {
    let (moto, base) = world().await;
    let proxy = Proxy::start(moto.addr()).await;
    proxy.managed_instances_provider("ci-mi");
    moto::create_cluster(&base, "mi").await;
    let ecs = aws_sdk_ecs::Client::new(&base);
    ecs.put_cluster_capacity_providers()
        .cluster("mi")
        .capacity_providers("ci-mi")
        .capacity_providers("ci-ghost")
        .set_default_capacity_provider_strategy(Some(vec![]))
        .send()
        .await
        .expect("PutClusterCapacityProviders");

    let props = [("ClusterName", "mi"), ("Region", REGION), ("CapacityProviderStrategy", "ci-mi")];
    let d = doctor(&proxy.endpoint(), &props, &[]).await;
    assert_eq!(d.code, Some(0), "{:?}", d.fails());
    assert_eq!(
        capacity_lines(&d),
        [
            "ok   capacity: capacity providers ci-mi:1:0: each is a capacity provider of cluster mi",
            "ok   capacity: capacity provider ci-mi: ECS Managed Instances, ACTIVE",
        ]
    );
    assert_eq!(proxy.count("ecs:DescribeCapacityProviders"), 1);

    // ci-other is not one of the cluster's providers: FAIL, and the command that adds it.
    let missing = [("ClusterName", "mi"), ("Region", REGION), ("CapacityProviderStrategy", "ci-mi\nci-other:2")];
    let d = doctor(&proxy.endpoint(), &missing, &[]).await;
    assert_eq!(d.code, Some(1));
    let capacity = capacity_lines(&d);
    assert_eq!(capacity.len(), 1, "{capacity:?}");
    assert!(
        capacity[0]
            .starts_with("FAIL capacity: ci-other not a capacity provider of cluster mi (it has: ci-mi, ci-ghost)"),
        "{capacity:?}"
    );
    assert!(
        capacity[0].contains(
            "; fix: aws ecs put-cluster-capacity-providers --cluster mi --capacity-providers ci-mi ci-ghost ci-other"
        ),
        "{capacity:?}"
    );

    // ci-ghost is the cluster's, but ECS describes no such provider (MISSING): FAIL, create it.
    let ghost = [("ClusterName", "mi"), ("Region", REGION), ("CapacityProviderStrategy", "ci-mi\nci-ghost")];
    let d = doctor(&proxy.endpoint(), &ghost, &[]).await;
    assert_eq!(d.code, Some(1));
    let capacity = capacity_lines(&d);
    assert!(capacity.contains(&&"ok   capacity: capacity provider ci-mi: ECS Managed Instances, ACTIVE".to_string()));
    assert!(
        capacity.iter().any(|l| l.starts_with("FAIL capacity: capacity provider ci-ghost does not exist in us-east-1")
            && l.contains("; fix: create it (aws ecs create-capacity-provider --name ci-ghost")),
        "{capacity:?}"
    );
}

/// `doctor --elastic-profile` checks a `TaskDefinitionArn` as create-agent does: one that fits
/// is ok; one ECS Managed Instances cannot run, one whose image the allow-list refuses and one
/// that does not exist each FAIL with what to change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_given_task_definition_is_checked_as_create_agent_checks_it() {
    let (moto, base) = world().await;
    let proxy = Proxy::start(moto.addr()).await;
    proxy.managed_instances_provider("ci-mi");
    moto::create_cluster(&base, "mi").await;
    aws_sdk_ecs::Client::new(&base)
        .put_cluster_capacity_providers()
        .cluster("mi")
        .capacity_providers("ci-mi")
        .set_default_capacity_provider_strategy(Some(vec![]))
        .send()
        .await
        .expect("PutClusterCapacityProviders");
    let image = "gocd/gocd-agent-alpine-3.19:v24.1.0";
    let fits = moto::register_team_task_definition(&base, "team-fits", image, &["FARGATE", "MANAGED_INSTANCES"]).await;
    let fargate_only = moto::register_team_task_definition(&base, "team-fargate-only", image, &["FARGATE"]).await;
    let elsewhere = moto::register_team_task_definition(
        &base,
        "team-elsewhere",
        "quay.io/x/agent:1",
        &["FARGATE", "MANAGED_INSTANCES"],
    )
    .await;
    let missing = "arn:aws:ecs:us-east-1:123456789012:task-definition/team-gone:1";
    let files: Vec<String> = [&fits, &fargate_only, &elsewhere, &missing.to_string()]
        .iter()
        .map(|arn| profile_file(&[("Image", image), ("TaskDefinitionArn", arn.as_str())]).display().to_string())
        .collect();
    let cluster =
        [("ClusterName", "mi"), ("Region", REGION), ("CapacityProviderStrategy", "ci-mi"), ("AllowedImages", "gocd/*")];
    let args: Vec<&str> = files.iter().flat_map(|f| ["--elastic-profile", f.as_str()]).collect();
    let d = doctor(&proxy.endpoint(), &cluster, &args).await;
    assert_eq!(d.code, Some(1));
    let lines: Vec<&String> = d.lines.iter().filter(|l| l.contains(" task definition: ")).collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(
        lines[0].starts_with(&format!("ok   task definition: {}: {fits} meets the allow-lists and suits", files[0])),
        "{lines:?}"
    );
    assert!(
        lines[1].starts_with(&format!("FAIL task definition: {}: ", files[1]))
            && lines[1].contains("ci-mi (ECS Managed Instances) needs MANAGED_INSTANCES")
            && lines[1].contains("Add MANAGED_INSTANCES"),
        "{lines:?}"
    );
    assert!(
        lines[2].starts_with(&format!("FAIL task definition: {}: ", files[2])) && lines[2].contains("AllowedImages"),
        "{lines:?}"
    );
    assert!(
        lines[3].starts_with(&format!("FAIL task definition: {}: ", files[3]))
            && lines[3].contains(&format!("aws ecs describe-task-definition --task-definition {missing}")),
        "{lines:?}"
    );
    assert_eq!(proxy.count("ecs:DescribeCapacityProviders"), 2, "the capacity check's, and the kinds learned once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ec2_checks_the_image_the_instance_profile_and_a_dry_run() {
    let (moto, base) = world().await;
    moto::create_cluster(&base, "ec2").await;
    let ec2 = aws_sdk_ec2::Client::new(&base);
    let images = ec2.describe_images().owners("amazon").send().await.expect("DescribeImages");
    let ami = images.images().iter().find_map(|i| i.image_id()).expect("moto has AMIs").to_string();
    let props = |ami: &str| {
        vec![
            ("ClusterName", "ec2".to_string()),
            ("Region", REGION.to_string()),
            ("LaunchType", "EC2".to_string()),
            ("Ec2InstanceType", "c5.xlarge".to_string()),
            ("Ec2InstanceProfile", "gocd-ecs-instance".to_string()),
            ("Ec2AmiId", ami.to_string()),
        ]
    };
    let run = |p: Vec<(&'static str, String)>| {
        let endpoint = moto.endpoint();
        async move {
            let refs: Vec<(&str, &str)> = p.iter().map(|(k, v)| (*k, v.as_str())).collect();
            doctor(&endpoint, &refs, &[]).await
        }
    };
    let d = run(props("ami-0000000000000dead")).await;
    assert_eq!(d.code, Some(1));
    assert_eq!(d.verdict("ec2 image"), "FAIL");
    assert!(d.line("ec2 image").contains("ami-0000000000000dead"));
    assert_eq!(d.verdict("ec2 instance profile"), "FAIL");
    assert!(d.line("ec2 instance profile").contains("create-instance-profile"), "{}", d.line("ec2 instance profile"));
    assert_eq!(d.verdict("ec2 launch"), "FAIL");

    let iam = aws_sdk_iam::Client::new(&base);
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    iam.create_role()
        .role_name("gocd-ecs-instance")
        .assume_role_policy_document(trust)
        .send()
        .await
        .expect("CreateRole");
    iam.create_instance_profile()
        .instance_profile_name("gocd-ecs-instance")
        .send()
        .await
        .expect("CreateInstanceProfile");
    iam.add_role_to_instance_profile()
        .instance_profile_name("gocd-ecs-instance")
        .role_name("gocd-ecs-instance")
        .send()
        .await
        .expect("AddRole");
    let d = run(props(&ami)).await;
    assert_eq!(d.code, Some(0), "{:?}", d.fails());
    assert!(d.line("ec2 instance profile").contains("with role gocd-ecs-instance"));
    assert!(d.line("ec2 launch").contains("would succeed (dry run)"), "{}", d.line("ec2 launch"));
    assert!(d.line("capacity").contains("0 container instance(s)"));
}

/// Several instance types: each must exist in the region, and each needs a listed AMI of its
/// architecture.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ec2_checks_every_listed_type_has_an_ami_of_its_architecture() {
    let (moto, base) = world().await;
    moto::create_cluster(&base, "ec2").await;
    let x86 = world::ec2::al2023_ami(&base, "x86_64").await;
    let arm = world::ec2::al2023_ami(&base, "arm64").await;
    let run = |types: &str, amis: String| {
        let endpoint = moto.endpoint();
        let types = types.to_string();
        async move {
            let p = [
                ("ClusterName", "ec2"),
                ("Region", REGION),
                ("LaunchType", "EC2"),
                ("Ec2InstanceType", types.as_str()),
                ("Ec2InstanceProfile", "gocd-ecs-instance"),
                ("Ec2AmiId", amis.as_str()),
            ];
            doctor(&endpoint, &p, &[]).await
        }
    };
    let type_lines = |d: &Doctor| -> Vec<String> {
        d.lines.iter().filter(|l| l.get(5..).is_some_and(|r| r.starts_with("ec2 instance type: "))).cloned().collect()
    };
    let d = run("c5.xlarge, c6g.xlarge", x86.clone()).await;
    assert_eq!(d.code, Some(1));
    let lines = type_lines(&d);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("FAIL") && l.contains("c6g.xlarge is arm64, but Ec2AmiId lists no arm64 AMI")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("ok") && l.contains("c5.xlarge exists in us-east-1: x86_64")),
        "{lines:#?}"
    );
    let d = run("c5.xlarge, c6g.xlarge", format!("{x86}, {arm}")).await;
    let lines = type_lines(&d);
    assert!(lines.iter().all(|l| l.starts_with("ok")), "{lines:#?}");
    assert!(lines.iter().any(|l| l.contains("c6g.xlarge exists in us-east-1: arm64")), "{lines:#?}");
    let images: Vec<&String> = d.lines.iter().filter(|l| l.contains("ec2 image: ")).collect();
    assert!(images.len() == 2 && images.iter().all(|l| l.starts_with("ok")), "{images:#?}");
    let d = run("c5.xlarge, zz9.huge", x86).await;
    let lines = type_lines(&d);
    assert!(
        lines.iter().any(|l| l.starts_with("FAIL") && l.contains("zz9.huge that EC2 does not offer")),
        "{lines:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_profiles_stop_before_aws() {
    let d = doctor("http://127.0.0.1:9", &[("ClusterName", "ci"), ("LaunchType", "SUBMARINE")], &[]).await;
    assert_eq!(d.code, Some(1));
    assert_eq!(d.lines.len(), 1, "{:?}", d.lines);
    assert!(d.lines[0].starts_with("FAIL profile: ") && d.lines[0].contains("LaunchType"));
}

/// `doctor --elastic-profile` checks each elastic profile against the cluster profile as
/// create-agent would: a Fargate pair with awslogs and no execution role fails, with a fix;
/// one with the role passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elastic_profiles_are_checked_against_the_cluster_profile() {
    let (moto, base) = world().await;
    moto::create_cluster(&base, "ci").await;
    let without = profile_file(&[("Image", "gocd/gocd-agent-alpine-3.19:v24.1.0")]);
    let with = profile_file(&[
        ("Image", "gocd/gocd-agent-alpine-3.19:v24.1.0"),
        ("ExecutionRoleArn", "arn:aws:iam::123456789012:role/ecsTaskExecutionRole"),
    ]);
    let (without, with) = (without.display().to_string(), with.display().to_string());
    let cluster = [("ClusterName", "ci"), ("Region", REGION), ("LogGroup", "/gocd/agents")];
    let d = doctor(&moto.endpoint(), &cluster, &["--elastic-profile", &without, "--elastic-profile", &with]).await;
    assert_eq!(d.code, Some(1), "a pair that does not fit fails doctor");
    let lines: Vec<&String> = d.lines.iter().filter(|l| l.contains("elastic profile")).collect();
    assert!(
        lines.iter().any(|l| l.starts_with("FAIL") && l.contains(&without) && l.contains("ExecutionRoleArn")),
        "{lines:?}"
    );
    assert!(lines.iter().any(|l| l.starts_with("ok") && l.contains(&with)), "{lines:?}");
}

/// Elastic profiles that mount EFS or pull with registry credentials: the tasks'
/// security groups are checked for outbound NFS; what needs clients doctor does not carry (EFS,
/// Secrets Manager) is a warning naming the command to run. A group without outbound NFS fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn efs_volumes_need_outbound_nfs_and_the_rest_is_named() {
    let (moto, base) = world().await;
    moto::create_cluster(&base, "ci").await;
    let ec2 = aws_sdk_ec2::Client::new(&base);
    let vpc =
        ec2.describe_vpcs().send().await.expect("DescribeVpcs").vpcs()[0].vpc_id().unwrap_or_default().to_string();
    let closed = ec2
        .create_security_group()
        .group_name("no-egress")
        .description("no egress")
        .vpc_id(&vpc)
        .send()
        .await
        .expect("CreateSecurityGroup")
        .group_id()
        .unwrap_or_default()
        .to_string();
    ec2.revoke_security_group_egress()
        .group_id(&closed)
        .ip_permissions(
            aws_sdk_ec2::types::IpPermission::builder()
                .ip_protocol("-1")
                .ip_ranges(aws_sdk_ec2::types::IpRange::builder().cidr_ip("0.0.0.0/0").build())
                .build(),
        )
        .send()
        .await
        .expect("RevokeSecurityGroupEgress");
    let image = ("Image", "gocd/gocd-agent-alpine-3.19:v24.1.0");
    let exec = ("ExecutionRoleArn", "arn:aws:iam::123456789012:role/ecsTaskExecutionRole");
    let registry = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ci/registry-AbCdEf";
    let open =
        profile_file(&[image, exec, ("EfsVolumes", "fs-0a1b2c3d /cache"), ("RepositoryCredentialsArn", registry)]);
    let shut = profile_file(&[image, ("EfsVolumes", "fs-0a1b2c3d /cache"), ("SecurityGroupIds", closed.as_str())]);
    let (open, shut) = (open.display().to_string(), shut.display().to_string());
    let cluster = [("ClusterName", "ci"), ("Region", REGION)];
    let d = doctor(&moto.endpoint(), &cluster, &["--elastic-profile", &open, "--elastic-profile", &shut]).await;
    let efs: Vec<&String> = d.lines.iter().filter(|l| l.get(5..).is_some_and(|r| r.starts_with("efs: "))).collect();
    assert!(
        efs.iter().any(|l| l.starts_with("ok") && l.contains(&open) && l.contains("let NFS (TCP 2049) out")),
        "{efs:?}"
    );
    assert!(
        efs.iter()
            .any(|l| l.starts_with("FAIL") && l.contains(&shut) && l.contains(&format!("{closed} allows TCP 2049"))),
        "{efs:?}"
    );
    assert!(
        efs.iter().any(|l| l.starts_with("warn")
            && l.contains("fs-0a1b2c3d not checked")
            && l.contains("aws efs describe-mount-targets")),
        "{efs:?}"
    );
    assert_eq!(d.verdict("registry credentials"), "warn");
    assert!(d
        .line("registry credentials")
        .contains(&format!("aws secretsmanager describe-secret --secret-id {registry}")));
    assert_eq!(d.code, Some(1), "the closed group fails doctor");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_queue_must_exist_be_readable_and_have_a_rule_targeting_it() {
    let (moto, base) = world().await;
    moto::create_cluster(&base, "ci").await;
    let missing = format!("{}/{}/no-such-queue", moto.endpoint(), moto::BASE_ACCOUNT);
    let d =
        doctor(&moto.endpoint(), &[("ClusterName", "ci"), ("Region", REGION), ("EventQueueUrl", &missing)], &[]).await;
    assert_eq!(d.verdict("event queue"), "FAIL", "{}", d.line("event queue"));
    assert!(d.line("event queue").contains("create the queue"), "{}", d.line("event queue"));

    let queue = world::eventbridge::create_queue(&base, "gocd-events").await;
    let props = [("ClusterName", "ci"), ("Region", REGION), ("EventQueueUrl", queue.as_str())];
    let d = doctor(&moto.endpoint(), &props, &[]).await;
    assert_eq!(d.verdict("event queue"), "ok", "{}", d.line("event queue"));
    assert_eq!(d.verdict("event rule"), "FAIL", "{}", d.line("event rule"));
    assert!(d.line("event rule").contains("event-rule-pattern"), "{}", d.line("event rule"));

    // The rule iam-policy prints, targeting the queue: all is well.
    let events = aws_sdk_eventbridge::Client::new(&base);
    let pattern = r#"{"source":["aws.ecs"],"detail-type":["ECS Task State Change"]}"#;
    events.put_rule().name("gocd-ecs-events-ci").event_pattern(pattern).send().await.expect("PutRule");
    let arn = format!("arn:aws:sqs:{REGION}:{}:gocd-events", moto::BASE_ACCOUNT);
    let target = aws_sdk_eventbridge::types::Target::builder().id("gocd").arn(&arn).build().expect("a target");
    events.put_targets().rule("gocd-ecs-events-ci").targets(target).send().await.expect("PutTargets");
    let d = doctor(&moto.endpoint(), &props, &[]).await;
    assert_eq!(d.verdict("event rule"), "ok", "{}", d.line("event rule"));
    assert!(d.line("event rule").contains("gocd-ecs-events-ci"), "{}", d.line("event rule"));
}

/// `soci`: a Fargate profile's ECR image without a SOCI index warns, naming the image, what lazy
/// loading saves and how to add an index; one whose tag names an image index with a SOCI index
/// v2 is ok. moto serves PutImage and BatchGetImage; it does not serve ListImageReferrers, so
/// the warning says v1 was not checked. A Docker Hub image is not looked at.
///
/// The warning gives the image's pulls measured in the last hour: the world times each task's
/// start as ECS does ([`TaskStarts`]: each image pull takes the time the test gives it), and
/// the pulls counted are those of the plugin's agent tasks of this cluster profile that ECS
/// lists, stopped or running, of the image, with both pull times: not another image's, not a
/// task without the owner tags or `try`'s, not one stopped during its pull, and, with
/// `--server-id`, not another GoCD server's. doctor only reads (ListTasks of STOPPED and
/// RUNNING tasks, DescribeTasks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soci_warns_of_an_ecr_image_without_an_index_with_its_measured_pulls_and_passes_one_with_a_v2_index() {
    let (moto, base) = world().await;
    moto::create_cluster(&base, "ci").await;
    let manifest = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","size":7023,"digest":"sha256:1111111111111111111111111111111111111111111111111111111111111111"},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","size":32654,"digest":"sha256:2222222222222222222222222222222222222222222222222222222222222222"}]}"#;
    let index = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:3333333333333333333333333333333333333333333333333333333333333333","size":1024,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"com.amazon.soci.index-digest":"sha256:4444444444444444444444444444444444444444444444444444444444444444"}},{"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.amazon.soci.index.v2+json","digest":"sha256:4444444444444444444444444444444444444444444444444444444444444444","size":1000}]}"#;
    crate::images::push_manifest(&base, "gocd/agent", "plain", manifest, "application/vnd.oci.image.manifest.v1+json")
        .await;
    crate::images::push_manifest(&base, "gocd/agent", "soci", index, "application/vnd.oci.image.index.v1+json").await;
    let registry = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
    let role = ("ExecutionRoleArn", "arn:aws:iam::123456789012:role/ecsTaskExecutionRole");
    let plain_image = format!("{registry}/gocd/agent:plain");
    let soci_image = format!("{registry}/gocd/agent:soci");
    let hub_image = "gocd/gocd-agent-alpine-3.19:v24.1.0";

    // Agent tasks of the plain image, started through the proxy, whose pulls the world times.
    let proxy = Proxy::start(moto.addr()).await;
    let secs = Duration::from_secs_f64;
    let starts = TaskStarts {
        provisioning: secs(0.2),
        // In RunTask order: ours (three), another server's, untagged, try's, ours stopped mid-pull.
        pulls: vec![(plain_image.clone(), [1.5, 2.5, 3.5, 0.5, 0.4, 0.3, 60.0].map(secs).to_vec())],
        other_pull: secs(0.1),
        container_start: secs(0.2),
    };
    proxy.add_rewrite("ecs.task_starts", starts.rewrite());
    let tasks = Tasks::new(&proxy).await;
    let plain_td = moto::register_team_task_definition(&base, "agent-plain", &plain_image, &["FARGATE"]).await;
    let hub_td = moto::register_team_task_definition(&base, "agent-hub", hub_image, &["FARGATE"]).await;
    let key = cluster_key(moto::BASE_ACCOUNT, REGION, "ci", None);
    let ours = [(TAG_SERVER_ID, SERVER), (TAG_CLUSTER_PROFILE, key.as_str())];
    let theirs = [(TAG_SERVER_ID, OTHER_SERVER), (TAG_CLUSTER_PROFILE, key.as_str())];
    let tried = [(TAG_SERVER_ID, "try"), (TAG_CLUSTER_PROFILE, key.as_str()), ("gocd:try", "true")];
    let a = tasks.run(&plain_td, &ours).await;
    let b = tasks.run(&plain_td, &ours).await;
    let c = tasks.run(&plain_td, &ours).await;
    tasks.run(&plain_td, &theirs).await;
    tasks.run(&plain_td, &[("team", "web")]).await;
    tasks.run(&plain_td, &tried).await;
    let mid_pull = tasks.run(&plain_td, &ours).await;
    tasks.run(&hub_td, &ours).await;
    tasks.wait_running(&c).await;
    for arn in [&a, &b, &mid_pull] {
        tasks.stop(arn).await;
    }

    let plain = profile_file(&[("Image", &plain_image), role]).display().to_string();
    let soci = profile_file(&[("Image", &soci_image), role]).display().to_string();
    let hub = profile_file(&[("Image", hub_image)]).display().to_string();
    let cluster = [("ClusterName", "ci"), ("Region", REGION), ("LogGroup", "/gocd/agents")];
    let args = ["--elastic-profile", &plain, "--elastic-profile", &soci, "--elastic-profile", &hub];
    let server = ["--server-id", SERVER];
    let mark = proxy.mark();
    let d = doctor(&proxy.endpoint(), &cluster, &[&args[..], &server[..]].concat()).await;
    let lines = lines_of(&d, "soci");
    assert_eq!(lines.len(), 2, "one line per ECR image: {lines:#?}");
    let warn = lines.iter().find(|l| l.contains(&plain)).expect("the plain image's line");
    assert!(warn.starts_with(&format!("warn soci: {plain}: {plain_image} has no SOCI index")), "{warn}");
    assert!(warn.contains("v1 was not checked"), "moto has no ListImageReferrers: {warn}");
    for says in [
        "pulls the whole image",
        "up to 60 %",
        "under 10 MiB",
        "zstd",
        "soci convert",
        "cfn-ecr-aws-soci-index-builder",
    ] {
        assert!(warn.contains(says), "{says}: {warn}");
    }
    assert!(warn.contains("digest") && warn.contains("task definition"), "the converted image must be named: {warn}");
    // Ours only: two stopped and one running; 1.5, 2.5 and 3.5 s.
    assert!(
        warn.contains(
            "3 pulls measured in the last hour: p50 2.5 s, p95 3.5 s; a SOCI index could take up to 1.5 s off each \
             start (60 % of the p50 pull"
        ),
        "{warn}"
    );
    let ok = lines.iter().find(|l| l.contains(&soci)).expect("the SOCI-enabled image's line");
    assert!(ok.starts_with(&format!("ok   soci: {soci}: {soci_image} has a SOCI index v2 sha256:4444")), "{ok}");
    assert!(!ok.contains("measured"), "{ok}");
    // Reads only: stopped and running tasks listed, described in batches.
    let listed: Vec<String> = proxy
        .requests("ecs", "ListTasks")
        .iter()
        .filter_map(|r| r["desiredStatus"].as_str().map(str::to_string))
        .collect();
    assert!(listed.contains(&"STOPPED".to_string()) && listed.contains(&"RUNNING".to_string()), "{listed:?}");
    let changed: Vec<String> = proxy
        .counts_since(mark)
        .into_keys()
        .filter(|k| !["Describe", "List", "Get", "BatchGet", "AssumeRole"].iter().any(|r| k.contains(&format!(":{r}"))))
        .collect();
    assert!(changed.is_empty(), "doctor changed something: {changed:?}");

    // Without --server-id, every GoCD server's agent tasks of the profile: 0.5 s joins them.
    let d = doctor(&proxy.endpoint(), &cluster, &args).await;
    let warn = lines_of(&d, "soci").into_iter().find(|l| l.contains(&plain)).expect("the plain image's line").clone();
    assert!(
        warn.contains("4 pulls measured in the last hour: p50 1.5 s, p95 3.5 s; a SOCI index could take up to 0.9 s"),
        "{warn}"
    );

    // No task of the image within the hour: said so.
    let fresh = Proxy::start(moto.addr()).await;
    moto.api("POST", "/moto-api/reset", None).await;
    moto::create_cluster(&base, "ci").await;
    crate::images::push_manifest(&base, "gocd/agent", "plain", manifest, "application/vnd.oci.image.manifest.v1+json")
        .await;
    let d = doctor(&fresh.endpoint(), &cluster, &["--elastic-profile", &plain]).await;
    assert!(d.line("soci").contains("No pull of this image measured in the last hour"), "{}", d.line("soci"));
}

/// GoCD server ids, as the plugin tags its tasks with them.
const SERVER: &str = "6f1c2a3e-0000-4000-8000-0000000000aa";
const OTHER_SERVER: &str = "6f1c2a3e-0000-4000-8000-0000000000bb";

/// Tasks of cluster `ci` started and stopped through a proxy, as the plugin would.
struct Tasks {
    ecs: aws_sdk_ecs::Client,
    network: moto::DefaultNetwork,
}

impl Tasks {
    async fn new(proxy: &Proxy) -> Tasks {
        let config = moto::base_config_at(&proxy.endpoint()).await;
        Tasks { ecs: aws_sdk_ecs::Client::new(&config), network: moto::default_network(&config).await }
    }

    /// Starts a Fargate task of `td` with `tags`; its ARN.
    async fn run(&self, td: &str, tags: &[(&str, &str)]) -> String {
        use aws_sdk_ecs::types::{AssignPublicIp, AwsVpcConfiguration, LaunchType, NetworkConfiguration, Tag};
        let vpc = AwsVpcConfiguration::builder()
            .subnets(&self.network.subnet_ids[0])
            .security_groups(&self.network.security_group_id)
            .assign_public_ip(AssignPublicIp::Enabled)
            .build()
            .expect("awsvpc");
        let out = self
            .ecs
            .run_task()
            .cluster("ci")
            .task_definition(td)
            .launch_type(LaunchType::Fargate)
            .network_configuration(NetworkConfiguration::builder().awsvpc_configuration(vpc).build())
            .set_tags(Some(tags.iter().map(|(k, v)| Tag::builder().key(*k).value(*v).build()).collect()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("RunTask: {}", moto::aws_error_text(&e)));
        out.tasks()[0].task_arn().expect("a task ARN").to_string()
    }

    /// Waits until the task is RUNNING (its pull done).
    async fn wait_running(&self, arn: &str) {
        world::wait_for("the task to run", Duration::from_secs(30), || async {
            let out = self.ecs.describe_tasks().cluster("ci").tasks(arn).send().await.expect("DescribeTasks");
            out.tasks().first().and_then(|t| t.last_status()) == Some("RUNNING")
        })
        .await;
    }

    async fn stop(&self, arn: &str) {
        self.ecs.stop_task().cluster("ci").task(arn).reason("done").send().await.expect("StopTask");
    }
}
