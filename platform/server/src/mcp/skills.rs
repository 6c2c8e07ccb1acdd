//! Each Language's guides as an Agent Skill (the MCP Skills extension,
//! SEP-2640, `io.modelcontextprotocol/skills`), so that an agent that does
//! not speak Pilotage still finds how to write each Language well.
//!
//! One skill per Language the caller's tenant serves, at
//! `skill://pilotage/{name}/SKILL.md`, where `{name}` is the Language
//! identifier made a skill name (`workflow/v1` → `workflow-v1`, [`names`]):
//!
//! - `SKILL.md` is YAML frontmatter (`name`, `description`, and
//!   `metadata` naming the Language and the core guide's version) followed
//!   by the Language's core guide body, byte for byte;
//! - every other guide, the closed-sets guide included, is
//!   `references/{id}{ext}`, its body byte for byte (`{id}` percent-encoded,
//!   `{ext}` from the guide's `format`).
//!
//! The bodies are the `pilotage_get_guide` answers' (Part II §5.2, Part III
//! §4.1): a skill changes exactly when a guide does, its digests with it,
//! and a Language's arrival, change or removal is announced as
//! `notifications/resources/list_changed` (and `resources/updated` to a
//! subscriber of the `SKILL.md`), as for the guide resources. Visibility is
//! the guide tools': the caller's tenant's Languages. `docs/skills.md` is
//! the full description.

use std::sync::Arc;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    ReadResourceResult, Resource, ResourceContents, SKILL_MD, Skill, SkillFrontmatter, SkillResource, SkillResources,
};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::operations::Context;
use crate::tenancy::LanguageSlot;
use pilotage_protocol::guide::{Guide, GuideLevel};

/// Every skill URI of this server starts so: the `pilotage` authority is the
/// organizational prefix SEP-2640 allows before the skill's name.
pub(crate) const PREFIX: &str = "skill://pilotage/";

/// Where a skill's other guides live, below its root.
const REFERENCES: &str = "references/";

/// The media type of `SKILL.md` and of a guide without `format`.
const MARKDOWN: &str = "text/markdown";

/// Longest skill name (Agent Skills: 1–64 characters).
const NAME_MAX: usize = 64;

/// Longest frontmatter `description` (Agent Skills: 1–1024 characters).
const DESCRIPTION_MAX: usize = 1024;

/// Files per skill and bytes per skill that every host must accept
/// (SEP-2640 "Limits"); a Language whose guides exceed either is not served
/// as a skill.
const FILES_MAX: usize = 512;
const BYTES_MAX: u64 = 16 * 1024 * 1024;

/// What a guide id may keep unescaped in a file name: letters, digits, `-._~`.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// Whether `uri` is of this server's skill namespace (for subscriptions).
pub(crate) fn is_skill_uri(uri: &str) -> bool {
    uri.strip_prefix(PREFIX).is_some_and(|rest| rest.contains('/'))
}

/// The Language identifier `language` as a skill name: ASCII lowercased,
/// every run of other characters one `-`, no `-` at either end, at most 64
/// characters; `language` when nothing is left.
fn slug(language: &str) -> String {
    let mut name = String::with_capacity(language.len());
    for ch in language.chars() {
        let ch = ch.to_ascii_lowercase();
        if ch.is_ascii_lowercase() || ch.is_ascii_digit() {
            name.push(ch);
        } else if !name.is_empty() && !name.ends_with('-') {
            name.push('-');
        }
    }
    name.truncate(NAME_MAX);
    let name = name.trim_end_matches('-').to_owned();
    if name.is_empty() { "language".to_owned() } else { name }
}

/// `slug` made unique by a hash of the identifier: `{slug}-{8 hex}`.
fn hashed(language: &str) -> String {
    let digest = Sha256::digest(language.as_bytes());
    let mut base = slug(language);
    base.truncate(NAME_MAX - 9);
    format!("{}-{}", base.trim_end_matches('-'), hex::encode(&digest[..4]))
}

/// Each Language of the tenant with its skill name, in the order of the
/// Language identifiers. Two identifiers can slug alike (`Workflow/V1`,
/// `workflow-v1`): the first keeps the plain name, the later ones take
/// [`hashed`] names, so every name is unique within the listing.
fn names(context: &Context) -> Vec<(String, Arc<LanguageSlot>)> {
    let mut taken = std::collections::BTreeSet::new();
    let mut named = Vec::new();
    for slot in context.tenant.languages() {
        let plain = slug(&slot.entry.name);
        let name = if taken.contains(&plain) { hashed(&slot.entry.name) } else { plain };
        taken.insert(name.clone());
        named.push((name, slot));
    }
    named
}

/// One file of a skill: its URI, media type and text.
struct File {
    uri: String,
    mime_type: String,
    text: String,
}

/// One Language's skill: the entry and the files it lists.
struct Built {
    skill: Skill,
    files: Vec<File>,
}

/// The file extension of a guide's media type.
fn extension(format: &str) -> &'static str {
    match format {
        MARKDOWN => ".md",
        "text/plain" => ".txt",
        "text/html" => ".html",
        "application/json" => ".json",
        _ => "",
    }
}

/// `text` on one line: control characters and line or paragraph separators
/// become spaces, so that a Language's titles cannot break the frontmatter.
fn one_line(text: &str) -> String {
    text.chars().map(|ch| if ch.is_control() || matches!(ch, '\u{2028}' | '\u{2029}') { ' ' } else { ch }).collect()
}

/// The frontmatter `description`: what the skill is for, the tools it
/// teaches, and the other guides as files, the list cut (saying how many
/// were left out) to keep within [`DESCRIPTION_MAX`] characters.
fn description(slot: &LanguageSlot, references: &[(String, String)]) -> String {
    let entry = &slot.entry;
    // A Language's own title is bounded here so that the list of files has room.
    let title: String = one_line(&entry.title).chars().take(120).collect();
    let language: String = one_line(&entry.name).chars().take(120).collect();
    let mut head = format!(
        "How to write {language} programs ({title}) for this server's Pilotage tools: check one with {} before anything runs",
        entry.loop_tools.validate
    );
    if let Some(execute) = &entry.loop_tools.execute {
        head.push_str(&format!(", run it with {execute} and read what ran in its trace"));
    }
    head.push_str(&format!(". Use it whenever a task calls for writing, checking or running {language} programs."));
    let items: Vec<String> = references.iter().map(|(path, title)| format!("{path} ({})", one_line(title))).collect();
    let mut listed = items.len();
    loop {
        let text = match (listed, items.len()) {
            (_, 0) => head.clone(),
            (0, all) => format!("{head} Further guides: {all} in this skill's {REFERENCES} files."),
            (some, all) if some < all => {
                format!(
                    "{head} Further guides: {}; and {} more in this skill's files.",
                    items[..some].join("; "),
                    all - some
                )
            }
            _ => format!("{head} Further guides: {}.", items.join("; ")),
        };
        if listed == 0 || text.chars().count() <= DESCRIPTION_MAX {
            return text.chars().take(DESCRIPTION_MAX).collect();
        }
        listed -= 1;
    }
}

/// The frontmatter as YAML: every value a JSON string, which YAML reads as a
/// double-quoted scalar, so the text parses to exactly `frontmatter` (the
/// entry's `frontmatter` and the file's must be identical, SEP-2640). The
/// keys are the platform's own (`name`, `description`, `metadata` and its
/// members), plain words YAML reads as strings, so they are written bare.
fn frontmatter_yaml(frontmatter: &SkillFrontmatter) -> String {
    let quoted = |text: &str| serde_json::to_string(text).unwrap_or_default();
    let mut yaml = String::from("---\n");
    yaml.push_str(&format!("name: {}\n", quoted(&frontmatter.name)));
    yaml.push_str(&format!("description: {}\n", quoted(&frontmatter.description)));
    for (key, value) in &frontmatter.extra {
        match value {
            serde_json::Value::Object(members) => {
                yaml.push_str(&format!("{key}:\n"));
                for (member, value) in members {
                    yaml.push_str(&format!("  {member}: {}\n", quoted(value.as_str().unwrap_or_default())));
                }
            }
            other => yaml.push_str(&format!("{key}: {}\n", quoted(other.as_str().unwrap_or_default()))),
        }
    }
    yaml.push_str("---\n");
    yaml
}

/// `slot`'s skill under `name`; `None` when the Language has no guide, or
/// its guides exceed SEP-2640's per-skill limits.
fn build(name: &str, slot: &LanguageSlot) -> Option<Built> {
    let guides: Vec<Guide> = slot.description().guides.iter().map(|guide| guide.with_body()).collect();
    let core = guides.iter().position(|guide| guide.level == GuideLevel::Core).or((!guides.is_empty()).then_some(0))?;
    let root = format!("{PREFIX}{name}/");
    let mut references = Vec::new();
    let mut files = Vec::new();
    for (index, guide) in guides.iter().enumerate() {
        if index == core {
            continue;
        }
        let format = guide.format.as_deref().unwrap_or(MARKDOWN);
        let path = format!("{REFERENCES}{}{}", utf8_percent_encode(&guide.id, SEGMENT), extension(format));
        references.push((path.clone(), guide.title.clone()));
        files.push(File {
            uri: format!("{root}{path}"),
            mime_type: format.to_owned(),
            text: guide.body.clone().unwrap_or_default(),
        });
    }
    let core = &guides[core];
    let frontmatter = SkillFrontmatter::new(name, description(slot, &references))
        .with_field("metadata", json!({"language": slot.entry.name, "guide": core.id, "version": core.version}));
    let text = format!("{}{}", frontmatter_yaml(&frontmatter), core.body.as_deref().unwrap_or_default());
    let uri = format!("{root}{SKILL_MD}");
    files.insert(0, File { uri: uri.clone(), mime_type: MARKDOWN.to_owned(), text });
    let total: u64 = files.iter().map(|file| file.text.len() as u64).sum();
    if files.len() > FILES_MAX || total > BYTES_MAX {
        tracing::warn!(language = %slot.entry.name, files = files.len(), bytes = total,
            "a Language's guides exceed a skill's limits; it is not served as a skill");
        return None;
    }
    let resources = files.iter().map(|file| SkillResource::from_bytes(&file.uri, file.text.as_bytes())).collect();
    Some(Built { skill: Skill::new(uri, frontmatter, SkillResources::Files(resources)), files })
}

/// The skill whose root `uri` lies under, with the file `uri` names.
fn find(context: &Context, uri: &str) -> Option<Built> {
    let rest = uri.strip_prefix(PREFIX)?;
    let (name, _) = rest.split_once('/')?;
    let name = percent_decode_str(name).decode_utf8().ok()?;
    names(context).into_iter().find(|(candidate, _)| *candidate == name).and_then(|(name, slot)| build(&name, &slot))
}

/// `skills/list`: every skill the caller may read, one per Language.
pub(crate) fn list(context: &Context) -> Vec<Skill> {
    names(context).into_iter().filter_map(|(name, slot)| build(&name, &slot)).map(|built| built.skill).collect()
}

/// `skills/get`: the entry of the skill whose `SKILL.md` is `uri`.
///
/// # Errors
/// -32602 (invalid params, SEP-2640 "Error Handling") when no skill of the
/// caller's is served at `uri`, `data` naming the `uri`.
pub(crate) fn get(context: &Context, uri: &str) -> Result<Skill, McpError> {
    find(context, uri).map(|built| built.skill).filter(|skill| skill.uri == uri).ok_or_else(|| {
        McpError::invalid_params(
            format!("no skill is served at {uri}; skills/list names this server's skills"),
            Some(json!({"uri": uri})),
        )
    })
}

/// The `SKILL.md` of each skill, for `resources/list` (SEP-2640 "Resource
/// Metadata": named and described from the frontmatter, Markdown).
pub(crate) fn resources(context: &Context) -> Vec<Resource> {
    list(context)
        .into_iter()
        .map(|skill| {
            let mut resource = Resource::new(skill.uri.clone(), skill.frontmatter.name.clone());
            resource.description = Some(skill.frontmatter.description.clone());
            resource.mime_type = Some(MARKDOWN.to_owned());
            if let SkillResources::Files(files) = &skill.resources {
                resource.size = files.iter().find(|file| file.uri == skill.uri).map(|file| file.size);
            }
            resource
        })
        .collect()
}

/// `resources/read` of a skill file: its text, of its media type.
///
/// # Errors
/// Resource not found (`resources::not_found`) for a URI under
/// [`PREFIX`] that names no file of the caller's skills.
pub(crate) fn read(context: &Context, uri: &str) -> Result<ReadResourceResult, McpError> {
    let file = find(context, uri).and_then(|built| built.files.into_iter().find(|file| file.uri == uri));
    let Some(file) = file else {
        return Err(super::resources::not_found(
            format!("'{uri}' is no file of this server's skills; skills/list names each skill's files"),
            uri,
            None,
        ));
    };
    Ok(ReadResourceResult::new(vec![ResourceContents::TextResourceContents {
        uri: file.uri,
        mime_type: Some(file.mime_type),
        text: file.text,
        meta: None,
    }]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_identifiers_become_skill_names() {
        assert_eq!(slug("workflow/v1"), "workflow-v1");
        assert_eq!(slug("sql/postgres-15"), "sql-postgres-15");
        assert_eq!(slug("Automation/1"), "automation-1");
        assert_eq!(slug("a//b__c"), "a-b-c");
        assert_eq!(slug("/x/"), "x");
        assert_eq!(slug("日本/語"), "language");
        assert_eq!(slug(&"x".repeat(80)).len(), NAME_MAX);
        let long = format!("{}/{}", "y".repeat(63), "z");
        assert!(!slug(&long).ends_with('-'), "{}", slug(&long));
        let unique = hashed("workflow-v1");
        assert!(unique.starts_with("workflow-v1-") && unique.len() == "workflow-v1-".len() + 8, "{unique}");
        assert!(hashed(&"q".repeat(90)).chars().count() <= NAME_MAX);
        for name in [slug("workflow/v1"), hashed("Workflow/V1"), slug("日本"), hashed(&"q/".repeat(50))] {
            let skill = Skill::new(
                format!("{PREFIX}{name}/SKILL.md"),
                SkillFrontmatter::new(name.clone(), "d"),
                SkillResources::Dynamic,
            );
            assert!(skill.validate().is_ok(), "{name}: {:?}", skill.validate());
        }
    }

    #[test]
    fn the_frontmatter_is_yaml_of_json_strings() {
        let frontmatter = SkillFrontmatter::new("workflow-v1", "Say \"hi\"\\ then: go #1")
            .with_field("metadata", json!({"language": "workflow/v1", "version": "1.0"}));
        let yaml = frontmatter_yaml(&frontmatter);
        assert_eq!(
            yaml,
            "---\nname: \"workflow-v1\"\ndescription: \"Say \\\"hi\\\"\\\\ then: go #1\"\nmetadata:\n  \
             language: \"workflow/v1\"\n  version: \"1.0\"\n---\n"
        );
        assert_eq!(one_line("a\nb\u{2028}c\td"), "a b c d");
    }

    #[test]
    fn only_uris_below_the_prefix_with_a_skill_are_skill_uris() {
        assert!(is_skill_uri("skill://pilotage/workflow-v1/SKILL.md"));
        assert!(!is_skill_uri("skill://pilotage/"));
        assert!(!is_skill_uri("skill://other/x/SKILL.md"));
        assert!(!is_skill_uri("pilotage://manifest"));
    }
}
