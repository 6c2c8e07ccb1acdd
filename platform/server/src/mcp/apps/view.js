// The plan view and the Run view, shared by the console's Run page and the
// MCP Apps views (docs/architecture.md, "The console and the views").
//
// globalThis.PilotageView.renderPlan(root, validateResponse)
//   A validate response (Part II §6.3): `valid`, `plan` (§5.6: `steps` with
//   `id`, `calls`, `risk`, `risk_hints`, `arm`, `loop`; `max_risk`,
//   `max_risk_hints`), `diagnostics` (§5.5), `catalog_version`.
// globalThis.PilotageView.renderRun(root, run)
//   An execute response (§6.5) or a trace-fetch response (§6.6), with
//   `plan` added when it is known: `run_id`, `outcome` (§5.7), `output`,
//   `trace` (§5.8: `level`, `steps` with `id`, `calls`, `input`, `output`,
//   `outcome`, `t_ms`, `decisions`, `simulated`), `diagnostics`,
//   `approval`.
//
// Everything shown is set as text (never parsed as HTML), so a program,
// an input or a Run's output cannot inject markup or script. Large traces
// are paged (PAGE_STEPS per page) and large values are cut at CUT_CHARS
// with a button that shows them whole, so a Run at the invocation bound
// (about 1,000 steps, 660 KB) renders at once and stays scrollable.
(function () {
  "use strict";

  var PAGE_STEPS = 100;
  var CUT_CHARS = 2000;

  // One line on what a refusal or failure means (Part II §5.7's reserved
  // statuses, and the platform's policy statuses).
  var EXPLAINED = {
    validation_error: "Refused before anything ran: the program, input or context did not validate. No side effects occurred.",
    catalog_drift: "Refused before anything ran: the catalog changed since the program was validated (expected_catalog_version differs). Validate again and retry.",
    promotion_drift: "Refused before anything ran: an entry the promoted program references changed since it was promoted. Promote it again.",
    partial: "The Run began but did not complete: some steps may have had effects.",
    approval_required: "Held by the tenant's policy on risk: a person must approve this exact request before it runs. Nothing ran.",
    approval_rejected: "A person rejected this request under the tenant's policy on risk. Nothing ran.",
    policy_denied: "The tenant's policy on risk denies this Run. Nothing ran.",
    budget_exceeded: "The tenant's budget for Runs of this risk is used up for now. Nothing ran.",
    resource_exhausted: "The Run reached one of its bounds (fuel, memory, time or invocations) and was stopped.",
    timeout: "The Run ran out of time and was stopped.",
    interrupted: "The Run was interrupted (its lease ended before it finished): some steps may have had effects."
  };

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (key) {
        if (key === "text") node.textContent = attrs[key];
        else if (key === "className") node.className = attrs[key];
        else node.setAttribute(key, attrs[key]);
      });
    }
    (children || []).forEach(function (child) {
      if (child !== null && child !== undefined) node.appendChild(child);
    });
    return node;
  }

  function text(value) {
    if (value === null || value === undefined) return "";
    return typeof value === "string" ? value : JSON.stringify(value);
  }

  function clear(root) {
    while (root.firstChild) root.removeChild(root.firstChild);
  }

  // A value as indented JSON, cut at CUT_CHARS with a way to see it whole;
  // built only when its <details> is opened.
  function valueDetails(summary, value, className) {
    var details = el("details", { className: "pv-value " + (className || "") }, [el("summary", { text: summary })]);
    var built = false;
    details.addEventListener("toggle", function () {
      if (!details.open || built) return;
      built = true;
      var whole = JSON.stringify(value, null, 2);
      if (whole === undefined) whole = "undefined";
      var pre = el("pre", { text: whole.length > CUT_CHARS ? whole.slice(0, CUT_CHARS) + "\n…" : whole });
      details.appendChild(pre);
      if (whole.length > CUT_CHARS) {
        var more = el("button", { type: "button", className: "pv-whole", text: "Show the whole value (" + Math.ceil(whole.length / 1024) + " KB)" });
        more.addEventListener("click", function () {
          pre.textContent = whole;
          more.remove();
        });
        details.appendChild(more);
      }
    });
    return details;
  }

  function hints(h) {
    if (!h) return "";
    var set = [];
    if (h.readOnly) set.push("read-only");
    if (h.destructive) set.push("destructive");
    if (h.openWorld) set.push("open world");
    return set.length ? set.join(", ") : "writes";
  }

  // Which arms did the Run take? A Map of branch id to the Set of labels
  // taken (Maps, not objects: a step named "__proto__" is data, never a
  // key of Object.prototype); null when no trace is known (the plan alone
  // then greys nothing).
  function takenArms(trace) {
    if (!trace || !Array.isArray(trace.steps)) return null;
    var taken = new Map();
    trace.steps.forEach(function (step) {
      (step.decisions || []).forEach(function (d) {
        var at = text(d.at);
        if (!taken.has(at)) taken.set(at, new Set());
        taken.get(at).add(text(d.took));
      });
    });
    return taken;
  }

  function diagnosticsList(diagnostics) {
    if (!Array.isArray(diagnostics) || diagnostics.length === 0) return null;
    var list = el("ul", { className: "pv-diagnostics" });
    diagnostics.forEach(function (d) {
      var where = d.path && typeof d.path === "object" ? text(d.path.pointer || d.path) : text(d.path);
      list.appendChild(
        el("li", { className: "pv-" + text(d.severity) }, [
          el("strong", { text: text(d.severity) + " " + text(d.code) }),
          el("span", { text: " at " + (where || "/") + ": " + text(d.message) }),
          d.hint ? el("div", { className: "pv-hint", text: "Hint: " + text(d.hint) }) : null
        ])
      );
    });
    return el("section", { className: "pv-section", "aria-label": "Diagnostics" }, [el("h2", { text: "Diagnostics" }), list]);
  }

  function planTable(plan, taken) {
    var body = el("tbody");
    (plan.steps || []).forEach(function (step) {
      var arm = step.arm ? step.arm.branch + " → " + step.arm.label : "";
      var untaken = !!(taken && step.arm && taken.has(text(step.arm.branch)) && !taken.get(text(step.arm.branch)).has(text(step.arm.label)));
      var row = el("tr", { className: "pv-step" + (untaken ? " pv-untaken" : ""), "data-step": text(step.id) }, [
        el("th", { scope: "row", text: text(step.id) }),
        el("td", { text: text(step.calls) }),
        el("td", { className: "pv-risk pv-risk-" + text(step.risk), text: text(step.risk) }),
        el("td", { text: hints(step.risk_hints) }),
        el("td", { className: "pv-arm", text: arm + (untaken ? " (not taken)" : "") }),
        el("td", { text: text(step.loop) })
      ]);
      body.appendChild(row);
    });
    var head = el("thead", null, [
      el("tr", null, ["Step", "Calls", "Risk", "Hints", "Arm", "Loop"].map(function (h) {
        return el("th", { scope: "col", text: h });
      }))
    ]);
    return el("div", { className: "pv-scroll" }, [
      el("table", { className: "pv-plan" }, [
        el("caption", { text: "Every step the program may take, with its risk" + (taken ? "; arms the Run did not take are greyed" : "") }),
        head,
        body
      ])
    ]);
  }

  function planSection(plan, taken, catalogVersion) {
    var facts = el("dl", { className: "pv-facts" }, [
      el("dt", { text: "Highest risk" }),
      el("dd", { className: "pv-risk pv-risk-" + text(plan.max_risk), id: "pv-max-risk", text: text(plan.max_risk) }),
      el("dt", { text: "Risk hints" }),
      el("dd", { text: hints(plan.max_risk_hints) }),
      catalogVersion ? el("dt", { text: "Catalog version" }) : null,
      catalogVersion ? el("dd", { text: text(catalogVersion) }) : null
    ]);
    return el("section", { className: "pv-section", "aria-label": "Plan" }, [el("h2", { text: "Plan" }), facts, planTable(plan, taken)]);
  }

  function outcomeLine(outcome) {
    if (!outcome) return null;
    var status = text(outcome.status);
    var line = el("p", { className: "pv-outcome " + (outcome.ok ? "pv-ok" : "pv-failed"), id: "pv-outcome" }, [
      el("strong", { text: (outcome.ok ? "Succeeded: " : "Failed: ") + status }),
      outcome.error ? el("span", { text: " — " + text(outcome.error) }) : null
    ]);
    var why = EXPLAINED[status];
    return why ? el("div", null, [line, el("p", { className: "pv-explain", text: why })]) : line;
  }

  function stepItem(step, index) {
    var outcome = step.outcome || {};
    var badges = [];
    if (step.simulated) badges.push(el("span", { className: "pv-badge pv-simulated", text: "simulated (test run)" }));
    if (!step.calls && Array.isArray(step.decisions) && step.decisions.length) badges.push(el("span", { className: "pv-badge", text: "decision" }));
    var head = el("div", { className: "pv-step-head" }, [
      el("span", { className: "pv-index", text: String(index + 1) + "." }),
      el("strong", { className: "pv-step-id", text: text(step.id) }),
      step.calls ? el("code", { className: "pv-calls", text: text(step.calls) }) : null,
      el("span", { className: "pv-status " + (outcome.ok === false ? "pv-failed" : "pv-ok"), text: text(outcome.status) }),
      typeof step.t_ms === "number" ? el("span", { className: "pv-ms", text: step.t_ms + " ms" }) : null
    ].concat(badges));
    var item = el("li", { className: "pv-trace-step", "data-step": text(step.id) }, [head]);
    if (outcome.error) item.appendChild(el("p", { className: "pv-error", text: text(outcome.error) }));
    (step.decisions || []).forEach(function (d) {
      item.appendChild(
        el("p", { className: "pv-decision", "data-at": text(d.at) }, [
          el("span", { text: "At " + text(d.at) + " took " }),
          el("strong", { text: text(d.took) }),
          el("span", { text: " because " }),
          el("q", { className: "pv-because", text: text(d.because) })
        ])
      );
    });
    if ("input" in step) item.appendChild(valueDetails("Input", step.input, "pv-input"));
    if ("output" in step) item.appendChild(valueDetails("Output", step.output, "pv-output"));
    return item;
  }

  // The trace as a timeline, PAGE_STEPS at a time.
  function traceSection(trace) {
    var steps = Array.isArray(trace.steps) ? trace.steps : [];
    var pages = Math.max(1, Math.ceil(steps.length / PAGE_STEPS));
    var section = el("section", { className: "pv-section", "aria-label": "Trace" }, [
      el("h2", { text: "Trace" }),
      el("p", { className: "pv-trace-facts", text: steps.length + " steps, recorded at level " + text(trace.level) + (trace.stats ? "; stats " + text(trace.stats) : "") })
    ]);
    var list = el("ol", { className: "pv-timeline", id: "pv-timeline" });
    var nav = el("nav", { className: "pv-pages", "aria-label": "Trace pages" });
    var label = el("span", { className: "pv-page-label", "aria-live": "polite" });
    var previous = el("button", { type: "button", text: "Previous steps" });
    var next = el("button", { type: "button", text: "Next steps" });
    var page = 0;
    function show(p) {
      page = Math.min(Math.max(p, 0), pages - 1);
      clear(list);
      var start = page * PAGE_STEPS;
      list.setAttribute("start", String(start + 1));
      var fragment = document.createDocumentFragment();
      steps.slice(start, start + PAGE_STEPS).forEach(function (step, i) {
        fragment.appendChild(stepItem(step, start + i));
      });
      list.appendChild(fragment);
      label.textContent = "Steps " + (steps.length ? start + 1 : 0) + "–" + Math.min(start + PAGE_STEPS, steps.length) + " of " + steps.length + " (page " + (page + 1) + " of " + pages + ")";
      previous.disabled = page === 0;
      next.disabled = page === pages - 1;
    }
    previous.addEventListener("click", function () { show(page - 1); });
    next.addEventListener("click", function () { show(page + 1); });
    if (pages > 1) {
      nav.appendChild(previous);
      nav.appendChild(label);
      nav.appendChild(next);
    } else {
      nav.appendChild(label);
    }
    section.appendChild(nav);
    section.appendChild(list);
    show(0);
    return section;
  }

  function renderPlan(root, response) {
    clear(root);
    response = response || {};
    var ok = response.valid === true;
    root.appendChild(el("p", { className: "pv-outcome " + (ok ? "pv-ok" : "pv-failed"), id: "pv-validity", text: ok ? "The program is valid." : "The program is not valid." }));
    var diagnostics = diagnosticsList(response.diagnostics);
    if (diagnostics) root.appendChild(diagnostics);
    if (response.plan) root.appendChild(planSection(response.plan, null, response.catalog_version));
  }

  function renderRun(root, run) {
    clear(root);
    run = run || {};
    var head = el("section", { className: "pv-section", "aria-label": "Outcome" }, [
      el("h2", { text: "Outcome" }),
      el("p", { className: "pv-run-id" }, [el("span", { text: "Run " }), el("code", { text: text(run.run_id) })]),
      outcomeLine(run.outcome)
    ]);
    if (run.approval && /^https?:\/\//.test(text(run.approval.url))) {
      head.appendChild(el("p", null, [el("span", { text: "Approval " + text(run.approval.id) + " is " + text(run.approval.state) + ": " }), el("a", { href: run.approval.url, text: run.approval.url, target: "_blank", rel: "noopener" })]));
    }
    if ("output" in run) head.appendChild(valueDetails("Output of the Run", run.output, "pv-run-output"));
    root.appendChild(head);
    var diagnostics = diagnosticsList(run.diagnostics);
    if (diagnostics) root.appendChild(diagnostics);
    if (run.plan) root.appendChild(planSection(run.plan, takenArms(run.trace), null));
    if (run.trace) root.appendChild(traceSection(run.trace));
    else root.appendChild(el("p", { className: "pv-note", text: "No trace was returned with this Run." }));
  }

  globalThis.PilotageView = { renderPlan: renderPlan, renderRun: renderRun, PAGE_STEPS: PAGE_STEPS, CUT_CHARS: CUT_CHARS };
})();
