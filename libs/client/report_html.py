"""`podway report`'s page: one self-contained HTML file (plotly.js inlined from the `plotly` package, the
run's data as JSON), so it opens anywhere with no network.

The page says what it drew: `data-rows` on the Gantt is the number of PodGroup rows plotted, `data-charts`
on the body the charts drawn and `data-errors` the script errors caught (tests read them from the DOM).
"""

from __future__ import annotations

import html
import importlib.util
import json
from pathlib import Path

from libs.client.report_model import RunReport

STATE_COLOURS = {"waiting": "#f2b134", "placed": "#4e79a7", "running": "#59a14f", "preempted": "#e15759"}


def plotly_js() -> str:
    """plotly.min.js as the `plotly` wheel ships it (found without importing plotly's Python side)."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the plotly package is missing: `make install` installs it")
    path = Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"
    return path.read_text(encoding="utf-8")


PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Podway run report</title>
<style>
  body {{ font-family: system-ui, sans-serif; margin: 24px; color: #222; }}
  h1 {{ font-size: 22px; margin-bottom: 4px; }}
  h2 {{ font-size: 17px; margin: 28px 0 4px; }}
  p.note {{ color: #666; margin: 0 0 8px; font-size: 13px; }}
  .chart {{ width: 100%; min-height: 320px; }}
  .empty {{ color: #999; font-style: italic; padding: 12px 0; }}
</style>
<script>
  window.podwayErrors = [];
  window.addEventListener("error", function (e) {{
    window.podwayErrors.push(String(e.message));
    if (document.body) document.body.setAttribute("data-errors", window.podwayErrors.join(" | "));
  }});
</script>
<script>{plotly}</script>
</head>
<body data-charts="0" data-errors="">
<h1>Podway run report</h1>
<p class="note">{summary}</p>
<h2>GPU occupancy by rack</h2>
<p class="note">Share of each rack's GPUs held by bound pods, over time.</p>
<div id="occupancy" class="chart"></div>
<h2>PodGroups</h2>
<p class="note">Each PodGroup's life: waiting for a placement, placed (bound, starting), running,
preempted; marks are evictions and restarts.</p>
<div id="gantt" class="chart" data-podgroups="{podgroups}" data-rows="0"></div>
<h2>Router traffic</h2>
<p class="note">Answers per 10 s by deployment and served tier; triangles mark spillovers (PT to on-demand),
crosses failovers.</p>
<div id="traffic" class="chart"></div>
<h2>Circuit breakers</h2>
<p class="note">0 closed, 1 half-open (ramping), 2 open.</p>
<div id="breakers" class="chart"></div>
<script id="run-data" type="application/json">{data}</script>
<script>
(function () {{
  var run = JSON.parse(document.getElementById("run-data").textContent);
  var colours = {colours};
  var drawn = 0;
  function empty(id, text) {{
    var div = document.getElementById(id);
    div.className = "empty";
    div.textContent = text;
  }}
  function plot(id, traces, layout) {{
    layout = Object.assign({{margin: {{t: 10, r: 10, b: 40, l: 160}}, hovermode: "closest", showlegend: true}}, layout);
    Plotly.newPlot(id, traces, layout, {{displaylogo: false, responsive: true}});
    drawn += 1;
  }}
  try {{
    var racks = Object.keys(run.occupancy);
    if (racks.length) {{
      plot("occupancy", racks.map(function (rack) {{
        var points = run.occupancy[rack];
        return {{name: rack + " (" + run.racks[rack] + " GPUs)", type: "scatter", mode: "lines",
                 line: {{shape: "hv"}}, x: points.map(function (p) {{ return p[0]; }}),
                 y: points.map(function (p) {{ return p[1]; }})}};
      }}), {{yaxis: {{title: "% of GPUs", range: [0, 100]}}, xaxis: {{type: "date"}}}});
    }} else {{ empty("occupancy", "No GPU was allocated in this run."); }}

    var groups = run.groups;
    if (groups.length) {{
      var traces = [];
      Object.keys(colours).forEach(function (state) {{
        var rows = [], bases = [], widths = [], texts = [];
        groups.forEach(function (g) {{
          g.segments.forEach(function (s) {{
            if (s.state !== state) return;
            var start = Date.parse(s.start.replace(" ", "T") + "Z"), end = Date.parse(s.end.replace(" ", "T") + "Z");
            rows.push(g.name); bases.push(s.start); widths.push(Math.max(end - start, 1));
            texts.push(state + " " + ((end - start) / 1000).toFixed(1) + " s");
          }});
        }});
        traces.push({{name: state, type: "bar", orientation: "h", y: rows, base: bases, x: widths,
                      text: texts, hoverinfo: "y+text", textposition: "none", marker: {{color: colours[state]}}}});
      }});
      var marks = {{x: [], y: [], text: []}};
      groups.forEach(function (g) {{ g.marks.forEach(function (m) {{ marks.x.push(m.at); marks.y.push(g.name); marks.text.push(m.what); }}); }});
      traces.push({{name: "evicted / restarted", type: "scatter", mode: "markers", x: marks.x, y: marks.y,
                    text: marks.text, marker: {{symbol: "x", size: 10, color: "#000"}}}});
      plot("gantt", traces, {{barmode: "overlay", xaxis: {{type: "date"}},
        yaxis: {{type: "category", categoryorder: "array", categoryarray: groups.map(function (g) {{ return g.name; }}).reverse(), automargin: true}},
        height: Math.max(320, 26 * groups.length + 80)}});
      var gd = document.getElementById("gantt"), names = {{}};
      gd.data.forEach(function (t) {{ if (t.type === "bar") (t.y || []).forEach(function (y) {{ names[y] = 1; }}); }});
      gd.setAttribute("data-rows", String(Object.keys(names).length));
    }} else {{ empty("gantt", "No PodGroup in this run."); }}

    var series = Object.keys(run.traffic);
    if (series.length || run.moves.length) {{
      var bin = 10000, traffic = series.map(function (key) {{
        var counts = {{}};
        run.traffic[key].forEach(function (at) {{
          var t = Math.floor(Date.parse(at.replace(" ", "T") + "Z") / bin) * bin;
          counts[t] = (counts[t] || 0) + 1;
        }});
        var xs = Object.keys(counts).map(Number).sort();
        return {{name: key, type: "bar", x: xs.map(function (t) {{ return new Date(t).toISOString().replace("T", " ").replace("Z", ""); }}),
                 y: xs.map(function (t) {{ return counts[t]; }})}};
      }});
      ["spillover", "failover"].forEach(function (kind) {{
        var moves = run.moves.filter(function (m) {{ return m.kind === kind; }});
        if (!moves.length) return;
        traffic.push({{name: kind + "s", type: "scatter", mode: "markers", yaxis: "y2",
          x: moves.map(function (m) {{ return m.at; }}), y: moves.map(function () {{ return kind === "spillover" ? 1 : 2; }}),
          text: moves.map(function (m) {{ return m.from + " -> " + m.to + " (" + m.reason + ")"; }}),
          marker: {{symbol: kind === "spillover" ? "triangle-up" : "x", size: 9}}}});
      }});
      plot("traffic", traffic, {{barmode: "stack", xaxis: {{type: "date"}}, yaxis: {{title: "answers / 10 s"}},
        yaxis2: {{overlaying: "y", side: "right", range: [0, 3], showticklabels: false}}}});
    }} else {{ empty("traffic", "No inference request in this run."); }}

    var deployments = Object.keys(run.breakers);
    if (deployments.length) {{
      plot("breakers", deployments.map(function (d) {{
        var points = run.breakers[d];
        return {{name: d, type: "scatter", mode: "lines", line: {{shape: "hv"}},
                 x: points.map(function (p) {{ return p[0]; }}), y: points.map(function (p) {{ return p[1]; }})}};
      }}), {{yaxis: {{tickvals: [0, 1, 2], ticktext: ["closed", "half-open", "open"], range: [-0.2, 2.2]}}, xaxis: {{type: "date"}}}});
    }} else {{ empty("breakers", "No breaker changed state in this run."); }}
  }} catch (e) {{
    window.podwayErrors.push(String(e && e.message || e));
  }}
  document.body.setAttribute("data-charts", String(drawn));
  document.body.setAttribute("data-errors", window.podwayErrors.join(" | "));
}})();
</script>
</body>
</html>
"""


def render_report(report: RunReport) -> str:
    summary = (
        f"{report.events} events from {report.started or '-'} to {report.ended or '-'} (UTC); "
        f"{len(report.groups)} PodGroups, {sum(len(v) for v in report.traffic.values())} routed answers, "
        f"{len(report.moves)} spillovers and failovers."
    )
    data = json.dumps(report.as_json()).replace("</", "<\\/")
    return PAGE.format(
        plotly=plotly_js().replace("</script", "<\\/script"),
        summary=html.escape(summary),
        podgroups=len(report.groups),
        data=data,
        colours=json.dumps(STATE_COLOURS),
    )
