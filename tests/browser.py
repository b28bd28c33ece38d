"""Open a local HTML file in headless Chromium and report what a reader would see.

Chromium is driven over the DevTools protocol (a websocket, through tornado, which ipykernel
already requires). The report lists every image with its load state, the page's text, the ids
of its tables and figures, its cross-reference links, every console message and uncaught
exception, and failed resource loads. Runs as root with the flags this machine needs: no
sandbox, no GPU, no background networking, a fresh profile.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = (
    "--headless",
    "--window-size=1400,1000",  # a desktop browser window: the paper's column is 960 px wide
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--remote-allow-origins=*",
)

PAGE_REPORT_JS = r"""
(() => {
  const images = Array.from(document.images).map(img => ({
    src: img.getAttribute('src').slice(0, 40), complete: img.complete,
    width: img.naturalWidth, height: img.naturalHeight }));
  const ids = sel => Array.from(document.querySelectorAll(sel)).map(e => e.id);
  const links = Array.from(document.querySelectorAll('a[href^="#"]')).map(a => ({
    text: a.textContent, target: a.getAttribute('href').slice(1),
    resolves: document.getElementById(a.getAttribute('href').slice(1)) !== null }));
  const clipped = Array.from(document.querySelectorAll('table'))
    .filter(t => t.scrollWidth > t.clientWidth + 1 || t.getBoundingClientRect().right > window.innerWidth)
    .map(t => t.id || (t.closest('[id]') || {}).id || '(no id)');
  return JSON.stringify({ images, text: document.body.innerText, tables: ids('table[id]'),
                          figures: ids('figure[id]'), links, title: document.title, clipped_tables: clipped });
})()
"""


def find_chromium() -> str | None:
    """The Chromium executable, or None when it is not installed."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageReport:
    images: list[dict[str, Any]]
    text: str
    tables: list[str]
    figures: list[str]
    links: list[dict[str, Any]]
    title: str
    clipped_tables: list[str] = field(default_factory=list)
    """Tables wider than their box (they scroll or are cut off) or than the window."""
    console: list[dict[str, Any]] = field(default_factory=list)
    """Console messages and exceptions: ``{"level": ..., "text": ...}``."""
    screenshot: bytes = b""

    @property
    def errors(self) -> list[dict[str, Any]]:
        return [m for m in self.console if m["level"] in ("error", "exception")]


async def _inspect(ws_url: str, url: str, *, screenshot: bool, timeout: float) -> PageReport:
    from tornado.websocket import websocket_connect

    conn = await websocket_connect(ws_url, max_message_size=256 * 1024 * 1024)
    console: list[dict[str, Any]] = []
    next_id = 0
    pending: dict[int, asyncio.Future[Any]] = {}
    loaded = asyncio.get_running_loop().create_future()

    async def reader() -> None:
        while True:
            message = await conn.read_message()
            if message is None:
                return
            data = json.loads(message)
            if "id" in data and data["id"] in pending:
                future = pending.pop(data["id"])
                if "error" in data:
                    future.set_exception(RuntimeError(str(data["error"])))
                else:
                    future.set_result(data.get("result"))
                continue
            method = data.get("method")
            params = data.get("params", {})
            if method == "Runtime.consoleAPICalled":
                text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
                console.append({"level": "error" if params.get("type") in ("error", "assert") else params.get("type"),
                                "text": text})
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                console.append({"level": "exception", "text": details.get("text", "") + " "
                                + str(details.get("exception", {}).get("description", ""))})
            elif method == "Log.entryAdded":
                entry = params.get("entry", {})
                console.append({"level": entry.get("level"), "text": f"[{entry.get('source')}] {entry.get('text')}"})
            elif method == "Page.loadEventFired" and not loaded.done():
                loaded.set_result(True)

    async def call(method: str, **params: Any) -> Any:
        nonlocal next_id
        next_id += 1
        future = asyncio.get_running_loop().create_future()
        pending[next_id] = future
        await conn.write_message(json.dumps({"id": next_id, "method": method, "params": params}))
        return await asyncio.wait_for(future, timeout)

    task = asyncio.create_task(reader())
    try:
        for domain in ("Runtime", "Log", "Page"):
            await call(f"{domain}.enable")
        await call("Emulation.setDeviceMetricsOverride", width=1200, height=900, deviceScaleFactor=1, mobile=False)
        await call("Page.navigate", url=url)
        await asyncio.wait_for(loaded, timeout)
        await asyncio.sleep(0.3)  # late console messages
        result = await call("Runtime.evaluate", expression=PAGE_REPORT_JS, returnByValue=True)
        report = PageReport(**json.loads(result["result"]["value"]), console=console)
        if screenshot:
            import base64

            shot = await call("Page.captureScreenshot", format="png")
            report.screenshot = base64.b64decode(shot["data"])
        return report
    finally:
        task.cancel()
        conn.close()


def inspect_page(path: Path, *, screenshot: bool = False, timeout: float = 60.0) -> PageReport:
    """Load ``path`` in a fresh headless Chromium and report on the page."""
    chromium = find_chromium()
    if chromium is None:
        raise FileNotFoundError("chromium is not installed")
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        proc = subprocess.Popen(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
             "--remote-debugging-address=127.0.0.1", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: every helper process can be stopped with it
        )
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            deadline = time.monotonic() + timeout
            while not (port_file.is_file() and len(port_file.read_text().split()) >= 2):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"chromium did not open its DevTools port (exit code {proc.poll()})")
                time.sleep(0.05)
            port = int(port_file.read_text().split()[0])
            targets: list[dict[str, Any]] = []
            while not any(t.get("type") == "page" for t in targets):
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as response:
                        targets = json.loads(response.read())
                except OSError:  # the DevTools server may not accept connections yet
                    targets = []
                if time.monotonic() > deadline:
                    raise RuntimeError("chromium opened no page target")
                time.sleep(0.05)
            page = next(t for t in targets if t.get("type") == "page")
            return asyncio.run(_inspect(page["webSocketDebuggerUrl"], path.resolve().as_uri(),
                                        screenshot=screenshot, timeout=timeout))
        finally:
            _stop_group(proc)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop chromium and every process it started (they write into the profile until they exit, so the
    profile can be removed only after the last one is gone)."""
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            proc.poll()  # reap the leader, so the group empties
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
    proc.wait()


def pdf_pages(pdf: Path, out_dir: Path, *, dpi: int = 40) -> list[Path]:
    """Rasterise every page of ``pdf`` with pdftoppm; the PNG files in page order."""
    if shutil.which("pdftoppm") is None:
        raise FileNotFoundError("pdftoppm is not installed")
    subprocess.run(["pdftoppm", "-r", str(dpi), "-png", str(pdf), str(out_dir / "page")], check=True,
                   env={**os.environ, "LC_ALL": "C"})
    return sorted(out_dir.glob("page-*.png"))


def pdf_overprinted_words(pdf: Path) -> list[tuple[int, str, str]]:
    """(page, word, word) for every two words of a page whose boxes overlap (``pdftotext -bbox``):
    text set on top of other text, as a table column too narrow for its content gives."""
    import html
    import re

    out = subprocess.run(["pdftotext", "-bbox", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    found = []
    for number, page in enumerate(out.split("<page ")[1:], 1):
        words = [(float(a), float(b), float(c), float(d), html.unescape(w)) for a, b, c, d, w in re.findall(
            r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">(.*?)</word>', page)]
        for i, (x0, y0, x1, y1, word) in enumerate(words):
            for a0, b0, a1, b1, other in words[i + 1:]:
                if min(x1, a1) - max(x0, a0) > 1.0 and min(y1, b1) - max(y0, b0) > 0.5 * min(y1 - y0, b1 - b0):
                    found.append((number, word, other))
    return found
