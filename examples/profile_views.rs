//! Writes the two profile forms (the GoCD Angular templates of `settings::views`) as standalone
//! HTML pages, styled like GoCD's profile dialog, for `scripts/screenshots` to photograph.
//! Angular is not run: the server-error spans (`ng-show`) are hidden, as GoCD shows them only
//! when a validation fails.
//!
//! `cargo run --example profile_views -- /tmp/views` writes `elastic-profile-view.html` and
//! `cluster-profile-view.html` there.

#![allow(clippy::print_stdout)]

use std::path::PathBuf;

use ecs_elastic_agent::settings::{cluster_profile_view, elastic_profile_view};

const STYLE: &str = "
body { font-family: 'Open Sans', 'Helvetica Neue', Arial, sans-serif; font-size: 13px; color: #333;
       background: #e8eaf0; margin: 0; padding: 24px; }
.dialog { background: #fff; width: 860px; margin: 0 auto; border-radius: 3px; box-shadow: 0 2px 8px rgba(0,0,0,.25); }
.dialog h1 { font-size: 17px; font-weight: 600; margin: 0; padding: 14px 20px; background: #943a9e; color: #fff;
             border-radius: 3px 3px 0 0; }
.dialog .body { padding: 16px 20px; }
fieldset { border: 1px solid #d6d6d6; border-radius: 3px; margin: 0 0 14px; padding: 8px 14px 2px; }
legend { font-weight: 600; font-size: 14px; color: #943a9e; padding: 0 6px; }
.form_item_block { margin-bottom: 10px; }
label { display: block; font-weight: 600; margin-bottom: 3px; }
input[type=text], input[type=password], textarea, select { width: 100%; box-sizing: border-box; padding: 5px 7px;
       border: 1px solid #ccc; border-radius: 2px; font: inherit; }
textarea { height: 46px; }
input[type=checkbox] { margin: 2px 0; }
.form-help-content { display: block; color: #777; font-size: 11.5px; margin-top: 2px; line-height: 1.35; }
.form_error { display: none; }
.asterix { color: #d9534f; margin-left: 2px; }
";

fn page(title: &str, form: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title><style>{STYLE}</style></head>\
         <body><div class=\"dialog\"><h1>{title}</h1><div class=\"body\">{form}</div></div></body></html>"
    )
}

fn main() -> std::io::Result<()> {
    let out = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "target/screenshots".into()));
    std::fs::create_dir_all(&out)?;
    for (file, title, form) in [
        ("elastic-profile-view.html", "Add elastic agent profile", elastic_profile_view()),
        ("cluster-profile-view.html", "Add cluster profile", cluster_profile_view()),
    ] {
        let path = out.join(file);
        std::fs::write(&path, page(title, &form))?;
        println!("{}", path.display());
    }
    Ok(())
}
