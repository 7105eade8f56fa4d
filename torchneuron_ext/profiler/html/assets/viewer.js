// The neuron profile viewer: summary, timeline, op table, HBM usage and comparison of embedded
// traces. Everything it needs is in this page; it never touches the network.
"use strict";
(function () {
  const T_START = performance.now();

  // ---------------------------------------------------------------- formatting and DOM helpers
  function fmtUs(us) {
    if (!isFinite(us)) return "-";
    const a = Math.abs(us);
    if (a >= 1e6) return (us / 1e6).toFixed(2) + " s";
    if (a >= 1e3) return (us / 1e3).toFixed(2) + " ms";
    if (a >= 1 || a === 0) return us.toFixed(1) + " us";
    return (us * 1e3).toFixed(0) + " ns";
  }
  function fmtBytes(n) {
    const units = ["B", "KiB", "MiB", "GiB"];
    let u = 0;
    while (n >= 1024 && u < units.length - 1) { n /= 1024; u++; }
    return u === 0 ? Math.round(n) + " B" : n.toFixed(1) + " " + units[u];
  }
  function fmtPct(x) { return (100 * x).toFixed(1) + "%"; }
  function fmtInt(n) { return n.toLocaleString("en-US"); }
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }
  function tierBadge(tier) { return tier ? el("span", { class: "tier tier-" + tier, text: tier }) : ""; }
  function setStatus(text) { document.getElementById("status").textContent = text; }

  // Colours: one hue per event name, stable across reloads and profiles.
  function hashString(s) {
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
    return h >>> 0;
  }
  // As #rrggbb: the canvas parses hex colours faster than hsl() ones, and it sets one per rectangle.
  function nameColor(name) {
    const h = hashString(name);
    const hue = h % 360, sat = (45 + (h >> 9) % 25) / 100, light = (55 + (h >> 17) % 15) / 100;
    const a = sat * Math.min(light, 1 - light);
    const f = (n) => {
      const k = (n + hue / 30) % 12;
      return Math.round(255 * (light - a * Math.max(-1, Math.min(k - 3, 9 - k, 1)))).toString(16).padStart(2, "0");
    };
    return "#" + f(0) + f(8) + f(4);
  }

  // Binary searches over sorted typed arrays, within [lo, hi).
  function lowerBound(arr, lo, hi, x) { // first k with arr[k] >= x
    while (lo < hi) { const m = (lo + hi) >>> 1; if (arr[m] < x) lo = m + 1; else hi = m; }
    return lo;
  }
  function upperBound(arr, lo, hi, x) { // first k with arr[k] > x
    while (lo < hi) { const m = (lo + hi) >>> 1; if (arr[m] <= x) lo = m + 1; else hi = m; }
    return lo;
  }

  // Level L holds the max of each block of 2^L values; rangeMax walks it bottom-up like a segment
  // tree: the largest value in [lo, hi) in O(log n).
  function maxPyramid(v) {
    const levels = [v];
    for (let cur = v; cur.length > 1;) {
      const next = new Float64Array(Math.ceil(cur.length / 2));
      for (let j = 0; j < next.length; j++) next[j] = 2 * j + 1 < cur.length ? Math.max(cur[2 * j], cur[2 * j + 1]) : cur[2 * j];
      levels.push(next);
      cur = next;
    }
    return levels;
  }
  function rangeMax(levels, lo, hi) {
    let m = -Infinity;
    for (let L = 0; lo < hi; L++, lo >>= 1, hi >>= 1) {
      if (lo & 1) m = Math.max(m, levels[L][lo++]);
      if (hi & 1) m = Math.max(m, levels[L][--hi]);
    }
    return m;
  }

  // ---------------------------------------------------------------- the embedded data
  const ARRAYS = { f64: Float64Array, f32: Float32Array, u32: Uint32Array, u16: Uint16Array, u8: Uint8Array, i32: Int32Array };

  function base64Bytes(b64) {
    if (Uint8Array.fromBase64) return Uint8Array.fromBase64(b64);
    const s = atob(b64);
    const u = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) u[i] = s.charCodeAt(i);
    return u;
  }
  async function inflate(bytes) {
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return await new Response(stream).arrayBuffer();
  }

  class Profile {
    constructor(meta, buffer, index) {
      this.index = index;
      for (const k of ["name", "source", "duration", "lanes", "groups", "tiers", "strings", "cats", "summary", "ops", "findings", "kernels"]) this[k] = meta[k];
      this.memoryCategories = meta.memoryCategories || [];
      const col = (name) => { const [dt, off, n] = meta.columns[name]; return new ARRAYS[dt](buffer, off, n); };
      this.nameId = col("name"); this.lane = col("lane");
      this.cat = col("cat"); this.tier = col("tier"); this.rowStart = col("rowStart");
      this.genericTier = this.tiers.indexOf("generic");  // its kernels are marked on the timeline
      this.n = this.nameId.length;
      // Times arrive as uint32 nanoseconds (starts as deltas within each row, 0xFFFFFFFF: take the
      // next escape value) and become float64 microseconds. Each row is non-overlapping and
      // start-sorted, so its end times are sorted too: both can be binary-searched.
      this.start = new Float64Array(this.n); this.dur = new Float64Array(this.n); this.end = new Float64Array(this.n);
      const sNs = col("startNs"), sEsc = col("startEscapes"), dNs = col("durNs"), dEsc = col("durEscapes");
      // uint32 nanosecond deltas (0xFFFFFFFF: the next escape value) summed into microseconds.
      const deltasToUs = (name) => {
        const v = col(name + "Ns"), esc = col(name + "Escapes"), out = new Float64Array(v.length);
        let acc = 0, k = 0;
        for (let i = 0; i < v.length; i++) { acc += v[i] === 0xFFFFFFFF ? esc[k++] : v[i]; out[i] = acc / 1000; }
        return out;
      };
      let se = 0, de = 0;
      for (let r = 0; r + 1 < this.rowStart.length; r++) {
        let acc = 0;
        for (let i = this.rowStart[r], hi = this.rowStart[r + 1]; i < hi; i++) {
          const ds = sNs[i], dd = dNs[i];
          acc += ds === 0xFFFFFFFF ? sEsc[se++] : ds;
          const d = dd === 0xFFFFFFFF ? dEsc[de++] : dd;
          this.start[i] = acc / 1000; this.dur[i] = d / 1000; this.end[i] = (acc + d) / 1000;
        }
      }
      const argLength = col("argLength");
      this.argOffset = new Float64Array(this.n + 1);
      for (let i = 0; i < this.n; i++) this.argOffset[i + 1] = this.argOffset[i] + argLength[i];
      this.argBytes = null; // inflated on demand by loadArgs()
      this.argsBlob = meta.argsBlob;
      this.argsPromise = null;
      this.flowTo = col("flowTo");
      const fromDelta = col("flowFromDelta");
      this.flowFrom = new Uint32Array(fromDelta.length);
      for (let k = 0, acc = 0; k < fromDelta.length; k++) { acc += fromDelta[k]; this.flowFrom[k] = acc; }
      this.counters = meta.counters.map((c) => {
        const series = c.series.map((s) => ({ name: s, v: col(c.column + ".v." + s) }));
        let max = 0, peakAt = 0;
        for (const s of series) for (let i = 0; i < s.v.length; i++) if (s.v[i] > max) { max = s.v[i]; }
        const first = series[0];
        if (first) { let best = -1; for (let i = 0; i < first.v.length; i++) if (first.v[i] > best) { best = first.v[i]; peakAt = i; } }
        // Our HBM counters are in MB ("allocated MB"); those read best as bytes.
        const mb = c.series.length > 0 && c.series.every((s) => s.endsWith(" MB"));
        for (const s of series) s.label = mb ? s.name.slice(0, -3) : s.name;
        const fmt = mb ? (v) => fmtBytes(v * 1048576) : (v) => (Math.abs(v) >= 100 ? v.toFixed(0) : v.toPrecision(3));
        return { label: c.label, ts: deltasToUs(c.column + ".ts"), series, max, peakAt, fmt };
      });
      this.colors = this.strings.map(nameColor);
      this.decoder = new TextDecoder();
      this.flowInIndex = null;
    }
    eventName(i) { return this.strings[this.nameId[i]]; }
    groupOf(i) { return this.lanes[this.lane[i]].group; }
    rowOf(i) { return upperBound(this.rowStart, 0, this.rowStart.length, i) - 1; }
    loadArgs() {
      if (!this.argsPromise) {
        this.argsPromise = inflate(base64Bytes(this.argsBlob)).then((buf) => { this.argBytes = new Uint8Array(buf); this.argsBlob = null; });
      }
      return this.argsPromise;
    }
    // An event's args, or null while they are still being inflated (see loadArgs).
    args(i) {
      const a = this.argOffset[i], b = this.argOffset[i + 1];
      if (a === b) return {};
      if (!this.argBytes) return null;
      try { return JSON.parse(this.decoder.decode(this.argBytes.subarray(a, b))); } catch (e) { return {}; }
    }
    flowsOut(i) {
      const out = [];
      for (let k = lowerBound(this.flowFrom, 0, this.flowFrom.length, i); k < this.flowFrom.length && this.flowFrom[k] === i; k++) out.push(this.flowTo[k]);
      return out;
    }
    flowsIn(i) {
      if (!this.flowInIndex) {
        // Sources grouped by destination (a counting sort: linear, built on first use).
        const m = this.flowTo.length, first = new Uint32Array(this.n + 1), src = new Uint32Array(m);
        for (let k = 0; k < m; k++) first[this.flowTo[k] + 1]++;
        for (let j = 0; j < this.n; j++) first[j + 1] += first[j];
        const next = first.slice(0, this.n);
        for (let k = 0; k < m; k++) src[next[this.flowTo[k]]++] = this.flowFrom[k];
        this.flowInIndex = { first, src };
      }
      const { first, src } = this.flowInIndex;
      return Array.from(src.subarray(first[i], first[i + 1]));
    }
    // Events nested inside i on its lane (deeper rows, within its time span).
    descendants(i, limit) {
      const lane = this.lanes[this.lane[i]];
      const out = [];
      const s = this.start[i], e = this.end[i];
      for (let row = this.rowOf(i) + 1; row < lane.firstRow + lane.rows; row++) {
        const lo = this.rowStart[row], hi = this.rowStart[row + 1];
        for (let k = lowerBound(this.start, lo, hi, s); k < hi && this.start[k] <= e; k++) {
          out.push(k);
          if (out.length >= limit) return out;
        }
      }
      return out;
    }
    // The device work an event led to: follow flows from it and from the ops nested in it down to
    // hardware and transfer lanes.
    deviceWork(i) {
      const device = new Set(["hardware", "transfer"]);
      if (device.has(this.groupOf(i))) return [i];
      const seen = new Set([i]);
      let frontier = [i, ...this.descendants(i, 20000)];
      const found = [];
      while (frontier.length && seen.size < 100000) {
        const next = [];
        for (const j of frontier) {
          seen.add(j);
          for (const k of this.flowsOut(j)) {
            if (seen.has(k)) continue;
            seen.add(k);
            if (device.has(this.groupOf(k))) found.push(k); else next.push(k);
            // Device events nested under a linked one (a compiled graph's kernels) belong to it too.
            if (device.has(this.groupOf(k))) for (const d of this.descendants(k, 10000)) if (!seen.has(d)) { seen.add(d); found.push(d); }
          }
        }
        frontier = next;
      }
      found.sort((a, b) => this.start[a] - this.start[b]);
      return found;
    }
    laneLabel(i) { const l = this.lanes[this.lane[i]]; return l.group + " · " + l.label; }
  }

  // ---------------------------------------------------------------- the timeline
  const ROW_H = 18, LANE_PAD = 6, LABEL_W = 240, AXIS_H = 24, GROUP_H = 18, COUNTER_H = 60;

  function niceStep(raw) {
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
  }
  function fmtTick(t, step) {
    const units = [[1e6, "s"], [1e3, "ms"], [1, "us"], [1e-3, "ns"]];
    const [scale, unit] = units.find(([s]) => step >= s) || units[3];
    const decimals = Math.max(0, Math.min(6, -Math.floor(Math.log10(step / scale) + 1e-9)));
    return (t / scale).toFixed(decimals) + " " + unit;
  }

  class Timeline {
    constructor(host, profile, options) {
      this.p = profile;
      this.options = options || {};
      this.selected = -1;
      this.range = null; // the measured time range, see setRange
      this.matches = null;
      this.showAllFlows = false;
      this.stats = { drawn: 0, inView: 0, draws: 0 };
      this.view = { t0: 0, t1: Math.max(profile.duration, 1e-3) };
      this.resetView(false);
      this.root = el("div", { class: "timeline-view" });
      this.info = el("span", { class: "info" });
      this.search = el("input", { type: "search", placeholder: "search events (Enter: next)", "aria-label": "search events" });
      this.search.addEventListener("input", () => this.setSearch(this.search.value));
      this.search.addEventListener("keydown", (e) => { if (e.key === "Enter") this.nextMatch(); });
      this.jumpButton = el("button", { class: "jump-device", text: "Jump to device work", disabled: true, onclick: () => this.jumpToDevice() });
      const flows = el("input", { type: "checkbox" });
      flows.addEventListener("change", () => { this.showAllFlows = flows.checked; this.requestDraw(); });
      // Measured device lanes (this host's clock) against the cost model's projected lanes (their own clock).
      this.clock = "both";
      const hasProjected = profile.lanes.some((l) => l.group === "projected");
      const clock = el("select", { class: "clock", "aria-label": "device clock", disabled: !hasProjected },
        el("option", { value: "both", text: "measured + projected" }), el("option", { value: "measured", text: "measured" }),
        el("option", { value: "projected", text: "projected (model)" }));
      clock.addEventListener("change", () => { this.setClock(clock.value); });
      this.toolbar = el("div", { class: "toolbar" },
        this.search,
        el("button", { text: "−", title: "zoom out (s)", onclick: () => this.zoomBy(1.6) }),
        el("button", { text: "+", title: "zoom in (w)", onclick: () => this.zoomBy(1 / 1.6) }),
        el("button", { text: "Reset", title: "whole trace (0)", onclick: () => { this.resetView(true); } }),
        this.jumpButton,
        el("label", {}, flows, " all flows"),
        el("label", { title: "device lanes: measured on this host, projected on the target by the cost model (docs/cost_model.md)" }, "device ", clock),
        this.info);
      this.canvas = el("canvas", { tabindex: "0", "aria-label": "timeline of " + profile.name });
      this.box = el("div", { class: "canvas-box" }, this.canvas);
      this.details = el("div", { class: "details" }, el("span", { class: "empty", text: "Click an event for its details; wheel zooms, drag or shift+wheel pans, shift+drag measures a range (m: the selected event's), w/s/a/d/0 on the keyboard." }));
      this.tooltip = el("div", { class: "tooltip" });
      this.root.append(this.toolbar, el("div", { class: "timeline" }, this.box, this.details), this.tooltip);
      host.append(this.root);
      this.layoutLanes();
      this.bindInput();
      this.resize();
      // Redraw when the box changes width (window resized, tab shown); its first report is the
      // size just drawn.
      this.resizeObserver = new ResizeObserver(() => { if (Math.max(400, this.box.clientWidth || 1000) !== this.width) this.resize(); });
      this.resizeObserver.observe(this.box);
    }

    setClock(clock) {
      this.clock = clock;
      this.layoutLanes();
      this.resize();
      // The projected clock runs faster than the host's: show the whole projected span.
      if (clock !== "projected") { this.resetView(true); return; }
      const p = this.p;
      let t0 = Infinity, t1 = -Infinity;
      p.lanes.forEach((lane) => {
        if (lane.group !== "projected") return;
        for (let row = lane.firstRow; row < lane.firstRow + lane.rows; row++) {
          for (let i = p.rowStart[row]; i < p.rowStart[row + 1]; i++) { t0 = Math.min(t0, p.start[i]); t1 = Math.max(t1, p.end[i]); }
        }
      });
      if (t1 > t0) { const m = (t1 - t0) * 0.02; this.setView(t0 - m, t1 + m, true); }
    }
    laneShown(lane) {
      if (this.clock === "measured") return lane.group !== "projected";
      if (this.clock === "projected") return lane.group !== "hardware";
      return true;
    }

    layoutLanes() {
      const p = this.p;
      this.items = [];
      this.laneItem = new Array(p.lanes.length);
      let y = AXIS_H, group = null;
      // Every group gets its header, an empty one saying so: a missing transfer lane is news too.
      const addGroup = (g) => {
        while (group !== g) {
          const next = p.groups[group === null ? 0 : p.groups.indexOf(group) + 1];
          if (next === undefined) return;
          group = next;
          const empty = next !== g;
          // Projected lanes are the cost model's, in traces exported with them; no header otherwise.
          if (next === "projected" && empty) continue;
          this.items.push({ kind: "group", group: next, y, h: GROUP_H, empty });
          y += GROUP_H;
        }
      };
      p.lanes.forEach((lane, li) => {
        if (!this.laneShown(lane)) return;
        addGroup(lane.group);
        const item = { kind: "lane", lane: li, y, h: lane.rows * ROW_H + LANE_PAD };
        this.items.push(item);
        this.laneItem[li] = item;
        y += item.h;
      });
      p.counters.forEach((c, ci) => {
        addGroup("memory");
        this.items.push({ kind: "counter", counter: ci, y, h: COUNTER_H });
        y += COUNTER_H;
      });
      addGroup(p.groups[p.groups.length - 1]);
      if (!p.counters.length && this.items.length && this.items[this.items.length - 1].group === "memory") this.items[this.items.length - 1].empty = true;
      this.height = y + 4;
    }

    resize() {
      const w = Math.max(400, this.box.clientWidth || 1000);
      const dpr = window.devicePixelRatio || 1;
      this.width = w;
      this.box.style.maxHeight = Math.max(240, window.innerHeight - 260) + "px";
      this.canvas.width = Math.round(w * dpr);
      this.canvas.height = Math.round(this.height * dpr);
      this.canvas.style.width = w + "px";
      this.canvas.style.height = this.height + "px";
      this.dpr = dpr;
      this.drawNow();
    }

    // -------------------------------------------------- view
    resetView(draw) {
      const d = Math.max(this.p.duration, 1e-3);
      this.setView(-d * 0.01, d * 1.01, draw);
    }
    setView(t0, t1, draw = true, fromLink = false) {
      if (fromLink) {
        // A linked timeline shows exactly the range of the one that moved, even past its own
        // trace's end (the other trace may be longer).
        this.view = { t0, t1 };
        if (draw) this.requestDraw();
        return;
      }
      const d = Math.max(this.p.duration, 1e-3);
      let span = Math.min(Math.max(t1 - t0, 1e-3), d * 4);
      let c = (t0 + t1) / 2;
      c = Math.min(Math.max(c, -d), 2 * d);
      this.view = { t0: c - span / 2, t1: c + span / 2 };
      if (draw) this.requestDraw();
      if (!fromLink && this.options.onView) this.options.onView(this, this.view);
    }
    plotWidth() { return this.width - LABEL_W; }
    xOf(t) { return LABEL_W + (t - this.view.t0) * this.plotWidth() / (this.view.t1 - this.view.t0); }
    tOf(x) { return this.view.t0 + (x - LABEL_W) * (this.view.t1 - this.view.t0) / this.plotWidth(); }
    zoomBy(f, x) {
      const cx = x === undefined ? LABEL_W + this.plotWidth() / 2 : x;
      const t = this.tOf(cx);
      this.setView(t - (t - this.view.t0) * f, t + (this.view.t1 - t) * f);
    }
    panBy(px) {
      const dt = px * (this.view.t1 - this.view.t0) / this.plotWidth();
      this.setView(this.view.t0 + dt, this.view.t1 + dt);
    }

    // -------------------------------------------------- input
    bindInput() {
      const c = this.canvas;
      let drag = null;
      c.addEventListener("wheel", (e) => {
        e.preventDefault();
        const r = c.getBoundingClientRect();
        const mx = e.clientX - r.left;
        if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) this.panBy(e.shiftKey ? e.deltaY || e.deltaX : e.deltaX);
        else this.zoomBy(Math.exp(e.deltaY * 0.0015), Math.max(mx, LABEL_W));
      }, { passive: false });
      c.addEventListener("mousedown", (e) => {
        if (e.button !== 0) return;
        // Shift+drag measures a time range; a plain drag pans.
        const r = c.getBoundingClientRect();
        drag = { x: e.clientX, lastX: e.clientX, moved: false, measure: e.shiftKey, t0: this.tOf(Math.max(e.clientX - r.left, LABEL_W)) };
        c.classList.add("dragging");
      });
      window.addEventListener("mousemove", (e) => {
        if (drag) {
          if (Math.abs(e.clientX - drag.x) > 3) drag.moved = true;
          if (drag.moved && drag.measure) {
            const r = c.getBoundingClientRect();
            this.setRange(drag.t0, this.tOf(Math.max(e.clientX - r.left, LABEL_W)), false);
          } else if (drag.moved) { this.panBy(drag.lastX - e.clientX); drag.lastX = e.clientX; }
        }
      });
      window.addEventListener("mouseup", (e) => {
        if (!drag) return;
        const wasDrag = drag.moved, measured = drag.measure && drag.moved;
        drag = null;
        c.classList.remove("dragging");
        if (measured) this.setRange(this.range.t0, this.range.t1, true);
        if (!wasDrag && e.target === c) {
          const r = c.getBoundingClientRect();
          const hit = this.hitTest(e.clientX - r.left, e.clientY - r.top);
          this.select(hit, false);
          c.focus();
        }
      });
      c.addEventListener("mousemove", (e) => {
        if (drag) { this.tooltip.style.display = "none"; return; }
        const r = c.getBoundingClientRect();
        const x = e.clientX - r.left, y = e.clientY - r.top;
        const hit = this.hitTest(x, y);
        const text = hit >= 0 ? this.p.eventName(hit) + " · " + fmtUs(this.p.dur[hit]) : this.counterText(x, y);
        if (!text) { this.tooltip.style.display = "none"; return; }
        this.tooltip.textContent = text;
        this.tooltip.style.left = (e.clientX + 12) + "px";
        this.tooltip.style.top = (e.clientY + 12) + "px";
        this.tooltip.style.display = "block";
      });
      c.addEventListener("mouseleave", () => { this.tooltip.style.display = "none"; });
      c.addEventListener("keydown", (e) => {
        const k = e.key.toLowerCase();
        if (k === "w") this.zoomBy(1 / 1.4);
        else if (k === "s") this.zoomBy(1.4);
        else if (k === "a") this.panBy(-this.plotWidth() / 8);
        else if (k === "d") this.panBy(this.plotWidth() / 8);
        else if (k === "0") this.resetView(true);
        else if (k === "m" && this.selected >= 0) this.setRange(this.p.start[this.selected], this.p.end[this.selected], true);
        else if (k === "escape") { if (this.range) this.setRange(null); else this.select(-1, false); }
        else return;
        e.preventDefault();
      });
    }

    // Which event is under (x, y) (canvas pixels), or -1; tiny events are hit within 3 px.
    hitTest(x, y) {
      if (x < LABEL_W) return -1;
      const item = this.items.find((it) => y >= it.y && y < it.y + it.h);
      if (!item || item.kind !== "lane") return -1;
      const p = this.p, lane = p.lanes[item.lane];
      const r = Math.floor((y - item.y - LANE_PAD / 2) / ROW_H);
      if (r < 0 || r >= lane.rows) return -1;
      const row = lane.firstRow + r, lo = p.rowStart[row], hi = p.rowStart[row + 1];
      const t = this.tOf(x), tol = 3 * (this.view.t1 - this.view.t0) / this.plotWidth();
      let best = -1, bestDist = Infinity;
      const k0 = lowerBound(p.end, lo, hi, t - tol);
      for (let k = k0; k < hi && p.start[k] <= t + tol; k++) {
        const d = t < p.start[k] ? p.start[k] - t : t > p.end[k] ? t - p.end[k] : 0;
        if (d < bestDist) { bestDist = d; best = k; }
        if (d === 0) break;
      }
      return best;
    }

    // The values of the counter lane under (x, y) at that time, or "".
    counterText(x, y) {
      if (x < LABEL_W) return "";
      const item = this.items.find((it) => it.kind === "counter" && y >= it.y && y < it.y + it.h);
      if (!item) return "";
      const c = this.p.counters[item.counter], t = this.tOf(x);
      const k = upperBound(c.ts, 0, c.ts.length, t) - 1;
      if (k < 0) return "";
      return c.label + " at " + fmtUs(t) + ": " + c.series.map((s) => s.label + " " + c.fmt(s.v[k])).join(", ");
    }

    // Canvas position (centre) of event i in the current view; used by the tests too.
    eventCenter(i) {
      const p = this.p, item = this.laneItem[p.lane[i]];
      if (!item) return { x: -1, y: -1 }; // its lane is hidden by the device-clock switch
      const r = p.rowOf(i) - p.lanes[p.lane[i]].firstRow;
      const x0 = Math.max(this.xOf(p.start[i]), LABEL_W), x1 = Math.min(this.xOf(p.end[i]), this.width);
      return { x: (x0 + Math.max(x1, x0 + 1)) / 2, y: item.y + LANE_PAD / 2 + r * ROW_H + ROW_H / 2 };
    }

    // -------------------------------------------------- search
    setSearch(q) {
      q = q.trim().toLowerCase();
      if (!q) { this.matches = null; this.requestDraw(); this.updateInfo(); return; }
      this.matches = new Uint8Array(this.p.strings.length);
      this.p.strings.forEach((s, k) => { if (s.toLowerCase().includes(q)) this.matches[k] = 1; });
      let count = 0;
      for (let i = 0; i < this.p.n; i++) count += this.matches[this.p.nameId[i]];
      this.matchCount = count;
      this.requestDraw();
      this.updateInfo();
    }
    // Select the next match in time order (ties by index), wrapping around after the last.
    nextMatch() {
      if (!this.matches) return;
      const p = this.p, cur = this.selected;
      const before = (i, j) => p.start[i] < p.start[j] || (p.start[i] === p.start[j] && i < j);
      let best = -1, first = -1;
      for (let i = 0; i < p.n; i++) {
        if (!this.matches[p.nameId[i]]) continue;
        if (first < 0 || before(i, first)) first = i;
        if ((cur < 0 || before(cur, i)) && (best < 0 || before(i, best))) best = i;
      }
      if (best < 0) best = first;
      if (best >= 0) this.select(best, true);
    }

    // -------------------------------------------------- selection and details
    select(i, zoom) {
      this.selected = i;
      this.jumpButton.disabled = i < 0;
      if (i >= 0 && zoom) this.reveal([i]);
      this.renderDetails();
      this.requestDraw();
      if (this.options.onSelect) this.options.onSelect(this, i);
    }
    // Bring events into view: zoom to their span (with margins) and scroll their lanes into sight.
    reveal(list) {
      const p = this.p;
      let s = Infinity, e = -Infinity;
      for (const i of list) { s = Math.min(s, p.start[i]); e = Math.max(e, p.end[i]); }
      const span = Math.max(e - s, 1);
      this.setView(s - span * 0.6, e + span * 0.6);
      const c = this.eventCenter(list[0]);
      if (c.y < this.box.scrollTop + AXIS_H || c.y > this.box.scrollTop + this.box.clientHeight - ROW_H) this.box.scrollTop = Math.max(0, c.y - this.box.clientHeight / 2);
    }
    jumpToDevice() {
      if (this.selected < 0) return;
      const work = this.p.deviceWork(this.selected);
      if (!work.length) { this.details.querySelector(".device-work").textContent = "No device work is linked to this event."; return; }
      this.reveal(work);
      this.select(work[0], false);
    }
    eventButton(j, prefix) {
      const p = this.p;
      return el("button", { title: p.laneLabel(j), onclick: () => this.select(j, true) },
        prefix + p.eventName(j) + " (" + p.lanes[p.lane[j]].label + ", " + fmtUs(p.dur[j]) + ")");
    }
    renderDetails() {
      const p = this.p, i = this.selected;
      this.details.textContent = "";
      if (i < 0) { this.details.append(el("span", { class: "empty", text: "Nothing selected." })); return; }
      const rows = [
        ["name", p.eventName(i)], ["category", p.cats[p.cat[i]] || "-"], ["lane", p.laneLabel(i)],
        ["start", fmtUs(p.start[i])], ["duration", fmtUs(p.dur[i])], ["end", fmtUs(p.end[i])],
      ];
      if (p.tier[i]) rows.push(["tier", p.tiers[p.tier[i]]]);
      const args = p.args(i);
      if (args === null) {
        rows.push(["args", "loading…"]);
        p.loadArgs().then(() => { if (this.selected === i) this.renderDetails(); });
      } else for (const [k, v] of Object.entries(args)) rows.push([k, typeof v === "object" ? JSON.stringify(v) : String(v)]);
      const table = el("table", { class: "event-args" }, ...rows.map(([k, v]) => el("tr", {}, el("td", { text: k }), el("td", { text: v }))));
      const links = el("div", { class: "links" });
      const ins = p.flowsIn(i), outs = p.flowsOut(i);
      for (const j of ins.slice(0, 20)) links.append(this.eventButton(j, "← "));
      for (const j of outs.slice(0, 20)) links.append(this.eventButton(j, "→ "));
      const deviceInfo = el("div", { class: "device-work" });
      const group = p.groupOf(i);
      if (group !== "hardware" && group !== "transfer") {
        const work = p.deviceWork(i);
        if (work.length) {
          let busy = 0;
          for (const j of work) busy += p.dur[j];
          deviceInfo.append(el("button", { class: "jump", text: "Jump to device work", onclick: () => this.jumpToDevice() }),
            " " + work.length + " device event" + (work.length > 1 ? "s" : "") + ", " + fmtUs(busy) + ": ");
          for (const j of work.slice(0, 12)) deviceInfo.append(this.eventButton(j, ""));
        } else deviceInfo.append(el("span", { class: "muted", text: "No device work is linked to this event." }));
      }
      this.jumpButton.disabled = group === "hardware" || group === "transfer";
      this.details.append(el("div", { class: "title" }, el("b", { text: p.eventName(i) })), table, links, deviceInfo);
    }
    // The measured range [t0, t1] (or none, with null): its length, the events overlapping it and
    // how busy the device was inside it (union of hardware and transfer events, clipped to it).
    setRange(t0, t1, summarise) {
      if (t0 === null) { this.range = null; this.requestDraw(); this.updateInfo(); return; }
      const a = Math.min(t0, t1), b = Math.max(t0, t1), p = this.p;
      this.range = { t0: a, t1: b, events: 0, busy: 0 };
      if (summarise) {
        const spans = [];
        p.lanes.forEach((lane) => {
          const device = lane.group === "hardware" || lane.group === "transfer";
          for (let row = lane.firstRow; row < lane.firstRow + lane.rows; row++) {
            const lo = p.rowStart[row], hi = p.rowStart[row + 1];
            const first = lowerBound(p.end, lo, hi, a), last = upperBound(p.start, lo, hi, b);
            this.range.events += Math.max(0, last - first);
            if (device) for (let i = first; i < last; i++) spans.push([Math.max(p.start[i], a), Math.min(p.end[i], b)]);
          }
        });
        spans.sort((x, y) => x[0] - y[0]);
        let end = -Infinity;
        for (const [s, e] of spans) { if (e <= end) continue; this.range.busy += e - Math.max(s, end); end = e; }
        this.range.summarised = true;
      }
      this.requestDraw();
      this.updateInfo();
    }
    updateInfo() {
      const p = this.p;
      let text = fmtInt(p.n) + " events · " + p.lanes.length + " lanes · " + fmtInt(p.flowFrom.length) + " flows · " +
        fmtInt(this.stats.inView) + " in view · " + fmtUs(this.view.t1 - this.view.t0) + " shown";
      if (this.matches) text += " · " + fmtInt(this.matchCount) + " match";
      const r = this.range;
      if (r) {
        text += " · range " + fmtUs(r.t1 - r.t0);
        if (r.summarised) text += ": " + fmtInt(r.events) + " events, device busy " + fmtPct(r.t1 > r.t0 ? r.busy / (r.t1 - r.t0) : 0);
      }
      this.info.textContent = text;
      this.info.dataset.events = String(p.n);
      this.info.dataset.inView = String(this.stats.inView);
    }

    // -------------------------------------------------- drawing
    requestDraw() {
      if (this.pending) return;
      this.pending = true;
      requestAnimationFrame(() => { this.pending = false; this.drawNow(); });
    }
    drawNow() {
      if (!this.width) return;
      const p = this.p, ctx = this.canvas.getContext("2d");
      ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
      ctx.clearRect(0, 0, this.width, this.height);
      ctx.font = "11px system-ui, sans-serif";
      ctx.textBaseline = "middle";
      const { t0, t1 } = this.view, W = this.width;
      const scale = this.plotWidth() / (t1 - t0);
      const xOf = (t) => LABEL_W + (t - t0) * scale;
      let drawn = 0, inView = 0;
      // Background bands first, so grid lines sit on top of them and under the events.
      for (const it of this.items) {
        if (it.kind === "group") { ctx.fillStyle = "#e9edf3"; ctx.fillRect(0, it.y, W, it.h); }
        else { ctx.fillStyle = "#ffffff"; ctx.fillRect(0, it.y, W, it.h); ctx.fillStyle = "#eef0f4"; ctx.fillRect(0, it.y + it.h - 1, W, 1); }
      }
      const step = niceStep((t1 - t0) / Math.max(2, this.plotWidth() / 110));
      ctx.fillStyle = "#f0f2f6";
      for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) ctx.fillRect(Math.round(xOf(t)), AXIS_H, 1, this.height - AXIS_H);
      ctx.save();
      ctx.beginPath(); ctx.rect(LABEL_W, 0, W - LABEL_W, this.height); ctx.clip();
      for (const it of this.items) {
        if (it.kind === "lane") {
          const lane = p.lanes[it.lane];
          for (let r = 0; r < lane.rows; r++) {
            const row = lane.firstRow + r, lo = p.rowStart[row], hi = p.rowStart[row + 1];
            const y = it.y + LANE_PAD / 2 + r * ROW_H;
            const last = upperBound(p.start, lo, hi, t1);
            let i = lowerBound(p.end, lo, hi, t0);
            inView += Math.max(0, last - i);
            let free = -Infinity; // first pixel column not yet painted in this row
            while (i < last) {
              const x0 = xOf(p.start[i]), x1 = xOf(p.end[i]);
              if (x1 < free) {
                // Level of detail: everything up to the next free pixel is already painted; skip to
                // the first event that reaches past it (at most one event straddles it).
                const tFree = t0 + (free - LABEL_W) / scale;
                let k = lowerBound(p.start, i + 1, last, tFree);
                if (k - 1 > i && p.end[k - 1] >= tFree) k -= 1;
                i = Math.max(k, i + 1);
                continue;
              }
              const px0 = Math.max(Math.floor(x0), free === -Infinity ? LABEL_W - 1 : free);
              const px1 = Math.max(Math.ceil(x1), px0 + 1);
              const nameIdx = p.nameId[i];
              ctx.fillStyle = this.matches && !this.matches[nameIdx] ? "#d9dde4" : p.colors[nameIdx];
              ctx.fillRect(px0, y + 1, px1 - px0, ROW_H - 2);
              if (p.tier[i] === p.genericTier) { ctx.fillStyle = "#c23a2b"; ctx.fillRect(px0, y + 1, px1 - px0, 3); }
              if (px1 - px0 > 36) {
                const label = p.strings[nameIdx];
                const room = Math.floor((px1 - Math.max(px0, LABEL_W) - 6) / 6.2);
                if (room > 2) {
                  ctx.fillStyle = "#111";
                  ctx.fillText(label.length > room ? label.slice(0, room - 1) + "…" : label, Math.max(px0, LABEL_W) + 3, y + ROW_H / 2);
                }
              }
              drawn++;
              free = px1;
              i++;
            }
          }
        } else if (it.kind === "counter") {
          this.drawCounter(ctx, p.counters[it.counter], it, xOf);
        }
      }
      this.drawFlows(ctx, xOf);
      if (this.range) {
        const x0 = xOf(this.range.t0), x1 = Math.max(xOf(this.range.t1), x0 + 1);
        ctx.fillStyle = "rgba(47,111,219,0.12)"; ctx.fillRect(x0, AXIS_H, x1 - x0, this.height - AXIS_H);
        ctx.fillStyle = "#2f6fdb"; ctx.fillRect(Math.round(x0), AXIS_H, 1, this.height - AXIS_H); ctx.fillRect(Math.round(x1), AXIS_H, 1, this.height - AXIS_H);
      }
      if (this.selected >= 0) {
        const i = this.selected, c = this.eventCenter(i);
        const x0 = xOf(p.start[i]), x1 = Math.max(xOf(p.end[i]), x0 + 1);
        ctx.strokeStyle = "#111"; ctx.lineWidth = 2;
        ctx.strokeRect(Math.round(x0) - 1, c.y - ROW_H / 2, Math.round(x1 - x0) + 2, ROW_H);
        ctx.lineWidth = 1;
      }
      ctx.restore();
      // Axis and labels over everything.
      ctx.fillStyle = "#f5f7fa"; ctx.fillRect(0, 0, W, AXIS_H);
      ctx.fillStyle = "#dde1e8"; ctx.fillRect(0, AXIS_H - 1, W, 1);
      ctx.fillStyle = "#5b6477";
      for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
        const x = Math.round(xOf(t));
        if (x < LABEL_W) continue;
        ctx.fillRect(x, AXIS_H - 6, 1, 6);
        ctx.fillText(fmtTick(t, step), x + 3, AXIS_H / 2 - 1);
      }
      if (this.range) {
        const x0 = Math.max(xOf(this.range.t0), LABEL_W), x1 = Math.min(xOf(this.range.t1), W);
        const label = fmtUs(this.range.t1 - this.range.t0), w = label.length * 6.5 + 10;
        const cx = Math.min(Math.max((x0 + x1) / 2 - w / 2, LABEL_W), W - w);
        ctx.fillStyle = "#2f6fdb"; ctx.fillRect(cx, 2, w, AXIS_H - 6);
        ctx.fillStyle = "#fff"; ctx.fillText(label, cx + 5, AXIS_H / 2 - 1);
      }
      for (const it of this.items) {
        ctx.fillStyle = it.kind === "group" ? "#e9edf3" : "#f8f9fb";
        ctx.fillRect(0, it.y, LABEL_W, it.h - (it.kind === "group" ? 0 : 1));
        ctx.fillStyle = it.kind === "group" ? "#1d2330" : "#3a4356";
        const text = it.kind === "group" ? it.group.toUpperCase() + (it.empty ? "  (none recorded)" : "")
          : it.kind === "lane" ? p.lanes[it.lane].label : p.counters[it.counter].label;
        ctx.font = it.kind === "group" ? "600 11px system-ui, sans-serif" : "11px system-ui, sans-serif";
        const room = Math.floor((LABEL_W - 12) / 6.2);
        ctx.fillText(text.length > room ? text.slice(0, room - 1) + "…" : text, 8, it.y + Math.min(it.h, ROW_H + LANE_PAD) / 2);
      }
      ctx.fillStyle = "#dde1e8"; ctx.fillRect(LABEL_W - 1, 0, 1, this.height);
      this.stats = { drawn, inView, draws: this.stats.draws + 1 };
      this.updateInfo();
    }
    // Step chart of a counter (allocated filled, other series as lines). Each pixel column shows
    // the largest value it covers, so a spike never disappears when zoomed out; a max pyramid per
    // series answers that in O(log n) per column, whatever the number of samples.
    drawCounter(ctx, c, it, xOf) {
      const top = it.y + 6, h = it.h - 10, base = top + h, n = c.ts.length;
      if (!n) return;
      const yOf = (v) => base - (c.max > 0 ? v / c.max : 0) * h;
      const xFirst = Math.max(LABEL_W, Math.floor(xOf(c.ts[0])));
      c.series.forEach((s, si) => {
        if (!s.levels) s.levels = maxPyramid(s.v);
        ctx.beginPath();
        let k = upperBound(c.ts, 0, n, this.tOf(xFirst)) - 1;
        let carried = k >= 0 ? s.v[k] : null, started = false, px = xFirst;
        for (; px < this.width; px++) {
          const lo = k + 1, hi = upperBound(c.ts, lo, n, this.tOf(px + 1));
          let v = carried;
          if (hi > lo) {
            const m = rangeMax(s.levels, lo, hi);
            v = v === null ? m : Math.max(v, m);
            carried = s.v[hi - 1];
            k = hi - 1;
          }
          if (v === null) continue;
          const y = yOf(v);
          if (!started) { ctx.moveTo(px, y); started = true; } else ctx.lineTo(px, y);
          ctx.lineTo(px + 1, y);
          if (k >= n - 1 && hi <= lo) { ctx.lineTo(this.width, yOf(carried)); px = this.width; break; }
        }
        if (!started) return;
        if (si === 0) {
          ctx.strokeStyle = "#2f6fdb"; ctx.stroke();
          ctx.lineTo(this.width, base); ctx.lineTo(xFirst, base); ctx.closePath(); ctx.fillStyle = "rgba(47,111,219,0.25)"; ctx.fill();
        } else { ctx.strokeStyle = "#9aa3b5"; ctx.setLineDash([4, 3]); ctx.stroke(); ctx.setLineDash([]); }
      });
      ctx.fillStyle = "#5b6477";
      ctx.fillText("max " + c.fmt(c.max), this.width - 110, top + 6);
    }
    drawFlows(ctx, xOf) {
      const p = this.p, pairs = [];
      if (this.selected >= 0) {
        // The chain through the selection: where it came from and where it went, both ways.
        const walk = (start, dir) => {
          const seen = new Set([start]);
          let frontier = [start];
          while (frontier.length && pairs.length < 400) {
            const next = [];
            for (const a of frontier) for (const b of (dir > 0 ? p.flowsOut(a) : p.flowsIn(a))) {
              pairs.push(dir > 0 ? [a, b] : [b, a]);
              if (!seen.has(b)) { seen.add(b); next.push(b); }
            }
            frontier = next;
          }
        };
        walk(this.selected, 1); walk(this.selected, -1);
      }
      if (this.showAllFlows) {
        const { t0, t1 } = this.view;
        for (let k = 0; k < p.flowFrom.length && pairs.length < 3000; k++) {
          const a = p.flowFrom[k], b = p.flowTo[k];
          if ((p.start[a] <= t1 && p.end[a] >= t0) || (p.start[b] <= t1 && p.end[b] >= t0)) pairs.push([a, b]);
        }
      }
      ctx.strokeStyle = "rgba(29,35,48,0.75)"; ctx.fillStyle = "rgba(29,35,48,0.75)";
      for (const [a, b] of pairs) {
        const ya = this.eventCenter(a).y, yb = this.eventCenter(b).y;
        const xa = xOf(p.start[a]), xb = xOf(p.start[b]);
        const dy = yb > ya ? -ROW_H / 2 + 2 : ROW_H / 2 - 2;
        ctx.beginPath();
        ctx.moveTo(xa, ya);
        const mid = (ya + yb + dy) / 2;
        ctx.bezierCurveTo(xa, mid, xb, mid, xb, yb + dy);
        ctx.stroke();
        ctx.beginPath();
        const dir = yb > ya ? 1 : -1;
        ctx.moveTo(xb, yb + dy); ctx.lineTo(xb - 4, yb + dy - 6 * dir); ctx.lineTo(xb + 4, yb + dy - 6 * dir); ctx.closePath(); ctx.fill();
      }
    }
  }

  // ---------------------------------------------------------------- op table
  const OP_COLUMNS = [
    { key: "name", label: "Op", csv: "op", text: true },
    { key: "tier", label: "Tier", csv: "tier", text: true },
    { key: "calls", label: "Calls", csv: "calls", fmt: fmtInt },
    { key: "host_us", label: "Host total", csv: "host_us", fmt: fmtUs },
    { key: "host_mean", label: "Host mean", csv: "host_mean_us", fmt: fmtUs },
    { key: "device_us", label: "Device total", csv: "device_us", fmt: fmtUs },
    { key: "device_mean", label: "Device mean", csv: "device_mean_us", fmt: fmtUs },
    { key: "device_share", label: "Device %", csv: "device_share_pct", fmt: fmtPct, csvScale: 100 },
    { key: "bytes", label: "Bytes", csv: "bytes", fmt: fmtBytes },
  ];
  // The same table on the cost model's clock: projected device time on the target (docs/cost_model.md).
  const PROJECTED_COLUMNS = [
    ...OP_COLUMNS.slice(0, 5),
    { key: "projected_us", label: "Projected total", csv: "projected_us", fmt: fmtUs },
    { key: "projected_mean", label: "Projected mean", csv: "projected_mean_us", fmt: fmtUs },
    { key: "projected_share", label: "Projected %", csv: "projected_share_pct", fmt: fmtPct, csvScale: 100 },
    { key: "bound", label: "Bound", csv: "bound", text: true },
    OP_COLUMNS[8],
  ];
  function csvField(v) {
    const s = String(v);
    return /[",\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }
  class OpTable {
    constructor(host, profile) {
      const total = profile.ops.reduce((a, r) => a + r.device_us, 0);
      const projectedTotal = profile.ops.reduce((a, r) => a + (r.projected_us || 0), 0);
      this.profile = profile;
      this.rows = profile.ops.map((r) => ({
        ...r, host_mean: r.calls ? r.host_us / r.calls : 0, device_mean: r.calls ? r.device_us / r.calls : 0,
        device_share: total > 0 ? r.device_us / total : 0, projected_us: r.projected_us || 0, bound: r.bound || "",
        projected_mean: r.calls ? (r.projected_us || 0) / r.calls : 0,
        projected_share: projectedTotal > 0 ? (r.projected_us || 0) / projectedTotal : 0,
      }));
      this.columns = OP_COLUMNS;
      const target = (profile.summary.projected || {}).target;
      const clock = el("select", { class: "clock", "aria-label": "device clock", disabled: !target },
        el("option", { value: "measured", text: "measured device time" }),
        el("option", { value: "projected", text: "projected on " + (target || "the target") + " (model)" }));
      clock.addEventListener("change", () => {
        this.columns = clock.value === "projected" ? PROJECTED_COLUMNS : OP_COLUMNS;
        const key = clock.value === "projected" ? "projected_us" : "device_us";
        if (!this.columns.some((c) => c.key === this.sort.key) || /^(device|projected)_us$/.test(this.sort.key)) this.sort = { key, dir: -1 };
        this.render();
      });
      this.clock = clock;
      this.sort = { key: "device_us", dir: -1 };
      this.filter = "";
      this.filterInput = el("input", { type: "search", placeholder: "filter ops", "aria-label": "filter ops" });
      this.filterInput.addEventListener("input", () => { this.filter = this.filterInput.value.trim().toLowerCase(); this.render(); });
      this.count = el("span", { class: "info" });
      this.table = el("table", { class: "grid op-table" });
      host.append(el("div", { class: "toolbar" }, this.filterInput, clock,
        el("button", { class: "export-csv", text: "Export CSV", onclick: () => this.download() }), this.count), this.table);
      this.render();
    }
    visibleRows() {
      const { key, dir } = this.sort;
      const rows = this.rows.filter((r) => !this.filter || r.name.toLowerCase().includes(this.filter) || r.tier.includes(this.filter));
      const text = this.columns.find((c) => c.key === key).text;
      rows.sort((a, b) => {
        const d = text ? String(a[key]).localeCompare(String(b[key])) : a[key] - b[key];
        return d * dir || a.name.localeCompare(b.name);
      });
      return rows;
    }
    render() {
      const rows = this.visibleRows();
      const head = el("tr", {}, ...this.columns.map((c) => el("th", {
        class: "sortable" + (c.key === "name" ? " name" : "") + (this.sort.key === c.key ? (this.sort.dir > 0 ? " sorted-asc" : " sorted-desc") : ""),
        "data-key": c.key, text: c.label,
        onclick: () => {
          this.sort = this.sort.key === c.key ? { key: c.key, dir: -this.sort.dir } : { key: c.key, dir: c.text ? 1 : -1 };
          this.render();
        },
      })));
      const body = rows.map((r) => el("tr", {}, ...this.columns.map((c) =>
        c.key === "tier" ? el("td", {}, tierBadge(r.tier)) : el("td", { class: c.key === "name" ? "name" : "", title: c.key === "name" ? r.name : null, text: c.fmt ? c.fmt(r[c.key]) : r[c.key] }))));
      this.table.replaceChildren(el("thead", {}, head), el("tbody", {}, ...body));
      this.count.textContent = rows.length + " of " + this.rows.length + " ops";
    }
    csv() {
      const lines = [this.columns.map((c) => c.csv).join(",")];
      for (const r of this.visibleRows()) {
        lines.push(this.columns.map((c) => {
          const v = r[c.key];
          if (c.text) return csvField(v);
          if (c.key === "calls" || c.key === "bytes") return String(v);
          return (v * (c.csvScale || 1)).toFixed(3);
        }).join(","));
      }
      return lines.join("\n") + "\n";
    }
    download() {
      const url = URL.createObjectURL(new Blob([this.csv()], { type: "text/csv" }));
      const a = el("a", { href: url, download: this.profile.name.replace(/[^\w.-]+/g, "_") + "_ops.csv" });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    }
  }

  // ---------------------------------------------------------------- HBM chart
  // A chart over the profile's time axis: the plot's margins, and the time under the pointer.
  class TimeChart {
    geometry() { return { left: 70, right: 16, top: 12, bottom: 28 }; }
    tAt(e) {
      const r = this.canvas.getBoundingClientRect(), g = this.geometry();
      const w = r.width - g.left - g.right, x = e.clientX - r.left - g.left;
      if (x < 0 || x > w) return null;
      return x / w * Math.max(this.p.duration, 1e-3);
    }
  }

  class MemoryChart extends TimeChart {
    constructor(host, profile, counter, onPick) {
      super();
      this.p = profile; this.c = counter; this.onPick = onPick;
      this.canvas = el("canvas", { class: "memchart", "aria-label": counter.label });
      this.readout = el("div", { class: "muted readout", text: "hover for values; click to open the timeline there" });
      const peak = counter.series[0] ? counter.series[0].v[counter.peakAt] : 0;
      host.append(el("h2", { text: counter.label + " — peak " + (counter.series[0] ? counter.series[0].label : "") + " " + counter.fmt(peak) + " at " + fmtUs(counter.ts[counter.peakAt] || 0) }),
        this.canvas, this.readout);
      this.canvas.addEventListener("mousemove", (e) => this.hover(e));
      this.canvas.addEventListener("click", (e) => { const t = this.tAt(e); if (t !== null && this.onPick) this.onPick(t); });
      new ResizeObserver(() => this.draw()).observe(host);
      this.draw();
    }
    hover(e) {
      const t = this.tAt(e);
      if (t === null) return;
      const k = Math.max(0, upperBound(this.c.ts, 0, this.c.ts.length, t) - 1);
      this.readout.textContent = "at " + fmtUs(t) + ": " + this.c.series.map((s) => s.label + " " + this.c.fmt(s.v[k] || 0)).join(", ");
    }
    draw() {
      const w = Math.max(400, this.canvas.parentElement ? this.canvas.parentElement.clientWidth - 4 : 800), h = 200;
      const dpr = window.devicePixelRatio || 1;
      this.canvas.width = w * dpr; this.canvas.height = h * dpr;
      this.canvas.style.width = w + "px"; this.canvas.style.height = h + "px";
      const ctx = this.canvas.getContext("2d"), g = this.geometry();
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, w, h);
      ctx.font = "11px system-ui, sans-serif";
      const pw = w - g.left - g.right, ph = h - g.top - g.bottom, d = Math.max(this.p.duration, 1e-3);
      const max = this.c.max > 0 ? this.c.max * 1.1 : 1;
      const xOf = (t) => g.left + t / d * pw, yOf = (v) => g.top + ph - v / max * ph;
      ctx.fillStyle = "#5b6477"; ctx.strokeStyle = "#eef0f4";
      const vstep = niceStep(max / 4);
      for (let v = 0; v <= max; v += vstep) {
        ctx.beginPath(); ctx.moveTo(g.left, yOf(v)); ctx.lineTo(w - g.right, yOf(v)); ctx.stroke();
        ctx.fillText(this.c.fmt(v), 6, yOf(v) + 4);
      }
      const tstep = niceStep(d / Math.max(2, pw / 110));
      for (let t = 0; t <= d; t += tstep) ctx.fillText(fmtTick(t, tstep), xOf(t) - 10, h - 8);
      this.c.series.forEach((s, si) => {
        ctx.beginPath();
        let prev = null;
        for (let k = 0; k < this.c.ts.length; k++) {
          const x = xOf(this.c.ts[k]), y = yOf(s.v[k]);
          if (prev === null) ctx.moveTo(x, y); else { ctx.lineTo(x, prev); ctx.lineTo(x, y); }
          prev = y;
        }
        if (prev !== null) ctx.lineTo(w - g.right, prev);
        if (si === 0) {
          ctx.strokeStyle = "#2f6fdb"; ctx.stroke();
          ctx.lineTo(w - g.right, yOf(0)); ctx.lineTo(xOf(this.c.ts[0] || 0), yOf(0)); ctx.closePath();
          ctx.fillStyle = "rgba(47,111,219,0.2)"; ctx.fill();
        } else { ctx.strokeStyle = "#9aa3b5"; ctx.setLineDash([4, 3]); ctx.stroke(); ctx.setLineDash([]); }
      });
      if (this.c.series[0] && this.c.ts.length) {
        const k = this.c.peakAt, x = xOf(this.c.ts[k]), y = yOf(this.c.series[0].v[k]);
        ctx.fillStyle = "#c23a2b"; ctx.beginPath(); ctx.arc(x, y, 3.5, 0, 2 * Math.PI); ctx.fill();
      }
    }
  }

  // ---------------------------------------------------------------- memory by category
  // torch.profiler's memory profile of one core (what export_memory_timeline draws for CUDA): the bytes each
  // category holds over time, stacked, the peak marked. Times are microseconds from the profile's start.
  const CATEGORY_COLORS = { parameter: "#2e7d32", optimizer_state: "#c9a227", input: "#37474f", temporary: "#9575cd",
    activation: "#e53935", gradient: "#1e40af", autograd_detail: "#6f95e8", unknown: "#a0a4ab" };
  class CategoryChart extends TimeChart {
    constructor(host, profile, m, onPick) {
      super();
      this.p = profile; this.m = m; this.onPick = onPick;
      // Cumulative sums per sample: band c lies between stack[k][c] and stack[k][c + 1].
      this.stack = m.bytes.map((row) => { const out = [0]; for (const v of row) out.push(out[out.length - 1] + v); return out; });
      this.canvas = el("canvas", { class: "memchart", "aria-label": "NC" + m.device + " memory by category" });
      this.readout = el("div", { class: "muted readout", text: "hover for values; click to open the timeline there" });
      host.append(el("h2", { text: "NC" + m.device + " memory by category — peak " + fmtBytes(m.peak_bytes) + " at " + fmtUs(m.peak_us) }),
        el("div", { class: "legend" }, ...m.categories.map((c) => el("span", {}, el("i", { style: "background:" + (CATEGORY_COLORS[c] || "#777") }), c.replace(/_/g, " ")))),
        this.canvas, this.readout);
      this.canvas.addEventListener("mousemove", (e) => this.hover(e));
      this.canvas.addEventListener("click", (e) => { const t = this.tAt(e); if (t !== null && this.onPick) this.onPick(t); });
      new ResizeObserver(() => this.draw()).observe(host);
      this.draw();
    }
    sampleAt(t) { return Math.max(0, upperBound(this.m.t_us, 0, this.m.t_us.length, t) - 1); }
    hover(e) {
      const t = this.tAt(e);
      if (t === null || !this.m.t_us.length) return;
      const k = this.sampleAt(t), row = this.m.bytes[k];
      this.readout.textContent = "at " + fmtUs(t) + ": " + fmtBytes(this.stack[k][row.length]) + " — " +
        this.m.categories.map((c, i) => [c, row[i]]).filter(([, v]) => v > 0).map(([c, v]) => c.replace(/_/g, " ") + " " + fmtBytes(v)).join(", ");
    }
    draw() {
      const w = Math.max(400, this.canvas.parentElement ? this.canvas.parentElement.clientWidth - 4 : 800), h = 220;
      const dpr = window.devicePixelRatio || 1;
      this.canvas.width = w * dpr; this.canvas.height = h * dpr;
      this.canvas.style.width = w + "px"; this.canvas.style.height = h + "px";
      const ctx = this.canvas.getContext("2d"), g = this.geometry(), m = this.m, n = m.t_us.length;
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, w, h);
      ctx.font = "11px system-ui, sans-serif";
      const pw = w - g.left - g.right, ph = h - g.top - g.bottom, d = Math.max(this.p.duration, 1e-3);
      const max = m.peak_bytes > 0 ? m.peak_bytes * 1.1 : 1;
      const xOf = (t) => g.left + Math.min(Math.max(t, 0), d) / d * pw, yOf = (v) => g.top + ph - v / max * ph;
      ctx.fillStyle = "#5b6477"; ctx.strokeStyle = "#eef0f4";
      const vstep = niceStep(max / 4);
      for (let v = 0; v <= max; v += vstep) {
        ctx.beginPath(); ctx.moveTo(g.left, yOf(v)); ctx.lineTo(w - g.right, yOf(v)); ctx.stroke();
        ctx.fillText(fmtBytes(v), 6, yOf(v) + 4);
      }
      const tstep = niceStep(d / Math.max(2, pw / 110));
      for (let t = 0; t <= d; t += tstep) ctx.fillText(fmtTick(t, tstep), xOf(t) - 10, h - 8);
      if (!n) return;
      // Each band as steps: a sample's bytes hold until the next sample (the last one to the end).
      const xEnd = (k) => (k + 1 < n ? xOf(m.t_us[k + 1]) : w - g.right);
      m.categories.forEach((c, ci) => {
        ctx.beginPath();
        for (let k = 0; k < n; k++) {
          const x0 = xOf(m.t_us[k]), x1 = xEnd(k), y = yOf(this.stack[k][ci + 1]);
          if (k === 0) ctx.moveTo(x0, y); else ctx.lineTo(x0, y);
          ctx.lineTo(x1, y);
        }
        for (let k = n - 1; k >= 0; k--) {
          const x0 = xOf(m.t_us[k]), x1 = xEnd(k), y = yOf(this.stack[k][ci]);
          ctx.lineTo(x1, y); ctx.lineTo(x0, y);
        }
        ctx.closePath();
        ctx.fillStyle = CATEGORY_COLORS[c] || "#777"; ctx.globalAlpha = 0.75; ctx.fill(); ctx.globalAlpha = 1;
      });
      const x = xOf(m.peak_us), y = yOf(m.peak_bytes);
      ctx.strokeStyle = "#c23a2b"; ctx.setLineDash([4, 3]);
      ctx.beginPath(); ctx.moveTo(x, g.top); ctx.lineTo(x, g.top + ph); ctx.stroke(); ctx.setLineDash([]);
      ctx.fillStyle = "#c23a2b"; ctx.beginPath(); ctx.arc(x, y, 3.5, 0, 2 * Math.PI); ctx.fill();
      ctx.fillText("peak " + fmtBytes(m.peak_bytes), Math.min(x + 6, w - g.right - 90), g.top + 10);
    }
  }

  // ---------------------------------------------------------------- pages
  const app = { profiles: [], active: 0, tab: "summary", views: new Map(), compare: null };

  function card(k, v, extra) {
    return el("div", { class: "card" }, el("div", { class: "k", text: k }), el("div", { class: "v" }, v), extra || null);
  }
  function renderSummary(host, p) {
    const s = p.summary;
    const share = s.device_busy_share;
    const peak = Object.entries(s.peak_hbm_bytes || {}).map(([c, b]) => "NC" + c + " " + fmtBytes(b)).join(", ") || "-";
    const generic = Object.values(s.generic_ops || {}).reduce((a, b) => a + b, 0);
    host.append(
      el("div", { class: "cards" },
        // Named only when not the host's: the numbers, and any precision bug, are then Trainium's.
        ...(s.numerics && s.numerics !== "host" ? [card("numerics", s.numerics + " (64-bit work in 32 bits)")] : []),
        card("wall time", fmtUs(s.wall_us)),
        card("device busy", fmtPct(share), el("div", { class: "bar" }, el("div", { style: "width:" + Math.min(100, 100 * share).toFixed(1) + "%" }))),
        card("verdict", el("span", { class: "verdict verdict-" + s.verdict.replace(/\s+/g, "-"), text: s.verdict })),
        card("host dispatch", fmtUs(s.host_dispatch_us)),
        card("kernels", fmtInt(s.kernels) + (s.cores.length ? " on NC" + s.cores.join(", NC") : "")),
        card("generic-path kernels", s.kernels ? fmtInt(generic) + " (" + fmtPct(generic / s.kernels) + ")" : "0"),
        card("peak HBM", peak)),
      ...(s.projected ? [el("h2", { text: "Projected on " + s.projected.target + " (cost model, not a measurement)" }),
        el("div", { class: "cards projected" },
          card("projected wall", fmtUs(s.projected.wall_us)),
          card("projected device busy", fmtPct(s.projected.device_busy_share), el("div", { class: "bar" }, el("div", { style: "width:" + Math.min(100, 100 * s.projected.device_busy_share).toFixed(1) + "%" }))),
          card("projected verdict", el("span", { class: "verdict verdict-" + s.projected.verdict.replace(/\s+/g, "-"), text: s.projected.verdict })),
          card("launches", fmtInt(s.projected.launches) + " (" + fmtUs(s.projected.launch_us) + ")"))] : []),
      el("h2", { text: "Findings" }),
      el("ol", { class: "findings" }, ...p.findings.map((f) => el("li", { "data-key": f.key },
        el("div", { class: "title", text: f.title }), el("div", { text: f.detail }), el("div", { class: "advice", text: f.advice })))),
      el("h2", { text: "Top ops by device time" }));
    const top = el("table", { class: "grid" }, el("tr", {}, ...["Op", "Tier", "Calls", "Host", "Device", "Projected", "Bound"].map((t, k) => el("th", { class: k === 0 ? "name" : "", text: t }))),
      ...p.ops.slice(0, 8).map((r) => el("tr", {}, el("td", { class: "name", text: r.name }), el("td", {}, tierBadge(r.tier)),
        el("td", { text: fmtInt(r.calls) }), el("td", { text: fmtUs(r.host_us) }), el("td", { text: fmtUs(r.device_us) }),
        el("td", { text: r.projected_us ? fmtUs(r.projected_us) : "-" }), el("td", { text: r.bound || "-" }))));
    host.append(top, el("p", { class: "muted", text: "Trace: " + (p.source || "(in memory)") + " · " + fmtInt(p.n) + " events in " + p.lanes.length + " lanes" }));
  }
  function renderMemory(host, p) {
    const openAt = (t) => {
      showTab("timeline");
      const tl = viewFor("timeline", p, () => null);
      const span = (tl.view.t1 - tl.view.t0) / 8;
      tl.setView(t - span / 2, t + span / 2);
    };
    for (const m of p.memoryCategories) new CategoryChart(host, p, m, openAt);
    if (!p.memoryCategories.length) host.append(el("p", { class: "muted", text: "No memory by category in this trace (profile with profile_memory=True, record_shapes=True, with_stack=True and export with NeuronProfiler)." }));
    if (!p.counters.length) { host.append(el("p", { class: "muted", text: "This trace has no HBM counters (profile with ProfilerActivity.PrivateUse1)." })); return; }
    host.append(el("div", { class: "legend" }, el("span", {}, el("i", { style: "background:#2f6fdb" }), "allocated"), el("span", {}, el("i", { style: "background:#9aa3b5" }), "reserved (dashed)")));
    for (const c of p.counters) new MemoryChart(host, p, c, openAt);
  }

  function compareMetrics(a, b) {
    const gen = (p) => Object.values(p.summary.generic_ops || {}).reduce((x, y) => x + y, 0);
    const transfers = (p) => Object.values(p.summary.transfers || {}).reduce((x, v) => [x[0] + v[0], x[1] + v[1]], [0, 0]);
    const peak = (p) => Object.values(p.summary.peak_hbm_bytes || {}).reduce((x, y) => Math.max(x, y), 0);
    // [label, value of a profile, formatter, whether smaller is better]
    return [
      ["wall time", (p) => p.summary.wall_us, fmtUs, true],
      ["device busy", (p) => p.summary.device_busy_us, fmtUs, true],
      ["device busy share", (p) => p.summary.device_busy_share, fmtPct, false],
      ["host dispatch", (p) => p.summary.host_dispatch_us, fmtUs, true],
      ["kernels", (p) => p.summary.kernels, fmtInt, true],
      ["generic-path kernels", gen, fmtInt, true],
      ["transfers", (p) => transfers(p)[0], fmtInt, true],
      ["transfer bytes", (p) => transfers(p)[1], fmtBytes, true],
      ["peak HBM", peak, fmtBytes, true],
      ["verdict", (p) => p.summary.verdict, String, null],
      ["projected wall (model)", (p) => (p.summary.projected ? p.summary.projected.wall_us : 0), fmtUs, true],
      ["projected device busy (model)", (p) => (p.summary.projected ? p.summary.projected.device_busy_us : 0), fmtUs, true],
      ["projected launches (model)", (p) => (p.summary.projected ? p.summary.projected.launches : 0), fmtInt, true],
      ["projected verdict (model)", (p) => (p.summary.projected ? p.summary.projected.verdict : "-"), String, null],
    ].map(([label, f, fmt, lower]) => ({ label, a: f(a), b: f(b), fmt, lower }));
  }
  function renderCompare(host) {
    const ps = app.profiles;
    const pick = (value) => el("select", {}, ...ps.map((p, k) => el("option", { value: String(k), selected: k === value, text: p.name })));
    if (!app.compare) {
      const find = (re) => ps.findIndex((p) => re.test(p.name));
      let a = find(/naive|eager/i), b = find(/compile/i);
      if (a < 0 || b < 0 || a === b) { a = 0; b = 1; }
      app.compare = { a, b };
    }
    const selA = pick(app.compare.a), selB = pick(app.compare.b);
    const body = el("div", { class: "compare-grid" });
    const rerender = () => { app.compare = { a: +selA.value, b: +selB.value }; body.replaceChildren(); fill(); };
    selA.addEventListener("change", rerender); selB.addEventListener("change", rerender);
    host.append(el("div", { class: "compare-pickers" }, el("label", {}, "A ", selA), el("label", {}, "B ", selB),
      el("span", { class: "muted", text: "timelines share one time scale from each trace's start; zoom either" })), body);
    const fill = () => {
      const a = ps[app.compare.a], b = ps[app.compare.b];
      const rows = compareMetrics(a, b).map((m) => {
        let ratio = "", cls = "";
        if (typeof m.a === "number" && typeof m.b === "number" && m.a > 0) {
          ratio = (m.b / m.a).toFixed(2) + "x";
          if (m.lower !== null && m.b !== m.a) cls = (m.b < m.a) === m.lower ? "better" : "worse";
        }
        return el("tr", {}, el("td", { class: "name", text: m.label }), el("td", { text: m.fmt(m.a) }), el("td", { text: m.fmt(m.b) }), el("td", { class: cls, text: ratio }));
      });
      const metrics = el("table", { class: "grid compare-metrics" }, el("tr", {}, el("th", { class: "name", text: "" }), el("th", { text: "A: " + a.name }), el("th", { text: "B: " + b.name }), el("th", { text: "B / A" })), ...rows);
      const names = new Map();
      for (const [side, p] of [["a", a], ["b", b]]) for (const r of p.ops) {
        const row = names.get(r.name) || { name: r.name, a: null, b: null };
        row[side] = r; names.set(r.name, row);
      }
      const opRows = [...names.values()].sort((x, y) => Math.max(y.a ? y.a.device_us : 0, y.b ? y.b.device_us : 0) - Math.max(x.a ? x.a.device_us : 0, x.b ? x.b.device_us : 0));
      const v = (r, k, f) => (r ? f(r[k]) : "-");
      const ops = el("table", { class: "grid compare-ops" },
        el("tr", {}, ...["Op", "calls A", "calls B", "device A", "device B", "host A", "host B"].map((t, k) => el("th", { class: k ? "" : "name", text: t }))),
        ...opRows.slice(0, 40).map((r) => el("tr", {}, el("td", { class: "name", text: r.name }),
          el("td", { text: v(r.a, "calls", fmtInt) }), el("td", { text: v(r.b, "calls", fmtInt) }),
          el("td", { text: v(r.a, "device_us", fmtUs) }), el("td", { text: v(r.b, "device_us", fmtUs) }),
          el("td", { text: v(r.a, "host_us", fmtUs) }), el("td", { text: v(r.b, "host_us", fmtUs) }))));
      const hostA = el("div"), hostB = el("div");
      const findings = (p, side) => el("div", { class: "compare-findings" }, el("h2", { text: side + ": " + p.name + " — findings" }),
        el("ol", { class: "findings" }, ...p.findings.map((f) => el("li", { "data-key": f.key }, el("div", { class: "title", text: f.title }), el("div", { text: f.detail })))));
      body.append(
        el("div", { class: "side-by-side" }, el("div", {}, el("h2", { text: "Summary" }), metrics), el("div", {}, el("h2", { text: "Ops" }), ops)),
        el("div", { class: "side-by-side even" }, findings(a, "A"), findings(b, "B")),
        el("div", {}, el("h2", { text: "A: " + a.name }), hostA), el("div", {}, el("h2", { text: "B: " + b.name }), hostB));
      const link = (src, view) => { for (const t of app.compareTimelines || []) if (t !== src) t.setView(view.t0, view.t1, true, true); };
      const ta = new Timeline(hostA, a, { onView: link }), tb = new Timeline(hostB, b, { onView: link });
      app.compareTimelines = [ta, tb];
      const d = Math.max(a.duration, b.duration, 1e-3);
      ta.setView(-d * 0.01, d * 1.01, true, true); tb.setView(-d * 0.01, d * 1.01, true, true);
    };
    fill();
  }

  // The kernel view: each NKI kernel's instruction-level profile, projected on its target by the schedule
  // model (profiler/html/kernel_view.py computes the numbers; this lays them out).
  const CLASS_LABELS = { tensor: "Tensor Engine", vector_scalar: "Vector/Scalar", dma: "DMA", stalls: "dependency stalls" };
  function bar(x) { return el("div", { class: "bar" }, el("div", { style: "width:" + Math.min(100, 100 * x).toFixed(1) + "%" })); }
  function table(head, rows) {
    return el("table", { class: "grid" }, el("tr", {}, ...head.map((t, k) => el("th", { class: k === 0 ? "name" : "", text: t }))),
      ...rows.map((r) => el("tr", {}, ...r.map((v, k) => el("td", k === 0 ? { class: "name" } : {}, v)))));
  }
  function renderKernels(host, p) {
    const ks = p.kernels || [];
    if (!ks.length) {
      host.append(el("p", { class: "muted", text: "This trace has no NKI instruction profile. Write one with nki.profile(working_directory=...) or nki.benchmark(save_trace_name=...), or profile NKI launches under torch.profiler with TORCHNEURON_EXT_NKI_INSTRUCTIONS=1 (docs/nki.md, \"The instruction-level profile\")." }));
      return;
    }
    for (const k of ks) {
      const sec = el("section", { class: "kernel", "data-kernel": k.kernel });
      const finding = p.findings.find((f) => f.key === "nki_kernel_" + k.bound && f.title.includes(k.kernel));
      sec.append(
        el("h2", { text: k.kernel + " — projected on " + k.target + " (schedule model, not a measurement)" + (k.launches > 1 ? " · longest of " + k.launches + " launches" : "") }),
        el("div", { class: "cards projected" },
          card("makespan", fmtUs(k.makespan_us)),
          card("instructions", fmtInt(k.instructions) + (k.cores > 1 ? " on " + k.cores + " cores" : "")),
          card("MFU", fmtPct(k.mfu), bar(k.mfu)),
          card("HBM bandwidth", fmtPct(k.hbm_utilisation), bar(k.hbm_utilisation)),
          card("bound", el("span", { class: "bound bound-" + k.bound, text: CLASS_LABELS[k.bound] || k.bound }))),
        ...(finding ? [el("div", { class: "finding" }, el("div", { class: "title", text: finding.title }), el("div", { text: finding.detail }), el("div", { class: "advice", text: finding.advice }))] : []),
        el("h3", { text: "Engine utilisation (busy / makespan)" }),
        table(["Lane", "Core", "Busy", "Utilisation", "Instructions"], k.lanes.map((l) => [l.label, String(l.core), fmtUs(l.busy_us),
          el("span", {}, fmtPct(l.utilisation), bar(l.utilisation)), fmtInt(l.instructions)])),
        el("h3", { text: "Top source lines by projected time" }),
        table(["Line", "Time", "Share", "Instructions", "Engines"], k.top_lines.map((l) => [l.line, fmtUs(l.time_us), fmtPct(l.share), fmtInt(l.instructions), l.engines.join(", ")])),
        el("h3", { text: "Critical path: " + fmtInt(k.critical_path_length) + " instructions (" +
          Object.entries(k.critical_by_class).filter(([, v]) => v >= 0.0005).map(([c, v]) => (CLASS_LABELS[c] || c) + " " + fmtUs(v)).join(", ") + ")" }),
        table(["Instruction", "Lane", "Line", "Start", "Duration", "Waited"], k.critical_path.map((r) => [r.opcode + " #" + r.index + (k.cores > 1 ? " (core " + r.core + ")" : ""),
          r.lane, r.line || "-", fmtUs(r.start_us), fmtUs(r.dur_us), fmtUs(r.wait_us)])),
        ...(k.critical_path_length > k.critical_path.length ? [el("p", { class: "muted", text: "first " + k.critical_path.length + " of " + k.critical_path_length + " shown" })] : []));
      host.append(sec);
    }
  }

  // One view per (tab, profile), built on first show.
  function viewFor(tab, p, build) {
    const key = tab + ":" + p.index;
    if (!app.views.has(key)) {
      const host = el("div", { class: "view", "data-profile": String(p.index) });
      document.getElementById("tab-" + tab).append(host);
      app.views.set(key, { host, obj: build(host) });
    }
    return app.views.get(key).obj;
  }
  function showTab(tab) {
    if (tab === "compare" && app.profiles.length < 2) tab = "summary";
    app.tab = tab;
    for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("active", b.dataset.tab === tab);
    for (const s of document.querySelectorAll("main > .tab")) s.classList.toggle("active", s.id === "tab-" + tab);
    const p = app.profiles[app.active];
    if (tab === "compare") {
      const sec = document.getElementById("tab-compare");
      if (!sec.childElementCount) renderCompare(sec);
    } else {
      const builders = {
        summary: (h) => renderSummary(h, p), timeline: (h) => new Timeline(h, p), ops: (h) => new OpTable(h, p), memory: (h) => renderMemory(h, p),
        kernels: (h) => renderKernels(h, p),
      };
      const existed = app.views.has(tab + ":" + p.index);
      viewFor(tab, p, builders[tab]);
      for (const [key, v] of app.views) if (key.startsWith(tab + ":")) v.host.hidden = key !== tab + ":" + p.index;
      // A timeline built while hidden measured no width; one built just now is already drawn.
      const tl = app.views.get("timeline:" + p.index);
      if (tab === "timeline" && tl && existed) tl.obj.resize();
    }
    const hash = "#tab=" + tab + (app.profiles.length > 1 ? "&profile=" + encodeURIComponent(p.name) : "");
    if (location.hash !== hash) history.replaceState(null, "", hash);
  }
  function fromHash() {
    const params = new URLSearchParams(location.hash.slice(1));
    const name = params.get("profile");
    const k = app.profiles.findIndex((p) => p.name === name);
    if (k >= 0) app.active = k;
    return params.get("tab") || "summary";
  }

  async function main() {
    // Where the opening time goes, for bench/html_viewer_load.py.
    const timings = window.tnx.timings = { scriptStart: T_START };
    let mark = performance.now();
    const lap = (name) => { const now = performance.now(); timings[name] = (timings[name] || 0) + now - mark; mark = now; };
    const raw = JSON.parse(document.getElementById("tnx-data").textContent);
    document.getElementById("tnx-data").remove(); // the text is parsed; let the browser drop it
    lap("parse");
    setStatus("decoding " + raw.profiles.length + " profile(s)…");
    for (let k = 0; k < raw.profiles.length; k++) {
      const meta = raw.profiles[k];
      const bytes = base64Bytes(meta.blob);
      meta.blob = null;
      lap("base64");
      const buffer = await inflate(bytes);
      lap("inflate");
      app.profiles.push(new Profile(meta, buffer, k));
      lap("columns");
    }
    const picker = document.getElementById("profile-picker");
    app.profiles.forEach((p, k) => picker.append(el("option", { value: String(k), text: p.name })));
    document.getElementById("profile-picker-label").hidden = app.profiles.length < 2;
    document.querySelector('#tabs button[data-tab="compare"]').hidden = app.profiles.length < 2;
    picker.addEventListener("change", () => { app.active = +picker.value; showTab(app.tab === "compare" ? "summary" : app.tab); });
    for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => showTab(b.dataset.tab));
    const tab = fromHash();
    picker.value = String(app.active);
    showTab(tab);
    lap("firstView");
    const total = app.profiles.reduce((a, p) => a + p.n, 0);
    window.tnx.loadMs = performance.now() - T_START;
    setStatus(fmtInt(total) + " events · opened in " + (window.tnx.loadMs / 1000).toFixed(2) + " s");
    window.tnx.ready = true;
    // Now the page is usable, inflate the args of every profile in the background.
    setTimeout(() => { for (const p of app.profiles) p.loadArgs().catch((err) => console.error(err)); }, 0);
  }

  // The page's state for scripts and tests (tests/profiler/test_html_browser.py drives it).
  window.tnx = {
    ready: false,
    error: null,
    profiles: () => app.profiles.map((p) => ({ name: p.name, events: p.n, lanes: p.lanes.length, flows: p.flowFrom.length, counters: p.counters.length, memoryCategories: p.memoryCategories.map((m) => ({ device: m.device, peak: m.peak_bytes, samples: m.t_us.length })) })),
    show: (tab, profile) => {
      if (profile !== undefined) { app.active = profile; document.getElementById("profile-picker").value = String(profile); }
      showTab(tab);
    },
    timeline: () => (app.tab === "compare" ? null : viewFor("timeline", app.profiles[app.active], (h) => new Timeline(h, app.profiles[app.active]))),
    compareTimelines: () => app.compareTimelines || [],
    opTable: () => viewFor("ops", app.profiles[app.active], (h) => new OpTable(h, app.profiles[app.active])),
    opTableCsv: () => window.tnx.opTable().csv(),
    // Index of the k-th event (in time order) named `name` in the active profile, or -1.
    findEvent: (name, k) => {
      const p = app.profiles[app.active], idx = p.strings.indexOf(name), hits = [];
      if (idx < 0) return -1;
      for (let i = 0; i < p.n; i++) if (p.nameId[i] === idx) hits.push(i);
      hits.sort((a, b) => p.start[a] - p.start[b]);
      return hits[k || 0] === undefined ? -1 : hits[k || 0];
    },
    event: async (i) => {
      const p = app.profiles[app.active];
      await p.loadArgs();
      return { name: p.eventName(i), group: p.groupOf(i), lane: p.lanes[p.lane[i]].label, start: p.start[i], dur: p.dur[i], args: p.args(i) };
    },
  };
  main().catch((err) => {
    window.tnx.error = String(err && err.stack || err);
    setStatus("failed to open the report");
    document.querySelector("main").prepend(el("p", { class: "error", text: "The report could not be opened: " + err }));
    console.error(err);
  });
})();
