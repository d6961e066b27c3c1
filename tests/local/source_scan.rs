//! Reading the plugin's own source for rules a compiler does not check: which lines of `src`
//! are non-test code. Test code is `#[cfg(test)]` items and modules (and the files of modules
//! declared under it, with their submodules), files named `tests.rs`, and folders `tests/`.
//! Comment lines are not code.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// One line of non-test code.
pub struct CodeLine {
    /// The file, from the crate's root (`src/...`).
    pub file: String,
    /// The line's number, from 1.
    pub number: usize,
    /// The line without what a `//` comment at its end says.
    pub code: String,
}

impl CodeLine {
    /// `file:line`.
    pub fn at(&self) -> String {
        format!("{}:{}", self.file, self.number)
    }
}

/// Every line of non-test code under `root` (a folder of `src`, or `src` itself), file by file.
/// The whole of `src` is read, so that a module declared under `#[cfg(test)]` above `root` is
/// known as test code.
pub fn non_test_lines(root: &Path) -> Vec<CodeLine> {
    let src = src();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
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
    let crate_root = src.parent().unwrap_or(&src);
    let mut lines = Vec::new();
    for (file, text, l) in &lexed {
        if !file.starts_with(root) || is_test_file(&src, file, &test_modules) {
            continue;
        }
        let name = file.strip_prefix(crate_root).unwrap_or(file).display().to_string();
        for (n, line) in text.lines().enumerate() {
            if l.test_lines.contains(&(n + 1)) || line.trim_start().starts_with("//") {
                continue;
            }
            let code = line.split("//").next().unwrap_or_default().to_string();
            lines.push(CodeLine { file: name.clone(), number: n + 1, code });
        }
    }
    lines
}

/// The crate's `src` folder.
pub fn src() -> PathBuf {
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
fn is_test_file(root: &Path, file: &Path, test_modules: &BTreeSet<PathBuf>) -> bool {
    let inside = file.strip_prefix(root).unwrap_or(file);
    if file.file_name().is_some_and(|n| n == "tests.rs") || inside.components().any(|c| c.as_os_str() == "tests") {
        return true;
    }
    test_modules.contains(file)
        || file
            .ancestors()
            .skip(1)
            .take_while(|dir| dir.starts_with(root) && *dir != root)
            .any(|dir| test_modules.contains(&dir.with_extension("rs")) || test_modules.contains(&dir.join("mod.rs")))
}

#[test]
fn the_lexer_marks_test_items_and_test_module_declarations() {
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
