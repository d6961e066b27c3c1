//! The repository stands alone: every document, comment and script it holds names only files that
//! are in it. A fresh clone has no notes from outside, so a pointer to one (a `.md` file that does
//! not exist here, or an absolute path of some machine) would lead a reader nowhere.
//!
//! What counts as a pointer: a word ending in `.md`, or a path starting with one of the
//! repository's own top-level folders (`src/`, `tests/`, `docs/`, ...). A path is looked up from
//! the repository's root and from the folder of the file that names it; a bare file name ending
//! in `.md` anywhere in the tree.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The folders a path in prose may start with and still mean this repository.
const TOP_FOLDERS: [&str; 8] =
    ["src/", "tests/", "docs/", "packaging/", "benches/", "scripts/", "profiles/", "examples/"];
/// The root of this machine's own folders: a path under it names a file of one machine only.
const MACHINE_ROOT: &str = concat!("/", "work", "/");
/// Text files worth reading; everything else (images, lock files) names nothing.
const TEXT_ENDINGS: [&str; 12] = ["rs", "md", "sh", "toml", "java", "xml", "json", "yaml", "yml", "txt", "html", "j2"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every text file of the repository, skipping build output and git's own folder.
fn text_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !matches!(name.as_str(), ".git" | "target" | "node_modules") {
                text_files(&path, out);
            }
        } else {
            let script = matches!(name.as_str(), "test" | "demo" | "run" | "screenshots" | "moto.sh");
            let text = path.extension().is_some_and(|e| TEXT_ENDINGS.contains(&e.to_string_lossy().as_ref()));
            if script || text {
                out.push(path);
            }
        }
    }
}

/// The words of `text` that point at a file: any ending in `.md`, and paths under a top folder.
fn pointers(text: &str) -> Vec<String> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-');
    let mut found = Vec::new();
    for word in text.split(|c: char| !is_path_char(c)) {
        let word = word.trim_end_matches('.');
        // A bare ending (`*.md`), a URL, build output and a name cut at a variable part
        // (`target/ecs-elastic-agent-gocd-$version.jar`) point at nothing to check.
        let generated = word.contains("target/") || word.ends_with('-');
        if word.starts_with('.') || word.contains("://") || generated {
            continue;
        }
        if word.starts_with('/') && !word.starts_with(MACHINE_ROOT) {
            continue;
        }
        let under_top = TOP_FOLDERS.iter().any(|top| word.starts_with(top));
        if word.ends_with(".md") || under_top || word.starts_with(MACHINE_ROOT) {
            found.push(word.to_string());
        }
    }
    found
}

/// Whether `pointer`, named in `file`, is a file or folder of the repository.
fn exists(root: &Path, file: &Path, pointer: &str, md_names: &BTreeSet<String>) -> bool {
    if pointer.starts_with('/') {
        return false;
    }
    // A glob or a placeholder (`packaging/iam/*.json`, `src/<module>.rs`) names a family, not a file.
    if pointer.contains('*') || pointer.contains('<') {
        return true;
    }
    let from_root = root.join(pointer);
    let from_here = file.parent().map(|d| d.join(pointer));
    if from_root.exists() || from_here.is_some_and(|p| p.exists()) {
        return true;
    }
    !pointer.contains('/') && md_names.contains(pointer)
}

#[test]
fn no_file_names_a_file_that_is_not_in_the_repository() {
    let root = repo();
    let mut files = Vec::new();
    text_files(&root, &mut files);
    assert!(files.len() > 100, "only {} text files found under {}", files.len(), root.display());
    let md_names: BTreeSet<String> = files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    let mut missing = Vec::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else { continue };
        for pointer in pointers(&text) {
            if !exists(&root, file, &pointer, &md_names) {
                missing.push(format!("{}: {pointer}", file.strip_prefix(&root).unwrap_or(file).display()));
            }
        }
    }
    missing.dedup();
    assert!(missing.is_empty(), "files named that are not in the repository:\n  {}", missing.join("\n  "));
}

#[test]
fn pointers_are_found_and_checked() {
    // The missing names are built here, so this file names no document the repository lacks.
    let missing = format!("{}.md", "NOT-HERE");
    let outside = format!("{MACHINE_ROOT}shared/{missing}");
    let words =
        pointers(&format!("see {missing} §7, `docs/aws-rules.md` and src/cluster/launch/run_task.rs; {outside}."));
    assert_eq!(words, [missing.as_str(), "docs/aws-rules.md", "src/cluster/launch/run_task.rs", outside.as_str()]);
    let root = repo();
    let here = root.join("README.md");
    let md: BTreeSet<String> = ["README.md".to_string()].into();
    assert!(exists(&root, &here, "src/main.rs", &md));
    assert!(exists(&root, &here, "README.md", &md));
    assert!(!exists(&root, &here, &missing, &md));
    assert!(!exists(&root, &here, &outside, &md));
    assert!(!exists(&root, &here, &format!("src/{}", "no_such_file.rs"), &md));
}
