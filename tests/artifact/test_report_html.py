#!/usr/bin/python3
"""`ferry build`'s report.html, rendered in headless Chromium (Debian's `chromium`).

Two builds of the digits CNN: examples/digits_cnn/ferry.yaml as is (passes; no task), and a
project with labels whose int8 variant is calibrated on clipped ranges (percentile:50) so a class
drops beyond max_class_drop: the gate fails and per-layer localisation runs, so every figure has
data. The failing project's model has a node renamed to an HTML/script injection, which must come
out as text.

Each report.html is loaded in one headless Chromium driven over the DevTools protocol on a pipe
(--remote-debugging-pipe): console messages, uncaught exceptions, log entries (failed loads) and
every network request arrive as structured events, so "no console error" and "no request but the
page itself" are checked from Chromium's own events rather than from its log text. A control page
with a console.error, an uncaught exception, a missing image and an external URL proves the
detector sees each kind. Then the rendered DOM (what --dump-dom prints) is checked: every expected
<figure id> holds an <svg> laid out with a nonzero size, a title and a caption, no <script>; the
HTML file has no http(s):// URL, no src= and no href= but in-page anchors. A full-page screenshot
of each report is stored in the work folder (in the build tree).

Chromium missing or not starting is a failure, not a skip.
"""
import argparse
import base64
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "cli"))
from clilib import check, summary  # noqa: E402
from test_build import make_project  # noqa: E402

INJECTED = "conv<script>console.error(\"injected\")</script>&\"'<b>x</b>"


class Chromium:
    """One headless Chromium, driven over the DevTools protocol on fds 3 (commands in) and 4
    (responses and events out), messages separated by NUL."""

    def __init__(self, exe, profile, log_path):
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        # Out of the way of 3 and 4, so that the dup2 calls in the child cannot clobber them.
        cmd_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
        res_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
        os.close(to_browser_r)
        os.close(from_browser_w)

        def child_fds():
            os.dup2(cmd_r, 3)
            os.dup2(res_w, 4)

        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--disable-gpu", "--no-sandbox", "--remote-debugging-pipe",
             "--user-data-dir=" + profile, "--no-first-run", "--no-default-browser-check",
             "--hide-scrollbars", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            preexec_fn=child_fds, pass_fds=(3, 4))
        os.close(cmd_r)
        os.close(res_w)
        self.w = os.fdopen(to_browser_w, "wb", buffering=0)
        self.r = os.fdopen(from_browser_r, "rb", buffering=0)
        self.buf = b""
        self.next_id = 0
        self.events = []

    def _read(self):
        while b"\0" not in self.buf:
            chunk = self.r.read(1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe (exit %s); see %s" %
                                   (self.proc.poll(), self.log.name))
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.w.write(json.dumps(msg).encode() + b"\0")
        while True:
            m = self._read()
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method, session):
        for i, m in enumerate(self.events):
            if m.get("method") == method and m.get("sessionId") == session:
                return self.events.pop(i)
        while True:
            m = self._read()
            if m.get("method") == method and m.get("sessionId") == session:
                return m
            self.events.append(m)

    def render(self, url, png):
        """Loads url in a fresh tab; returns (problems, requests, dom, figures, scripts)."""
        self.events = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.call(domain + ".enable", session=s)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": 1280, "height": 4000, "deviceScaleFactor": 1, "mobile": False}, session=s)
        self.call("Page.navigate", {"url": url}, session=s)
        self.wait_event("Page.loadEventFired", s)
        figures = self.eval(s, """JSON.stringify(Array.from(document.querySelectorAll('figure')).map(f => {
            const svg = f.querySelector('svg'); const box = svg ? svg.getBoundingClientRect() : null;
            return {id: f.id, svg: !!svg, w: box ? box.width : 0, h: box ? box.height : 0,
                    title: svg && svg.querySelector('title') ? svg.querySelector('title').textContent : '',
                    caption: f.querySelector('figcaption') ? f.querySelector('figcaption').textContent : '',
                    circles: svg ? svg.querySelectorAll('circle').length : 0,
                    rects: svg ? svg.querySelectorAll('rect').length : 0,
                    first: svg ? svg.querySelectorAll('line.first').length : 0,
                    failed_rings: svg ? svg.querySelectorAll('circle[stroke="#C62828"]').length : 0}; }))""")
        scripts = self.eval(s, "document.querySelectorAll('script').length")
        dom = self.eval(s, "document.documentElement.outerHTML")
        height = self.call("Page.getLayoutMetrics", session=s)["cssContentSize"]["height"]
        shot = self.call("Page.captureScreenshot",
                         {"format": "png", "captureBeyondViewport": True,
                          "clip": {"x": 0, "y": 0, "width": 1280, "height": height, "scale": 1}},
                         session=s)
        with open(png, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        problems, requests = [], []
        for m in self.events:
            if m.get("sessionId") != s:
                continue
            p = m.get("params", {})
            if m["method"] == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
                problems.append("console.%s: %s" % (p["type"], " ".join(
                    str(a.get("value", a.get("description", ""))) for a in p.get("args", []))))
            elif m["method"] == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                problems.append("exception: %s" % d.get("exception", {}).get("description", d.get("text")))
            elif m["method"] == "Log.entryAdded" and p["entry"]["level"] == "error":
                problems.append("log (%s): %s" % (p["entry"]["source"], p["entry"]["text"]))
            elif m["method"] == "Network.requestWillBeSent":
                requests.append(p["request"]["url"])
        self.call("Target.closeTarget", {"targetId": target})
        return problems, requests, dom, json.loads(figures), scripts

    def eval(self, session, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True}, session=session)
        if "exceptionDetails" in r:
            raise RuntimeError("evaluating %s: %s" % (expr[:60], r["exceptionDetails"]))
        return r["result"]["value"]

    def close(self):
        try:
            self.call("Browser.close")
        except RuntimeError:
            pass  # the pipe closes as the browser exits
        self.proc.wait()
        self.log.close()


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def build(args, cfg, out, want_rc):
    p = subprocess.run([args.ferry, "build", cfg, "-o", out, "--bench-runs", "10"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(p.returncode == want_rc, "build %s: exit %d (got %d: %s)" % (
        os.path.basename(out), want_rc, p.returncode, p.stderr.strip()[-300:]))
    html = os.path.join(out + ".report", "report.html")
    check(os.path.isfile(html) and os.path.isfile(os.path.join(out + ".report", "report.md")),
          "%s: report.html beside report.md in OUT.report/" % os.path.basename(out))
    if want_rc == 0:
        check(not os.path.exists(os.path.join(out, "report.html")), "report.html not in the artifact")
        manifest = json.load(open(os.path.join(out, "manifest.json")))
        check(not [f for f in manifest["files"] if "report" in f["path"]],
              "report.html not in the manifest")
    return html


def check_self_contained(name, html):
    text = open(html, encoding="utf-8").read()
    check(not re.search(r"(?i)\b(https?|ftp)://", text), "%s: no http(s):// URL in the file" % name)
    check(not re.search(r"(?i)<(script|link|img|iframe|object|embed)\b", text),
          "%s: no script, link, img, iframe, object or embed element" % name)
    check(not re.search(r"(?i)\bsrc\s*=", text), "%s: no src= attribute" % name)
    hrefs = re.findall(r"(?i)\bhref\s*=\s*\"([^\"]*)\"", text)
    check(all(h.startswith("#") for h in hrefs), "%s: every href is an in-page anchor (%s)" % (
        name, [h for h in hrefs if not h.startswith("#")][:3]))
    check(not re.search(r"(?i)url\(|@import", text), "%s: no url() or @import in the CSS" % name)
    return text


def check_render(name, result, want_ids, page_url):
    problems, requests, dom, figures, scripts = result
    check(not problems, "%s: no console error, exception or failed load (%s)" % (name, problems[:3]))
    check(requests == [page_url], "%s: the page is the only request (%s)" % (name, requests[:4]))
    check(scripts == 0, "%s: no <script> element in the DOM" % name)
    ids = [f["id"] for f in figures]
    check(sorted(ids) == sorted(want_ids), "%s: figures %s (got %s)" % (name, want_ids, ids))
    for f in figures:
        check(f["svg"] and f["w"] > 100 and f["h"] > 50,
              "%s: %s holds an <svg> laid out at %.0fx%.0f" % (name, f["id"], f["w"], f["h"]))
        check(f["title"].strip() and len(f["caption"].strip()) > 20,
              "%s: %s has a title (%r) and a caption" % (name, f["id"], f["title"][:50]))
        check('id="%s"' % f["id"] in dom, "%s: %s in the dumped DOM" % (name, f["id"]))
    return {f["id"]: f for f in figures}


def rename_first_node(model_path):
    import onnx
    m = onnx.load(model_path)
    m.graph.node[0].name = INJECTED
    onnx.save(m, model_path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--example", required=True, help="examples/digits_cnn")
    ap.add_argument("--chromium", default="chromium")
    args = ap.parse_args()
    work = os.path.abspath(args.work)
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    exe = shutil.which(args.chromium)
    if not exe:
        check(False, "chromium found (%s): scripts/install-deps installs Debian's chromium" % args.chromium)
        return summary()

    # 1. The example as is: passes, no task.
    out_a = os.path.join(work, "digits")
    html_a = build(args, os.path.join(os.path.abspath(args.example), "ferry.yaml"), out_a, 0)
    # 2. Labels, an int8 variant beyond max_class_drop, and an injected node name.
    proj = os.path.join(work, "proj_fail")
    cfg = make_project(proj, args.example, quant_extra=", method: \"percentile:50\"")
    model = os.path.join(proj, "model.onnx")
    old = sha256(model)
    rename_first_node(model)
    with open(cfg) as f:
        text = f.read()
    with open(cfg, "w") as f:
        f.write(text.replace(old, sha256(model)))
    out_b = os.path.join(work, "digits_fail")
    html_b = build(args, cfg, out_b, 1)
    if not (os.path.isfile(html_a) and os.path.isfile(html_b)):
        return summary()
    text_a = check_self_contained("pass", html_a)
    text_b = check_self_contained("fail", html_b)
    check("&lt;script&gt;console.error(&quot;injected&quot;)&lt;/script&gt;" in text_b,
          "fail: the injected node name is escaped in the file")

    browser = Chromium(exe, os.path.join(work, "chromium-profile"), os.path.join(work, "chromium.log"))
    try:
        # The detector sees each kind of problem on a control page.
        bad = os.path.join(work, "control.html")
        with open(bad, "w") as f:
            f.write("<!DOCTYPE html><html><head><title>control</title></head><body>"
                    "<img src=\"missing.png\"><img src=\"http://192.0.2.1/x.png\">"
                    "<script>console.error('control error'); not_defined();</script></body></html>")
        problems, requests, _, _, _ = browser.render("file://" + bad, os.path.join(work, "control.png"))
        check(any("control error" in p for p in problems), "control: console.error seen (%s)" % problems)
        check(any("not_defined" in p for p in problems), "control: uncaught exception seen")
        check(any("missing.png" in p or "ERR_FILE_NOT_FOUND" in p for p in problems),
              "control: failed load seen (%s)" % problems)
        check(any(u.startswith("http://192.0.2.1/") for u in requests), "control: external request seen")

        url_a = "file://" + html_a
        figs = check_render("pass", browser.render(url_a, os.path.join(work, "report_pass.png")),
                            ["fig-error-0", "fig-layers-fp32", "fig-layers-int8", "fig-latency"], url_a)
        if figs:
            check(figs["fig-error-0"]["rects"] >= 3, "pass: the error histogram has bars")
            check(figs["fig-latency"]["circles"] >= 20, "pass: a dot per timed run of both variants")
            check("gate passed" in figs["fig-layers-int8"]["caption"],
                  "pass: the per-layer figure says why it is empty")
        url_b = "file://" + html_b
        result_b = browser.render(url_b, os.path.join(work, "report_fail.png"))
        figs = check_render("fail", result_b, ["fig-error-0", "fig-classes", "fig-layers-fp32",
                                               "fig-layers-int8", "fig-latency"], url_b)
        if figs:
            li = figs["fig-layers-int8"]
            check(li["circles"] >= 5 and li["first"] == 1,
                  "fail: int8 per-layer error along the graph, the first layer out of tolerance "
                  "marked (%d points, %d marks)" % (li["circles"], li["first"]))
            check("first layer out of tolerance" in li["caption"], "fail: the caption names it")
            fc = figs["fig-classes"]
            check(fc["circles"] == 10 * 3 and fc["failed_rings"] >= 1,
                  "fail: a source and two variant dots per class, a failing class ringed "
                  "(%d dots, %d rings)" % (fc["circles"], fc["failed_rings"]))
            check(figs["fig-latency"]["circles"] == 10, "fail: latency of the passing fp32 only")
        dom_b = result_b[2]
        check(INJECTED.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in dom_b,
              "fail: the injected node name is text in the DOM")
    finally:
        browser.close()
    for png in ("report_pass.png", "report_fail.png"):
        p = os.path.join(work, png)
        ok = os.path.isfile(p) and open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
        check(ok and os.path.getsize(p) > 20000, "screenshot %s stored (%d bytes)" % (
            p, os.path.getsize(p) if os.path.isfile(p) else 0))
    del text_a
    return summary()


if __name__ == "__main__":
    sys.exit(main())
