"""What ``uaprobe review`` found, as data: each check it ran (:class:`Check`) and the whole review
(:class:`Review`) with its verdict; :mod:`uaprobe.repro.review` makes it, :mod:`uaprobe.repro.review_page` writes it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from uaprobe.repro import recompute, recorded


@dataclass
class Check:
    """One step of the review: ``passed`` is None when it could not be run (``summary`` says why)."""

    name: str
    passed: bool | None
    summary: str
    details: list[str] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class Review:
    machine: dict[str, Any]
    commit: str
    checks: list[Check] = field(default_factory=list)
    outputs: list[recorded.OutputRow] = field(default_factory=list)
    """Every output dvc.lock records, with what the review did with it."""
    stages: list[recompute.StageRun] = field(default_factory=list)
    started: str = ""
    """When the review started (UTC, ISO 8601)."""

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks) and all(o.passed for o in self.outputs)

    @property
    def verdict(self) -> str:
        if self.passed:
            return "AGREES: " + self.proven()
        failed = [c.name for c in self.checks if c.passed is False]
        unchecked = [c.name for c in self.checks if c.passed is None]
        bad = [o for o in self.outputs if not o.passed]
        parts = ([f"failed: {', '.join(failed)}"] if failed else []) + \
            ([f"not checked: {', '.join(unchecked)}"] if unchecked else [])
        if bad:
            shown = "; ".join(f"{o.path} {o.describe()}" for o in bad[:3])
            parts.append(f"{len(bad)} output(s) not the bytes dvc.lock records: {shown}"
                         + (f"; and {len(bad) - 3} more" if len(bad) > 3 else ""))
        return "DOES NOT AGREE: " + "; ".join(parts)

    def proven(self) -> str:
        """What was recomputed, in one sentence."""
        if not self.outputs:
            return "every output is the bytes dvc.lock records, and this machine reproduces them"
        extractions = [o for o in self.outputs if o.stage.split("@", 1)[0] == recompute.EXTRACTION]
        results = [o for o in self.outputs if o not in extractions]
        what = "every result recomputed from the pulled extractions"
        pulled = sorted({o.stage for o in extractions if o.status == recorded.PULLED})
        within = any(o.status == recorded.WITHIN for o in extractions)
        if not extractions:
            what = "every result recomputed"
        elif not pulled:
            what += ", and the extractions recomputed from the models"
            what += " (the GPU's within tolerance)" if within else ""
        elif len(pulled) < len({o.stage for o in extractions}):
            what += f", and the extractions recomputed from the models except {', '.join(pulled)} (pulled and " \
                    "verified, not recomputed: why below)"
        else:
            what += "; the extractions pulled and verified, not recomputed (why below)"
        if not results:
            what = what.replace("every result recomputed from the pulled extractions", "no stage but the extractions")
        return f"{what}: every recomputed output is the bytes dvc.lock records, on this machine"


__all__ = ["Check", "Review"]
