/// The dashboard's page and script. The page carries the snapshot it was served with, so it
/// shows the numbers at once (and to a client without scripts); the script draws it and
/// then follows `/dashboard/events`. Every value is set as text, never as markup.
enum DashboardPage {
    static func html(snapshot json: [UInt8], charts: Bool) -> [UInt8] {
        // Inside <script>, "<" could close the element: escaped (it only occurs in strings).
        let embedded = String(decoding: json, as: UTF8.self).replacingOccurrences(of: "<", with: "\\u003c")
        return Array((head + embedded + middle + (charts ? #"<script src="/dashboard/chart.js"></script>"# : "") + tail).utf8)
    }

    private static let head = #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>Pushfan dashboard</title>
        <style>
        body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d2330; background: #f4f6f9; }
        header { display: flex; align-items: baseline; gap: 1em; padding: 12px 20px; background: #1d2330; color: #fff; }
        header h1 { font-size: 18px; margin: 0; }
        #live { font-size: 12px; opacity: .8; }
        main { padding: 16px 20px; display: grid; gap: 16px; grid-template-columns: 1fr 1fr; }
        section { background: #fff; border-radius: 6px; padding: 12px 16px; box-shadow: 0 1px 2px rgba(0,0,0,.08); min-width: 0; }
        section.wide { grid-column: 1 / -1; }
        h2 { font-size: 14px; margin: 0 0 8px; color: #4a5568; }
        table { border-collapse: collapse; width: 100%; }
        th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #edf0f4; white-space: nowrap; }
        td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
        tr.campaign { cursor: pointer; }
        tr.campaign.chosen { background: #e8f0fe; }
        progress { width: 140px; vertical-align: middle; }
        .status { font-weight: 600; }
        .status-running, .status-sending { color: #2563eb; } .status-completed { color: #15803d; }
        .status-paused { color: #b45309; } .status-failed, .status-cancelled { color: #b91c1c; }
        .empty { color: #8a94a6; }
        canvas { max-height: 260px; }
        </style>
        </head>
        <body>
        <header><h1>Pushfan</h1><span id="live">live updates connecting…</span></header>
        <main>
        <section class="wide"><h2>Campaigns</h2>
        <table><thead><tr><th>Campaign</th><th>App</th><th>Status</th><th>Progress</th><th class="num">Sends/s</th><th>Outcomes</th></tr></thead>
        <tbody id="campaigns"></tbody></table></section>
        <section><h2 id="rate-title">Send rate</h2><canvas id="rate-chart"></canvas><p id="rate-text" class="empty"></p></section>
        <section><h2 id="outcomes-title">Outcomes</h2><canvas id="outcomes-chart"></canvas>
        <table><thead><tr><th>Outcome</th><th>Reason</th><th class="num">Devices</th></tr></thead><tbody id="reasons"></tbody></table>
        <table><thead><tr><th>Variant</th><th class="num">Delivered</th><th class="num">Done</th><th class="num">Opened</th><th class="num">Open rate</th><th class="num">Converted</th><th class="num">Conv. rate</th></tr></thead><tbody id="variants"></tbody></table>
        <p id="engagement-note" class="empty"></p></section>
        <section class="wide"><h2>Each app's sends per second against its limit (last minute)</h2><canvas id="apps-chart"></canvas>
        <table><thead><tr><th>App</th><th class="num">Sends/s now</th><th class="num">Limit</th></tr></thead><tbody id="apps"></tbody></table></section>
        <section class="wide"><h2>Recent dead letters</h2>
        <table><thead><tr><th>When</th><th>Topic</th><th class="num">Partition</th><th class="num">Offset</th><th>Key</th><th>Error</th><th>Reason</th></tr></thead>
        <tbody id="dead-letters"></tbody></table></section>
        </main>
        <script id="snapshot" type="application/json">
        """#

    private static let middle = "</script>\n"
    private static let tail = #"""
        <script src="/dashboard/dashboard.js"></script>
        </body>
        </html>

        """#

    static let script = #"""
        "use strict";
        (function () {
          var snapshot = JSON.parse(document.getElementById("snapshot").textContent);
          var chosen = new URLSearchParams(location.search).get("campaign");
          var charts = {};
          // Each campaign's engagement as last read (the event stream's snapshots carry none).
          var engaged = {};
          var palette = ["#2563eb", "#15803d", "#b45309", "#7c3aed", "#b91c1c", "#0e7490", "#be185d", "#4d7c0f"];

          function el(tag, text, cls) {
            var node = document.createElement(tag);
            if (text !== undefined && text !== null) node.textContent = String(text);
            if (cls) node.className = cls;
            return node;
          }
          function fill(id, rows, columns, empty) {
            var body = document.getElementById(id);
            body.replaceChildren();
            if (rows.length === 0) {
              var tr = el("tr"), td = el("td", empty, "empty");
              td.colSpan = columns;
              tr.appendChild(td);
              body.appendChild(tr);
            }
            rows.forEach(function (row) { body.appendChild(row); });
          }
          function time(ms) { return new Date(ms).toLocaleTimeString(); }
          function outcomesText(outcomes) {
            return Object.keys(outcomes).sort().map(function (k) { return k + " " + outcomes[k]; }).join(", ");
          }

          function render() {
            var rows = snapshot.campaigns;
            if (!chosen && rows.length) chosen = rows[0].id;
            var current = rows.filter(function (c) { return c.id === chosen; })[0];
            fill("campaigns", rows.map(function (c) {
              var tr = el("tr", null, "campaign" + (c.id === chosen ? " chosen" : ""));
              tr.dataset.campaign = c.id;
              tr.dataset.status = c.status;
              tr.dataset.done = c.done;
              if (c.audience !== undefined && c.audience !== null) tr.dataset.audience = c.audience;
              tr.appendChild(el("td", c.id));
              tr.appendChild(el("td", c.app || ""));
              tr.appendChild(el("td", c.status + (c.error ? ": " + c.error : ""), "status status-" + c.status));
              var progress = el("td");
              var bar = el("progress");
              bar.max = c.audience || Math.max(c.done, 1);
              bar.value = Math.min(c.done, bar.max);
              progress.appendChild(bar);
              var percent = c.audience ? " (" + Math.floor(100 * Math.min(c.done, c.audience) / c.audience) + "%)" : "";
              progress.appendChild(el("span", " " + c.done + (c.audience ? " / " + c.audience : "") + percent, "progress-text"));
              tr.appendChild(progress);
              tr.appendChild(el("td", c.rate, "num"));
              tr.appendChild(el("td", outcomesText(c.outcomes)));
              tr.addEventListener("click", function () { choose(c.id); });
              return tr;
            }), 6, "no campaign has results yet");

            document.getElementById("rate-title").textContent = current ? "Send rate of " + current.id : "Send rate";
            document.getElementById("outcomes-title").textContent = current ? "Outcomes of " + current.id : "Outcomes";
            var series = snapshot.selected && current && snapshot.selected.name === current.id ? snapshot.selected : null;
            document.getElementById("rate-text").textContent = series ? "" : "choose a campaign with results";
            fill("reasons", current ? current.reasons.map(function (r) {
              var tr = el("tr");
              tr.appendChild(el("td", r.outcome)); tr.appendChild(el("td", r.reason)); tr.appendChild(el("td", r.count, "num"));
              return tr;
            }) : [], 3, "no reasons");
            if (snapshot.engagement && snapshot.selected) engaged[snapshot.selected.name] = snapshot.engagement;
            var variants = current && current.variants ? current.variants : {};
            var engagement = current ? engaged[current.id] : null;
            var groups = engagement ? engagement.variants : {};
            var names = Object.keys(variants).concat(Object.keys(groups).filter(function (n) { return !(n in variants); })).sort();
            function percent(rate) { return rate === null || rate === undefined ? "–" : (100 * rate).toFixed(1) + "%"; }
            fill("variants", names.map(function (name) {
              var counts = variants[name] || {}, group = groups[name], tr = el("tr");
              tr.dataset.variant = name;
              tr.appendChild(el("td", name));
              tr.appendChild(el("td", counts.delivered || (group ? group.delivered : 0), "num"));
              tr.appendChild(el("td", Object.keys(counts).reduce(function (s, k) { return s + counts[k]; }, 0), "num"));
              if (group) {
                tr.dataset.opened = group.opened.devices;
                tr.dataset.converted = group.conversions.devices;
              }
              tr.appendChild(el("td", group ? group.opened.devices : "–", "num"));
              tr.appendChild(el("td", group ? percent(group.open_rate) : "–", "num"));
              tr.appendChild(el("td", group ? group.conversions.devices : "–", "num"));
              tr.appendChild(el("td", group ? percent(group.conversion_rate) : "–", "num"));
              return tr;
            }), 7, "no A/B variants");
            var notes = [];
            if (engagement && engagement.holdout_lift) {
              var lift = engagement.holdout_lift;
              notes.push("Holdout lift " + (100 * lift.absolute).toFixed(2) + " points (95% interval " + (100 * lift.ci95[0]).toFixed(2) +
                " to " + (100 * lift.ci95[1]).toFixed(2) + "): variants " + percent(lift.treated_rate) + " against holdout " + percent(lift.holdout_rate) + ".");
            }
            if (engagement && engagement.winner) {
              var decision = engagement.winner.decision;
              notes.push(decision ? "Winner: " + decision.variant + " by " + decision.metric.replace("_", " ") + " (" +
                Object.keys(decision.rates).sort().map(function (v) { return v + " " + percent(decision.rates[v]); }).join(", ") + "), decided " + time(decision.at) + "."
                : "Winner: decided " + engagement.winner.after_s + " s after the start, from the test group's " + engagement.winner.metric.replace("_", " ") + ".");
            }
            var note = document.getElementById("engagement-note");
            note.textContent = notes.join(" ");
            note.dataset.lift = engagement && engagement.holdout_lift ? "shown" : "none";
            fill("apps", snapshot.apps.map(function (a) {
              var counts = a.series.counts, last = counts.slice(-5), now = last.reduce(function (s, n) { return s + n; }, 0) / Math.max(last.length, 1);
              var tr = el("tr");
              tr.dataset.app = a.app;
              tr.appendChild(el("td", a.app)); tr.appendChild(el("td", Math.round(now), "num"));
              tr.appendChild(el("td", a.limit === undefined || a.limit === null ? "unknown" : a.limit, "num"));
              return tr;
            }), 3, "no sends in the last minute");
            fill("dead-letters", snapshot.deadLetters.map(function (d) {
              var tr = el("tr");
              [time(d.at), d.topic, d.partition, d.offset, d.key || "", d.error, d.reason].forEach(function (v, i) {
                tr.appendChild(el("td", v, i === 2 || i === 3 ? "num" : null));
              });
              return tr;
            }), 7, "none");
            drawCharts(current, series);
          }

          function chart(id, config) {
            if (!window.Chart) return;
            config.options = Object.assign({ animation: false, responsive: true, maintainAspectRatio: false }, config.options || {});
            if (charts[id]) { charts[id].data = config.data; charts[id].update("none"); return; }
            charts[id] = new Chart(document.getElementById(id), config);
          }
          function seconds(series) {
            return series.counts.map(function (_, i) { return time((series.start + i) * 1000); });
          }
          function drawCharts(current, series) {
            chart("rate-chart", { type: "line", data: {
              labels: series ? seconds(series) : [],
              datasets: [{ label: "sends per second", data: series ? series.counts : [], borderColor: palette[0], pointRadius: 0, fill: false }]
            }, options: { scales: { y: { beginAtZero: true } } } });
            var keys = current ? Object.keys(current.outcomes).sort() : [];
            chart("outcomes-chart", { type: "doughnut", data: {
              labels: keys, datasets: [{ data: keys.map(function (k) { return current.outcomes[k]; }), backgroundColor: palette }]
            } });
            var datasets = [];
            snapshot.apps.forEach(function (a, i) {
              var color = palette[i % palette.length];
              datasets.push({ label: a.app, data: a.series.counts, borderColor: color, pointRadius: 0 });
              if (a.limit) datasets.push({ label: a.app + " limit", data: a.series.counts.map(function () { return a.limit; }), borderColor: color, borderDash: [6, 4], pointRadius: 0 });
            });
            var first = snapshot.apps[0];
            chart("apps-chart", { type: "line", data: { labels: first ? seconds(first.series) : [], datasets: datasets },
              options: { scales: { y: { beginAtZero: true } } } });
          }

          var source = null;
          function connect() {
            if (source) source.close();
            source = new EventSource("/dashboard/events" + (chosen ? "?campaign=" + encodeURIComponent(chosen) : ""));
            source.addEventListener("snapshot", function (event) {
              snapshot = JSON.parse(event.data);
              document.getElementById("live").textContent = "live, updated " + time(snapshot.at);
              render();
            });
            source.onerror = function () { document.getElementById("live").textContent = "reconnecting…"; };
          }
          function choose(id) {
            chosen = id;
            history.replaceState(null, "", "?campaign=" + encodeURIComponent(id));
            render();
            connect();
          }

          // Engagement is read from the store, not the stream: asked for every few seconds.
          function refreshEngagement() {
            if (!chosen) return;
            fetch("/dashboard/state?campaign=" + encodeURIComponent(chosen), { credentials: "same-origin" })
              .then(function (answer) { return answer.ok ? answer.json() : null; })
              .then(function (state) {
                if (state && state.engagement && state.selected) { engaged[state.selected.name] = state.engagement; render(); }
              })
              .catch(function () {});
          }

          render();
          connect();
          setInterval(refreshEngagement, 3000);
        })();

        """#
}
