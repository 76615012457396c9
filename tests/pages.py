"""Reading a report page in tests: its HTML as a parser sees it (:class:`Page`, :func:`png_size`)
and as a real browser renders it (:class:`Chromium`, headless, driven over the DevTools
protocol on a pipe; :func:`open_in_chromium`, :func:`overflow`). A helper module, no tests:
the report's tests (tests/test_report.py, tests/test_sections.py, tests/test_priors.py) import it."""
from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import struct
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

class Page(HTMLParser):
    """Tags with their attributes, section ids, and the text of each section."""

    def __init__(self, text):
        super().__init__()
        self.tags, self.sections, self._section = [], {}, None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "section":
            self._section = attrs.get("id")
            self.sections[self._section] = ""

    def handle_data(self, data):
        if self._section is not None:
            self.sections[self._section] += data


def png_size(data: bytes):
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1280,900")


class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (stdlib only).

    ``--remote-debugging-pipe`` makes Chromium read commands on fd 3 and write replies and
    events on fd 4, as NUL-terminated JSON, so no WebSocket client or driver binary is needed.
    """

    def __init__(self, executable, profile: Path, log: Path, timeout=60.0):
        commands_r, self._commands = os.pipe()
        self._replies, replies_w = os.pipe()
        # Copies numbered >= 10, so that moving them to 3 and 4 cannot clobber one another; a
        # tiny Python trampoline does the move (dash's redirections take single-digit fds only).
        child_r, child_w = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (commands_r, replies_w))
        trampoline = "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); " \
                     "os.execv(sys.argv[3], sys.argv[3:])"
        with open(log, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-c", trampoline, str(child_r), str(child_w), executable,
                                          *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe",
                                          "about:blank"],
                                         pass_fds=(child_r, child_w), stdin=subprocess.DEVNULL,
                                         stdout=err, stderr=err)
        for fd in (commands_r, replies_w, child_r, child_w):
            os.close(fd)
        self.deadline = time.monotonic() + timeout
        self.events, self._replies_by_id, self._buffer, self._id = [], {}, b"", 0

    def send(self, method, params=None, session=None):
        """Send a command and return its result (raises on a protocol error)."""
        self._id += 1
        message = {"id": self._id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while self._id not in self._replies_by_id:
            self._pump()
        reply = self._replies_by_id.pop(self._id)
        if "error" in reply:
            raise RuntimeError(f"DevTools error for {method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method):
        """Wait until an event named ``method`` has arrived; return it."""
        while True:
            for event in self.events:
                if event.get("method") == method:
                    return event
            self._pump()

    def _pump(self):
        left = self.deadline - time.monotonic()
        if left <= 0 or not select.select([self._replies], [], [], left)[0]:
            raise TimeoutError("Chromium did not answer in time")
        chunk = os.read(self._replies, 1 << 16)
        if not chunk:
            raise RuntimeError("Chromium closed the DevTools pipe")
        self._buffer += chunk
        *messages, self._buffer = self._buffer.split(b"\0")
        for raw in messages:
            message = json.loads(raw)
            if "id" in message:
                self._replies_by_id[message["id"]] = message
            else:
                self.events.append(message)

    def close(self):
        try:
            os.write(self._commands, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            os.close(self._commands)
            os.close(self._replies)


# Resolves to what every figure looks like once decoded: size in pixels and on the page.
FIGURES_JS = """
Promise.all([...document.images].map(img => img.decode().then(() => true, () => false))).then(decoded => ({
  images: [...document.images].map((img, i) => {
    const box = img.getBoundingClientRect();
    return {decoded: decoded[i], complete: img.complete, natural: [img.naturalWidth, img.naturalHeight],
            box: [box.width, box.height], alt: img.alt};
  }),
  svgs: [...document.querySelectorAll("svg")].map(svg => {
    const box = svg.getBoundingClientRect();
    return {box: [box.width, box.height]};
  }),
  sections: [...document.querySelectorAll("section")].map(s => s.id),
  opening: [...document.body.children].slice(0, 4).map(e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "")),
  answerTop: document.getElementById("answer") ? document.getElementById("answer").getBoundingClientRect().top : null,
  // the first screen's table and figure: what a reader sees before scrolling
  answerTableBottom: document.querySelector("#answer table") ? document.querySelector("#answer table").getBoundingClientRect().bottom : null,
  answerFigureTop: document.querySelector("#answer figure img") ? document.querySelector("#answer figure img").getBoundingClientRect().top : null,
  answerOrder: [...(document.getElementById("answer") || document.body).children].map(e => e.tagName.toLowerCase()),
  details: [...document.querySelectorAll("section[id^=dataset] details")].map(d => [d.open, d.querySelector("summary").textContent]),
  title: document.title,
}))
"""


# What overflows sideways: the document, and every table against the box it sits in.
LAYOUT_JS = """
(() => {
  const root = document.documentElement;
  return {
    viewport: root.clientWidth,
    scrollWidth: root.scrollWidth,
    tables: [...document.querySelectorAll("table")].map(t => {
      const box = t.getBoundingClientRect(), holder = t.parentElement;
      return {section: t.closest("section") ? t.closest("section").id : "",
              head: [...t.querySelectorAll("th")].slice(0, 3).map(th => th.textContent).join(" | "),
              width: box.width, right: box.right, container: holder.getBoundingClientRect().width,
              scrolls: holder.scrollWidth > holder.clientWidth};
    }),
    images: [...document.images].map(img => ({alt: img.alt, right: img.getBoundingClientRect().right})),
  };
})()
"""
#: the window a reader on a laptop or a desktop has (issue: the leaderboard ran off its edge)
READING_WIDTH = 1400
#: the height of that window: what a reader sees before scrolling
SCREEN_HEIGHT = 900
#: pixels of the first screen's figure that must show above the fold (its start, not a sliver)
FIGURE_SHOWN = 60


def open_in_chromium(path: Path, tmp_path: Path, width: int | None = None) -> dict:
    """Load ``path`` in headless Chromium; return what :data:`FIGURES_JS` saw, the console and
    page errors, and every URL the page requested; with ``width``, the page is laid out in a
    viewport that many CSS pixels wide and ``layout`` holds what :data:`LAYOUT_JS` measured."""
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.skip("Chromium is not installed: install the Debian package 'chromium' "
                    "(apt-get install chromium) to run the report's browser check")
    log = tmp_path / "chromium.log"
    browser = Chromium(executable, tmp_path / "profile", log)
    layout = None
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            browser.send(f"{domain}.enable", session=session)
        if width is not None:
            browser.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": SCREEN_HEIGHT,
                                                                "deviceScaleFactor": 1, "mobile": False},
                         session=session)
        browser.send("Page.navigate", {"url": path.as_uri()}, session=session)
        browser.wait_event("Page.loadEventFired")
        result = browser.send("Runtime.evaluate", {"expression": FIGURES_JS, "awaitPromise": True,
                                                   "returnByValue": True}, session=session)
        if width is not None:
            measured = browser.send("Runtime.evaluate", {"expression": LAYOUT_JS, "returnByValue": True},
                                    session=session)
            assert "exceptionDetails" not in measured, measured
            layout = measured["result"]["value"]
    except (TimeoutError, RuntimeError) as exc:
        raise AssertionError(f"{exc}; Chromium log:\n{log.read_text(errors='replace')[-3000:]}") from None
    finally:
        browser.close()
    assert "exceptionDetails" not in result, result

    def is_error(event):
        method, params = event.get("method"), event.get("params", {})
        return (method == "Runtime.exceptionThrown"
                or (method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"))
                or (method == "Log.entryAdded" and params["entry"].get("level") == "error"))

    return {"page": result["result"]["value"], "errors": [e for e in browser.events if is_error(e)],
            "requests": [e["params"]["request"]["url"] for e in browser.events
                         if e.get("method") == "Network.requestWillBeSent"],
            "layout": layout}


def overflow(layout: dict) -> list:
    """What runs off sideways in a :data:`LAYOUT_JS` measurement: the document wider than the
    viewport, a table wider than its box or past the viewport's right edge, a figure past it."""
    found = []
    if layout["scrollWidth"] > layout["viewport"]:
        found.append(f"the page is {layout['scrollWidth']} px wide in a {layout['viewport']} px viewport")
    for t in layout["tables"]:
        if t["width"] > t["container"] + 0.5 or t["scrolls"] or t["right"] > layout["viewport"] + 0.5:
            found.append(f"table [{t['head']}] in #{t['section']}: {t['width']:.0f} px in a "
                         f"{t['container']:.0f} px box (right edge {t['right']:.0f})")
    found += [f"figure {i['alt']!r} ends at {i['right']:.0f} px" for i in layout["images"]
              if i["right"] > layout["viewport"] + 0.5]
    return found


