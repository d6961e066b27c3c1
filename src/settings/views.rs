//! The profile forms: GoCD Angular templates generated from the key table.
//!
//! One `details` per group (a `summary` with the group's name over a `fieldset`), open for the
//! groups of [`ProfileKind::open_groups`] and collapsed for the others; one `form_item_block` per
//! key, in the style of the public GoCD elastic-agent plugins' `*.template.html`, its label
//! followed by the key's name. Labels, help text and option names are HTML-escaped; only
//! `{{GOINPUTNAME[Key].$error.server}}` is left for Angular to interpolate. GoCD hosts the
//! template in an AngularJS 1.0.8 app (`tests/local/profile_views.rs` renders it that way in a
//! browser): each input's `ng-model` is its exact key, which GoCD watches to read the value.

use std::fmt::Write as _;

use super::keys::{Input, KeySpec, ProfileKind};

/// The cluster profile form.
pub fn cluster_profile_view() -> String {
    render(ProfileKind::Cluster)
}

/// The elastic agent profile form.
pub fn elastic_profile_view() -> String {
    render(ProfileKind::Elastic)
}

fn render(kind: ProfileKind) -> String {
    let mut html = String::from("<div class=\"ecs-elastic-agent-profile\">\n");
    for group in kind.groups() {
        let specs: Vec<&KeySpec> = kind.keys().iter().filter(|s| s.group == *group).collect();
        let open = if kind.open_groups().contains(group) { " open" } else { "" };
        // A collapsed group says when one of its keys has a server error.
        let any_error = specs.iter().map(|s| server_error(s.key)).collect::<Vec<_>>().join(" || ");
        let _ = writeln!(html, "<details class=\"profile-group\"{open}>");
        let _ = writeln!(
            html,
            "  <summary>{}<span class=\"form_error form-error\" ng-class=\"{{'is-visible': {any_error}}}\" ng-show=\"{any_error}\">A key in this group is invalid.</span></summary>",
            escape(group)
        );
        html.push_str("  <fieldset>\n");
        for spec in specs {
            field(&mut html, spec);
        }
        html.push_str("  </fieldset>\n</details>\n");
    }
    html.push_str("</div>\n");
    html
}

/// The Angular expression of a key's server error; GoCD rewrites `GOINPUTNAME[Key]`.
fn server_error(key: &str) -> String {
    format!("GOINPUTNAME[{key}].$error.server")
}

fn field(html: &mut String, spec: &KeySpec) {
    let key = spec.key;
    let server_error = server_error(key);
    let asterisk = if spec.required { "<span class=\"asterix\">*</span>" } else { "" };
    let required = spec.required;
    let _ = writeln!(html, "    <div class=\"form_item_block\">");
    let _ = writeln!(
        html,
        "      <label ng-class=\"{{'is-invalid-label': {server_error}}}\">{}:{asterisk} <code class=\"key-name\">{}</code></label>",
        escape(spec.label),
        escape(key)
    );
    let input = match spec.input {
        Input::Text => {
            format!("<input type=\"text\" ng-model=\"{key}\" ng-required=\"{required}\"/>")
        }
        Input::Password => {
            format!("<input type=\"password\" ng-model=\"{key}\" ng-required=\"{required}\"/>")
        }
        Input::Lines => format!("<textarea ng-model=\"{key}\" ng-required=\"{required}\" rows=\"4\"></textarea>"),
        Input::Checkbox => {
            format!("<input type=\"checkbox\" ng-model=\"{key}\" ng-true-value=\"true\" ng-false-value=\"false\"/>")
        }
        Input::Select(options) => select(key, required, options),
    };
    let _ = writeln!(html, "      {input}");
    let _ = writeln!(
        html,
        "      <span class=\"form_error form-error\" ng-class=\"{{'is-visible': {server_error}}}\" ng-show=\"{server_error}\">{{{{{server_error}}}}}</span>"
    );
    let _ = writeln!(html, "      <span class=\"form-help-content help-text\">{}</span>", escape(spec.help));
    let _ = writeln!(html, "    </div>");
}

/// A drop-down whose empty choice means "the default" (the first option).
fn select(key: &str, required: bool, options: &[&str]) -> String {
    let mut html = format!("<select ng-model=\"{key}\" ng-required=\"{required}\">");
    if let Some(default) = options.first() {
        let _ = write!(html, "<option value=\"\">Default ({})</option>", escape(default));
    }
    for option in options {
        let option = escape(option);
        let _ = write!(html, "<option value=\"{option}\">{option}</option>");
    }
    html.push_str("</select>");
    html
}

/// Escapes text for HTML content and attribute values. Braces too, though that alone does not
/// keep Angular from interpolating: it reads the decoded text. No text of the key table holds
/// `{{` (a test below checks), and the browser test reads every label and help text back as written.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '{' => out.push_str("&#123;"),
            '}' => out.push_str("&#125;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn views() -> [(ProfileKind, String); 2] {
        [(ProfileKind::Cluster, cluster_profile_view()), (ProfileKind::Elastic, elastic_profile_view())]
    }

    #[test]
    fn every_key_has_a_bound_input_its_name_an_error_span_and_help() {
        for (kind, html) in views() {
            for spec in kind.keys() {
                assert_eq!(html.matches(&format!("ng-model=\"{}\"", spec.key)).count(), 1, "{}", spec.key);
                assert!(html.contains(&format!("{{{{GOINPUTNAME[{}].$error.server}}}}", spec.key)), "{}", spec.key);
                assert!(
                    html.contains(&format!(" <code class=\"key-name\">{}</code></label>", spec.key)),
                    "{}",
                    spec.key
                );
            }
            assert_eq!(html.matches("ng-model=").count(), kind.keys().len());
            assert_eq!(html.matches("<fieldset>").count(), kind.groups().len());
            assert_eq!(html.matches("class=\"form_item_block\"").count(), kind.keys().len());
        }
    }

    #[test]
    fn groups_fold_and_only_the_open_ones_start_open() {
        for (kind, html) in views() {
            assert_eq!(html.matches("<details ").count(), kind.groups().len());
            for group in kind.groups() {
                let open = kind.open_groups().contains(group);
                let tag =
                    if open { "<details class=\"profile-group\" open>" } else { "<details class=\"profile-group\">" };
                assert!(html.contains(&format!("{tag}\n  <summary>{group}<span ")), "{group}");
                // The summary's error marker covers exactly the group's keys.
                let summary =
                    html.split(&format!("<summary>{group}<")).nth(1).and_then(|s| s.split("</summary>").next());
                let summary = summary.unwrap_or_default();
                for spec in kind.keys() {
                    let named = summary.contains(&format!("GOINPUTNAME[{}].$error.server", spec.key));
                    assert_eq!(named, spec.group == *group, "{group}: {}", spec.key);
                }
            }
        }
        assert!(cluster_profile_view().contains("<details class=\"profile-group\">\n  <summary>EC2 capacity<"));
        assert!(elastic_profile_view().contains("<details class=\"profile-group\">\n  <summary>Advanced<"));
        assert!(elastic_profile_view().contains("<details class=\"profile-group\" open>\n  <summary>Basics<"));
    }

    #[test]
    fn only_required_keys_get_an_asterisk() {
        let html = cluster_profile_view();
        assert_eq!(html.matches("class=\"asterix\"").count(), 1);
        assert!(html.contains(
            "ECS cluster name or ARN:<span class=\"asterix\">*</span> <code class=\"key-name\">ClusterName</code></label>"
        ));
        assert!(html.contains("<input type=\"text\" ng-model=\"ClusterName\" ng-required=\"true\"/>"));
        assert!(html.contains("<input type=\"text\" ng-model=\"Region\" ng-required=\"false\"/>"));
        assert!(html.contains("AWS region: <code class=\"key-name\">Region</code></label>"));
        assert_eq!(elastic_profile_view().matches("class=\"asterix\"").count(), 1);
    }

    #[test]
    fn inputs_follow_the_key_kind() {
        let cluster = cluster_profile_view();
        assert!(cluster.contains("<input type=\"password\" ng-model=\"SecretAccessKey\""));
        assert!(cluster.contains("<input type=\"password\" ng-model=\"AccessKeyId\""));
        assert!(cluster.contains("<textarea ng-model=\"Tags\" ng-required=\"false\" rows=\"4\"></textarea>"));
        assert!(cluster.contains(
            "<select ng-model=\"LaunchType\" ng-required=\"false\"><option value=\"\">Default (FARGATE)</option><option value=\"FARGATE\">FARGATE</option><option value=\"FARGATE_SPOT\">FARGATE_SPOT</option><option value=\"EC2\">EC2</option></select>"
        ));
        assert!(cluster.contains(
            "<input type=\"checkbox\" ng-model=\"AssignPublicIp\" ng-true-value=\"true\" ng-false-value=\"false\"/>"
        ));
        let elastic = elastic_profile_view();
        assert!(elastic.contains("<option value=\"WINDOWS_SERVER_2022_CORE\">"));
        assert!(elastic.contains("<option value=\"ARM64\">ARM64</option>"));
    }

    #[test]
    fn help_text_is_escaped() {
        assert_eq!(
            escape("a<b> & \"c\" 'd' {{e}}"),
            "a&lt;b&gt; &amp; &quot;c&quot; &#39;d&#39; &#123;&#123;e&#125;&#125;"
        );
        for (kind, html) in views() {
            for spec in kind.keys() {
                let shown = format!("<span class=\"form-help-content help-text\">{}</span>", escape(spec.help));
                assert!(html.contains(&shown), "{}", spec.key);
            }
            // Every `<` starts one of the tags this module writes; none comes from help text.
            for tag in html.split('<').skip(1) {
                let name: String = tag.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '/').collect();
                let allowed = [
                    "div",
                    "/div",
                    "details",
                    "/details",
                    "summary",
                    "/summary",
                    "fieldset",
                    "/fieldset",
                    "label",
                    "/label",
                    "code",
                    "/code",
                    "span",
                    "/span",
                    "input",
                    "textarea",
                    "/textarea",
                    "select",
                    "/select",
                    "option",
                    "/option",
                ];
                assert!(allowed.contains(&name.as_str()), "unexpected tag <{name}");
            }
            // Angular interpolates only the server errors.
            assert_eq!(html.matches("{{").count(), kind.keys().len());
        }
    }

    #[test]
    fn no_text_of_the_table_would_be_interpolated() {
        // Angular interpolates the decoded text, so `&#123;&#123;` would still be `{{` to it.
        for kind in [ProfileKind::Cluster, ProfileKind::Elastic] {
            let mut texts: Vec<&str> = kind.groups().to_vec();
            for spec in kind.keys() {
                texts.extend([spec.key, spec.label, spec.help]);
                if let Input::Select(options) = spec.input {
                    texts.extend(options);
                }
            }
            for text in texts {
                assert!(!text.contains("{{") && !text.contains("}}"), "{text}");
            }
        }
    }
}
