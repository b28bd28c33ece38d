"""docs/performance.md's figures agree with the results files of bench/compare.py that they cite."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import report  # noqa: E402  (bench/report.py)

REPO = Path(__file__).resolve().parents[1]


def record(seconds: float = 12.5) -> dict:
    size = {"pairs": 230, "layers": "all", "seconds": seconds, "previous_seconds": 12.0, "ratio": seconds / 12.0,
            "runs": {"this": [seconds], "previous": [12.0]}}
    return {"cpu_model": "Some CPU", "cores": 2, "commit": "0" * 12, "against": "1" * 12, "embeddings": "m.h5",
            "rounds": 1, "sizes": [size]}


def test_every_generated_block_of_the_performance_page_is_its_results_file_rendered():
    text = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    cited = report.blocks(text)
    assert cited, "docs/performance.md quotes no results file of bench/compare.py"
    for path, body in cited:
        assert (REPO / path).is_file(), f"docs/performance.md cites {path}, which does not exist"
        assert body == report.render(json.loads((REPO / path).read_text(encoding="utf-8"))), (
            f"docs/performance.md's figures from {path} are stale: run python bench/report.py")


def test_every_results_file_is_quoted_by_the_performance_page():
    text = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    cited = {path for path, _ in report.blocks(text)}
    for path in sorted((REPO / "bench" / "results").glob("*.json")):
        assert str(path.relative_to(REPO)) in cited, f"{path.name} is not quoted in docs/performance.md"


def test_a_changed_figure_is_caught_and_rewritten(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps(record(12.5)), encoding="utf-8")
    text = "intro\n<!-- bench: r.json -->\n" + report.render(record(12.5)) + "<!-- end bench -->\nafter\n"
    assert report.rewrite(text, root=tmp_path) == text
    (tmp_path / "r.json").write_text(json.dumps(record(13.5)), encoding="utf-8")
    new = report.rewrite(text, root=tmp_path)
    assert new != text and "13.5 s" in new and "12.5 s" not in new
    assert new.startswith("intro\n") and new.endswith("<!-- end bench -->\nafter\n")


def loop_record(edit: float = 40.0) -> dict:
    def code(commit: str, total: float) -> dict:
        stages = {"analyze": total - 12.0, "compare": 2.0, "figures": 6.0, "paper": 4.0}
        run = {"seconds": total, "stages": stages, "ran": ["analyze@a", "compare", "figures", "paper"]}
        manuscript = {"seconds": 9.0, "stages": {"paper": 8.0}, "ran": ["paper"]}
        return {"commit": commit, "edit": {"seconds": total, "stages": stages},
                "manuscript": {"seconds": 9.0, "stages": {"analyze": 0.0, "compare": 0.0, "figures": 0.0,
                                                          "paper": 8.0}},
                "runs": {"edit": [run], "manuscript": [manuscript]}}

    return {"benchmark": "loop", "cpu_model": "Some CPU", "cores": 2, "rounds": 1, "load_average": [1.0, 2.5],
            "edit": "analysis.preference mean -> sum", "codes": {"this": code("0" * 12, edit),
                                                                 "previous": code("1" * 12, 80.0)},
            "ratio": {"edit": edit / 80.0, "manuscript": 1.0}}


def test_a_loop_results_file_renders_the_issue_line_and_a_row_per_stage():
    text = report.render(loop_record(40.0))
    assert ("This code: `edit loop: 40.0 s (analyze 28.0 s, compare 2.0 s, figures 6.0 s, paper 4.0 s); "
            "manuscript edit: 9.0 s`") in text
    assert "| edit loop, `dvc repro` | 40.0 s | 80.0 s | 0.50x | 40.0; 80.0 |" in text
    assert "| figures | 6.0 s | 6.0 s | 1.00x | 6.0; 6.0 |" in text
    assert "| manuscript edit, `dvc repro` | 9.0 s | 9.0 s | 1.00x | 9.0; 9.0 |" in text
    assert "load average 1.0 to 2.5" in text
