//! Each Language's guides as an Agent Skill through the real endpoint (the
//! MCP Skills extension, SEP-2640; docs/skills.md): the extension is
//! declared; `skills/list` has one skill per Language (workflow/v1,
//! sql/postgres-15, automation/1), each a complete manifest whose files
//! read back with their listed sizes and digests, `SKILL.md` being the
//! frontmatter and then the core guide and every other guide a file, byte
//! for byte as `pilotage_get_guide` answers (Part II §5.2); `skills/get`
//! agrees with the listing; unknown URIs are refused on the channels the
//! extension names; a Language's arrival and retirement are announced
//! (`resources/list_changed`, `resources/updated` to a subscriber of the
//! `SKILL.md`) and show in the skills; a tenant sees only its own; and the
//! official TypeScript and Python SDK clients list, fetch and verify every
//! skill (`tests/interop/{ts,py}/skills.*`).

use rmcp::model::{
    ClientConfig, GetSkillRequestParams, ReadResourceRequestParams, ResourceContents, Skill, SkillResources,
    SubscribeRequestParams,
};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};

use crate::endpoint::{Backend, client, ok, postgres_url, server, settings};
use crate::interop::{python_sdk, sdk_passes_checks, typescript_sdk};

type Client = RunningService<RoleClient, ClientConfig>;

/// The one text content `uri` reads as, with its media type.
async fn read(client: &rmcp::Peer<RoleClient>, uri: &str) -> Result<(String, Option<String>), rmcp::ServiceError> {
    let result = client.read_resource(ReadResourceRequestParams::new(uri)).await?;
    match &result.contents[..] {
        [ResourceContents::TextResourceContents { text, mime_type, uri: read_uri, .. }] => {
            assert_eq!(read_uri, uri);
            Ok((text.clone(), mime_type.clone()))
        }
        other => panic!("{uri}: one text content expected: {other:?}"),
    }
}

/// The frontmatter block of a `SKILL.md` read as a host reads it (the
/// platform writes each value as a JSON string, one `key: value` a line, a
/// nested map indented by two spaces), and the body after it.
fn split_skill_md(text: &str) -> (Value, &str) {
    let rest = text.strip_prefix("---\n").expect("SKILL.md opens with its frontmatter");
    let end = rest.find("\n---\n").expect("the frontmatter is closed");
    let scalar = |text: &str| -> Value { serde_json::from_str(text.trim()).unwrap_or_else(|_| json!(text.trim())) };
    let mut frontmatter = serde_json::Map::new();
    let mut nested: Option<String> = None;
    for line in rest[..end].lines() {
        let (key, value) = line.trim_start().split_once(':').expect("key: value");
        let key = scalar(key).as_str().unwrap().to_owned();
        match (line.starts_with("  "), value.trim().is_empty()) {
            (true, _) => {
                let parent = nested.as_ref().expect("a nested line follows its map");
                frontmatter[parent.as_str()][key.as_str()] = scalar(value);
            }
            (false, true) => {
                frontmatter.insert(key.clone(), json!({}));
                nested = Some(key);
            }
            (false, false) => {
                frontmatter.insert(key, scalar(value));
                nested = None;
            }
        }
    }
    (Value::Object(frontmatter), &rest[end + 5..])
}

/// Checks one skill against the guides of the Language it names; returns
/// that Language.
async fn skill_is_its_guides(client: &Client, skill: &Skill) -> String {
    let name = skill.frontmatter.name.clone();
    assert_eq!(skill.uri, format!("skill://pilotage/{name}/SKILL.md"));
    let language = skill.frontmatter.extra["metadata"]["language"].as_str().expect("metadata.language").to_owned();
    assert_eq!(name, language.replace('/', "-"), "the skill name is the Language identifier's slug");
    let description = &skill.frontmatter.description;
    assert!(!description.is_empty() && description.chars().count() <= 1024, "{description}");
    assert!(description.contains(&language), "{description}");
    let got = client.get_skill(GetSkillRequestParams::new(&skill.uri)).await.unwrap();
    assert_eq!(&got.skill, skill, "skills/get answers the listed entry");

    let SkillResources::Files(files) = &skill.resources else { panic!("{name}: a complete list of files") };
    let index = ok(client, "pilotage_get_guide", json!({"language": language})).await;
    let guides = index["guides"].as_array().unwrap();
    assert_eq!(files.len(), guides.len(), "{name}: one file per guide");
    let mut closed_sets = false;
    for guide in guides {
        let id = guide["id"].as_str().unwrap();
        let body = ok(client, "pilotage_get_guide", json!({"language": language, "id": id})).await["guide"]["body"]
            .as_str()
            .unwrap()
            .to_owned();
        let file = if guide["level"] == "core" {
            files.iter().find(|file| file.uri == skill.uri).expect("SKILL.md listed")
        } else {
            let uri = format!("skill://pilotage/{name}/references/{id}.md");
            files.iter().find(|file| file.uri == uri).unwrap_or_else(|| panic!("{uri} listed in {files:?}"))
        };
        let (text, mime_type) = read(client, &file.uri).await.unwrap();
        assert_eq!(mime_type.as_deref(), Some("text/markdown"), "{}", file.uri);
        file.verify(text.as_bytes()).unwrap_or_else(|error| panic!("{error}"));
        if file.uri == skill.uri {
            let (frontmatter, after) = split_skill_md(&text);
            assert_eq!(frontmatter, serde_json::to_value(&skill.frontmatter).unwrap(), "the entry's frontmatter");
            assert_eq!(frontmatter["metadata"]["guide"], id);
            assert_eq!(frontmatter["metadata"]["version"], guide["version"]);
            assert_eq!(after, body, "{name}: SKILL.md's body is the core guide, byte for byte");
        } else {
            assert_eq!(text, body, "{}: the guide '{id}', byte for byte", file.uri);
        }
        if guide["topics"].as_array().unwrap().iter().any(|topic| topic == "closed-sets") {
            closed_sets = true;
            assert!(text.contains("assertion_failed"), "the platform's sections are in the closed-sets file");
            assert!(description.contains(&format!("references/{id}.md")), "{description}");
        }
    }
    assert!(closed_sets, "{name}: the closed-sets guide is a file of the skill");
    language
}

/// The error code of a failed request.
fn code<T: std::fmt::Debug>(result: Result<T, rmcp::ServiceError>) -> i32 {
    match result {
        Err(rmcp::ServiceError::McpError(error)) => error.code.0,
        other => panic!("an error expected: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_language_is_a_skill_made_of_its_guides_byte_for_byte() {
    let mut settings = settings(Backend::Sqlite).await;
    settings.demo_postgres = postgres_url();
    let server = server(settings).await;
    assert!(matches!(server.demo_sql, Some(Ok(_))), "the demo's SQL part: {:?}", server.demo_sql);
    let client = client(&server.mcp_url()).await;
    let capabilities = client.peer_info().unwrap().capabilities.clone();
    assert!(capabilities.supports_skills() && capabilities.resources.is_some(), "{capabilities:?}");
    assert!(!capabilities.supports_directory_read(), "no resources/directory/read is declared");

    let skills = client.list_all_skills().await.unwrap();
    let mut languages = Vec::new();
    for skill in &skills {
        languages.push(skill_is_its_guides(&client, skill).await);
    }
    languages.sort();
    assert_eq!(languages, ["automation/1", "sql/postgres-15", "workflow/v1"], "one skill per Language");

    // resources/list names each SKILL.md from its frontmatter; the other
    // files are read by the URIs the entries list.
    let listed = client.list_all_resources().await.unwrap();
    let markdown: Vec<_> = listed.iter().filter(|resource| resource.uri.starts_with("skill://")).collect();
    assert_eq!(markdown.len(), skills.len(), "{markdown:?}");
    for skill in &skills {
        let resource = markdown.iter().find(|resource| resource.uri == skill.uri).expect("SKILL.md listed");
        assert_eq!(resource.name, skill.frontmatter.name);
        assert_eq!(resource.description.as_ref(), Some(&skill.frontmatter.description));
        assert_eq!(resource.mime_type.as_deref(), Some("text/markdown"));
    }

    // The bad cases (SEP-2640 "Error Handling"): no skill at the URI, a
    // file that is not a SKILL.md, a skill URI of another form, are -32602;
    // a file no skill has is resource-not-found, naming its URI.
    let reference = match &skills[0].resources {
        SkillResources::Files(files) => files.iter().find(|file| file.uri != skills[0].uri).unwrap().uri.clone(),
        other => panic!("a complete list of files, not {other:?}"),
    };
    for bad in ["skill://pilotage/nosuch-v9/SKILL.md", "skill://other/workflow-v1/SKILL.md", reference.as_str()] {
        assert_eq!(code(client.get_skill(GetSkillRequestParams::new(bad)).await), -32602, "{bad}");
    }
    for bad in [
        "skill://pilotage/workflow-v1/references/nosuch.md",
        "skill://pilotage/nosuch-v9/SKILL.md",
        "skill://pilotage/workflow-v1/SKILL.md/x",
    ] {
        match client.read_resource(ReadResourceRequestParams::new(bad)).await {
            Err(rmcp::ServiceError::McpError(error)) => {
                assert_eq!(error.code.0, -32002, "{bad}: {error:?}");
                assert_eq!(error.data.as_ref().map(|data| data["uri"].clone()), Some(json!(bad)), "{error:?}");
            }
            other => panic!("{bad}: {other:?}"),
        }
    }

    // The official SDK clients, with raw requests for the extension.
    let url = server.mcp_url();
    sdk_passes_checks(typescript_sdk().to_owned(), "tests/interop/ts/skills.mjs", url.clone(), 60).await;
    sdk_passes_checks(python_sdk(), "tests/interop/py/skills.py", url, 60).await;
    let _ = client.cancel().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // resources/subscribe is the session-bound form this test drives
async fn a_language_change_reaches_the_skills_of_its_tenant_only() {
    let (server, acme, recorder) = crate::resources::acme_recorded().await;

    // A tenant without a Language has no skill; its SKILL.md URI may be
    // followed before the Language arrives, as a guide index may.
    let skill_md = "skill://pilotage/workflow-v1/SKILL.md";
    assert!(acme.list_all_skills().await.unwrap().is_empty());
    assert_eq!(code(acme.get_skill(GetSkillRequestParams::new(skill_md)).await), -32602);
    acme.subscribe(SubscribeRequestParams::new(skill_md)).await.unwrap();

    crate::tenancy::upload_language(&server, "acme", pilotage_bundled::WORKFLOW).await;
    let heard = recorder.heard(&format!("updated {skill_md}"), 1).await;
    assert!(heard.iter().any(|n| n == "list_changed"), "{heard:?}");
    let skills = acme.list_all_skills().await.unwrap();
    assert_eq!(skills.iter().map(|skill| skill.uri.as_str()).collect::<Vec<_>>(), [skill_md]);
    let (text, _) = read(&acme, skill_md).await.unwrap();
    let workflow = skills[0].clone();

    // A second Language is a second skill; the first one's entry and bytes
    // do not move.
    crate::tenancy::upload_language(&server, "acme", pilotage_bundled::AUTOMATION).await;
    recorder.heard(&format!("updated {skill_md}"), 2).await;
    let skills = acme.list_all_skills().await.unwrap();
    assert_eq!(skills.len(), 2, "{skills:?}");
    assert!(skills.contains(&workflow), "the workflow skill is unchanged");
    assert_eq!(read(&acme, skill_md).await.unwrap().0, text);

    // The demo tenant sees its own Languages' skills, never acme's; acme's
    // caller cannot read a skill its tenant does not serve.
    let demo = client(&server.mcp_url()).await;
    let mut demo_skills: Vec<String> =
        demo.list_all_skills().await.unwrap().into_iter().map(|skill| skill.frontmatter.name).collect();
    demo_skills.sort();
    let manifest = ok(&demo, "pilotage_manifest", json!({})).await;
    let mut demo_languages: Vec<String> = manifest["languages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|language| language["name"].as_str().unwrap().replace('/', "-"))
        .collect();
    demo_languages.sort();
    assert_eq!(demo_skills, demo_languages, "the demo tenant's skills are its own Languages'");

    // Retired, the Language's skill is gone: announced, then -32602 and
    // resource-not-found.
    let (status, body) =
        crate::tenancy::admin(&server, reqwest::Method::DELETE, "/tenants/acme/languages/workflow/v1", None).await;
    assert!(status < 300, "{status} {body}");
    recorder.heard(&format!("updated {skill_md}"), 3).await;
    let skills = acme.list_all_skills().await.unwrap();
    assert_eq!(skills.iter().map(|skill| skill.frontmatter.name.as_str()).collect::<Vec<_>>(), ["automation-1"]);
    assert_eq!(code(acme.get_skill(GetSkillRequestParams::new(skill_md)).await), -32602);
    assert_eq!(code(read(&acme, skill_md).await), -32002);
    // The demo tenant still has its own workflow skill.
    assert!(demo.get_skill(GetSkillRequestParams::new(skill_md)).await.is_ok());
    let _ = demo.cancel().await;
    let _ = acme.cancel().await;
    server.stop().await;
}
