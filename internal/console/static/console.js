// Strata console: live figures on the topic page and the lag chart on the group
// page. Plain JavaScript, no dependencies; every page works without it.
"use strict";

function setField(row, field, text) {
  const cell = row.querySelector('[data-field="' + field + '"]');
  if (cell && cell.textContent !== text) cell.textContent = text;
}

function offsetText(n) { return n < 0 ? "\u2014" : n.toLocaleString("en-US"); }

function bytesText(n) {
  if (n < 0) return "\u2014";
  if (n < 1024) return n + " B";
  const units = "KMGTPE";
  let v = n / 1024, i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return v.toFixed(1) + " " + units[i] + "iB";
}

async function getJSON(url) {
  const resp = await fetch(url, { cache: "no-store" });
  if (!resp.ok) throw new Error(url + ": " + resp.status);
  return resp.json();
}

// Topic page: refresh the partition table every 3 s.
function watchTopic(table) {
  const url = "/console/api/topics/" + encodeURIComponent(table.dataset.topic);
  async function tick() {
    try {
      const data = await getJSON(url);
      for (const p of data.partitions) {
        const row = table.querySelector('tr[data-partition="' + p.partition + '"]');
        if (!row) continue;
        setField(row, "logStartOffset", offsetText(p.logStartOffset));
        setField(row, "highWatermark", offsetText(p.highWatermark));
        setField(row, "sizeBytes", bytesText(p.sizeBytes));
        setField(row, "messagesPerSecond", p.messagesPerSecond == null ? "\u2014" : p.messagesPerSecond.toFixed(1));
      }
    } catch (e) { /* the node may be restarting: keep the last figures */ }
  }
  setInterval(tick, 3000);
  setTimeout(tick, 1100); // a second sample soon, so rates show early
}

// Group page: sample the lag every 2 s and draw the total as a line.
function watchLag(svg) {
  const url = "/console/api/groups/" + encodeURIComponent(svg.dataset.group) + "/lag";
  const line = svg.querySelector("#lag-line");
  const area = svg.querySelector("#lag-area");
  const caption = document.getElementById("lag-caption");
  const total = document.getElementById("total-lag");
  const table = document.getElementById("lag");
  const points = []; // {t, lag}
  const keep = 90;
  function draw() {
    const w = 600, h = 160, pad = 8;
    const maxLag = Math.max(1, ...points.map(p => p.lag));
    const top = maxLag * 1.15; // headroom above the highest point
    const t0 = points[0].t, t1 = Math.max(points[points.length - 1].t, t0 + 1);
    const xy = points.map(p =>
      ((p.t - t0) / (t1 - t0) * w).toFixed(1) + "," + (h - pad - p.lag / top * (h - 2 * pad)).toFixed(1));
    line.setAttribute("points", xy.join(" "));
    const last = ((points[points.length - 1].t - t0) / (t1 - t0) * w).toFixed(1);
    area.setAttribute("points", "0," + (h - pad) + " " + xy.join(" ") + " " + last + "," + (h - pad));
    svg.dataset.samples = String(points.length);
    caption.textContent = "total lag, sampled every 2 s: now " + points[points.length - 1].lag.toLocaleString("en-US") +
      ", max " + maxLag.toLocaleString("en-US") + " over " + points.length + " samples";
  }
  async function tick() {
    try {
      const data = await getJSON(url);
      points.push({ t: data.time, lag: data.total });
      if (points.length > keep) points.shift();
      if (total) total.textContent = data.total.toLocaleString("en-US");
      for (const p of data.partitions) {
        const row = table && table.querySelector('tr[data-topic="' + CSS.escape(p.topic) + '"][data-partition="' + p.partition + '"]');
        if (!row) continue;
        setField(row, "committed", offsetText(p.committed));
        setField(row, "highWatermark", offsetText(p.highWatermark));
        setField(row, "lag", offsetText(p.lag));
      }
      draw();
    } catch (e) { /* keep the chart as it is */ }
  }
  tick();
  setInterval(tick, 2000);
}

document.addEventListener("DOMContentLoaded", () => {
  const partitions = document.getElementById("partitions");
  if (partitions && partitions.dataset.topic) watchTopic(partitions);
  const chart = document.getElementById("lag-chart");
  if (chart && chart.dataset.group) watchLag(chart);
});
