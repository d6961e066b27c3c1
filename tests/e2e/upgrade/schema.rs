//! The recorded schemas: `tests/data/upgrades/<version>.json`, one per released version, each
//! saying what that version writes into AWS that a later version must adopt (the format:
//! `tests/data/upgrades/README.md`). Here: reading the files, matching a written name or tag
//! value against a recorded pattern (which also reads the values back out of it), rendering a
//! pattern with other values, and the derivations of the values one version computes from others
//! (the cluster profile key, the server id's hash in `startedBy`).
//!
//! A pattern is text with `{name}` placeholders; each name is one of the file's `values`, with
//! a shape (`hex` of a length, `int`, `text`, `any`, `one_of`). Within one resource a name has
//! one value: `{cluster_key}` in `startedBy`, in a tag and in the agent id is the same key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::world::host::Props;

/// Where the version files are.
pub fn folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("data").join("upgrades")
}

/// One version's file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schema {
    /// The version (as `Cargo.toml` names it).
    pub version: String,
    /// What the file is, for a reader.
    #[allow(dead_code)]
    pub about: String,
    /// Every placeholder the patterns use.
    pub values: BTreeMap<String, ValueSpec>,
    /// Every kind of resource the version writes: its names and tags.
    pub kinds: BTreeMap<String, Kind>,
    /// Where the examples were recorded.
    pub world: World,
    /// One resource of each kind and state, as the version wrote it.
    pub examples: BTreeMap<String, Example>,
    /// The file it was read from (set by [`Schema::load`]).
    #[serde(skip)]
    pub file: PathBuf,
}

/// A placeholder: its shape, and how the version computes it when it is computed from others.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValueSpec {
    /// `hex`, `int`, `text` (one character or more), `any` (possibly empty) or `one_of`.
    pub shape: String,
    /// For `hex`: how many digits.
    #[serde(default)]
    pub length: Option<usize>,
    /// For `one_of`: the values allowed.
    #[serde(default)]
    pub one_of: Vec<String>,
    /// What it is, for a reader.
    #[allow(dead_code)]
    pub about: String,
    /// How the version computes it from other values.
    #[serde(default)]
    pub derived: Option<Derivation>,
}

/// A value computed from others: SHA-256 over each part followed by a NUL byte, as lower-case
/// hex, its first `sha256_hex` digits.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Derivation {
    /// How many hex digits are kept.
    pub sha256_hex: usize,
    /// The parts, each a pattern.
    pub of: Vec<String>,
}

/// A kind of resource: its names (`startedBy`, a family) and its tags, each a pattern.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Kind {
    /// What it is, for a reader.
    #[allow(dead_code)]
    pub about: String,
    #[serde(default)]
    pub names: BTreeMap<String, Field>,
    #[serde(default)]
    pub tags: BTreeMap<String, Field>,
}

/// A name or tag: its pattern, and when it is written only sometimes.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Field {
    /// Always written.
    Always(String),
    /// Written only when `only` says.
    Sometimes {
        /// The pattern.
        value: String,
        /// When it is written (for a reader).
        #[allow(dead_code)]
        only: String,
    },
}

impl Field {
    /// The pattern.
    pub fn pattern(&self) -> &str {
        match self {
            Field::Always(p) | Field::Sometimes { value: p, .. } => p,
        }
    }

    /// Whether every resource of the kind has it.
    pub fn required(&self) -> bool {
        matches!(self, Field::Always(_))
    }
}

/// Where the examples were recorded: the account and region, GoCD's server id then, and the
/// profiles (cluster profile id → properties; elastic profile id → its cluster profile and
/// properties).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct World {
    #[allow(dead_code)]
    pub about: String,
    pub account: String,
    pub region: String,
    pub role_arn: String,
    /// GoCD's server id when the examples were recorded (for a reader).
    #[allow(dead_code)]
    pub server_id: String,
    pub cluster_profiles: BTreeMap<String, Props>,
    pub elastic_profiles: BTreeMap<String, ElasticProfile>,
}

/// An elastic profile of the world.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ElasticProfile {
    pub cluster_profile: String,
    pub properties: Props,
}

/// One resource as the version wrote it, in one state.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    /// One of the file's kinds.
    pub kind: String,
    /// Its state (README: "States").
    pub state: String,
    /// What that state is, in AWS and in GoCD, for a reader.
    #[allow(dead_code)]
    pub about: String,
    /// The world's cluster profile it belongs to (instances), or the elastic profile (tasks,
    /// task definitions).
    #[serde(default)]
    pub cluster_profile: Option<String>,
    #[serde(default)]
    pub elastic_profile: Option<String>,
    /// For a task on an EC2 instance: the example of that instance.
    #[serde(default)]
    pub on: Option<String>,
    #[serde(default)]
    pub names: BTreeMap<String, String>,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

/// A version as numbers, for ordering (`0.10.0` after `0.9.0`).
pub fn version_key(version: &str) -> Vec<u64> {
    version
        .split('.')
        .map(|p| p.parse().unwrap_or_else(|_| panic!("version {version:?} is not numbers and dots")))
        .collect()
}

impl Schema {
    /// Reads one version's file and checks it holds together (see [`Schema::check_examples`]).
    ///
    /// # Panics
    /// When the file is missing, not the format, or its examples do not match its patterns.
    pub fn load(file: &Path) -> Schema {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        let mut schema: Schema =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not a recorded schema: {e}", file.display()));
        schema.file = file.to_path_buf();
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        assert_eq!(stem, schema.version, "{} records version {}: name it after it", file.display(), schema.version);
        schema.check_examples();
        schema
    }

    /// Every recorded version, oldest first.
    ///
    /// # Panics
    /// When there is none (a fresh clone always has `0.1.0.json`), or one does not load.
    pub fn all() -> Vec<Schema> {
        let dir = folder();
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort_by_key(|f| version_key(f.file_stem().and_then(|s| s.to_str()).unwrap_or_default()));
        assert!(!files.is_empty(), "no recorded schema in {}: every released version has one", dir.display());
        let schemas: Vec<Schema> = files.iter().map(|f| Schema::load(f)).collect();
        let newest = schemas.last().map(|s| s.version.clone()).unwrap_or_default();
        assert!(
            version_key(&newest) <= version_key(env!("CARGO_PKG_VERSION")),
            "the newest recorded schema is {newest}, newer than the plugin's version {} in Cargo.toml",
            env!("CARGO_PKG_VERSION")
        );
        schemas
    }

    /// The newest recorded version: what the plugin must write now.
    pub fn newest() -> Schema {
        Schema::all().pop().expect("at least one")
    }

    /// A kind of this version.
    ///
    /// # Panics
    /// When the version records no such kind.
    pub fn kind(&self, kind: &str) -> &Kind {
        self.kinds.get(kind).unwrap_or_else(|| panic!("{} records no kind {kind:?}", self.file.display()))
    }

    fn shape_of(&self, name: &str) -> &ValueSpec {
        self.values
            .get(name)
            .unwrap_or_else(|| panic!("{} uses {{{name}}} without a `values` entry", self.file.display()))
    }

    /// Every example matches its kind: each recorded name and each tag the kind always writes
    /// is there, nothing else is, and every value has its pattern's shape, with one value per
    /// placeholder in the resource.
    ///
    /// # Panics
    /// Naming the example and what does not match.
    pub fn check_examples(&self) {
        for v in self.values.values() {
            assert!(
                matches!(v.shape.as_str(), "hex" | "int" | "text" | "any" | "one_of"),
                "{}: unknown shape {:?}",
                self.file.display(),
                v.shape
            );
        }
        for (name, example) in &self.examples {
            let kind = self.kind(&example.kind);
            let problems = self.compare(kind, &example.names, &example.tags).problems;
            assert!(
                problems.is_empty(),
                "{}: example {name} does not match kind {}:\n  {}",
                self.file.display(),
                example.kind,
                problems.join("\n  ")
            );
        }
    }

    /// Compares one written resource with a kind: names, tag keys, and the shape of every value.
    /// Returns the problems (empty when it matches) and the placeholders' values read from it.
    pub fn compare(&self, kind: &Kind, names: &BTreeMap<String, String>, tags: &BTreeMap<String, String>) -> Compared {
        let mut problems = Vec::new();
        let mut bound: BTreeMap<String, String> = BTreeMap::new();
        for (what, recorded, written) in [("name", &kind.names, names), ("tag", &kind.tags, tags)] {
            for (key, field) in recorded {
                match written.get(key) {
                    None if field.required() => {
                        problems.push(format!("no {what} {key} (recorded: {:?})", field.pattern()))
                    }
                    Some(value) if !self.matches(field.pattern(), value, &mut bound) => {
                        problems.push(format!(
                            "{what} {key} = {value:?} does not have the recorded shape {:?}{}",
                            field.pattern(),
                            bound_note(field.pattern(), &bound)
                        ));
                    }
                    None | Some(_) => {}
                }
            }
            for (key, value) in written {
                if !recorded.contains_key(key) {
                    problems.push(format!("{what} {key} = {value:?} is not recorded"));
                }
            }
        }
        Compared { problems, bound }
    }

    /// Whether `value` matches `pattern`, binding its placeholders (a placeholder bound already
    /// must have the same value). On a mismatch `bound` is as it was.
    pub fn matches(&self, pattern: &str, value: &str, bound: &mut BTreeMap<String, String>) -> bool {
        let segments = segments(pattern);
        let mut trial = bound.clone();
        if self.match_from(&segments, value, &mut trial) {
            *bound = trial;
            true
        } else {
            false
        }
    }

    fn match_from(&self, segments: &[Segment], s: &str, bound: &mut BTreeMap<String, String>) -> bool {
        match segments.first() {
            None => s.is_empty(),
            Some(Segment::Literal(l)) => {
                s.strip_prefix(l.as_str()).is_some_and(|rest| self.match_from(&segments[1..], rest, bound))
            }
            Some(Segment::Value(name)) => {
                if let Some(v) = bound.get(name).cloned() {
                    return s.strip_prefix(v.as_str()).is_some_and(|rest| self.match_from(&segments[1..], rest, bound));
                }
                let spec = self.shape_of(name);
                let ends: Vec<usize> = s.char_indices().map(|(i, _)| i).skip(1).chain([s.len()]).collect();
                for end in std::iter::once(0).chain(ends).rev() {
                    let candidate = &s[..end];
                    if !fits(spec, candidate) {
                        continue;
                    }
                    bound.insert(name.clone(), candidate.to_string());
                    if self.match_from(&segments[1..], &s[end..], bound) {
                        return true;
                    }
                    bound.remove(name);
                }
                false
            }
        }
    }

    /// `pattern` with its placeholders replaced by `values`.
    ///
    /// # Panics
    /// When a placeholder has no value, or the value does not have its shape.
    pub fn render(&self, pattern: &str, values: &BTreeMap<String, String>) -> String {
        segments(pattern)
            .into_iter()
            .map(|s| match s {
                Segment::Literal(l) => l,
                Segment::Value(name) => {
                    let v =
                        values.get(&name).unwrap_or_else(|| panic!("no value for {{{name}}} in {pattern:?}")).clone();
                    assert!(fits(self.shape_of(&name), &v), "{{{name}}} = {v:?} does not have its shape");
                    v
                }
            })
            .collect()
    }

    /// Adds every derived value whose parts are all known to `values` (and those derived from
    /// them in turn).
    pub fn derive(&self, values: &mut BTreeMap<String, String>) {
        loop {
            let mut added = false;
            for (name, spec) in &self.values {
                let Some(d) = &spec.derived else { continue };
                if values.contains_key(name) {
                    continue;
                }
                let parts: Option<Vec<String>> = d.of.iter().map(|p| self.try_render(p, values)).collect();
                if let Some(parts) = parts {
                    values.insert(name.clone(), sha256_hex(&parts, d.sha256_hex));
                    added = true;
                }
            }
            if !added {
                return;
            }
        }
    }

    fn try_render(&self, pattern: &str, values: &BTreeMap<String, String>) -> Option<String> {
        segments(pattern)
            .into_iter()
            .map(|s| match s {
                Segment::Literal(l) => Some(l),
                Segment::Value(name) => values.get(&name).cloned(),
            })
            .collect()
    }

    /// What the world's cluster profile `id` makes of the world's inputs: `account`, `region`,
    /// `role_arn`, `cluster_name` and `server_id` as given, and every value derived from them
    /// (`cluster_key`, `server_hash`).
    pub fn world_values(&self, cluster_profile: &str, server_id: &str) -> BTreeMap<String, String> {
        let props =
            self.world.cluster_profiles.get(cluster_profile).unwrap_or_else(|| {
                panic!("{}: the world has no cluster profile {cluster_profile:?}", self.file.display())
            });
        let cluster = props.get("ClusterName").expect("every cluster profile names its cluster");
        let mut values: BTreeMap<String, String> = [
            ("account", self.world.account.as_str()),
            ("region", self.world.region.as_str()),
            ("role_arn", self.world.role_arn.as_str()),
            ("cluster_name", cluster.as_str()),
            ("server_id", server_id),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        self.derive(&mut values);
        values
    }

    /// The cluster profile of an example: its own, or its elastic profile's.
    pub fn cluster_profile_of(&self, example: &Example) -> String {
        match (&example.cluster_profile, &example.elastic_profile) {
            (Some(c), _) => c.clone(),
            (None, Some(e)) => self.elastic_profile(e).cluster_profile.clone(),
            (None, None) => {
                panic!("{}: an example names neither a cluster nor an elastic profile", self.file.display())
            }
        }
    }

    /// An elastic profile of the world.
    pub fn elastic_profile(&self, id: &str) -> &ElasticProfile {
        self.world
            .elastic_profiles
            .get(id)
            .unwrap_or_else(|| panic!("{}: the world has no elastic profile {id:?}", self.file.display()))
    }

    /// Whether the world's cluster profile runs on EC2 instances of the plugin's own.
    pub fn is_ec2(&self, cluster_profile: &str) -> bool {
        self.world.cluster_profiles.get(cluster_profile).and_then(|p| p.get("LaunchType")).is_some_and(|t| t == "EC2")
    }
}

/// The outcome of [`Schema::compare`].
#[derive(Debug, Clone, Default)]
pub struct Compared {
    /// What does not match, one sentence each.
    pub problems: Vec<String>,
    /// The placeholders' values read from the resource.
    pub bound: BTreeMap<String, String>,
}

/// For a mismatch: what the pattern's placeholders were bound to by the resource's other names
/// and tags (a value that differs from one of those is the reason).
fn bound_note(pattern: &str, bound: &BTreeMap<String, String>) -> String {
    let known: Vec<String> = segments(pattern)
        .into_iter()
        .filter_map(|s| match s {
            Segment::Value(n) => bound.get(&n).map(|v| format!("{{{n}}} = {v:?}")),
            Segment::Literal(_) => None,
        })
        .collect();
    if known.is_empty() {
        String::new()
    } else {
        format!(" (with {} from its other names and tags)", known.join(", "))
    }
}

/// Whether `v` has the placeholder's shape.
fn fits(spec: &ValueSpec, v: &str) -> bool {
    match spec.shape.as_str() {
        "hex" => {
            spec.length.is_none_or(|n| v.len() == n)
                && !v.is_empty()
                && v.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        }
        "int" => {
            let digits = v.strip_prefix('-').unwrap_or(v);
            !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
        }
        "text" => !v.is_empty(),
        "any" => true,
        "one_of" => spec.one_of.iter().any(|o| o == v),
        _ => false,
    }
}

/// SHA-256 over each part followed by a NUL byte, the first `digits` lower-case hex digits.
pub fn sha256_hex(parts: &[String], digits: usize) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    let hex: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    hex[..digits.min(hex.len())].to_string()
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Value(String),
}

/// A pattern's literal text and `{placeholders}`, in order.
fn segments(pattern: &str) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut rest = pattern;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            out.push(Segment::Literal(rest[..open].to_string()));
        }
        let close = rest[open..].find('}').map(|c| open + c).unwrap_or_else(|| panic!("unclosed {{ in {pattern:?}"));
        out.push(Segment::Value(rest[open + 1..close].to_string()));
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        out.push(Segment::Literal(rest.to_string()));
    }
    out
}
