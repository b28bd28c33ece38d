"""``review.html`` and ``review.json``: what ``uaprobe review`` proved, for a person and for a machine.

The page escapes every string it shows (paths, commands, a stage's log, the data's own text that a difference may
quote). The certificate holds the commit, the machine and its fingerprint result, uaprobe's version, when the review
ran and how long each step and stage took, every output with its md5 and status (and, for a directory, each of its
files that differs), and the verdict.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from uaprobe.repro import recorded
from uaprobe.repro.review_record import Review

CSS = ("body{font-family:sans-serif;max-width:80em;margin:2em auto}td,th{text-align:left;padding:.15em .6em;"
       "vertical-align:top}code,pre{font-size:.85em}pre{white-space:pre-wrap}.FAILED{color:#b00}.agrees{color:#070}"
       ".pulled{color:#850}")
EXPLAINED = (
    "<p>Every stage of <code>dvc.yaml</code> but the extractions was run again by its own command, in a scratch copy "
    "of this checkout, from the pulled extractions; each extraction was run again from its model where the model "
    "could be had. Each file a stage wrote is compared with the md5 <code>dvc.lock</code> records: "
    "<em>recomputed, same bytes</em> proves that the committed code and parameters compute exactly the recorded "
    "output on this machine. An extraction recorded on a GPU (bf16 kernels) is compared within <code>uaprobe verify "
    "--against</code>'s tolerance, not by bytes (<em>recomputed, within tolerance</em>). <em>Pulled and verified, not "
    "recomputed</em>: its bytes are the recorded ones (re-hashed), but this review did not compute them.</p>")


def _css_class(status: str) -> str:
    return {recorded.SAME: "agrees", recorded.WITHIN: "agrees", recorded.PULLED: "pulled"}.get(status, "FAILED")


def html_page(review: Review) -> str:
    def e(text: object) -> str:
        return html.escape(str(text))

    ok = {True: "agrees", False: "FAILED", None: "not checked"}
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8"><title>uaprobe review</title>',
             f"<style>{CSS}</style></head><body>", "<h1>uaprobe review</h1>",
             f'<p class="{"agrees" if review.passed else "FAILED"}"><strong>{e(review.verdict)}</strong></p>',
             "<h2>Machine and commit</h2><table>"]
    parts += [f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in review.machine.items()]
    parts += [f"<tr><th>commit</th><td><code>{e(review.commit)}</code></td></tr>",
              f"<tr><th>started</th><td>{e(review.started)}</td></tr></table>", "<h2>Checks</h2><table>"]
    parts += [f'<tr><th>{e(c.name)}</th><td class="{ok[c.passed]}">{ok[c.passed]}</td><td>{e(c.summary)}</td>'
              f"<td>{c.seconds:.1f} s</td></tr>" for c in review.checks]
    parts.append("</table>")
    if review.stages:
        parts.append("<h2>Stages recomputed</h2><table><tr><th>stage</th><th>command</th><th>exit</th><th>time</th>"
                     "</tr>")
        parts += [f'<tr><td><code>{e(r.stage.name)}</code></td><td><code>{e(r.stage.cmd)}</code></td>'
                  f'<td class="{"agrees" if r.code == 0 else "FAILED"}">{e(r.code)}</td><td>{r.seconds:.1f} s</td></tr>'
                  for r in review.stages]
        parts.append("</table>")
    parts.append("<h2>Every output dvc.lock records</h2>" + EXPLAINED +
                 "<table><tr><th>output</th><th>md5 (dvc.lock)</th><th>stage</th><th>found</th></tr>")
    for o in review.outputs:
        cell = e(o.status) + (f": {e(o.why)}" if o.why else "")
        if o.files and o.status == recorded.DIFFERS:
            cell += "<ul>" + "".join(f"<li><code>{e(f.path)}</code>: {e(f.difference.summary if f.difference else '')}"
                                     + ("<pre>" + e("\n".join(f.difference.details)) + "</pre>"
                                        if f.difference and f.difference.details else "") + "</li>"
                                     for f in o.files) + "</ul>"
        parts.append(f'<tr><td><code>{e(o.path)}</code></td><td><code>{e(o.md5)}</code></td><td>{e(o.stage)}</td>'
                     f'<td class="{_css_class(o.status)}">{cell}</td></tr>')
    parts.append("</table>")
    for c in review.checks:
        if c.details:
            parts.append(f"<h3>{e(c.name)}</h3><pre>{e(chr(10).join(c.details))}</pre>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def certificate(review: Review, root: Path) -> str:
    """``review.json``: the review as data (sorted keys, one trailing newline)."""
    from uaprobe import __version__

    fingerprint = next((c for c in review.checks if c.name == "fingerprint"), None)
    doc: dict[str, Any] = {
        "uaprobe_version": __version__,
        "commit": review.commit,
        "repository": root.name,
        "started": review.started,
        "machine": review.machine,
        "fingerprint": None if fingerprint is None else {"passed": fingerprint.passed, "summary": fingerprint.summary},
        "checks": [{"name": c.name, "passed": c.passed, "summary": c.summary, "seconds": round(c.seconds, 3)}
                   for c in review.checks],
        "stages": [{"name": r.stage.name, "cmd": r.stage.cmd, "exit": r.code, "seconds": round(r.seconds, 3)}
                   for r in review.stages],
        "outputs": [{"path": o.path, "md5": o.md5, "stage": o.stage, "status": o.status, "why": o.why,
                     "recomputed_md5": o.recomputed,
                     "files": [{"path": f.path, "md5": f.md5, "recomputed_md5": f.recomputed, "status": f.status,
                                "difference": None if f.difference is None else
                                {"summary": f.difference.summary, "details": f.difference.details}}
                               for f in o.files]}
                    for o in review.outputs],
        "verdict": {"passed": review.passed, "text": review.verdict},
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


__all__ = ["certificate", "html_page"]
