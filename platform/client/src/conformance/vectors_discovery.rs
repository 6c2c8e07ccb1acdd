//! The discovery, cold-start and learn vectors (PIL-DISCOVER-*,
//! PIL-COLDSTART-*, PIL-LEARN-*): the manifest, the signposts of the tool
//! surface, and the guides (Part II §6.1, §6.2; Part III §3).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::runner::{Check, Runner, RunnerError, skip};
use super::vector_file::{Vector, Verdict};
use crate::connection::Reply;
use pilotage_protocol::capabilities::Capability;

impl Runner<'_> {
    /// Runs `vector` when its id is one of PIL-DISCOVER-*, PIL-COLDSTART-* and
    /// PIL-LEARN-*: its verdict, or `None` for an id of another group.
    pub(super) async fn discovery_vector(
        &self,
        vector: &Vector,
        mut check: Check,
    ) -> Result<Option<Verdict>, RunnerError> {
        let language = self.entry.name.clone();
        match vector.id.as_str() {
            "PIL-DISCOVER-MANIFEST-G" => return self.discover_manifest(check).await.map(Some),
            "PIL-DISCOVER-INITMETA-G" => match self.connection.inline_manifest() {
                None => return Ok(Some(skip("the server attaches no inline manifest (a MAY of Part III §3.2)"))),
                Some(inline) => {
                    self.validates(&mut check, "Manifest", &serde_json::to_value(&inline).unwrap_or_default());
                    check.that(inline == self.manifest, "the inline manifest differs from pilotage_manifest's");
                }
            },
            "PIL-COLDSTART-SIGNPOSTS-G" => self.coldstart_signposts(&mut check),
            "PIL-LEARN-INDEX-G" => match self.call(pilotage_protocol::GUIDE_TOOL, json!({"language": language})).await?
            {
                Reply::Result(index) => {
                    self.validates(&mut check, "GuideIndexResult", &index);
                    let guides = index["guides"].as_array().cloned().unwrap_or_default();
                    check.that(guides.iter().all(|g| g.get("body").is_none()), "an index entry carries a body");
                    check.that(guides.iter().any(|g| g["level"] == "core"), "no core guide");
                    let closed: Vec<&Value> = guides
                        .iter()
                        .filter(|g| g["topics"].as_array().is_some_and(|t| t.iter().any(|t| t == "closed-sets")))
                        .collect();
                    check.that(
                        closed.len() == 1 && closed[0]["level"] == "reference",
                        "not exactly one reference closed-sets guide",
                    );
                }
                Reply::RequestError(e) => check.that(false, format!("request error: {}", e.error.message)),
            },
            "PIL-LEARN-FETCH-G" => {
                let index = match self.call(pilotage_protocol::GUIDE_TOOL, json!({"language": language})).await? {
                    Reply::Result(index) => index,
                    Reply::RequestError(request_error) => {
                        return Err(RunnerError::NoGuideIndex { language, request_error });
                    }
                };
                let id = index["guides"][0]["id"].clone();
                match self.call(pilotage_protocol::GUIDE_TOOL, json!({"language": language, "id": id})).await? {
                    Reply::Result(guide) => {
                        self.validates(&mut check, "GuideFetchResult", &guide);
                        check.that(guide["guide"]["body"].is_string(), "no body string");
                    }
                    Reply::RequestError(e) => check.that(false, format!("request error: {}", e.error.message)),
                }
            }
            "PIL-LEARN-UNKNOWN-ID-B" => {
                self.expect_error(
                    &mut check,
                    pilotage_protocol::GUIDE_TOOL,
                    json!({"language": language, "id": "no-such-guide"}),
                    "not_found",
                )
                .await?;
            }
            "PIL-LEARN-TOPIC-UNDECLARED-B" => {
                if self.declared("guides.topic_fetch") {
                    return Ok(Some(skip(format!("{language} declares guides.topic_fetch"))));
                }
                let index = match self.call(pilotage_protocol::GUIDE_TOOL, json!({"language": language})).await? {
                    Reply::Result(index) => index,
                    Reply::RequestError(request_error) => {
                        return Err(RunnerError::NoGuideIndex { language, request_error });
                    }
                };
                let guide = &index["guides"][0];
                let topic = guide["topics"][0].clone();
                self.expect_error(
                    &mut check,
                    pilotage_protocol::GUIDE_TOOL,
                    json!({"language": language, "id": guide["id"], "topic": topic}),
                    "invalid_request",
                )
                .await?;
            }
            _ => return Ok(None),
        }
        Ok(Some(check.verdict()))
    }

    /// PIL-DISCOVER-MANIFEST-G: the manifest validates, and each Language's
    /// loop tools are listed and match the capabilities it declares.
    async fn discover_manifest(&self, mut check: Check) -> Result<Verdict, RunnerError> {
        let reply = self.call(pilotage_protocol::MANIFEST_TOOL, json!({})).await?;
        let Reply::Result(manifest) = reply else {
            return Ok(Verdict::Failed { failures: vec!["manifest is a request error".into()] });
        };
        self.validates(&mut check, "Manifest", &manifest);
        check.that(!self.manifest.languages.is_empty(), "no Language");
        let names: BTreeSet<&str> = self.tools.iter().map(|t| t.name.as_ref()).collect();
        for entry in &self.manifest.languages {
            let map = entry.effective_capabilities(&self.manifest);
            let declares = |c| map.as_ref().is_some_and(|m| m.declares(c));
            check.that(
                names.contains(entry.loop_tools.validate.as_str()),
                format!("{} missing from tools/list", entry.loop_tools.validate),
            );
            check.that(
                entry.loop_tools.execute.is_some() == declares(Capability::Execute),
                "loop.execute does not match execute",
            );
            check.that(
                entry.loop_tools.trace.is_some() == declares(Capability::TraceFetch),
                "loop.trace does not match trace_fetch",
            );
            for tool in entry.loop_tools.execute.iter().chain(&entry.loop_tools.trace) {
                check.that(names.contains(tool.as_str()), format!("{tool} missing from tools/list"));
            }
            check.that(entry.guides == pilotage_protocol::GUIDE_TOOL, "guides is not pilotage_get_guide");
            check.that(
                entry.catalog.as_deref() == declares(Capability::Catalog).then_some(pilotage_protocol::CATALOG_TOOL),
                "catalog does not match the catalog capability",
            );
        }
        self.side_effect_free(&mut check);
        Ok(check.verdict())
    }

    /// PIL-COLDSTART-SIGNPOSTS-G: the welcome text and the tool descriptions
    /// point a cold agent at the manifest, then each stage of the loop.
    fn coldstart_signposts(&self, check: &mut Check) {
        let instructions = self.connection.instructions().unwrap_or_default();
        check.that(
            (instructions.contains("Pilotage") || instructions.contains(pilotage_protocol::EXTENSION_ID))
                && instructions.contains("pilotage_manifest"),
            "the welcome text does not name Pilotage and pilotage_manifest",
        );
        let description = |name: &str| {
            self.tools
                .iter()
                .find(|t| t.name == name)
                .and_then(|t| t.description.as_deref().map(str::to_lowercase))
                .unwrap_or_default()
        };
        let manifest = description(pilotage_protocol::MANIFEST_TOOL);
        check.that(
            manifest.contains("first") || manifest.contains("start"),
            "pilotage_manifest is not signposted as the starting point",
        );
        check.that(
            description(pilotage_protocol::GUIDE_TOOL).contains("learn"),
            "pilotage_get_guide does not state the learn stage",
        );
        if self.manifest.languages.iter().any(|l| l.catalog.is_some()) {
            check.that(
                description(pilotage_protocol::CATALOG_TOOL).contains("lookup"),
                "pilotage_catalog does not state the lookup stage",
            );
        }
        for entry in &self.manifest.languages {
            for (tool, stage) in [
                (Some(&entry.loop_tools.validate), "validate"),
                (entry.loop_tools.execute.as_ref(), "execute"),
                (entry.loop_tools.trace.as_ref(), "trace"),
            ] {
                if let Some(tool) = tool {
                    let text = description(tool);
                    check.that(
                        text.contains(stage) && text.contains(&entry.name.to_lowercase()),
                        format!("{tool} does not state its stage and Language"),
                    );
                }
            }
        }
    }
}
