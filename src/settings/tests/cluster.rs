//! Cluster profile rules.

use super::*;

const BASE: &[(&str, &str)] = &[("ClusterName", "ci")];
const ROLE: &[(&str, &str)] = &[("ClusterName", "ci"), ("RoleArn", "arn:aws:iam::123456789012:role/gocd")];
const EC2: &[(&str, &str)] = &[
    ("ClusterName", "ci"),
    ("LaunchType", "EC2"),
    ("Ec2InstanceType", "c5.xlarge"),
    ("Ec2InstanceProfile", "ecsInstanceRole"),
    ("Ec2AmiId", "ami-0abcdef1234567890"),
];

fn parse(p: &Properties) -> ClusterProfile {
    ClusterProfile::parse(p).unwrap_or_else(|e| panic!("{e:?}"))
}

#[test]
fn a_capacity_provider_strategy_replaces_the_launch_type() {
    let default = props(&[("ClusterName", "ci"), ("CapacityProviderStrategy", "default")]);
    assert_eq!(parse(&default).capacity_providers, Some(ProviderStrategy::ClusterDefault));
    assert_eq!(parse(&default).launch_type, LaunchType::Fargate, "awsvpc task definitions, Fargate's rules");
    for launch_type in ["FARGATE", "FARGATE_SPOT", "EC2"] {
        let both =
            props(&[("ClusterName", "ci"), ("LaunchType", launch_type), ("CapacityProviderStrategy", "FARGATE")]);
        let errors = validate_cluster_profile(&both);
        assert!(
            errors.iter().any(|e| e.key == "CapacityProviderStrategy" && e.message.contains("never both")),
            "{launch_type}: {errors:?}"
        );
    }
    assert_eq!(parse(&props(BASE)).capacity_providers, None);
}

#[test]
fn every_rule_has_a_good_and_a_bad_value() {
    let v = validate_cluster_profile;
    let lines = |n: usize, f: fn(usize) -> String| (0..n).map(f).collect::<Vec<_>>().join("\n");
    let subnets17 = (0..17).map(|i| format!("subnet-{i:08x}")).collect::<Vec<_>>().join(",");
    let groups6 = (0..6).map(|i| format!("sg-{i:08x}")).collect::<Vec<_>>().join(", ");
    let tags38 = lines(38, |i| format!("k{i}=v"));
    let long_tag_value = format!("k={}", "v".repeat(257));
    let long_tag_key = format!("{}=v", "k".repeat(129));
    let long_user_data = "x".repeat(16 * 1024 + 1);
    check_rule(
        v,
        BASE,
        "ClusterName",
        "arn:aws:ecs:us-east-1:123456789012:cluster/ci",
        &["ci.agents", "arn:aws:ecs:us-east-1:1234:cluster/ci", "arn:aws:ecs:us-east-1:123456789012:service/ci"],
    );
    check_rule(v, BASE, "Region", "us-gov-west-1", &["us-east-x", "US-EAST-1", "mars-1"]);
    check_rule(
        v,
        BASE,
        "GoServerUrl",
        "https://gocd.example.com:8443/go",
        &[
            "https://gocd.example.com/go/",
            "gocd.example.com/go",
            "https://gocd.example.com",
            "https://gocd.example.com/go?x",
        ],
    );
    check_rule(
        v,
        BASE,
        "RoleArn",
        "arn:aws-cn:iam::123456789012:role/path/gocd",
        &["arn:aws:iam::123456789012:user/gocd", "gocd"],
    );
    check_rule(v, ROLE, "ExternalId", "gocd:server-id:abc/def", &["x", "has space"]);
    check_rule(v, ROLE, "RoleSessionName", "gocd.session@ci", &["x", &"s".repeat(65), "a:b"]);
    check_rule(v, BASE, "LaunchType", "FARGATE_SPOT", &["fargate", "SPOT"]);
    check_rule(
        v,
        BASE,
        "SubnetIds",
        "subnet-0a1b2c3d, subnet-0a1b2c3d4e5f60718",
        &["subnet-123", "subnet-0a1b2c3d,subnet-0a1b2c3d", &subnets17],
    );
    check_rule(v, BASE, "SecurityGroupIds", "sg-0a1b2c3d,sg-1a1b2c3d", &["sg-XYZ", "subnet-0a1b2c3d", &groups6]);
    check_rule(v, BASE, "AssignPublicIp", "True", &["1", "yes"]);
    check_rule(v, BASE, "MaxAgents", "1000", &["0", "1001", "ten", "-1", "2.5"]);
    check_rule(v, BASE, "AgentRegisterTimeoutMinutes", "120", &["0", "121"]);
    check_rule(v, BASE, "EnvironmentVariables", "A=1\n\n  B_2 = x=y  \nC=", &["2A=1", "A=1\nA=2", "novalue", "A-B=1"]);
    check_rule(
        v,
        BASE,
        "Tags",
        "team=ci\nCost Center=a/b:c",
        &["aws:x=1", "AWS:x=1", "gocd:job=1", &long_tag_value, &long_tag_key, &tags38, "k=v*", "=v"],
    );
    check_rule(v, BASE, "LogGroup", "/aws/ecs/gocd#1", &["a b", &"g".repeat(513)]);
    check_rule(v, BASE, "PriceTable", "tests/data/prices-override.json", &["no-such-prices.json", "Cargo.toml"]);
    check_rule(
        v,
        BASE,
        "EventQueueUrl",
        "https://sqs.eu-west-1.amazonaws.com/123456789012/gocd-events",
        &["gocd-events", "https://sqs.eu-west-1.amazonaws.com/gocd-events"],
    );
    check_rule(
        v,
        BASE,
        "CapacityProviderStrategy",
        "FARGATE:1:2\nFARGATE_SPOT:3\nmy-asg-provider",
        &["FARGATE:2000", "FARGATE:1:1\nFARGATE_SPOT:1:1", "FAR GATE", "FARGATE\nFARGATE", "a:0"],
    );
    check_rule(v, BASE, "AllowedImages", "gocd/*\n**/agent:[0-9]*", &["[", "gocd/*\n[a"]);
    check_rule(v, BASE, "AllowedTaskRoleArns", "arn:aws:iam::*:role/gocd-*", &["[x"]);
    check_rule(v, BASE, "AllowedExecutionRoleArns", "arn:aws:iam::*:role/gocd-exec-*", &["[x"]);
    check_rule(v, BASE, "AllowedSecretArns", "arn:aws:secretsmanager:*:*:secret:ci/*", &["ci/[", "a\n[b"]);
    check_rule(v, BASE, "AllowPrivileged", "true", &["yes"]);
    check_rule(v, EC2, "Ec2InstanceType", "t3a.medium", &["t3a", "C5.large"]);
    check_rule(
        v,
        EC2,
        "Ec2InstanceProfile",
        "arn:aws:iam::123456789012:instance-profile/ecs",
        &["a b", "arn:aws:iam::123456789012:role/ecs"],
    );
    check_rule(v, EC2, "Ec2AmiId", "ami-0a1b2c3d", &["ami-xyz", "ami-0a1b2c3d4"]);
    check_rule(v, EC2, "Ec2MinInstances", "3", &["101", "6"]);
    check_rule(v, EC2, "Ec2MaxInstances", "100", &["0", "101"]);
    check_rule(v, EC2, "Ec2IdleMinutes", "1440", &["-1", "1441"]);
    check_rule(v, EC2, "Ec2IdleMinutes", "0", &["ten"]);
    check_rule(v, EC2, "Ec2RegisterTimeoutMinutes", "60", &["0", "61"]);
    check_rule(v, EC2, "Ec2ScaleOutWaitSeconds", "0", &["-1", "1801", "5m"]);
    check_rule(v, EC2, "Ec2StoppedInstances", "50", &["-1", "51", "two"]);
    check_rule(v, EC2, "Ec2Spot", "FALSE", &["maybe"]);
    check_rule(v, EC2, "Ec2KeyPair", "ops key", &["cl\u{e9}"]);
    check_rule(v, EC2, "Ec2RootVolumeGiB", "30", &["29", "16385"]);
    check_rule(v, EC2, "Ec2UserData", "#!/bin/bash\necho hi", &[&long_user_data]);
}

#[test]
fn a_minimal_profile_gets_the_documented_defaults() {
    let c = parse(&props(&[("ClusterName", " ci ")]));
    assert_eq!(c.cluster_name, "ci");
    assert_eq!(c.region, None);
    assert_eq!(c.go_server_url, None);
    assert!(c.static_credentials.is_none() && c.role_arn.is_none() && c.external_id.is_none());
    assert_eq!(c.launch_type, LaunchType::Fargate);
    assert!(c.subnet_ids.is_empty() && c.security_group_ids.is_empty());
    assert!(!c.assign_public_ip);
    assert_eq!((c.max_agents, c.agent_register_timeout_minutes), (10, 10));
    assert!(c.environment_variables.is_empty() && c.tags.is_empty() && c.log_group.is_none());
    assert!(c.allowed_images.is_empty() && c.allowed_task_role_arns.is_empty());
    assert!(c.ec2.is_none());
}

#[test]
fn a_full_profile_is_typed() {
    let c = parse(&profile_file("cluster-fargate"));
    assert_eq!(c.region.as_deref(), Some("us-east-1"));
    assert_eq!(c.subnet_ids, ["subnet-0a1b2c3d4e5f60718", "subnet-1a2b3c4d"]);
    assert_eq!(c.max_agents, 20);
    assert_eq!(
        c.environment_variables,
        [("TZ".to_string(), "UTC".to_string()), ("GO_AGENT_LOG_LEVEL".into(), "info".into())]
    );
    assert_eq!(c.allowed_images.len(), 2);
    let ec2 = parse(&profile_file("cluster-ec2"));
    assert_eq!(ec2.launch_type, LaunchType::Ec2);
    let cap = ec2.ec2.expect("EC2 capacity");
    assert_eq!((cap.min_instances, cap.max_instances, cap.idle_minutes, cap.register_timeout_minutes), (0, 4, 15, 5));
    assert!(cap.spot);
    assert_eq!(cap.key_pair.as_deref(), Some("gocd-ops"));
    assert_eq!(cap.root_volume_gib, 50);
}

#[test]
fn ec2_defaults() {
    let cap = parse(&props(EC2)).ec2.expect("EC2 capacity");
    assert_eq!(cap.instance_types, ["c5.xlarge"]);
    assert_eq!(cap.ami_ids.len(), 1);
    assert_eq!((cap.min_instances, cap.max_instances, cap.idle_minutes, cap.register_timeout_minutes), (0, 5, 10, 5));
    assert_eq!((cap.scale_out_wait_seconds, cap.stopped_instances), (0, 5));
    assert_eq!((cap.spot, cap.root_volume_gib), (false, 30));
    assert!(cap.key_pair.is_none() && cap.user_data.is_none());
}

#[test]
fn ec2_takes_several_instance_types_and_amis() {
    let mut p = props(EC2);
    p.insert("Ec2InstanceType".into(), "c5.xlarge, c6g.xlarge,\n m5.xlarge\n".to_string().into());
    p.insert("Ec2AmiId".into(), "ami-0abcdef1234567890\nami-0fedcba9876543210".to_string().into());
    let cap = parse(&p).ec2.expect("EC2 capacity");
    assert_eq!(cap.instance_types, ["c5.xlarge", "c6g.xlarge", "m5.xlarge"]);
    assert_eq!(cap.ami_ids, ["ami-0abcdef1234567890", "ami-0fedcba9876543210"]);
    assert!(validate_cluster_profile(&p).is_empty());
}

#[test]
fn ec2_lists_are_checked_item_by_item() {
    let check = |key: &str, value: &str| {
        let mut p = props(EC2);
        p.insert(key.into(), value.to_string().into());
        let errors = validate_cluster_profile(&p);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].key, key);
        errors[0].message.clone()
    };
    let m = check("Ec2InstanceType", "c5.xlarge, C6G.xlarge");
    assert!(m.starts_with("Ec2InstanceType 'C6G.xlarge' is not an EC2 instance type"), "{m}");
    assert_eq!(check("Ec2InstanceType", "c5.xlarge,c5.xlarge"), "Ec2InstanceType lists 'c5.xlarge' twice.");
    assert_eq!(check("Ec2InstanceType", " , \n"), "Ec2InstanceType is empty.");
    let m = check("Ec2AmiId", "ami-0abcdef1234567890, ami-nothex");
    assert!(m.starts_with("Ec2AmiId 'ami-nothex' is not an AMI id"), "{m}");
}

#[test]
fn ec2_needs_its_three_keys() {
    let errors = validate_cluster_profile(&props(&[("ClusterName", "ci"), ("LaunchType", "EC2")]));
    let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["Ec2InstanceType", "Ec2InstanceProfile", "Ec2AmiId"]);
    assert_eq!(errors[0].message, "Ec2InstanceType is required when LaunchType is EC2.");
}

#[test]
fn ec2_keys_are_refused_with_another_launch_type() {
    let errors = validate_cluster_profile(&props(&[
        ("ClusterName", "ci"),
        ("Ec2InstanceType", "c5.xlarge"),
        ("Ec2Spot", "not even a boolean"),
        ("Ec2MinInstances", ""),
    ]));
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(errors[0].key, "Ec2InstanceType");
    assert_eq!(errors[0].message, "Ec2InstanceType only applies when LaunchType is EC2 (it is FARGATE).");
    assert_eq!(messages_for(&errors, "Ec2Spot"), ["Ec2Spot only applies when LaunchType is EC2 (it is FARGATE)."]);
    let spot = validate_cluster_profile(&props(&[
        ("ClusterName", "ci"),
        ("LaunchType", "FARGATE_SPOT"),
        ("Ec2AmiId", "ami-0a1b2c3d"),
    ]));
    assert_eq!(messages_for(&spot, "Ec2AmiId"), ["Ec2AmiId only applies when LaunchType is EC2 (it is FARGATE_SPOT)."]);
}

#[test]
fn an_invalid_launch_type_does_not_pile_up_ec2_errors() {
    let errors =
        validate_cluster_profile(&props(&[("ClusterName", "ci"), ("LaunchType", "ec2"), ("Ec2AmiId", "ami-0a1b2c3d")]));
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(
        errors[0].message,
        "LaunchType must be one of FARGATE, FARGATE_SPOT or EC2; 'ec2' is not (in capitals: did you mean EC2?)."
    );
}

#[test]
fn min_instances_may_not_exceed_max() {
    let errors = validate_cluster_profile(&with(&with_pairs(EC2, &[("Ec2MaxInstances", "2")]), "Ec2MinInstances", "3"));
    assert_eq!(
        messages_for(&errors, "Ec2MinInstances"),
        ["Ec2MinInstances (3) must not be more than Ec2MaxInstances (2)."]
    );
}

fn with_pairs<'a>(base: &[(&'a str, &'a str)], more: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    base.iter().chain(more).copied().collect()
}

#[test]
fn static_credentials_need_both_keys_and_are_never_echoed() {
    let only_id = validate_cluster_profile(&props(&[("ClusterName", "ci"), ("AccessKeyId", "AKIAVERYSECRET")]));
    assert_eq!(
        only_id,
        [FieldError {
            key: "SecretAccessKey".into(),
            message: "SecretAccessKey is required when AccessKeyId is set: give both or neither.".into(),
        }]
    );
    let only_secret = validate_cluster_profile(&props(&[("ClusterName", "ci"), ("SecretAccessKey", "hush")]));
    assert_eq!(messages_for(&only_secret, "AccessKeyId").len(), 1);

    let both = parse(&props(&[("ClusterName", "ci"), ("AccessKeyId", "AKIAEXAMPLE"), ("SecretAccessKey", "s/3+cr3t")]));
    let creds = both.static_credentials.clone().expect("credentials");
    assert_eq!(
        (creds.access_key_id.expose().as_str(), creds.secret_access_key.expose().as_str()),
        ("AKIAEXAMPLE", "s/3+cr3t")
    );
    assert!(!format!("{both:?}").contains("AKIAEXAMPLE") && !format!("{both:?}").contains("s/3+cr3t"));

    let bad = validate_cluster_profile(&props(&[
        ("ClusterName", "ci"),
        ("AccessKeyId", "AKIA TOPSECRET-1"),
        ("SecretAccessKey", "my very secret key"),
    ]));
    assert_eq!(bad.len(), 2, "{bad:?}");
    for error in &bad {
        assert!(!error.message.contains("TOPSECRET") && !error.message.contains("very secret"), "{error:?}");
    }
}

#[test]
fn secure_values_are_never_echoed_even_as_unknown_numbers() {
    // Every message produced for bad secure values, whatever the value, leaves the value out.
    let secret = "SECRET-VALUE-THAT-MUST-NOT-LEAK \u{1}";
    let errors = validate_cluster_profile(&props(&[
        ("ClusterName", "ci"),
        ("AccessKeyId", secret),
        ("SecretAccessKey", secret),
    ]));
    assert!(!errors.is_empty());
    assert!(errors.iter().all(|e| !e.message.contains("SECRET-VALUE")), "{errors:?}");
}

#[test]
fn role_settings_need_a_role() {
    let errors =
        validate_cluster_profile(&props(&[("ClusterName", "ci"), ("ExternalId", "abc"), ("RoleSessionName", "gocd")]));
    assert_eq!(messages_for(&errors, "ExternalId"), ["ExternalId only applies when RoleArn is set."]);
    assert_eq!(messages_for(&errors, "RoleSessionName"), ["RoleSessionName only applies when RoleArn is set."]);
    let external_id_error = validate_cluster_profile(&with(ROLE, "ExternalId", "bad secret id!"));
    assert!(!external_id_error[0].message.contains("bad secret id"), "the external id is not echoed");
}

#[test]
fn effective_role_session_name_and_external_id() {
    let plain = parse(&props(BASE));
    assert_eq!(plain.external_id("server-1"), None);
    assert_eq!(plain.role_session_name(), "gocd-ecs-ci");

    let role = parse(&props(ROLE));
    assert_eq!(role.external_id("3f2c-11"), Some("gocd:server-id:3f2c-11".to_string()));
    let explicit = parse(&with(ROLE, "ExternalId", "team-a"));
    assert_eq!(explicit.external_id("3f2c-11"), Some("team-a".to_string()));
    assert_eq!(parse(&with(ROLE, "RoleSessionName", "mine")).role_session_name(), "mine");

    let long = "c".repeat(255);
    let long_name = parse(&props(&[("ClusterName", &long)])).role_session_name();
    assert_eq!(long_name.len(), 64);
    assert!(long_name.starts_with("gocd-ecs-ccc"));
    let arn = parse(&props(&[("ClusterName", "arn:aws:ecs:eu-west-1:123456789012:cluster/build_farm")]));
    assert_eq!(arn.cluster_short_name(), "build_farm");
    assert_eq!(arn.role_session_name(), "gocd-ecs-build_farm");
}

#[test]
fn a_cluster_arn_gives_the_region_and_must_agree_with_it() {
    let arn = "arn:aws:ecs:eu-west-1:123456789012:cluster/ci";
    assert_eq!(parse(&props(&[("ClusterName", arn)])).region.as_deref(), Some("eu-west-1"));
    assert_eq!(parse(&props(&[("ClusterName", arn), ("Region", "eu-west-1")])).region.as_deref(), Some("eu-west-1"));
    let errors = validate_cluster_profile(&props(&[("ClusterName", arn), ("Region", "us-east-1")]));
    assert_eq!(
        messages_for(&errors, "Region"),
        ["Region is us-east-1 but the ClusterName ARN is in eu-west-1; they must agree."]
    );
}

#[test]
fn launch_type_names_match_the_key_table() {
    for name in keys::LAUNCH_TYPES {
        assert_eq!(LaunchType::from_name(name).map(LaunchType::as_str), Some(*name));
    }
    assert_eq!(LaunchType::from_name("fargate"), None);
    assert!(LaunchType::FargateSpot.is_fargate() && !LaunchType::Ec2.is_fargate());
}

#[test]
fn nulls_and_blanks_mean_not_set() {
    let mut p = props(&[("ClusterName", "ci"), ("Region", "   "), ("MaxAgents", "")]);
    for key in ["GoServerUrl", "LaunchType", "Tags", "Ec2AmiId", "AccessKeyId"] {
        p.insert(key.into(), None);
    }
    let c = parse(&p);
    assert_eq!((c.region, c.max_agents, c.launch_type), (None, 10, LaunchType::Fargate));

    let mut missing = Properties::new();
    missing.insert("ClusterName".into(), None);
    assert_eq!(
        validate_cluster_profile(&missing),
        [FieldError { key: "ClusterName".into(), message: "ClusterName is required.".into() }]
    );
    assert_eq!(
        messages_for(&validate_cluster_profile(&Properties::new()), "ClusterName"),
        ["ClusterName is required."]
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let errors = validate_cluster_profile(&props(&[
        ("Clustername", "ci"),
        ("Region", "nowhere"),
        ("MaxAgents", "0"),
        ("SubnetIds", "subnet-1, sg-0a1b2c3d"),
        ("Tags", "aws:x=1\nok=1\ngocd:y=2"),
        ("AssignPublicIp", "y"),
    ]));
    let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "Clustername",
            "ClusterName",
            "Region",
            "SubnetIds",
            "SubnetIds",
            "AssignPublicIp",
            "MaxAgents",
            "Tags",
            "Tags"
        ]
    );
    assert_eq!(errors[0].message, "'Clustername' is not a setting of this plugin. Did you mean ClusterName?");
    assert_eq!(
        errors[2].message,
        "Region 'nowhere' is not an AWS region name; use one like us-east-1, eu-west-3 or ap-southeast-4."
    );
}

#[test]
fn unknown_keys_are_named_with_a_suggestion() {
    let errors = validate_cluster_profile(&props(&[
        ("ClusterName", "ci"),
        ("MaxAgent", "3"),
        ("Image", "alpine"),
        ("Colour", "red"),
    ]));
    assert_eq!(
        messages_for(&errors, "MaxAgent"),
        ["'MaxAgent' is not a setting of this plugin. Did you mean MaxAgents?"]
    );
    assert_eq!(
        messages_for(&errors, "Image"),
        ["'Image' is not a setting of this plugin's cluster profiles; it belongs in the elastic agent profile."]
    );
    assert_eq!(messages_for(&errors, "Colour"), ["'Colour' is not a setting of this plugin."]);
}

#[test]
fn long_bad_values_are_cut_in_messages() {
    let long = format!("{}.x", "a".repeat(300));
    let errors = validate_cluster_profile(&props(&[("ClusterName", &long)]));
    assert_eq!(errors.len(), 1);
    assert!(errors[0].message.len() < 250, "{}", errors[0].message);
    assert!(errors[0].message.contains("…'"));
}

#[test]
fn a_price_table_that_cannot_be_used_says_what_to_fix() {
    let missing = validate_cluster_profile(&props(&[("ClusterName", "ci"), ("PriceTable", "no-such-prices.json")]));
    let message = &messages_for(&missing, "PriceTable").join("\n");
    assert!(message.contains("cannot read the price file no-such-prices.json"), "{message}");
    assert!(message.contains("`ecs-elastic-agent prices` prints"), "{message}");
    let malformed = validate_cluster_profile(&props(&[("ClusterName", "ci"), ("PriceTable", "Cargo.toml")]));
    let message = &messages_for(&malformed, "PriceTable").join("\n");
    assert!(message.contains("Cargo.toml: not a price table"), "{message}");
    let good = props(&[("ClusterName", "ci"), ("PriceTable", "tests/data/prices-override.json")]);
    assert_eq!(parse(&good).price_table.as_deref(), Some("tests/data/prices-override.json"));
}
