// The interactive views of an ipu_keras report.html (ipu_keras/_src/reports/interactive.py
// gathers the data). Drawn with plotly.js, inlined in the page: no network is used.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("ipu-data").textContent);
  var COLOURS = {compute: "#4C72B0", exchange: "#DD8452", sync: "#937860", host_io: "#55A868",
                 step: "#64B5CD", layer: "#8172B3", program: "#AAAAAA", "pipeline F": "#4C72B0",
                 "pipeline B": "#DD8452", "pipeline O": "#8C8C8C",
                 link: "#DA8BC3", collective: "#CCB974"};
  var CONFIG = {displaylogo: false, responsive: true};

  function fmt(n) { return Number(n).toLocaleString("en-US"); }
  function el(id) { return document.getElementById(id); }
  function escape(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;"}[c];
    });
  }
  function table(headers, rows) {
    var h = "<table><tr>" + headers.map(function (x) { return "<th>" + escape(x) + "</th>"; })
      .join("") + "</tr>";
    return h + rows.map(function (r) {
      return "<tr>" + r.map(function (c) { return "<td>" + escape(c) + "</td>"; }).join("") +
        "</tr>";
    }).join("") + "</table>";
  }

  if (window.IPU_NO_PLOTLY || typeof Plotly === "undefined") {
    document.querySelectorAll(".plot").forEach(function (div) {
      div.textContent = "The interactive views need the plotly package (pip install plotly).";
    });
    return;
  }

  // -- the execution trace: one row per IPU and kind of activity, zoomable -------------
  function timeline() {
    var T = D.timeline, div = el("timeline-plot");
    if (!T || !T.rows.length) { div.textContent = "No trace."; return; }
    var traces = Object.keys(T.groups).map(function (cat) {
      var g = T.groups[cat];
      return {type: "bar", orientation: "h", name: cat, y: g.y, base: g.base, x: g.x,
              text: g.text, textposition: "none",
              marker: {color: COLOURS[cat] || "#999", line: {color: "white", width: 0.5}},
              hovertemplate: "%{text}<br>cycles %{base:,} to %{customdata:,}" +
                             "<br>%{x:,} cycles<extra>" + cat + "</extra>",
              customdata: g.base.map(function (b, i) { return b + g.x[i]; })};
    });
    var layout = {barmode: "overlay", height: 140 + 26 * T.rows.length,
                  margin: {l: 200, r: 20, t: 30, b: 40},
                  // no range slider: it draws every slice a second time
                  xaxis: {title: {text: "cycles"}, range: [0, T.total]},
                  yaxis: {categoryorder: "array", categoryarray: T.rows.slice().reverse(),
                          fixedrange: true},
                  legend: {orientation: "h", y: 1.08}, dragmode: "zoom"};
    Plotly.newPlot(div, traces, layout, CONFIG);
  }

  // -- memory per tile, by category; a tile's tensors on hover ---------------------------
  function tensorsOnTile(tile) {
    var n = D.memory.tiles;
    return D.tensors.filter(function (t) {
      var offset = ((tile - t[5]) % n + n) % n;
      return offset < t[6];
    }).sort(function (a, b) { return b[7] - a[7]; });
  }

  function showTile(tile) {
    var rows = [], total = 0;
    Object.keys(D.memory.categories).forEach(function (k) {
      var v = D.memory.categories[k][tile];
      total += v;
      if (v) rows.push([k, fmt(v)]);
    });
    var tensors = tensorsOnTile(tile).slice(0, 30).map(function (t) {
      return [t[1], t[2], t[3], fmt(t[7]), fmt(t[4])];
    });
    el("tile-info").innerHTML = "<h3>Tile " + tile + ": " + fmt(total) + " bytes</h3>" +
      table(["category", "bytes"], rows) +
      "<h4>Tensors on the tile (bytes here, of the whole tensor)</h4>" +
      (tensors.length ? table(["kind", "op or variable", "layer", "on this tile", "whole"],
                              tensors) : "<p>None mapped here.</p>");
  }

  function memory() {
    var M = D.memory, div = el("memory-plot");
    var tiles = [];
    for (var i = 0; i < M.tiles; i++) tiles.push(i);
    // Stacked areas, one path per category (a bar per tile and category was thousands of
    // SVG shapes); the step shape keeps each tile flat.
    var traces = Object.keys(M.categories).map(function (k) {
      return {type: "scatter", mode: "lines", name: k, x: tiles, y: M.categories[k],
              stackgroup: "memory", line: {shape: "hv", width: 0},
              hovertemplate: "%{y:,} bytes<extra>" + k + "</extra>"};
    });
    var top = Math.max(1, M.max) * 1.1, full = M.capacity * 1.05;
    var layout = {height: 420, hovermode: "x unified",
                  margin: {l: 70, r: 20, t: 40, b: 40},
                  xaxis: {title: {text: "tile"}}, yaxis: {title: {text: "bytes"}, range: [0, top]},
                  shapes: [{type: "line", xref: "paper", x0: 0, x1: 1, y0: M.capacity,
                            y1: M.capacity, line: {color: "red", width: 1}}],
                  updatemenus: [{type: "buttons", direction: "right", x: 0, xanchor: "left",
                                 y: 1.18, yanchor: "top",
                                 buttons: [
                    {label: "scale to the fullest tile", method: "relayout",
                     args: [{"yaxis.range": [0, top]}]},
                    {label: "whole tile (" + fmt(M.capacity) + " bytes)", method: "relayout",
                     args: [{"yaxis.range": [0, full]}]}]}]};
    Plotly.newPlot(div, traces, layout, CONFIG);
    div.on("plotly_hover", function (e) { showTile(e.points[0].x); });
    div.on("plotly_click", function (e) { showTile(e.points[0].x); });
  }

  // -- liveness: choose a step, see what is live -----------------------------------------
  function liveness(which) {
    var L = D.liveness[which], div = el("liveness-" + which);
    if (!L) { if (div) div.parentNode.style.display = "none"; return; }
    var byId = {};
    D.tensors.forEach(function (t) { if (t[1] !== "variable") byId[t[0]] = t; });
    var steps = L.labels.map(function (_, i) { return i; });
    Plotly.newPlot(div, [{type: "scatter", mode: "lines", x: steps, y: L.bytes, text: L.labels,
                          fill: "tozeroy", line: {shape: "hvh", color: "#4C72B0", width: 1},
                          hovertemplate: "step %{x}: %{text}<br>%{y:,} bytes<extra></extra>"}],
                   {height: 320, margin: {l: 70, r: 20, t: 20, b: 40}, bargap: 0,
                    hovermode: "x",   // a click anywhere above a step chooses it
                    xaxis: {title: {text: "program step (click one)"}},
                    yaxis: {title: {text: "not-always-live bytes"}}}, CONFIG);
    function show(step) {
      var live = L.ranges.filter(function (r) { return r[1] <= step && step <= r[2]; })
        .map(function (r) { return byId[r[0]]; }).filter(Boolean)
        .sort(function (a, b) { return b[4] - a[4]; });
      var sum = live.reduce(function (s, t) { return s + t[4]; }, 0);
      el("live-" + which).innerHTML = "<h4>Step " + step + " (" + escape(L.labels[step]) +
        "): " + live.length + " values live, " + fmt(sum) + " bytes</h4>" +
        table(["op", "layer", "bytes", "tiles"], live.slice(0, 200).map(function (t) {
          return [t[2], t[3], fmt(t[4]), fmt(t[6])];
        }));
    }
    div.on("plotly_click", function (e) { show(e.points[0].x); });
    show(L.peak);
  }

  // -- cycles per op and per layer -------------------------------------------------------
  function cycles(key) {
    var C = D[key], div = el(key + "-plot");
    if (!C.names.length) { div.textContent = "No cycles."; return; }
    var names = C.names.slice(0, 40).reverse();
    var traces = Object.keys(C.kinds).map(function (k) {
      return {type: "bar", orientation: "h", name: k, y: names,
              x: C.kinds[k].slice(0, 40).reverse(), marker: {color: COLOURS[k]},
              hovertemplate: "%{y}: %{x:,} cycles<extra>" + k + "</extra>"};
    });
    Plotly.newPlot(div, traces, {barmode: "stack", height: 120 + 18 * names.length,
                                 margin: {l: 200, r: 20, t: 20, b: 40},
                                 xaxis: {title: {text: "cycles"}}}, CONFIG);
  }

  timeline();
  memory();
  liveness("top");
  liveness("loop");
  cycles("layers");
  cycles("ops");
  window.IPU_REPORT_READY = true;
})();
