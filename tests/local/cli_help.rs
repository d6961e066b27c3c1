//! `--version` and `--help` of the binary and of every subcommand, with examples; bad arguments
//! exit 2 (clap), and `--version` goes to stdout only.

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_ecs-elastic-agent");
const SUBCOMMANDS: [&str; 8] = ["serve", "validate", "iam-policy", "doctor", "profile", "try", "leftovers", "import"];

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).env("RUST_LOG", "off").output().expect("run the binary")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn version_everywhere() {
    let want = env!("CARGO_PKG_VERSION");
    let top = run(&["--version"]);
    assert!(top.status.success());
    assert_eq!(stdout(&top), format!("ecs-elastic-agent {want}\n"));
    for sub in SUBCOMMANDS {
        let o = run(&[sub, "--version"]);
        assert!(o.status.success(), "{sub} --version failed: {o:?}");
        assert_eq!(stdout(&o), format!("ecs-elastic-agent-{sub} {want}\n"), "{sub} --version");
        assert!(o.stderr.is_empty(), "{sub} --version wrote to stderr");
    }
}

#[test]
fn help_everywhere_with_examples() {
    let top = stdout(&run(&["--help"]));
    for sub in SUBCOMMANDS {
        assert!(top.contains(sub), "top-level help lists {sub}");
    }
    assert!(top.contains("Examples:") && top.contains("Exit codes"), "{top}");
    for sub in SUBCOMMANDS {
        for flag in ["--help", "-h"] {
            let o = run(&[sub, flag]);
            assert!(o.status.success(), "{sub} {flag}: {o:?}");
            let text = stdout(&o);
            assert!(text.contains("Examples:"), "{sub} {flag} has examples:\n{text}");
            assert!(text.contains(&format!("ecs-elastic-agent {sub}")), "{sub} {flag} shows a command line:\n{text}");
        }
        let o = run(&["help", sub]);
        assert!(o.status.success() && stdout(&o).contains("Examples:"), "help {sub}");
    }
    let validate = stdout(&run(&["validate", "--help"]));
    assert!(validate.contains("--cluster-profile <FILE>") && validate.contains("--elastic-profile <FILE>"));
    let doctor = stdout(&run(&["doctor", "--help"]));
    assert!(doctor.contains("--server-id <ID>") && doctor.contains("FAIL"));
    let profile = stdout(&run(&["profile", "--help"]));
    assert!(profile.contains("--from-stack <NAME>") && profile.contains("--region <REGION>"));
    let serve = stdout(&run(&["serve", "--help"]));
    assert!(serve.contains("--metrics-addr <ADDR>"));
    let try_help = stdout(&run(&["try", "--help"]));
    assert!(try_help.contains("--elastic-profile <FILE>") && try_help.contains("Exit status:"), "{try_help}");
    assert!(try_help.contains("6  execution role"), "the status table: {try_help}");
}

#[test]
fn bad_arguments_exit_2() {
    for args in [
        &["validate"][..],
        &["iam-policy", "--elastic-profile", "x.json"],
        &["doctor", "--nope"],
        &["profile"],
        &["try", "--cluster-profile", "cluster.json"],
        &["leftovers", "--nope"],
        &["fly"],
        &["serve", "--metrics-addr", "not-an-address"],
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        assert!(o.stdout.is_empty(), "{args:?} wrote to stdout");
    }
}
