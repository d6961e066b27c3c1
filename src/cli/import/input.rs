//! Reading their profiles in either form GoCD gives them: the JSON of GoCD's API
//! (`GET /go/api/admin/elastic/cluster_profiles`, `GET /go/api/elastic/profiles`: `_embedded`
//! holds `profiles`, or `cluster_profiles`; one profile object alone is taken too) or the
//! `<elastic>` section of `cruise-config.xml` (`<clusterProfiles>`, `<agentProfiles>`).
//!
//! Values are kept as [`Value`]: a secure value GoCD encrypted is only known to be there.

use std::path::Path;

use serde_json::Value as Json;

/// One property's value as the input has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// In clear (`value`, `<value>`).
    Clear(String),
    /// Encrypted by GoCD (`encrypted_value`, `<encryptedValue>`): never decrypted, never copied.
    Encrypted,
}

/// One property of one of their profiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    /// The key, as their plugin names it.
    pub key: String,
    /// The value.
    pub value: Value,
}

/// One profile of theirs, cluster or elastic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// Its id.
    pub id: String,
    /// Its plugin id (elastic profiles in GoCD 19.3 and later have none: their cluster profile's).
    pub plugin_id: Option<String>,
    /// An elastic profile's cluster profile.
    pub cluster_profile_id: Option<String>,
    /// Its properties, in the input's order.
    pub properties: Vec<Property>,
}

impl Profile {
    /// The clear value of `key`, trimmed, when set and not blank.
    pub fn clear(&self, key: &str) -> Option<&str> {
        self.properties.iter().find(|p| p.key == key).and_then(|p| match &p.value {
            Value::Clear(v) if !v.trim().is_empty() => Some(v.trim()),
            _ => None,
        })
    }
}

/// Everything read from the input files.
#[derive(Debug, Default)]
pub struct Theirs {
    /// Cluster profiles.
    pub clusters: Vec<Profile>,
    /// Elastic agent profiles.
    pub elastics: Vec<Profile>,
}

/// Reads one file (JSON or XML, told apart by its first character) into `into`.
///
/// # Errors
/// A sentence naming what is wrong with the file.
pub fn read_file(path: &Path, into: &mut Theirs) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read the file: {e}"))?;
    read_text(&text, into)
}

/// As [`read_file`], for the file's text.
///
/// # Errors
/// As [`read_file`].
pub fn read_text(text: &str, into: &mut Theirs) -> Result<(), String> {
    let text = text.trim_start_matches('\u{feff}').trim_start();
    if text.starts_with('<') {
        read_xml(text, into)
    } else {
        read_json(text, into)
    }
}

fn read_json(text: &str, into: &mut Theirs) -> Result<(), String> {
    let json: Json = serde_json::from_str(text).map_err(|e| format!("neither XML nor JSON: {e}"))?;
    let list: Vec<&Json> = match json.get("_embedded") {
        Some(embedded) => {
            let list = embedded.get("profiles").or_else(|| embedded.get("cluster_profiles")).ok_or(
                "`_embedded` has no `profiles` (or `cluster_profiles`): not a list of GoCD's elastic or cluster profiles",
            )?;
            list.as_array().ok_or("`_embedded.profiles` is not a list")?.iter().collect()
        }
        None if json.get("id").is_some() => vec![&json],
        None => match json.as_array() {
            Some(items) => items.iter().collect(),
            None => return Err("not GoCD's API JSON: no `_embedded` and no `id`".to_string()),
        },
    };
    for item in list {
        let profile = json_profile(item)?;
        if profile.cluster_profile_id.is_some() {
            into.elastics.push(profile);
        } else {
            into.clusters.push(profile);
        }
    }
    Ok(())
}

fn json_profile(item: &Json) -> Result<Profile, String> {
    let text = |name: &str| item.get(name).and_then(Json::as_str).map(str::to_string);
    let id = text("id").ok_or("a profile without a string `id`")?;
    let mut properties = Vec::new();
    for p in item.get("properties").and_then(Json::as_array).map(Vec::as_slice).unwrap_or_default() {
        let key = p.get("key").and_then(Json::as_str).ok_or_else(|| format!("{id}: a property without `key`"))?;
        let value = if p.get("encrypted_value").is_some_and(|v| !v.is_null()) {
            Value::Encrypted
        } else {
            Value::Clear(p.get("value").and_then(Json::as_str).unwrap_or_default().to_string())
        };
        properties.push(Property { key: key.to_string(), value });
    }
    Ok(Profile { id, plugin_id: text("plugin_id"), cluster_profile_id: text("cluster_profile_id"), properties })
}

fn read_xml(text: &str, into: &mut Theirs) -> Result<(), String> {
    let doc = roxmltree::Document::parse(text).map_err(|e| format!("not well-formed XML: {e}"))?;
    let mut found = false;
    for node in doc.descendants().filter(roxmltree::Node::is_element) {
        let elastic = match node.tag_name().name() {
            "clusterProfile" => false,
            "agentProfile" => true,
            "profile" if in_agent_profiles(node) => true,
            _ => continue,
        };
        found = true;
        let id = node.attribute("id").ok_or("a profile element without an `id` attribute")?.to_string();
        let mut properties = Vec::new();
        for p in node.children().filter(|c| c.has_tag_name("property")) {
            let child = |name: &str| p.children().find(|c| c.has_tag_name(name));
            let key = child("key").and_then(|k| k.text()).map(str::trim).unwrap_or_default();
            if key.is_empty() {
                return Err(format!("{id}: a <property> without <key>"));
            }
            let value = if child("encryptedValue").is_some() {
                Value::Encrypted
            } else {
                Value::Clear(child("value").and_then(|v| v.text()).unwrap_or_default().to_string())
            };
            properties.push(Property { key: key.to_string(), value });
        }
        let profile = Profile {
            id,
            plugin_id: node.attribute("pluginId").map(str::to_string),
            cluster_profile_id: node.attribute("clusterProfileId").map(str::to_string),
            properties,
        };
        if elastic {
            into.elastics.push(profile);
        } else {
            into.clusters.push(profile);
        }
    }
    if found || doc.descendants().any(|n| n.has_tag_name("elastic")) {
        Ok(())
    } else {
        Err("XML without an <elastic> section, <clusterProfile> or <agentProfile>".to_string())
    }
}

/// Under `<agentProfiles>`, or `<elastic><profiles>` (GoCD before 19.3, without cluster profiles).
fn in_agent_profiles(node: roxmltree::Node<'_, '_>) -> bool {
    node.parent().is_some_and(|p| {
        p.has_tag_name("agentProfiles")
            || (p.has_tag_name("profiles") && p.parent().is_some_and(|e| e.has_tag_name("elastic")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_json_lists_single_objects_and_encrypted_values() {
        let mut theirs = Theirs::default();
        read_text(
            r#"{"_embedded": {"profiles": [{"id": "c", "plugin_id": "p", "properties": [
                {"key": "ClusterName", "value": "ci"}, {"key": "AWSSecretAccessKey", "encrypted_value": "AES:x"}]}]}}"#,
            &mut theirs,
        )
        .unwrap();
        read_text(
            r#"{"id": "e", "cluster_profile_id": "c", "properties": [{"key": "Image", "value": "a"}]}"#,
            &mut theirs,
        )
        .unwrap();
        assert_eq!(theirs.clusters[0].clear("ClusterName"), Some("ci"));
        assert_eq!(theirs.clusters[0].properties[1].value, Value::Encrypted);
        assert_eq!(theirs.elastics[0].cluster_profile_id.as_deref(), Some("c"));
        assert!(read_text(r#"{"_embedded": {}}"#, &mut theirs).is_err());
    }

    #[test]
    fn cruise_config_elastic_section() {
        let mut theirs = Theirs::default();
        read_text(
            r#"<?xml version="1.0"?><cruise><elastic><clusterProfiles>
              <clusterProfile id="c" pluginId="p"><property><key>GoServerUrl</key><value>https://a/go?x=1&amp;y=2</value></property>
              <property><key>AWSSecretAccessKey</key><encryptedValue>AES:zz</encryptedValue></property></clusterProfile>
            </clusterProfiles><agentProfiles><agentProfile id="e" clusterProfileId="c">
              <property><key>Image</key><value>img</value></property></agentProfile></agentProfiles></elastic></cruise>"#,
            &mut theirs,
        )
        .unwrap();
        assert_eq!(theirs.clusters[0].clear("GoServerUrl"), Some("https://a/go?x=1&y=2"));
        assert_eq!(theirs.clusters[0].properties[1].value, Value::Encrypted);
        assert_eq!(theirs.elastics[0].clear("Image"), Some("img"));
        assert!(read_text("<cruise/>", &mut theirs).is_err());
        // GoCD before 19.3: elastic profiles with a plugin id and no cluster profile.
        let mut old = Theirs::default();
        read_text(
            r#"<cruise><elastic><profiles><profile id="old" pluginId="p"><property><key>Image</key><value>i</value></property></profile></profiles></elastic>
               <security><roles><profiles><profile id="not-elastic"/></profiles></roles></security></cruise>"#,
            &mut old,
        )
        .unwrap();
        assert_eq!(old.elastics.len(), 1);
        assert_eq!((old.elastics[0].id.as_str(), old.elastics[0].cluster_profile_id.as_deref()), ("old", None));
        assert!(read_text("<cruise>", &mut theirs).unwrap_err().contains("XML"));
    }
}
