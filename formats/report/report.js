// lcsim report: draws the page's embedded data (studies/report_data.hpp) with plain SVG; nothing is loaded.
// When every part has been drawn without an error, <html data-lcsim-rendered="ok"> (tests/report_page_test.py reads
// it from the headless browser's DOM); on an error, "error" and the message in #lcsim-status.
"use strict";
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                  "#bcbd22", "#17becf", "#393b79", "#ad494a"];
  const PART = { busy: "#4a7fb5", comm: "#e8833a", idle: "#d9d9d9" };

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const k in attrs || {}) node.setAttribute(k, attrs[k]);
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function svgEl(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const k in attrs || {}) node.setAttribute(k, attrs[k]);
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function fmt(x, digits) {
    return x === null || x === undefined ? "-" : Number(x).toFixed(digits);
  }
  function range(lo, hi, digits, unit) {
    return lo === null || hi === null ? "-" : fmt(lo, digits) + unit + "-" + fmt(hi, digits) + unit;
  }
  function section(root, title, id) {
    const s = el("section", { id: id });
    s.appendChild(el("h2", {}, title));
    root.appendChild(s);
    return s;
  }
  /// Round tick values over [lo, hi].
  function ticks(lo, hi, count) {
    const span = hi - lo || 1;
    const step0 = Math.pow(10, Math.floor(Math.log10(span / count)));
    const step = [1, 2, 5, 10].map(m => m * step0).find(s => span / s <= count) || step0 * 10;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
    return out;
  }
  function colorOf(data) {
    const map = {};
    data.policies.forEach((p, i) => { map[p.name] = COLORS[i % COLORS.length]; });
    return name => map[name] || "#444";
  }

  function drawHeader(root, d) {
    const reference = d.reference !== d.baseline ? " (does not fit in GPU memory; speedups over " + d.reference +
      ", the fastest policy that fits)" : "";
    root.appendChild(el("p", { class: "meta" }, "Mode " + d.mode + ", dataset " + d.dataset + ", profile " +
      d.profile.label + (/calibrated/.test(d.profile.label) ? "" : d.profile.calibrated ? " (calibrated)" :
      " (uncalibrated)") + "; source " + d.source));
    root.appendChild(el("p", { class: "meta" }, "Baseline " + d.baseline + reference + "."));
    const winner = d.winner === null ? "no policy fits in GPU memory in every iteration: no winner" :
      "Winner: " + d.winner + (d.p_winner !== null ? ", P(winner) = " + fmt(d.p_winner, 2) + " over " + d.samples +
        " sampled worlds" : "") + " (a policy that runs out of GPU memory never wins).";
    root.appendChild(el("p", { class: "meta", id: "winner-line" }, winner));
    d.notes.forEach(n => root.appendChild(el("p", { class: "note" }, n)));
  }

  function drawTable(root, d) {
    const s = section(root, "Comparison", "comparison");
    const table = el("table", { class: "compare", id: "comparison-table" });
    const head = ["policy", "kind", "mean s", "s p10-p90", "tokens/s", "speedup", "speedup p10-p90", "P(>base)",
                  "OOM iters"];
    const tr = el("tr");
    head.forEach(h => tr.appendChild(el("th", {}, h)));
    table.appendChild(el("thead")).appendChild(tr);
    const body = el("tbody");
    d.policies.forEach(p => {
      const oom = p.oom_iterations > 0;
      const row = el("tr", { class: oom ? "oom" : (p.name === d.winner ? "winner" : "") });
      const cells = [p.name + (p.name === d.winner ? " (winner)" : ""), p.kind, fmt(p.mean_s, 4),
        range(p.iteration_s_p10, p.iteration_s_p90, 3, ""), Math.round(p.tokens_per_s).toLocaleString("en-US"),
        fmt(p.speedup, 2) + "x", range(p.speedup_p10, p.speedup_p90, 2, "x"),
        p.name === d.reference ? "-" : fmt(p.p_beats_baseline, 2),
        (oom ? "OOM " : "") + p.oom_iterations + "/" + p.iterations];
      cells.forEach(c => row.appendChild(el("td", {}, c)));
      body.appendChild(row);
    });
    table.appendChild(body);
    s.appendChild(table);
    s.appendChild(el("p", { class: "caption" }, "Speedup: tokens/s over " + d.reference + "'s. Intervals: p10-p90 " +
      "(80%) over " + d.samples + " sampled worlds" + (d.samples > 1 ? "" : " (one world: no interval)") +
      ". Rows in red ran out of GPU memory in some iteration and cannot win."));
  }

  function drawSpeedup(root, d, color) {
    const s = section(root, "Speedup over " + d.reference, "speedup");
    const rowH = 22, left = 120, width = 760, plotW = width - left - 60;
    const height = d.policies.length * rowH + 40;
    const hi = Math.max(1, ...d.policies.map(p => Math.max(p.speedup, p.speedup_p90 || 0))) * 1.08;
    const x = v => left + plotW * v / hi;
    const svg = svgEl("svg", { id: "speedup-chart", width: width, height: height, viewBox: "0 0 " + width + " " +
      height, role: "img" });
    ticks(0, hi, 6).forEach(t => {
      svg.appendChild(svgEl("line", { x1: x(t), x2: x(t), y1: 5, y2: height - 25, stroke: "#eee" }));
      svg.appendChild(svgEl("text", { x: x(t), y: height - 10, "text-anchor": "middle" }, t + "x"));
    });
    d.policies.forEach((p, i) => {
      const y = 8 + i * rowH, oom = p.oom_iterations > 0;
      svg.appendChild(svgEl("text", { x: left - 6, y: y + 13, "text-anchor": "end" }, p.name));
      svg.appendChild(svgEl("rect", { class: "bar", x: left, y: y + 3, width: Math.max(0, x(p.speedup) - left),
        height: rowH - 8, fill: oom ? "#ccc" : color(p.name), stroke: oom ? "#a33" : "none",
        "stroke-dasharray": oom ? "3 2" : "none" }));
      if (p.speedup_p10 !== null && p.speedup_p90 !== null)
        svg.appendChild(svgEl("line", { x1: x(p.speedup_p10), x2: x(p.speedup_p90), y1: y + 11, y2: y + 11,
          stroke: "#222", "stroke-width": 1.5 }));
      svg.appendChild(svgEl("text", { x: x(Math.max(p.speedup, p.speedup_p90 || 0)) + 5, y: y + 14,
        style: "fill:" + (oom ? "#a33" : "#333") }, fmt(p.speedup, 2) + "x" + (oom ? "  OOM" : "")));
    });
    svg.appendChild(svgEl("line", { x1: x(1), x2: x(1), y1: 5, y2: height - 25, stroke: "#444",
      "stroke-dasharray": "4 3" }));
    s.appendChild(svg);
    s.appendChild(el("p", { class: "caption" }, "Bars: speedup in the nominal world; whiskers: the 80% interval; " +
      "grey dashed bars marked OOM ran out of GPU memory; dashed line: " + d.reference + " (1x)."));
  }

  function drawScaling(root, d, color) {
    const sw = d.sweep;
    const s = section(root, "Scaling: speedup against " + sw.axis, "scaling");
    const width = 760, height = 360, left = 60, right = 150, top = 10, bottom = 45;
    const xs = sw.points.map(p => p.x);
    const log = sw.numeric && Math.min(...xs) > 0 && Math.max(...xs) / Math.min(...xs) >= 8;
    const tx = v => (log ? Math.log2(v) : v);
    const x0 = Math.min(...xs.map(tx)), x1 = Math.max(...xs.map(tx));
    const x = v => left + (width - left - right) * (x1 === x0 ? 0.5 : (tx(v) - x0) / (x1 - x0));
    let ymax = 1;
    sw.points.forEach(pt => Object.values(pt.policies).forEach(q => { ymax = Math.max(ymax, q.p90 || q.speedup); }));
    ymax *= 1.08;
    const y = v => top + (height - top - bottom) * (1 - v / ymax);
    const svg = svgEl("svg", { id: "scaling-chart", width: width, height: height, role: "img",
      viewBox: "0 0 " + width + " " + height });
    ticks(0, ymax, 6).forEach(t => {
      svg.appendChild(svgEl("line", { x1: left, x2: width - right, y1: y(t), y2: y(t), stroke: "#eee" }));
      svg.appendChild(svgEl("text", { x: left - 6, y: y(t) + 4, "text-anchor": "end" }, t + "x"));
    });
    sw.points.forEach(pt => svg.appendChild(svgEl("text", { x: x(pt.x), y: height - bottom + 16,
      "text-anchor": "middle" }, pt.label)));
    svg.appendChild(svgEl("text", { x: (left + width - right) / 2, y: height - 8, "text-anchor": "middle" },
      sw.axis + (log ? " (log scale)" : "")));
    svg.appendChild(svgEl("text", { x: 14, y: (top + height - bottom) / 2, "text-anchor": "middle",
      transform: "rotate(-90 14 " + (top + height - bottom) / 2 + ")" }, "speedup over " + d.reference + " (x)"));
    d.policies.forEach((p, i) => {
      const pts = sw.points.filter(pt => pt.policies[p.name]);
      const band = pts.filter(pt => pt.policies[p.name].p10 !== null && pt.policies[p.name].p90 !== null);
      if (band.length > 1) {
        const upper = band.map(pt => x(pt.x) + "," + y(pt.policies[p.name].p90));
        const lower = band.slice().reverse().map(pt => x(pt.x) + "," + y(pt.policies[p.name].p10));
        svg.appendChild(svgEl("polygon", { points: upper.concat(lower).join(" "), fill: color(p.name),
          opacity: 0.15 }));
      }
      svg.appendChild(svgEl("polyline", { class: "series", points: pts.map(pt => x(pt.x) + "," +
        y(pt.policies[p.name].speedup)).join(" "), fill: "none", stroke: color(p.name), "stroke-width": 2 }));
      pts.forEach(pt => {
        const q = pt.policies[p.name], cx = x(pt.x), cy = y(q.speedup);
        if (q.oom) {
          svg.appendChild(svgEl("path", { class: "oom-mark", d: "M" + (cx - 5) + "," + (cy - 5) + "l10,10m0,-10l-10,10",
            stroke: "#c00", "stroke-width": 2 }));
        } else {
          svg.appendChild(svgEl("circle", { cx: cx, cy: cy, r: 3, fill: color(p.name) }));
        }
      });
      // style, not the fill attribute: the page's CSS colours every SVG text and would win over an attribute.
      svg.appendChild(svgEl("text", { x: width - right + 10, y: top + 14 + i * 16, style: "fill:" + color(p.name) },
        p.name));
    });
    s.appendChild(svg);
    s.appendChild(el("p", { class: "caption" }, "Lines: speedup in the nominal world at each point of the sweep; " +
      "bands: the 80% interval over the sampled worlds; red crosses: the policy ran out of GPU memory there."));
  }

  function drawBreakdown(root, d) {
    const s = section(root, "Per-GPU time: busy, exposed communication, idle", "breakdown");
    const legend = el("p", { class: "legend" });
    [["busy", "busy (compute, and communication it hides)"], ["comm", "exposed communication"], ["idle", "idle"]]
      .forEach(([k, text]) => {
        const span = el("span");
        span.appendChild(el("i", { style: "background:" + PART[k] }));
        span.appendChild(document.createTextNode(text));
        legend.appendChild(span);
      });
    s.appendChild(legend);
    const grid = el("div", { class: "breakdown" });
    d.policies.forEach(p => {
      const gpus = p.gpu_busy_s.length, width = 600, height = 60;
      const total = i => p.gpu_busy_s[i] + p.gpu_idle_s[i];
      const top = Math.max(1e-12, ...p.gpu_busy_s.map((b, i) => total(i)));
      const svg = svgEl("svg", { class: "breakdown-chart", width: "100%", height: height, preserveAspectRatio: "none",
        viewBox: "0 0 " + Math.max(1, gpus) + " " + height, role: "img" });
      let sums = [0, 0, 0];
      for (let g = 0; g < gpus; ++g) {
        const comm = p.gpu_exposed_comm_s ? Math.min(p.gpu_exposed_comm_s[g], p.gpu_busy_s[g]) : 0;
        const parts = [["busy", p.gpu_busy_s[g] - comm], ["comm", comm], ["idle", p.gpu_idle_s[g]]];
        let yAt = height;
        parts.forEach(([k, v], j) => {
          const h = height * v / top;
          sums[j] += v;
          if (h > 0) svg.appendChild(svgEl("rect", { x: g, y: yAt - h, width: 0.92, height: h, fill: PART[k] }));
          yAt -= h;
        });
      }
      const all = sums[0] + sums[1] + sums[2] || 1;
      grid.appendChild(el("div", {}, p.name + (p.oom_iterations > 0 ? " (OOM)" : "")));
      grid.appendChild(el("div")).appendChild(svg);
      grid.appendChild(el("div", { class: "caption" }, gpus + " GPUs: busy " + fmt(100 * sums[0] / all, 0) + "%, " +
        (p.gpu_exposed_comm_s ? "exposed comm " + fmt(100 * sums[1] / all, 0) + "%, " : "") + "idle " +
        fmt(100 * sums[2] / all, 0) + "%"));
    });
    s.appendChild(grid);
    const spans = d.policies.some(p => p.gpu_exposed_comm_s);
    s.appendChild(el("p", { class: "caption" }, "One column per GPU, mean seconds per iteration, on each policy's " +
      "own scale. " + (spans ? "Exposed communication: time a GPU communicates without computing." :
      "Exposed communication needs the simulation's spans: `lcsim report SCENARIO` or `lcsim simulate --report` " +
      "draws it; a results file holds busy and idle time only.")));
  }

  function drawTimeline(root, d, color) {
    const t = d.timeline;
    const s = section(root, "Timeline: " + t.panels.map(p => p.policy).join(" beside "), "timeline");
    const controls = el("p");
    const buttons = ["zoom in", "zoom out", "reset"].map(name => controls.appendChild(el("button", {}, name)));
    controls.appendChild(document.createTextNode(" or scroll to zoom, drag to pan, double-click to reset"));
    s.appendChild(controls);
    const end = Math.max(...t.panels.map(p => p.seconds)) || 1;
    const view = { lo: 0, hi: end };
    const rowH = Math.max(3, Math.min(14, Math.floor(420 / Math.max(1, t.gpus_shown))));
    const box = el("div", { class: "timelines" });
    const panels = t.panels.map((panel, i) => {
      const div = el("div");
      div.appendChild(el("p", { class: "caption" }, panel.policy + ": iteration " + (t.iteration + 1) + ", " +
        fmt(panel.seconds, 3) + " s"));
      const width = 560, height = t.gpus_shown * rowH + 24;
      const svg = svgEl("svg", { class: "timeline-svg", id: "timeline-" + i, width: "100%", height: height,
        viewBox: "0 0 " + width + " " + height, preserveAspectRatio: "none" });
      div.appendChild(svg);
      box.appendChild(div);
      return { panel: panel, svg: svg, width: width, height: height };
    });
    s.appendChild(box);
    function draw() {
      panels.forEach(({ panel, svg, width, height }) => {
        while (svg.firstChild) svg.removeChild(svg.firstChild);
        const left = 38, plotW = width - left - 4, scale = plotW / (view.hi - view.lo);
        const x = v => left + (v - view.lo) * scale;
        for (let g = 0; g < t.gpus_shown; g += Math.max(1, Math.ceil(t.gpus_shown / 16)))
          svg.appendChild(svgEl("text", { x: 2, y: g * rowH + rowH }, "GPU " + g));
        panel.spans.forEach(([gpu, a, b, kind]) => {
          if (b < view.lo || a > view.hi) return;
          const comm = t.communication[kind];
          const x0 = Math.max(left, x(a)), x1 = Math.min(width - 4, x(b));
          svg.appendChild(svgEl("rect", { x: x0, y: gpu * rowH + (comm ? rowH / 2 : 0), width: Math.max(0.3, x1 - x0),
            height: Math.max(1, comm ? rowH / 2 - 0.5 : rowH / 2), fill: comm ? PART.comm : color(panel.policy) }))
            .appendChild(svgEl("title", {}, t.kinds[kind] + " " + fmt(a, 4) + "-" + fmt(b, 4) + " s"));
        });
        const axisY = t.gpus_shown * rowH + 14;
        ticks(view.lo, view.hi, 6).forEach(v => svg.appendChild(svgEl("text", { x: x(v), y: axisY,
          "text-anchor": "middle" }, v + " s")));
        svg.appendChild(svgEl("line", { x1: x(panel.seconds), x2: x(panel.seconds), y1: 0, y2: axisY - 10,
          stroke: "#a33", "stroke-dasharray": "3 2" }));
      });
    }
    function zoom(factor, at) {
      const center = at === undefined ? (view.lo + view.hi) / 2 : at;
      const span = Math.min(end, Math.max(end * 1e-6, (view.hi - view.lo) * factor));
      view.lo = Math.max(0, center - (center - view.lo) * span / (view.hi - view.lo));
      view.hi = Math.min(end, view.lo + span);
      view.lo = Math.max(0, view.hi - span);
      draw();
    }
    function reset() { view.lo = 0; view.hi = end; draw(); }
    buttons[0].addEventListener("click", () => zoom(0.5));
    buttons[1].addEventListener("click", () => zoom(2));
    buttons[2].addEventListener("click", reset);
    panels.forEach(({ svg, width }) => {
      const timeAt = ev => {
        const r = svg.getBoundingClientRect();
        const px = (ev.clientX - r.left) * width / Math.max(1, r.width);
        return view.lo + (px - 38) * (view.hi - view.lo) / (width - 42);
      };
      svg.addEventListener("wheel", ev => { ev.preventDefault(); zoom(ev.deltaY < 0 ? 0.8 : 1.25, timeAt(ev)); });
      svg.addEventListener("dblclick", reset);
      let drag = null;
      svg.addEventListener("pointerdown", ev => { drag = timeAt(ev); });
      svg.addEventListener("pointerup", () => { drag = null; });
      svg.addEventListener("pointerleave", () => { drag = null; });
      svg.addEventListener("pointermove", ev => {
        if (drag === null) return;
        const shift = Math.max(-view.lo, Math.min(end - view.hi, drag - timeAt(ev)));
        view.lo += shift;
        view.hi += shift;
        draw();
      });
    });
    draw();
    s.appendChild(el("p", { class: "caption" }, "Each policy's first iteration from its own start (0 s), on one time " +
      "scale; " + t.gpus_shown + " of " + t.gpus + " GPUs. Upper half of a row: compute (the policy's colour); lower " +
      "half: communication (orange). Dashed red line: the iteration's end."));
  }

  function render() {
    const d = JSON.parse(document.getElementById("lcsim-data").textContent);
    const root = document.getElementById("report");
    const color = colorOf(d);
    drawHeader(root, d);
    drawTable(root, d);
    drawSpeedup(root, d, color);
    if (d.sweep) drawScaling(root, d, color);
    drawBreakdown(root, d);
    if (d.timeline) drawTimeline(root, d, color);
    else root.appendChild(el("p", { class: "caption", id: "no-timeline" }, "No timeline: a results file holds no " +
      "spans; `lcsim report SCENARIO` or `lcsim simulate --report FILE` simulates and draws it."));
  }

  function fail(message) {
    document.documentElement.setAttribute("data-lcsim-rendered", "error");
    const status = document.getElementById("lcsim-status");
    status.className = "error";
    status.textContent = "The report could not be drawn: " + message;
  }
  window.addEventListener("error", ev => fail(String(ev.message)));
  try {
    render();
    if (document.documentElement.getAttribute("data-lcsim-rendered") !== "error") {
      document.documentElement.setAttribute("data-lcsim-rendered", "ok");
      document.getElementById("lcsim-status").textContent = "";
    }
  } catch (e) {
    fail(String(e && e.stack ? e.stack : e));
  }
})();
