"""Snapshots of the manuscript's generated tables and phrases from one fixed synthetic run.

Every table and phrase is rendered to plain text (each value's markup replaced by the text it shows)
and compared with ``tests/snapshots/<name>.md``. A change to a builder, a format or an analysis shows
here as a diff of what the paper would print. After an intended change, rewrite the snapshots with
``UAPROBE_UPDATE_SNAPSHOTS=1 pytest tests/test_snapshots.py`` and review the diff before committing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from uaprobe.publishing.prose.panel import abstract
from uaprobe.publishing.prose.category import curve
from uaprobe.publishing.prose.panel import design
from uaprobe.publishing.prose.category import direction
from uaprobe.publishing.prose.category import findings
from uaprobe.publishing.prose.pairs import pair_family
from uaprobe.publishing.prose.pairs import pair_findings
from uaprobe.publishing.prose.category import phrases
from uaprobe.publishing.prose.primitives import study
from uaprobe.publishing.prose.tables import manuscript as tables
from uaprobe.publishing.prose.tables import original as tables_original
from uaprobe.publishing.provenance.outputs import Outputs, load_outputs
from uaprobe.publishing.provenance.values import plain_text

SNAPSHOTS = Path(__file__).parent / "snapshots"

BUILDERS: dict[str, Callable[[Outputs], str]] = {
    **{name: getattr(tables, name) for name in (
        "model_panel_table", "layer_table", "validation_table", "validation_summary_table", "scaling_table",
        "bins_table", "anisotropy_table", "sink_table", "confound_table")},
    **{name: getattr(tables_original, name) for name in ("option_b_table", "phase_table", "control_table")},
    **{name: getattr(phrases, name) for name in (
        "sink_exclusion_phrase", "position0_phrase", "published_comparison",
        "specification_significance_phrase", "panel_phrase", "inversion_phrase")},
    **{name: getattr(findings, name) for name in (
        "length_phrase", "confound_verdict", "conclusion_phrase", "length_limitation")},
    **{name: getattr(curve, name) for name in ("universe_phrase", "primary_phrase", "layer_zero_phrase",
                                                "below_alpha_phrase")},
    **{name: getattr(design, name) for name in ("power_table", "power_phrase", "original_phrase", "pythia_phrase",
                                                 "checks_phrase",
                                                 "scope_phrase", "length_matched_table", "length_matched_phrase",
                                                 "mixed_phrase")},
    **{name: getattr(direction, name) for name in (
        "direction_phrase", "standardized_phrase", "representation_r_phrase",
        "representation_table", "representation_change", "layer_zero_representation_phrase")},
    **{name: getattr(pair_findings, name) for name in (
        "old_knn_phrase", "pair_table", "pooling_limitation")},
    **{name: getattr(pair_family, name) for name in ("family_phrase", "family_conclusion", "family_table",
                                                      "suppression_phrase")},
    **{name: getattr(abstract, name) for name in ("abstract", "layer_zero_r_phrase")},
    **{name: getattr(study, name) for name in ("dataset_sentence", "panel_sentence", "layer_test_phrase")},
}


@pytest.fixture(scope="module")
def out(synthetic_tree: Path) -> Outputs:
    return load_outputs(synthetic_tree)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_generated_text_matches_its_snapshot(out: Outputs, name: str) -> None:
    text = plain_text(BUILDERS[name](out)).rstrip("\n") + "\n"
    path = SNAPSHOTS / f"{name}.md"
    if os.environ.get("UAPROBE_UPDATE_SNAPSHOTS") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path.name}: no snapshot; write it with UAPROBE_UPDATE_SNAPSHOTS=1"
    assert text == path.read_text(encoding="utf-8"), f"{name} changed; review, then UAPROBE_UPDATE_SNAPSHOTS=1"


def test_every_snapshot_has_its_builder() -> None:
    assert {p.stem for p in SNAPSHOTS.glob("*.md")} == set(BUILDERS)
