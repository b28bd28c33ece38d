"""Load and validate the statement-pair dataset.

The file maps each category name to ``{"description": str, "pairs": [[A, B], ...]}`` (other keys,
such as the original study's ``expected_effect``, are kept but not used). Statements are laid out
in a fixed order -- categories in file order, pairs in file order, A before B -- which is the row
order of every array the pipeline writes.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uaprobe.errors import DatasetError

log = logging.getLogger(__name__)

MIN_PAIRS_PER_CATEGORY = 2
"""A uniformity (mean pairwise cosine) needs at least two statements per side."""
MIN_CATEGORIES = 3
"""A correlation across categories needs at least three points."""


@dataclass(frozen=True)
class Statement:
    text: str
    category: str
    pair: int
    """Index of the pair over the whole dataset (0..n_pairs-1)."""
    side: int
    """0 for statement A, 1 for statement B."""
    index_in_category: int
    """Position of the pair in its category's list."""

    @property
    def json_path(self) -> str:
        """Where the statement sits in the file, e.g. ``business.pairs[12][1]``."""
        return f"{self.category}.pairs[{self.index_in_category}][{self.side}]"


@dataclass(frozen=True)
class Dataset:
    categories: tuple[str, ...]
    descriptions: tuple[str, ...]
    statements: tuple[Statement, ...]
    sha256: str

    @property
    def n_pairs(self) -> int:
        return len(self.statements) // 2

    @property
    def texts(self) -> list[str]:
        return [s.text for s in self.statements]


def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fail(path: Path, where: str, message: str) -> DatasetError:
    return DatasetError(f"{path}: {where}: {message}")


def parse_dataset(raw: Any, *, path: Path, sha256: str = "") -> Dataset:
    """Validate an already decoded JSON document; errors name the JSON path and what was expected."""
    if not isinstance(raw, dict) or not raw:
        raise _fail(path, "top level", "expected a non-empty object mapping category name -> category")
    if len(raw) < MIN_CATEGORIES:
        raise _fail(path, "top level", f"{len(raw)} categories; a correlation across categories needs "
                    f"at least {MIN_CATEGORIES}")
    categories, descriptions, statements = [], [], []
    seen: dict[tuple[str, str], str] = {}
    pair_index = 0
    for name, body in raw.items():
        if not name.strip():
            raise _fail(path, repr(name), "category names must be non-empty")
        if not isinstance(body, dict):
            raise _fail(path, name, f"expected an object with 'description' and 'pairs', got {type(body).__name__}")
        for key in ("description", "pairs"):
            if key not in body:
                raise _fail(path, name, f"missing key {key!r}")
        if not isinstance(body["description"], str):
            raise _fail(path, f"{name}.description", "expected a string")
        pairs = body["pairs"]
        if not isinstance(pairs, list):
            raise _fail(path, f"{name}.pairs", f"expected a list of [A, B] pairs, got {type(pairs).__name__}")
        if len(pairs) < MIN_PAIRS_PER_CATEGORY:
            raise _fail(path, f"{name}.pairs", f"{len(pairs)} pair(s); a uniformity needs at least "
                        f"{MIN_PAIRS_PER_CATEGORY} statements per side")
        for i, pair in enumerate(pairs):
            where = f"{name}.pairs[{i}]"
            if not isinstance(pair, list) or len(pair) != 2:
                raise _fail(path, where, "expected a list of exactly two strings [A, B]")
            for j, text in enumerate(pair):
                if not isinstance(text, str) or not text.strip():
                    raise _fail(path, f"{where}[{j}]", f"expected a non-empty string, got {text!r}")
            a, b = pair
            if a.strip() == b.strip():
                raise _fail(path, where, "A and B are identical; a pair must contrast two statements")
            key = (a.strip(), b.strip())
            if key in seen:
                raise _fail(path, where, f"duplicates {seen[key]}; remove one of them")
            seen[key] = where
            statements.append(Statement(a, name, pair_index, 0, i))
            statements.append(Statement(b, name, pair_index, 1, i))
            pair_index += 1
        categories.append(name)
        descriptions.append(body["description"])
    return Dataset(tuple(categories), tuple(descriptions), tuple(statements), sha256)


def load_dataset(path: str | Path) -> Dataset:
    """Read, decode and validate the dataset file."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"{path}: not found; check `dataset` in dvc.yaml or pass --dataset") from None
    try:
        raw = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: byte {exc.start} is not UTF-8; re-save the file as UTF-8") from None
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    return parse_dataset(raw, path=path, sha256=hashlib.sha256(data).hexdigest())


def load_prompts(path: str | Path) -> list[str]:
    """The anisotropy prompts: one per non-empty line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise DatasetError(f"{path}: not found") from None
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: byte {exc.start} is not UTF-8; re-save the file as UTF-8") from None
    prompts = [line.strip() for line in lines if line.strip()]
    if len(prompts) < 2:
        raise DatasetError(f"{path}: {len(prompts)} prompt(s); the anisotropy profile needs at least 2")
    return prompts
