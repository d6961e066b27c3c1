//! ECS and EC2 statuses are types (`aws::status`), read once where the port builds its views:
//! no code of the plugin compares a status as a string. This scans `src` for a string
//! comparison of a status AWS reports (a task's last or desired status, a stop code, a container
//! instance's, cluster's, task definition's or capacity provider's status, an EC2 instance's
//! state): `== "RUNNING"`, `!= "stopped"`, `Some("SpotInterruption")`, a match arm `"DRAINING" =>`,
//! a pattern `"STOPPING" | "STOPPED"`, `matches!` over such literals. Test code may keep the
//! literals: `#[cfg(test)]` items and modules, files named `tests.rs`, and folders `tests/`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The statuses ECS and EC2 report, as AWS spells them.
const STATUSES: &[&str] = &[
    // A task's lastStatus and desiredStatus.
    "PROVISIONING",
    "PENDING",
    "ACTIVATING",
    "RUNNING",
    "DEACTIVATING",
    "STOPPING",
    "DEPROVISIONING",
    "STOPPED",
    "DELETED",
    // A task's stopCode.
    "TaskFailedToStart",
    "EssentialContainerExited",
    "UserInitiated",
    "ServiceSchedulerInitiated",
    "SpotInterruption",
    "TerminationNotice",
    "InfrastructureHealth",
    // A container instance's, a cluster's, a task definition's, a capacity provider's status.
    "ACTIVE",
    "INACTIVE",
    "DRAINING",
    "REGISTERING",
    "DEREGISTERING",
    "REGISTRATION_FAILED",
    "DELETE_IN_PROGRESS",
    "FAILED",
    // An EC2 instance's state name.
    "pending",
    "running",
    "shutting-down",
    "terminated",
    "stopping",
    "stopped",
];

/// Where a status literal is a comparison: `(before the literal, after it)`.
const COMPARISONS: &[(&str, &str)] = &[
    ("==", ""),
    ("!=", ""),
    ("", "=="),
    ("", "!="),
    ("Some(", ")"),
    ("", "=>"),
    ("", "|"),
    ("|", ""),
    ("eq_ignore_ascii_case(", ""),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// What a file's lexer found: which lines are test code, and the modules it declares under
/// `#[cfg(test)]` (their files are test code).
struct Lexed {
    test_lines: BTreeSet<usize>,
    test_modules: Vec<String>,
}

/// Reads Rust just well enough to find `#[cfg(test)]` items: skips comments, strings (raw ones
/// too) and char literals, counts braces, and marks each such item's lines (through its `;` or
/// its closing brace) as test code.
fn lex(text: &str) -> Lexed {
    let chars: Vec<char> = text.chars().collect();
    let mut lexed = Lexed { test_lines: BTreeSet::new(), test_modules: Vec::new() };
    let (mut i, mut line, mut depth) = (0usize, 1usize, 0usize);
    // The test item being read: (its first line, the brace depth it started at, whether its
    // body is open).
    let mut item: Option<(usize, usize, bool)> = None;
    let mut item_text = String::new();
    let at = |i: usize, s: &str| s.chars().enumerate().all(|(k, c)| chars.get(i + k) == Some(&c));
    while i < chars.len() {
        let c = chars[i];
        let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c == '\n' {
            line += 1;
            i += 1;
            continue;
        }
        if at(i, "//") {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if at(i, "/*") {
            let mut nested = 0;
            while i < chars.len() {
                if at(i, "/*") {
                    nested += 1;
                    i += 2;
                } else if at(i, "*/") {
                    nested -= 1;
                    i += 2;
                    if nested == 0 {
                        break;
                    }
                } else {
                    line += usize::from(chars[i] == '\n');
                    i += 1;
                }
            }
            continue;
        }
        if c == 'r' && !ident_before && (chars.get(i + 1) == Some(&'"') || chars.get(i + 1) == Some(&'#')) {
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            if chars.get(i + 1 + hashes) == Some(&'"') {
                let close: String = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
                i += 2 + hashes;
                while i < chars.len() && !at(i, &close) {
                    line += usize::from(chars[i] == '\n');
                    i += 1;
                }
                i += close.len();
                continue;
            }
        }
        if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                line += usize::from(chars[i] == '\n');
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            continue;
        }
        if c == '\'' {
            if chars.get(i + 1) == Some(&'\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
                continue;
            }
            if chars.get(i + 2) == Some(&'\'') {
                i += 3;
                continue;
            }
            i += 1; // a lifetime
            continue;
        }
        if item.is_none() && at(i, "#[cfg(test)]") {
            item = Some((line, depth, false));
            item_text.clear();
            i += "#[cfg(test)]".len();
            continue;
        }
        if let Some((first, start_depth, open)) = item.as_mut() {
            if !*open {
                item_text.push(c);
            }
            let ends = match c {
                '{' => {
                    *open = true;
                    false
                }
                '}' => *open && depth == *start_depth + 1,
                ';' => !*open && depth == *start_depth,
                _ => false,
            };
            if ends {
                lexed.test_lines.extend(*first..=line);
                let declared = item_text.trim().trim_end_matches(';').trim();
                if c == ';' {
                    if let Some(name) = declared.split_whitespace().skip_while(|w| *w != "mod").nth(1) {
                        lexed.test_modules.push(name.to_string());
                    }
                }
                item = None;
            }
        }
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    lexed
}

/// The file of module `name` declared in `file`.
fn module_files(file: &Path, name: &str) -> [PathBuf; 2] {
    let stem = file.file_stem().unwrap_or_default().to_string_lossy();
    let dir = if matches!(stem.as_ref(), "mod" | "lib" | "main") {
        file.parent().unwrap_or(file).to_path_buf()
    } else {
        file.with_extension("")
    };
    [dir.join(format!("{name}.rs")), dir.join(name).join("mod.rs")]
}

/// Whether a whole file is test code: named `tests.rs`, under a `tests/` folder, declared under
/// `#[cfg(test)]`, or a submodule of such a file.
fn is_test_file(file: &Path, test_modules: &BTreeSet<PathBuf>) -> bool {
    let root = src();
    let inside = file.strip_prefix(&root).unwrap_or(file);
    if file.file_name().is_some_and(|n| n == "tests.rs") || inside.components().any(|c| c.as_os_str() == "tests") {
        return true;
    }
    test_modules.contains(file)
        || file
            .ancestors()
            .skip(1)
            .take_while(|dir| dir.starts_with(&root) && *dir != root)
            .any(|dir| test_modules.contains(&dir.with_extension("rs")) || test_modules.contains(&dir.join("mod.rs")))
}

/// The status literal `line` compares, if any.
fn compared_status(line: &str) -> Option<&'static str> {
    let code = line.split("//").next().unwrap_or_default();
    STATUSES.iter().copied().find(|status| {
        let quoted = format!("\"{status}\"");
        code.match_indices(&quoted).any(|(at, _)| {
            let before = code[..at].trim_end();
            let after = code[at + quoted.len()..].trim_start();
            code.contains("matches!(") || COMPARISONS.iter().any(|(b, a)| before.ends_with(b) && after.starts_with(a))
        })
    })
}

/// Every string comparison of a status in the plugin's non-test code, as `file:line: text`.
fn string_comparisons(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let lexed: Vec<(PathBuf, String, Lexed)> = files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).expect("read a source file");
            let l = lex(&text);
            (f, text, l)
        })
        .collect();
    let test_modules: BTreeSet<PathBuf> =
        lexed.iter().flat_map(|(f, _, l)| l.test_modules.iter().flat_map(|m| module_files(f, m))).collect();
    let mut found = Vec::new();
    for (file, text, l) in &lexed {
        if is_test_file(file, &test_modules) {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            if l.test_lines.contains(&(n + 1)) || line.trim_start().starts_with("//") {
                continue;
            }
            if let Some(status) = compared_status(line) {
                let name = file.strip_prefix(root.parent().unwrap_or(root)).unwrap_or(file).display();
                found.push(format!("{name}:{}: compares \"{status}\" as a string: {}", n + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn no_status_is_compared_as_a_string_outside_tests() {
    let found = string_comparisons(&src());
    assert!(
        found.is_empty(),
        "statuses are types (src/aws/status/): match on them instead of their text:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_sees_comparisons_and_skips_test_code() {
    for line in [
        r#"if c.status == "DRAINING" {"#,
        r#"t.last_status != "STOPPED" && ours"#,
        r#"stop_code.as_deref() == Some("SpotInterruption")"#,
        r#"    "ACTIVE" => true,"#,
        r#"matches!(s.as_str(), "DEACTIVATING" | "STOPPING")"#,
        r#"Some((_, state)) if state != "pending" && state != "running" => {"#,
    ] {
        assert!(compared_status(line).is_some(), "{line}");
    }
    for line in [
        r#"format!("ECS cluster {name} is {status}, not ACTIVE")"#,
        r#"if value == "RUNNINGX" {"#,
        r#"// a comment: status == "RUNNING""#,
        r#"let x = TaskStatus::Running;"#,
    ] {
        assert_eq!(compared_status(line), None, "{line}");
    }
    let text = concat!(
        "fn real() {}\n",
        "#[cfg(test)]\n",
        "mod tests {\n",
        "    fn t() { let s = \"{\"; }\n",
        "}\n",
        "fn after() {}\n",
        "#[cfg(test)]\n",
        "mod fixtures;\n",
    );
    let l = lex(text);
    assert_eq!(l.test_lines, (2..=5).chain(7..=8).collect(), "the test module and the declaration");
    assert_eq!(l.test_modules, ["fixtures"]);
}
