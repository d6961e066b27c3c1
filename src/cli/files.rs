//! Profiles kept in JSON files: a flat object of key to string (or `null`), exactly the body of
//! GoCD's validate calls. Anything else is refused with a sentence naming the file's problem.

use std::path::Path;

use serde_json::Value;

use crate::settings::{ClusterProfile, ElasticProfile, FieldError, Properties};

/// Reads a profile file into GoCD's property map.
///
/// # Errors
/// A sentence saying why the file cannot be used (unreadable, not JSON, not a flat object of
/// strings).
pub fn read_properties(path: &Path) -> Result<Properties, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read the file: {e}"))?;
    parse_properties(&text)
}

/// Parses the text of a profile file.
///
/// # Errors
/// As [`read_properties`].
pub fn parse_properties(text: &str) -> Result<Properties, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(map) = value else {
        return Err("not a JSON object: a profile is {\"Key\": \"value\", ...}".to_string());
    };
    let mut props = Properties::new();
    for (key, value) in map {
        let value = match value {
            Value::String(s) => Some(s),
            Value::Null => None,
            other => {
                return Err(format!(
                    "{key}: every value must be a JSON string, as GoCD sends them (write \"{}\", not {})",
                    plain(&other),
                    kind(&other)
                ))
            }
        };
        props.insert(key, value);
    }
    Ok(props)
}

/// A profile file read and parsed: the properties, and the typed profile when it is valid.
#[derive(Debug)]
pub struct Loaded<T> {
    /// The file's properties.
    pub properties: Properties,
    /// The parsed profile, or every problem.
    pub parsed: Result<T, Vec<FieldError>>,
}

/// Reads and parses a cluster profile file.
///
/// # Errors
/// As [`read_properties`].
pub fn load_cluster(path: &Path) -> Result<Loaded<ClusterProfile>, String> {
    let properties = read_properties(path)?;
    let parsed = ClusterProfile::parse(&properties);
    Ok(Loaded { properties, parsed })
}

/// Reads and parses an elastic profile file.
///
/// # Errors
/// As [`read_properties`].
pub fn load_elastic(path: &Path) -> Result<Loaded<ElasticProfile>, String> {
    let properties = read_properties(path)?;
    let parsed = ElasticProfile::parse(&properties);
    Ok(Loaded { properties, parsed })
}

fn plain(v: &Value) -> String {
    match v {
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        _ => "...".to_string(),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
        Value::Null | Value::String(_) => "a string",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_nulls_are_properties() {
        let props = parse_properties(r#"{"ClusterName": "ci", "Region": null}"#).unwrap();
        assert_eq!(props.get("ClusterName"), Some(&Some("ci".to_string())));
        assert_eq!(props.get("Region"), Some(&None));
    }

    #[test]
    fn other_shapes_are_refused_with_a_hint() {
        assert_eq!(
            parse_properties(r#"{"MaxAgents": 10}"#).unwrap_err(),
            "MaxAgents: every value must be a JSON string, as GoCD sends them (write \"10\", not a number)"
        );
        assert!(parse_properties("[1]").unwrap_err().starts_with("not a JSON object"));
        assert!(parse_properties("{").unwrap_err().starts_with("not JSON"));
    }
}
