#!/usr/bin/env python3
"""`chorus report` in a real browser (docs/report.md).

Debian's chromium, headless, driven by Debian's python3-selenium through
chromium-driver, opens reports for a production MSCCL file, a wrong file,
a synthesized two-box schedule, an aggregated (large) algorithm and perf
CSVs. Every check counts what the page drew against what the inputs hold,
counted here independently (the XML by ElementTree, the CSV by csv), and
every interaction (filters, time slider, hover, a diagnostic's link) must
change what is shown. No console message of level SEVERE or WARNING may
appear.

Usage: report_browser_test.py CHORUS SHARED_DIR SOURCE_DIR WORK_DIR [SHOTS_DIR]
With SHOTS_DIR, a screenshot of each view is written there (docs/report/).
Exit 77 (skipped) when chromium, chromium-driver or python3-selenium is
missing, unless CHORUS_REQUIRE_BROWSER=1 (CI), where that is a failure.
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

SKIP = 77
SENDS = {"s", "rcs", "rrs", "rrcs"}


def need(condition, what):
    if not condition:
        raise AssertionError(what)


def skip(why):
    if os.environ.get("CHORUS_REQUIRE_BROWSER") == "1":
        print("FAIL: " + why + " (CHORUS_REQUIRE_BROWSER=1)")
        sys.exit(1)
    print("SKIP: " + why)
    sys.exit(SKIP)


def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        skip("python3-selenium is not installed (apt-get install python3-selenium)")
    binary = shutil.which("chromium") or "/usr/bin/chromium"
    driver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if not os.path.exists(binary) or not os.path.exists(driver):
        skip("chromium or chromium-driver is not installed (apt-get install chromium "
             "chromium-driver)")
    o = Options()
    o.binary_location = binary
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1000", "--hide-scrollbars"]:
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=o)


class Page:
    def __init__(self, d, path):
        self.d = d
        d.get("file://" + os.path.abspath(path))
        need(self.js("return document.body.getAttribute('data-ready')") == "1",
             path + ": the viewer did not finish")
        self.console_clean(path)

    def js(self, code, *args):
        return self.d.execute_script(code, *args)

    def console_clean(self, path):
        bad = [e for e in self.d.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        need(not bad, path + ": console errors: " + json.dumps(bad))

    def count(self, selector, root="document"):
        return self.js("return %s.querySelectorAll(arguments[0]).length" % root, selector)

    def attr(self, selector, name, index=0):
        return self.js("return document.querySelectorAll(arguments[0])[arguments[2]]"
                       ".getAttribute(arguments[1])", selector, name, index)

    def set_value(self, selector, value, event, index=0):
        self.js("const e = document.querySelectorAll(arguments[0])[arguments[3]];"
                "e.value = arguments[1]; e.dispatchEvent(new Event(arguments[2]));",
                selector, value, event, index)

    def data(self):
        return json.loads(self.js("return document.getElementById('chorus-data').textContent"))

    def shot(self, shots, name, selector):
        if not shots:
            return
        el = self.d.find_element("css selector", selector)
        self.js("arguments[0].scrollIntoView()", el)
        el.screenshot(os.path.join(shots, name))


def xml_steps(path):
    """[(rank, tb id, channel, send peer, step type)] as the file has them."""
    out = []
    for gpu in ET.parse(path).getroot().iter("gpu"):
        for tb in gpu.iter("tb"):
            for step in tb.iter("step"):
                out.append((int(gpu.get("id")), int(tb.get("id")), int(tb.get("chan", "0")),
                            step.get("type")))
    return out


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    need(r.returncode == 0, " ".join(cmd) + " failed: " + r.stdout + r.stderr)
    return r.stdout


def production(d, chorus, shared, work, shots):
    xml = os.path.join(shared, "msccl-algorithms", "ndv4", "ag-1m.xml")
    html = os.path.join(work, "production.html")
    run([chorus, "report", xml, "--topo", "ndv4", "-o", html, "--bytes", "1M"])
    steps = xml_steps(xml)
    ranks = sorted({s[0] for s in steps})
    p = Page(d, html)
    need(p.attr(".verdict", "data-verdict") == "correct", "the production file is not correct")
    svg = "svg.flow-svg"
    need(int(p.attr(svg, "data-lanes")) == len(ranks), "one lane per rank")
    need(p.count(".lane") == len(ranks), "lane elements")
    need(p.count("svg.flow-svg rect.step") == len(steps),
         "every step drawn: %d of %d" % (p.count("svg.flow-svg rect.step"), len(steps)))
    sends = sum(1 for s in steps if s[3] in SENDS)
    need(p.count("svg.flow-svg path.msg") == sends, "an arrow per message: %d of %d" %
         (p.count("svg.flow-svg path.msg"), sends))
    need(p.count("svg.flow-svg path.msg.stub") == 0, "every message has its receive drawn")
    need(p.count("svg.flow-svg .msg-label") == sends, "each arrow labelled")
    need(p.count("svg.flow-svg rect.step.critical") > 0, "the critical path is marked")
    p.shot(shots, "flow.png", "section.algorithm")
    # Filter by rank: two lanes, their steps, their messages (as stubs where
    # the receiver is filtered out).
    p.set_value(".filter-rank", "0-1", "input")
    mine = [s for s in steps if s[0] in (0, 1)]
    need(int(p.attr(svg, "data-lanes")) == 2, "ranks 0-1: two lanes")
    need(p.count("svg.flow-svg rect.step") == len(mine), "ranks 0-1: their steps")
    need(p.count("svg.flow-svg path.msg") == sum(1 for s in mine if s[3] in SENDS),
         "ranks 0-1: their messages")
    p.shot(shots, "flow-ranks.png", "section.algorithm .flow")
    # Filter by channel.
    p.set_value(".filter-rank", "", "input")
    p.set_value(".filter-channel", "1", "change")
    need(p.count("svg.flow-svg rect.step") == sum(1 for s in steps if s[2] == 1),
         "channel 1: its steps")
    p.set_value(".filter-channel", "", "change")
    # Filter by chunk: only steps that touch output chunk 3.
    p.set_value(".filter-chunk", "o3", "input")
    shown = p.count("svg.flow-svg rect.step")
    need(0 < shown < len(steps), "chunk o3: some steps, not all (%d)" % shown)
    p.set_value(".filter-chunk", "", "input")
    # The simulated time axis keeps every step.
    p.set_value(".axis-mode", "time", "change")
    need(p.count("svg.flow-svg rect.step") == len(steps), "time axis: every step")
    # Hover on a receive: its dependencies and what it waited for.
    p.js("const r = [...document.querySelectorAll('svg.flow-svg rect.step.t-recv')][5];"
         "r.dispatchEvent(new MouseEvent('mouseover', {bubbles: true}));")
    text = p.js("return document.querySelector('.details').textContent")
    need("after rank" in text and "waited for" in text, "hover explains the step: " + text)
    need(p.count("svg.flow-svg .pred") >= 2, "hover marks the predecessors")
    # The topology: every link drawn, coloured by load; the slider changes it.
    data = p.data()
    need(p.count("svg.topo-svg circle.node-rank") == len(ranks), "a circle per rank")
    need(p.count("svg.topo-svg line.link") > 0, "links drawn")
    whole = p.js("return [...document.querySelectorAll('svg.topo-svg line.link')]"
                 ".map(l => l.getAttribute('data-util')).join()")
    p.shot(shots, "topology.png", "#topology")
    buckets = data["algorithms"][0]["sim"]["timeline"]["buckets"]
    p.set_value(".time-slider", "1", "input")
    first = p.js("return [...document.querySelectorAll('svg.topo-svg line.link')]"
                 ".map(l => l.getAttribute('data-util')).join()")
    need(first != whole, "the slider changes the links' colours")
    need("interval 1 of %d" % buckets in p.js(
        "return document.querySelector('.slider-label').textContent"), "the slider's label")
    p.set_value(".time-slider", str(buckets // 2), "input")
    p.shot(shots, "topology-timeline.png", "#topology")
    # The predicted curve and its bound.
    curve = data["algorithms"][0]["sim"]["curve"]
    need(int(p.attr("#predicted path.curve", "data-points")) == len(curve), "the curve's points")
    need(p.count("#predicted line.bound:not(.legend-line)") == 1, "the optimum's line")
    p.shot(shots, "predicted.png", "#predicted")
    p.console_clean(html)


def wrong(d, chorus, source, work, shots):
    bad = os.path.join(source, "tests", "data", "bad", "e301_swapped_offsets.xml")
    html = os.path.join(work, "wrong.html")
    run([chorus, "report", bad, "-o", html])
    p = Page(d, html)
    need(p.attr(".verdict", "data-verdict") == "wrong", "the wrong file is wrong")
    need(p.count("ul.diagnostics li.error") == 2, "both E301 findings listed")
    p.js("document.querySelector('ul.diagnostics a.goto').click()")
    need(p.count("svg.flow-svg rect.step.focus") == 1, "the diagnostic's link marks its step")
    node = p.attr("svg.flow-svg rect.step.focus", "data-node")
    text = p.js("return document.querySelector('.details').textContent")
    need(text.startswith("rank 1 tb 0 step 1"), "the step the diagnostic names: " + text)
    need(node is not None, "the focused step has a node")
    p.shot(shots, "diagnostics.png", "section.algorithm")
    unreadable = os.path.join(source, "tests", "data", "bad", "e001_truncated.xml")
    html = os.path.join(work, "unreadable.html")
    run([chorus, "report", unreadable, "-o", html])
    p = Page(d, html)
    need(p.attr(".verdict", "data-verdict") == "unreadable", "a truncated file is unreadable")
    need(p.count("ul.diagnostics li.error") >= 1, "its reader's finding listed")


def synthesized(d, chorus, work, shots):
    html = os.path.join(work, "synth.html")
    out = json.loads(run([chorus, "synth", "allgather", "--topo", "dgx-a100:2", "--time-budget",
                          "20", "--json", "--report", html]))
    p = Page(d, html)
    need(p.attr(".verdict", "data-verdict") == "correct", "the schedule is proven")
    need(p.count("svg.topo-svg circle.node-rank") == out["ranks"], "a circle per rank")
    edges = sum(len(t["edges"]) for t in out["forest"])
    need(int(p.attr("svg.topo-svg", "data-tree-edges")) == edges,
         "every tree edge drawn: %s of %d" % (p.attr("svg.topo-svg", "data-tree-edges"), edges))
    need(p.count("svg.topo-svg path.tree-edge") == edges, "tree edge paths")
    inside = set(out["cut"]["inside"])
    need(p.count("svg.topo-svg .cut") == len(inside), "the cut's nodes outlined")
    p.shot(shots, "synth-trees.png", "#topology")
    p.set_value(".tree-select", "0", "change")
    need(p.count("svg.topo-svg path.tree-edge") == len(out["forest"][0]["edges"]),
         "one tree selected: its edges")
    need(p.count("svg.topo-svg path.tree-edge[data-tree='0']") ==
         len(out["forest"][0]["edges"]), "only tree 0")
    p.shot(shots, "synth-tree0.png", "#topology")
    need(int(p.attr("svg.flow-svg", "data-lanes")) == out["ranks"], "a lane per rank")
    p.console_clean(html)


def aggregated(d, chorus, work, shots):
    xml = os.path.join(work, "ring16.xml")
    run([chorus, "gen", "ring_allreduce", "--ranks", "16", "-o", xml])
    steps = xml_steps(xml)
    html = os.path.join(work, "aggregated.html")
    run([chorus, "report", xml, "--topo", "ring:16", "--detail-steps", "100", "--detail-ranks",
         "0,5", "-o", html])
    p = Page(d, html)
    need(int(p.attr("svg.flow-svg", "data-lanes")) == 2, "only the detail ranks' lanes")
    need(p.count("svg.flow-svg rect.step") == sum(1 for s in steps if s[0] in (0, 5)),
         "their steps")
    need(p.count("canvas.matrix") == 1, "the traffic matrix")
    need(p.count("svg.flow-svg path.msg.stub") > 0, "messages to ranks not drawn are stubs")
    p.shot(shots, "aggregated.png", "section.algorithm")


def measured(d, chorus, source, work, shots):
    peer = os.path.join(source, "bench", "results", "peer_compare_3way_2026-11-22.csv")
    mine = os.path.join(work, "perf.csv")
    with open(mine, "w") as f:
        f.write(run([chorus, "perf", "allgather", "--ranks", "3", "-b", "1K", "-e", "64K", "-f",
                     "4", "-n", "2", "-w", "1", "--csv"]))
    html = os.path.join(work, "perf.html")
    run([chorus, "report", "--perf", peer, "--perf", mine, "-o", html])
    groups = {}
    for path in (peer, mine):
        with open(path) as f:
            for row in csv.DictReader(f):
                key = (row["collective"], row["ranks"])
                impls = groups.setdefault(key, set())
                for col, impl in (("chorus_busbw", "chorus"), ("mpi_busbw", "mpi"),
                                  ("gloo_busbw", "gloo"), ("oop_busbw_gbs", "chorus"),
                                  ("ip_busbw_gbs", "chorus in place")):
                    if row.get(col):
                        impls.add((path, impl))
    p = Page(d, html)
    need(p.count("#measured .chart") == len(groups), "a chart per collective and rank count: "
         "%d of %d" % (p.count("#measured .chart"), len(groups)))
    need(p.count("#measured path.curve") == sum(len(v) for v in groups.values()),
         "a curve per implementation")
    need(p.count("#measured line.bound[data-name^='memcpy']:not(.legend-line)") >= len(groups), "the memcpy lines")
    p.shot(shots, "measured.png", "#measured .chart")
    before = p.attr("#measured path.curve", "d")
    p.js("const c = document.querySelector('#measured input.log-y'); c.checked = true;"
         "c.dispatchEvent(new Event('change'));")
    need(p.attr("#measured path.curve", "d") != before, "the log axis redraws the curve")
    p.console_clean(html)


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    chorus, shared, source, work = sys.argv[1:5]
    shots = sys.argv[5] if len(sys.argv) > 5 else None
    os.makedirs(work, exist_ok=True)
    if shots:
        os.makedirs(shots, exist_ok=True)
    d = browser()
    try:
        production(d, chorus, shared, work, shots)
        wrong(d, chorus, source, work, shots)
        synthesized(d, chorus, work, shots)
        aggregated(d, chorus, work, shots)
        measured(d, chorus, source, work, shots)
    except AssertionError as e:
        print("FAIL: " + str(e))
        return 1
    finally:
        d.quit()
    print("ok: production, wrong, unreadable, synthesized, aggregated and measured reports")
    return 0


if __name__ == "__main__":
    sys.exit(main())
