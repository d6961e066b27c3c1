//! The two profile forms in a browser, as GoCD shows them: the real binary answers the view,
//! metadata and validate requests, and headless Chromium renders each view in a page that hosts
//! it the way GoCD's profile modals do (`fixtures/gocd_plugin_view.js`, after gocd/gocd's
//! `angular_plugin_new.js.msx`, on AngularJS 1.0.8 from `scripts/angular.sh`). Each form is opened
//! as an edit of a profile whose save failed on one key: the saved values and the plugin's own
//! error message show, the error's collapsed group says so; then a text input, a password, a
//! select, checkboxes (one in a collapsed group) and a textarea are filled as a user would, and
//! the values GoCD reads back (its `$watch` on each metadata key) and the Angular scope are
//! compared; then every input is set, which shows each key bound to one input under its exact key
//! name. Fails, never skips, when Chromium or Angular is missing (`scripts/test` fetches Angular;
//! `.ci/run` installs Chromium).
//!
//! A new profile's form starts empty, with only the basic groups open. With
//! `PROFILE_VIEW_SCREENSHOTS=DIR` both empty forms are also photographed into
//! `DIR/cluster-profile-view.png` and `DIR/elastic-profile-view.png` (the ones in `docs/images/`:
//! `PROFILE_VIEW_SCREENSHOTS=docs/images scripts/test --test local profile_views::`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ecs_elastic_agent::settings::keys::{Input, KeySpec, ProfileKind};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_ecs-elastic-agent");
/// The AngularJS GoCD ships for plugin views (`scripts/angular.sh`).
const ANGULAR_VERSION: &str = "1.0.8";
/// Width of the browser window for the screenshots: GoCD's modal at its usual size.
const SCREENSHOT_WIDTH: u32 = 960;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/local/fixtures").join(name)
}

fn angular_js() -> PathBuf {
    let Some(path) = std::env::var_os("ANGULAR_JS").filter(|p| !p.is_empty()) else {
        panic!("ANGULAR_JS is not set: run scripts/test, which fetches AngularJS (or: export ANGULAR_JS=$(scripts/angular.sh))")
    };
    let path = PathBuf::from(path);
    assert!(path.is_file(), "ANGULAR_JS={} does not exist: run scripts/angular.sh", path.display());
    path
}

/// `CHROMIUM`, else `chromium` on the PATH.
fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("CHROMIUM").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    let found = std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("chromium"))
        .find(|path| path.is_file());
    found.unwrap_or_else(|| {
        panic!("chromium is not on the PATH: apt-get install chromium (.ci/run installs it), or set CHROMIUM")
    })
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ecs-ea-profile-views-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// Asks the real binary, as GoCD does: `requests` in order, the answers' bodies in the same order.
fn ask_plugin(requests: &[(&str, Value)]) -> Vec<Value> {
    let mut child = Command::new(BIN)
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the plugin binary starts");
    let mut input = String::new();
    for (id, (name, body)) in requests.iter().enumerate() {
        let line = json!({"type": "request", "id": id, "name": name, "version": "5.0", "body": body});
        input.push_str(&format!("{line}\n"));
    }
    let mut stdin = child.stdin.take().expect("stdin");
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let out = child.wait_with_output().expect("the plugin exits when stdin closes");
    feeder.join().expect("stdin written");
    let lines: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    (0..requests.len())
        .map(|id| {
            let answer = lines.iter().find(|l| l["type"] == "response" && l["id"] == id).expect("an answer");
            assert_eq!(answer["code"], 200, "{}: {answer}", requests[id].0);
            answer["body"].clone()
        })
        .collect()
}

/// One form as GoCD would show it: the plugin's template and metadata, the profile being edited
/// with the errors of its failed save, and what the user does.
struct Form {
    kind: ProfileKind,
    title: &'static str,
    template: String,
    metadata: Value,
    configuration: Vec<Value>,
    steps: Vec<Vec<(String, String)>>,
}

/// The form of `kind`, opened on `saved` (validated by the plugin, whose errors are attached as
/// GoCD attaches them) with `steps` to play.
fn form(kind: ProfileKind, saved: &[(&str, &str)], steps: Vec<Vec<(String, String)>>) -> Form {
    let (noun, title) = match kind {
        ProfileKind::Cluster => ("cluster-profile", "Edit cluster profile"),
        ProfileKind::Elastic => ("elastic-agent-profile", "Edit elastic agent profile"),
    };
    let properties: BTreeMap<&str, &str> = saved.iter().copied().collect();
    let answers = ask_plugin(&[
        (&format!("cd.go.elastic-agent.get-{noun}-view"), Value::Null),
        (&format!("cd.go.elastic-agent.get-{noun}-metadata"), Value::Null),
        (&format!("cd.go.elastic-agent.validate-{noun}"), json!(properties)),
    ]);
    let template = answers[0]["template"].as_str().expect("a template").to_string();
    let errors = answers[2].as_array().expect("a list of errors");
    let configuration = saved
        .iter()
        .map(|(key, value)| {
            let messages: Vec<&Value> = errors.iter().filter(|e| e["key"] == *key).map(|e| &e["message"]).collect();
            json!({"key": key, "value": value, "errors": messages})
        })
        .collect();
    Form { kind, title, template, metadata: answers[1].clone(), configuration, steps }
}

fn changes(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// What setting every input looks like: text for text, two lines for a textarea, the last
/// option of a select, a ticked checkbox.
fn every_key(kind: ProfileKind) -> Vec<(String, String)> {
    kind.keys().iter().map(|spec| (spec.key.to_string(), every_key_value(spec))).collect()
}

fn every_key_value(spec: &KeySpec) -> String {
    match spec.input {
        Input::Text | Input::Password => format!("v-{}", spec.key),
        Input::Lines => format!("v-{}\nsecond line", spec.key),
        Input::Select(options) => options.last().expect("options").to_string(),
        Input::Checkbox => "true".into(),
    }
}

/// Writes the page of `form` into `dir`.
fn page(form: &Form, dir: &Path, angular: &Path) -> PathBuf {
    let input = json!({
        "uuid": "4ef1e1f6-0c5c-4a5e-9d1a-0f0c0e4d6a21",
        "template": form.template,
        "metadata": form.metadata,
        "configuration": form.configuration,
        "steps": form.steps.iter().map(|step| {
            step.iter().map(|(key, value)| json!({"key": key, "value": value})).collect::<Vec<_>>()
        }).collect::<Vec<_>>(),
    });
    // Inside <script>: no `<` may end it.
    let input = input.to_string().replace('<', "\\u003c");
    let url = |path: &Path| format!("file://{}", path.display());
    let html = std::fs::read_to_string(fixture("gocd_plugin_view.html"))
        .expect("the harness page")
        .replace("@TITLE@", form.title)
        .replace("@ANGULAR_JS@", &url(angular))
        .replace("@HARNESS_JS@", &url(&fixture("gocd_plugin_view.js")))
        .replace("@INPUT@", &input);
    let path = dir.join("form.html");
    std::fs::write(&path, html).expect("write the page");
    path
}

/// Runs headless Chromium with `args` on `page` (its own profile directory), within a minute.
fn run_chromium(dir: &Path, page: &Path, args: &[String]) -> String {
    let profile = dir.join("chromium-profile");
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("chromium does not start ({e}): apt-get install chromium, or set CHROMIUM"));
    let stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let stderr = child.stderr.take().expect("stderr");
    let err_reader = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for chromium") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = reader.join().expect("chromium's stdout");
    let err = err_reader.join().expect("chromium's stderr");
    assert!(status.success(), "chromium failed ({status}): {err}");
    out
}

/// Renders `form` and returns what the harness found.
fn render(form: &Form, tag: &str) -> Value {
    let angular = angular_js();
    let dir = scratch(tag);
    let page = page(form, &dir, &angular);
    let dom = run_chromium(&dir, &page, &["--dump-dom".into()]);
    let _ = std::fs::remove_dir_all(&dir);
    let start = "<script type=\"application/json\" id=\"harness-result\">";
    let result = dom
        .split(start)
        .nth(1)
        .and_then(|rest| rest.split("</script>").next())
        .unwrap_or_else(|| panic!("no harness result in the page (did Angular load?):\n{dom}"));
    let result: Value = serde_json::from_str(result).expect("the harness result is JSON");
    assert!(result.get("error").is_none(), "the harness failed: {}", result["error"]);
    assert_eq!(result["console_errors"], json!([]), "Angular logged errors");
    assert_eq!(result["angular"], ANGULAR_VERSION);
    result
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().expect("a list").iter().map(|v| v.as_str().expect("a string").to_string()).collect()
}

/// What every form shows whatever its values: every key of the metadata bound once, to an input
/// under its exact name, in the table's groups, with its label, key name and help as written, and
/// nothing left for Angular in the text.
fn check_structure(kind: ProfileKind, result: &Value) {
    let keys: Vec<&str> = kind.keys().iter().map(|s| s.key).collect();
    let models = result["models"].as_array().expect("models");
    let mut bound: Vec<&str> = models.iter().map(|m| m["key"].as_str().expect("a key")).collect();
    bound.sort_unstable();
    let mut want = keys.clone();
    want.sort_unstable();
    assert_eq!(bound, want, "every metadata key is bound exactly once, under its exact name");
    for model in models {
        let spec = kind.spec(model["key"].as_str().unwrap_or_default()).expect("a key of the table");
        assert_eq!(model["bound"], true, "{}: an ngModel controller", spec.key);
        let (tag, kind_of) = match spec.input {
            Input::Text => ("input", "text"),
            Input::Password => ("input", "password"),
            Input::Checkbox => ("input", "checkbox"),
            Input::Lines => ("textarea", "textarea"),
            Input::Select(_) => ("select", "select-one"),
        };
        assert_eq!((model["tag"].as_str(), model["type"].as_str()), (Some(tag), Some(kind_of)), "{}", spec.key);
    }
    let fields = result["fields"].as_array().expect("fields");
    assert_eq!(fields.len(), keys.len());
    for field in fields {
        let spec = kind.spec(field["key"].as_str().unwrap_or_default()).expect("one input per block");
        let asterisk = if spec.required { "*" } else { "" };
        assert_eq!(field["label"], format!("{}:{asterisk} {}", spec.label, spec.key), "{}", spec.key);
        assert_eq!(field["key_shown"], spec.key);
        assert_eq!(field["help"], spec.help, "{}: help text as written", spec.key);
    }
    let groups = result["groups"].as_array().expect("groups");
    let titles: Vec<&str> = groups.iter().map(|g| g["title"].as_str().unwrap_or_default()).collect();
    assert_eq!(titles, kind.groups());
    for group in groups {
        let title = group["title"].as_str().unwrap_or_default();
        let in_table: Vec<&str> = kind.keys().iter().filter(|s| s.group == title).map(|s| s.key).collect();
        assert_eq!(strings(&group["keys"]), in_table, "{title}");
        assert_eq!(group["marker"], "A key in this group is invalid.");
    }
    assert_eq!(result["text_has_braces"], false, "no {{ }} left in the rendered text");
}

/// The snapshot's `configuration` (what GoCD reads back) and `scope`, with `want` set and every
/// other key unset.
fn check_values(kind: ProfileKind, snapshot: &Value, want: &[(&str, &str)], what: &str) {
    let want: BTreeMap<&str, &str> = want.iter().copied().collect();
    for spec in kind.keys() {
        let expected = want.get(spec.key).map_or(Value::Null, |v| json!(v));
        assert_eq!(snapshot["configuration"][spec.key], expected, "{what}: GoCD reads {}", spec.key);
        assert_eq!(snapshot["scope"][spec.key], expected, "{what}: scope.{}", spec.key);
    }
    let read: Vec<&String> = snapshot["configuration"].as_object().expect("configuration").keys().collect();
    assert_eq!(read.len(), kind.keys().len(), "{what}: GoCD keeps exactly the metadata keys: {read:?}");
}

/// The groups start open or collapsed as the table says, and only `invalid`'s group says a key
/// in it is invalid; that key's label and error show the plugin's message.
fn check_initial(kind: ProfileKind, result: &Value, invalid: &str, message: &str) {
    let invalid_group = kind.spec(invalid).expect("a key").group;
    assert!(!kind.open_groups().contains(&invalid_group), "the test's error is in a collapsed group");
    for group in result["groups"].as_array().expect("groups") {
        let title = group["title"].as_str().unwrap_or_default();
        assert_eq!(group["open"], kind.open_groups().contains(&title), "{title} open or collapsed");
        assert_eq!(group["marker_shown"], title == invalid_group, "{title}: error marker");
    }
    for field in result["fields"].as_array().expect("fields") {
        let key = field["key"].as_str().unwrap_or_default();
        let expected = if key == invalid { message } else { "" };
        assert_eq!(field["error"], expected, "{key}: the server error shown");
        assert_eq!(field["error_shown"], key == invalid, "{key}: error span shown");
        assert_eq!(field["label_invalid"], key == invalid, "{key}: label marked invalid");
    }
}

/// The first message the plugin gives for `key` of the saved profile (the one GoCD shows).
fn first_error(form: &Form, key: &str) -> String {
    let config = form.configuration.iter().find(|c| c["key"] == key).expect("the key is saved");
    let message = config["errors"][0].as_str().unwrap_or_else(|| panic!("the plugin refuses {key}: {config}"));
    message.to_string()
}

fn screenshots_to() -> Option<PathBuf> {
    let dir = std::env::var_os("PROFILE_VIEW_SCREENSHOTS").filter(|d| !d.is_empty())?;
    let dir = PathBuf::from(dir);
    let dir = if dir.is_absolute() { dir } else { Path::new(env!("CARGO_MANIFEST_DIR")).join(dir) };
    std::fs::create_dir_all(&dir).expect("the screenshot directory");
    Some(dir)
}

/// Photographs `form` whole (`height` high) into `dir`, named after its profile.
fn screenshot(form: &Form, height: u64, dir: &Path) {
    let name = match form.kind {
        ProfileKind::Cluster => "cluster-profile-view",
        ProfileKind::Elastic => "elastic-profile-view",
    };
    let scratch = scratch(name);
    let page = page(form, &scratch, &angular_js());
    let png = dir.join(format!("{name}.png"));
    run_chromium(
        &scratch,
        &page,
        &[format!("--screenshot={}", png.display()), format!("--window-size={SCREENSHOT_WIDTH},{height}")],
    );
    let _ = std::fs::remove_dir_all(&scratch);
    let bytes = std::fs::read(&png).expect("chromium wrote the screenshot");
    assert!(bytes.starts_with(b"\x89PNG"), "{} is a PNG", png.display());
    eprintln!("{} ({SCREENSHOT_WIDTH}x{height})", png.display());
}

#[test]
fn the_cluster_profile_form_works_in_gocds_angular_host() {
    let kind = ProfileKind::Cluster;
    let saved = [("ClusterName", "ci-shared"), ("AssignPublicIp", "true"), ("MaxAgents", "0")];
    let typed = [
        ("Region", "eu-west-1"),
        ("SecretAccessKey", "s3cr3t"),
        ("LaunchType", "EC2"),
        ("AssignPublicIp", "false"),
        ("Ec2Spot", "true"),
        ("Tags", "team=platform\ncost-center=ci"),
    ];
    let form = form(kind, &saved, vec![changes(&typed), every_key(kind)]);
    let result = render(&form, "cluster");
    check_structure(kind, &result);
    let message = first_error(&form, "MaxAgents");
    check_initial(kind, &result, "MaxAgents", &message);

    let [initial, filled, everything] = result["snapshots"].as_array().expect("snapshots").as_slice() else {
        panic!("three snapshots: {}", result["snapshots"])
    };
    check_values(kind, initial, &saved, "the saved profile");
    assert_eq!(initial["shown"]["ClusterName"], "ci-shared", "the saved value is in its input");
    assert_eq!(initial["shown"]["AssignPublicIp"], "true", "the saved checkbox is ticked");
    assert_eq!(initial["shown"]["LaunchType"], "", "an unset select shows its default choice");

    let mut want: BTreeMap<&str, &str> = saved.iter().copied().collect();
    want.extend(typed);
    check_values(kind, filled, &want.into_iter().collect::<Vec<_>>(), "after typing");
    assert_eq!(filled["shown"]["LaunchType"], "EC2");

    let every: Vec<(String, String)> = every_key(kind);
    let every: Vec<(&str, &str)> = every.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    check_values(kind, everything, &every, "after setting every input");
}

#[test]
fn the_elastic_profile_form_works_in_gocds_angular_host() {
    let kind = ProfileKind::Elastic;
    let saved = [("Image", "gocd/gocd-agent-ubuntu-22.04:v24.1.0"), ("StopTimeoutSeconds", "500")];
    let typed = [
        ("Cpu", "2048"),
        ("CpuArchitecture", "ARM64"),
        ("EnableExecuteCommand", "true"),
        ("Environment", "JAVA_OPTS=-Xmx1g\nCI=true"),
        ("Sidecars", r#"[{"name": "postgres", "image": "postgres:16", "memory": 512, "environment": {"A": "{{b}}"}}]"#),
    ];
    let form = form(kind, &saved, vec![changes(&typed), every_key(kind)]);
    let result = render(&form, "elastic");
    check_structure(kind, &result);
    let message = first_error(&form, "StopTimeoutSeconds");
    check_initial(kind, &result, "StopTimeoutSeconds", &message);

    let [initial, filled, everything] = result["snapshots"].as_array().expect("snapshots").as_slice() else {
        panic!("three snapshots: {}", result["snapshots"])
    };
    check_values(kind, initial, &saved, "the saved profile");
    assert_eq!(initial["shown"]["Image"], "gocd/gocd-agent-ubuntu-22.04:v24.1.0");
    assert_eq!(initial["shown"]["StopTimeoutSeconds"], "500");

    let mut want: BTreeMap<&str, &str> = saved.iter().copied().collect();
    want.extend(typed);
    check_values(kind, filled, &want.into_iter().collect::<Vec<_>>(), "after typing");
    assert_eq!(filled["shown"]["EnableExecuteCommand"], "true");

    let every: Vec<(String, String)> = every_key(kind);
    let every: Vec<(&str, &str)> = every.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    check_values(kind, everything, &every, "after setting every input");
}

#[test]
fn a_new_profile_form_starts_empty_with_only_the_basic_groups_open() {
    let photograph = screenshots_to();
    std::thread::scope(|s| {
        for kind in [ProfileKind::Cluster, ProfileKind::Elastic] {
            let photograph = photograph.as_deref();
            s.spawn(move || {
                let (tag, title) = match kind {
                    ProfileKind::Cluster => ("cluster-new", "Add cluster profile"),
                    ProfileKind::Elastic => ("elastic-new", "Add elastic agent profile"),
                };
                let mut form = form(kind, &[], Vec::new());
                form.title = title;
                let result = render(&form, tag);
                check_structure(kind, &result);
                for group in result["groups"].as_array().expect("groups") {
                    let title = group["title"].as_str().unwrap_or_default();
                    assert_eq!(group["open"], kind.open_groups().contains(&title), "{title} open or collapsed");
                    assert_eq!(group["marker_shown"], false, "{title}: no error marker");
                }
                for field in result["fields"].as_array().expect("fields") {
                    assert_eq!((&field["error_shown"], &field["label_invalid"]), (&json!(false), &json!(false)));
                }
                check_values(kind, &result["snapshots"][0], &[], "a new profile");
                if let Some(dir) = photograph {
                    let height = result["height"].as_u64().expect("the page height");
                    screenshot(&form, height, dir);
                }
            });
        }
    });
}
