//! The self-description of workflow/v1: declarations, the closed sets from
//! [`crate::codes`], and the guides (the closed-sets guide is rendered from
//! the same tables the code emits).

use pilotage_guest_sdk::closed_sets::{self, ClosedSets, Prose};
use pilotage_guest_sdk::{Features, GuideLevel, LanguageInfo};

use crate::codes;

/// The Language identifier.
pub const NAME: &str = "workflow/v1";

const CORE: &str = include_str!("../guides/core.md");
const EXAMPLES: &str = include_str!("../guides/examples.md");

const SCOPE_RULES: &str = "\
- A step's output is addressable as `$.steps.<id>.output` by every step after it in the same list, and by the steps nested inside those later steps. It is not addressable by earlier steps or by itself.
- Steps inside a branch arm (`then` or `else`) can read everything addressable at the branch, plus earlier steps of the same arm. After the branch, nothing produced inside either arm is addressable: the arm may not have run. Compute shared values before the branch, or continue the work inside the arm.
- Steps inside a `for_each` body can read everything addressable at the loop, the loop variable (`$.item`, or the name given by `as`), and earlier steps of the same body in the same iteration. After the loop, body steps are not addressable; the loop's own output `$.steps.<loop id>.output` is the list of `collect` values, one per iteration (the elements themselves when `collect` is absent), and `[]` when the list was empty.
- The loop variable is addressable only inside its body; a nested loop may shadow an outer one by using the same name.
- `output` is evaluated after the last top-level step: it can read `$.input` and every top-level step, never a step inside an arm or body.
- Reading something that exists but is not addressable is `scope_violation`; reading a step id the program does not have is `unknown_step_reference`.";

const PARAMETER_BINDING: &str = "\
The Run's `input` is a JSON object; paths read it as `$.input.<name>...`.
- When the program has an `input` declaration (`{\"name\": \"type\"}`, types `string`, `number`, `integer`, `boolean`, `object`, `array`, `any`, a trailing `?` marking an optional one), the Run's input must carry every required parameter with the declared JSON type and nothing undeclared; each failure is an `input_binding` diagnostic whose `path` points into `input` (`/userId`), or `\"\"` when the whole input is missing or not an object. Paths may then only read declared names (`undeclared_input`).
- Without a declaration, any object (or no input) is accepted, and a path into a missing member fails the step at run time.
- workflow/v1 takes no validation `context`: supplying one is a `context_binding` diagnostic.";

const STEP_IDS: &str = "\
Programs name their steps: every step's `id` is its program step identifier; ids are unique across the program and may not contain `#` or `/`. In traces, a step inside loops carries `#n` per enclosing loop, outermost first, counting from 1 and restarting for each activation of an inner loop (`flag#2`, `cell#3#1`). Every step, `set` steps included, appears in the plan; branch-arm steps carry `arm` (`branch` = the branch's id, `label` = `then` or `else`) and loop-body steps carry `loop` (the innermost loop's id).";

const DECISIONS: &str = "\
A branch's trace entry carries one decision: `took` is `then` or `else`, and `because` shows the condition with the values it compared (`$.steps.profile.output.tier (\"gold\") eq \"gold\" is true`). A loop's entry appears once per activation and carries one decision per evaluation: `continue` before each iteration (`because`: `item 2 of 3`) and a final `exit` (`because`: `all 3 items done`, or `the list is empty`). A step's trace `input` is the evaluated `with` for a `call` and, for a `set`, an object mapping each path it reads to the value found; its `output` is the entry's output or the computed value. When a step fails, its outcome is `error` and the Run stops: the Run's status is `partial` when any entry had already been invoked, else `error`.";

const OUTPUT: &str = "\
The Run's `output` is the value of the program's `output` template, evaluated after the last top-level step; it is absent when the program has no `output` or the Run did not succeed.";

/// The closed sets the code emits, and the closed-sets guide's prose.
const CLOSED_SETS: ClosedSets = ClosedSets {
    codes: &codes::OWN_CODES,
    run_statuses: &codes::OWN_RUN_STATUSES,
    step_statuses: &codes::STEP_STATUSES,
    entry_kinds: &codes::ENTRY_KINDS,
    risk_levels: &codes::RISK_LEVELS,
    prose: Prose {
        scope_rules: Some(SCOPE_RULES),
        parameter_binding: Some(PARAMETER_BINDING),
        step_ids: Some(STEP_IDS),
        output: Some(OUTPUT),
        decisions: Some(DECISIONS),
    },
};

/// The full declaration of workflow/v1.
pub fn language_info() -> LanguageInfo {
    let mut info = LanguageInfo {
        name: NAME.to_owned(),
        title: "Workflows: steps that call catalog entries, with branches, loops and data flow".to_owned(),
        program_argument: "workflow".to_owned(),
        features: Features { plan: true, catalog: true, execute: true, test_run: false, promotion: true },
        ..CLOSED_SETS.language_info()
    };
    let closed = CLOSED_SETS.guide("workflow-closed-sets", &info);
    info.guides = vec![
        closed_sets::guide(
            "workflow-core",
            "workflow/v1 core: document, steps, paths, one runnable example",
            GuideLevel::Core,
            &["grammar", "steps", "paths", "conditions", "example"],
            CORE,
        ),
        closed,
        closed_sets::guide(
            "workflow-examples",
            "workflow/v1 examples: branches, loops, collect, common mistakes",
            GuideLevel::Examples,
            &["branch", "loop", "mistakes"],
            EXAMPLES,
        ),
    ];
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_guide_is_small_and_closed_sets_guide_is_unique() {
        let info = language_info();
        let core = info.guides.iter().find(|g| g.level == GuideLevel::Core).unwrap();
        assert!(core.body.len() <= 8192, "core guide is {} bytes", core.body.len());
        assert_eq!(info.guides.iter().filter(|g| g.topics.iter().any(|t| t == "closed-sets")).count(), 1);
    }

    #[test]
    fn every_code_the_validator_can_emit_is_declared() {
        let info = language_info();
        for (code, _) in codes::OWN_CODES {
            assert!(info.diagnostic_codes.iter().any(|c| c.code == code));
        }
        for reserved in ["constraint", "input_binding", "context_binding"] {
            assert!(info.diagnostic_codes.iter().any(|c| c.code == reserved));
        }
    }
}
