// The console's script: draws the Run page from its embedded record with
// the shared view (view.js), and keeps the overview's live figures fresh
// (figures.json every 5 seconds, drawn as small SVG bar charts and, for
// operators, a sparkline of requests per second), and the header's count
// of pending approvals. Everything shown is set as text; no markup comes
// from data.
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";

  function svg(tag, attrs) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs || {}).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    return node;
  }

  function barChart(title, values) {
    var keys = Object.keys(values || {});
    var figure = document.createElement("figure");
    figure.className = "chart";
    var caption = document.createElement("figcaption");
    caption.textContent = title;
    figure.appendChild(caption);
    if (keys.length === 0) {
      var none = document.createElement("p");
      none.className = "note";
      none.textContent = "Nothing yet.";
      figure.appendChild(none);
      return figure;
    }
    var max = Math.max.apply(null, keys.map(function (k) { return values[k]; }).concat([1]));
    var row = 22, width = 320, label = 130;
    var chart = svg("svg", { viewBox: "0 0 " + width + " " + (keys.length * row), width: "100%", role: "img" });
    var summary = keys.map(function (k) { return k + " " + values[k]; }).join(", ");
    chart.setAttribute("aria-label", title + ": " + summary);
    keys.forEach(function (key, i) {
      var y = i * row;
      var name = svg("text", { x: 0, y: y + 15, class: "chart-label" });
      name.textContent = key.length > 18 ? key.slice(0, 17) + "…" : key;
      var w = Math.max(2, Math.round((width - label - 50) * values[key] / max));
      var bar = svg("rect", { x: label, y: y + 4, width: w, height: row - 8, class: "chart-bar" });
      var tip = svg("title", {});
      tip.textContent = key + ": " + values[key];
      bar.appendChild(tip);
      var value = svg("text", { x: label + w + 4, y: y + 15, class: "chart-value" });
      value.textContent = String(values[key]);
      chart.appendChild(name);
      chart.appendChild(bar);
      chart.appendChild(value);
    });
    figure.appendChild(chart);
    return figure;
  }

  function sparkline(title, samples) {
    var figure = document.createElement("figure");
    figure.className = "chart";
    var caption = document.createElement("figcaption");
    var last = samples.length ? samples[samples.length - 1] : 0;
    caption.textContent = title + ": " + last.toFixed(1) + " now";
    figure.appendChild(caption);
    var width = 320, height = 60;
    var chart = svg("svg", { viewBox: "0 0 " + width + " " + height, width: "100%", role: "img" });
    chart.setAttribute("aria-label", title + ", the last " + samples.length + " samples, latest " + last.toFixed(1));
    var max = Math.max.apply(null, samples.concat([1]));
    var points = samples.map(function (v, i) {
      var x = samples.length > 1 ? (i * width) / (samples.length - 1) : 0;
      return x.toFixed(1) + "," + (height - 4 - ((height - 8) * v) / max).toFixed(1);
    });
    chart.appendChild(svg("polyline", { points: points.join(" "), class: "chart-line", fill: "none" }));
    figure.appendChild(chart);
    return figure;
  }

  function sum(values) {
    return Object.keys(values || {}).reduce(function (total, k) { return total + values[k]; }, 0);
  }

  function figures(section) {
    var charts = document.getElementById("charts");
    var rates = [];
    var previous = null;
    function draw(data) {
      while (charts.firstChild) charts.removeChild(charts.firstChild);
      charts.appendChild(barChart("This tenant's Runs by status (24 h)", data.tenant.runs_by_status));
      charts.appendChild(barChart("This tenant's firings by deployment (24 h)", data.tenant.firings_by_deployment));
      if (data.platform && !data.platform.recording) {
        var note = document.createElement("p");
        note.className = "note";
        note.id = "no-metrics";
        note.textContent = "This replica records no metrics: serve them (--metrics-listen or --metrics-token) to see its requests, Runs and firings here.";
        charts.appendChild(note);
      } else if (data.platform) {
        var total = sum(data.platform.requests_by_outcome);
        if (previous) {
          var seconds = Math.max(0.001, (data.at - previous.at) / 1000);
          rates.push(Math.max(0, (total - previous.total) / seconds));
          if (rates.length > 60) rates.shift();
        }
        previous = { at: data.at, total: total };
        charts.appendChild(sparkline("MCP requests per second (this replica)", rates));
        charts.appendChild(barChart("MCP requests by outcome (this replica)", data.platform.requests_by_outcome));
        charts.appendChild(barChart("Runs by status (this replica)", data.platform.runs_by_status));
        charts.appendChild(barChart("Firings by result (this replica)", data.platform.firings_by_result));
      }
      section.setAttribute("data-updated", String(data.at));
    }
    function poll() {
      fetch(section.getAttribute("data-src"), { credentials: "same-origin", cache: "no-store" })
        .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
        .then(draw)
        .catch(function (error) {
          charts.textContent = "The figures could not be read (" + error.message + ").";
        });
    }
    poll();
    setInterval(poll, 5000);
  }

  // The header's count of pending approval requests (approvals.json),
  // read once per page and every 30 seconds.
  function pendingCount(badge) {
    function read() {
      fetch(badge.getAttribute("data-src"), { credentials: "same-origin", cache: "no-store" })
        .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
        .then(function (data) {
          badge.textContent = data.pending > 0 ? String(data.pending) : "";
          badge.setAttribute("data-pending", String(data.pending));
          badge.setAttribute("aria-label", data.pending + " pending");
        })
        .catch(function () { badge.textContent = ""; });
    }
    read();
    setInterval(read, 30000);
  }

  function start() {
    var badge = document.getElementById("pending-count");
    if (badge && badge.getAttribute("data-src")) pendingCount(badge);
    var data = document.getElementById("run-data");
    var view = document.getElementById("run-view");
    if (data && view && globalThis.PilotageView) {
      globalThis.PilotageView.renderRun(view, JSON.parse(data.textContent));
    }
    var section = document.getElementById("figures");
    if (section && section.getAttribute("data-src")) figures(section);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
