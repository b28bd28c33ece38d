"""DVC's dotted parameter keys over parsed YAML documents."""

from __future__ import annotations

from typing import Any, Mapping


def param_at(doc: Any, dotted: str) -> Any:
    """The value of DVC's dotted parameter key ``a.b.c`` in a parsed YAML document (a key that itself holds
    dots matches first); KeyError if absent. Results files take ``/``-paths instead
    (:func:`uaprobe.publishing.provenance.values.lookup`)."""
    if isinstance(doc, Mapping) and dotted in doc:
        return doc[dotted]
    head, _, rest = dotted.partition(".")
    if not rest or not isinstance(doc, Mapping) or head not in doc:
        raise KeyError(dotted)
    return param_at(doc[head], rest)


def differing(a: Any, b: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """Every leaf where two parsed YAML/JSON values differ: (dotted key under ``prefix``, value in a, value in b)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return [d for k in sorted(set(a) | set(b), key=str)
                for d in differing(a.get(k), b.get(k), f"{prefix}.{k}" if prefix else str(k))]
    return [] if a == b else [(prefix, a, b)]
