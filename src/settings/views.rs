//! The profile forms: GoCD Angular templates generated from the key table.
//!
//! One `fieldset` per group, one `form_item_block` per key, in the style of the public GoCD
//! elastic-agent plugins' `*.template.html`. Labels, help text and option names are HTML-escaped;
//! only `{{GOINPUTNAME[Key].$error.server}}` is left for Angular to interpolate.

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
        let _ = writeln!(html, "<fieldset>\n  <legend>{}</legend>", escape(group));
        for spec in kind.keys().iter().filter(|s| s.group == *group) {
            field(&mut html, spec);
        }
        html.push_str("</fieldset>\n");
    }
    html.push_str("</div>\n");
    html
}

fn field(html: &mut String, spec: &KeySpec) {
    let key = spec.key;
    let server_error = format!("GOINPUTNAME[{key}].$error.server");
    let asterisk = if spec.required { "<span class=\"asterix\">*</span>" } else { "" };
    let required = spec.required;
    let _ = writeln!(html, "  <div class=\"form_item_block\">");
    let _ = writeln!(
        html,
        "    <label ng-class=\"{{'is-invalid-label': {server_error}}}\">{}:{asterisk}</label>",
        escape(spec.label)
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
    let _ = writeln!(html, "    {input}");
    let _ = writeln!(
        html,
        "    <span class=\"form_error form-error\" ng-class=\"{{'is-visible': {server_error}}}\" ng-show=\"{server_error}\">{{{{{server_error}}}}}</span>"
    );
    let _ = writeln!(html, "    <span class=\"form-help-content\">{}</span>", escape(spec.help));
    let _ = writeln!(html, "  </div>");
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

/// Escapes text for HTML content and attribute values; braces too, so Angular never
/// interpolates text.
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

    #[test]
    fn every_key_has_a_bound_input_error_span_and_help() {
        for (kind, html) in
            [(ProfileKind::Cluster, cluster_profile_view()), (ProfileKind::Elastic, elastic_profile_view())]
        {
            for spec in kind.keys() {
                assert!(html.contains(&format!("ng-model=\"{}\"", spec.key)), "{}", spec.key);
                assert!(html.contains(&format!("{{{{GOINPUTNAME[{}].$error.server}}}}", spec.key)), "{}", spec.key);
            }
            for group in kind.groups() {
                assert!(html.contains(&format!("<legend>{group}</legend>")), "{group}");
            }
            assert_eq!(html.matches("<fieldset>").count(), kind.groups().len());
            assert_eq!(html.matches("class=\"form_item_block\"").count(), kind.keys().len());
        }
    }

    #[test]
    fn only_required_keys_get_an_asterisk() {
        let html = cluster_profile_view();
        assert_eq!(html.matches("class=\"asterix\"").count(), 1);
        assert!(html.contains("ECS cluster name or ARN:<span class=\"asterix\">*</span></label>"));
        assert!(html.contains("<input type=\"text\" ng-model=\"ClusterName\" ng-required=\"true\"/>"));
        assert!(html.contains("<input type=\"text\" ng-model=\"Region\" ng-required=\"false\"/>"));
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
        for (kind, html) in
            [(ProfileKind::Cluster, cluster_profile_view()), (ProfileKind::Elastic, elastic_profile_view())]
        {
            for spec in kind.keys() {
                let shown = format!("<span class=\"form-help-content\">{}</span>", escape(spec.help));
                assert!(html.contains(&shown), "{}", spec.key);
            }
            // Every `<` starts one of the tags this module writes; none comes from help text.
            for tag in html.split('<').skip(1) {
                let name: String = tag.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '/').collect();
                let allowed = [
                    "div",
                    "/div",
                    "fieldset",
                    "/fieldset",
                    "legend",
                    "/legend",
                    "label",
                    "/label",
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
}
