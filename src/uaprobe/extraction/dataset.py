"""Load and validate the statement-pair dataset.

The file maps each category name to ``{"description": str, "pairs": [[A, B], ...]}`` (other keys,
such as the original study's ``expected_effect``, are kept but not used). Statements are laid out
in a fixed order -- categories in file order, pairs in file order, A before B -- which is the row
order of every array the pipeline writes.

Validation happens before any model loads. Every error is a :class:`~uaprobe.errors.DatasetError`
that names the file, the JSON path (``business.pairs[12][1]``) and what was expected. Rules:

- the file is UTF-8 JSON; a leading UTF-8 byte-order mark is skipped (logged);
- a key repeated in one object (JSON parsers silently keep the last one) is an error;
- at least :data:`MIN_CATEGORIES` categories, each with at least :data:`MIN_PAIRS_PER_CATEGORY`
  pairs; every pair is a list of two non-empty strings;
- A and B of a pair must differ (ignoring surrounding whitespace); a pair repeated anywhere in the
  file, or repeated with A and B swapped, is an error;
- a statement that appears in more than one pair is allowed but logged as a warning (it enters the
  uniformity of its side twice);
- text is used verbatim; it must be valid Unicode without NUL characters (HDF5 strings cannot hold
  them);
- statements longer than the model's context (or ``extract.max_length``) are refused by the extract
  stage once the tokenizer is known, before any forward pass.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uaprobe.errors import DatasetError, unreadable, unusable

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


class _Object(dict):
    """A decoded JSON object that remembers the keys it saw more than once."""

    repeated: tuple[str, ...] = ()


def _object_hook(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object()
    repeated = []
    for key, value in pairs:
        if key in obj:
            repeated.append(key)
        obj[key] = value
    obj.repeated = tuple(repeated)
    return obj


def _check_repeated(path: Path, obj: Any, where: str) -> None:
    repeated = getattr(obj, "repeated", ())
    if repeated:
        key = repeated[0]
        place = key if where == "top level" else f"{where}.{key}"
        raise _fail(path, place, f"key {key!r} appears more than once in the same object; JSON keeps only the "
                    "last one, so the earlier entries would be lost silently. Merge them into one entry")


def _text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored as a statement, or None."""
    if "\x00" in text:
        return "contains a NUL character (\\u0000), which HDF5 strings cannot hold; remove it"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"contains a lone surrogate {text[exc.start]!r} at character {exc.start} "
                "(an unpaired \\ud800-\\udfff escape); it is not valid Unicode text")
    return None


def parse_dataset(raw: Any, *, path: Path, sha256: str = "", min_categories: int = MIN_CATEGORIES) -> Dataset:
    """Validate an already decoded JSON document; errors name the JSON path and what was expected.
    ``min_categories``: a control set of pairs, analysed over pairs only, may have fewer categories."""
    if not isinstance(raw, dict) or not raw:
        raise _fail(path, "top level", "expected a non-empty object mapping category name -> category, got "
                    + (f"{type(raw).__name__}" if not isinstance(raw, dict) else "an empty object"))
    _check_repeated(path, raw, "top level")
    if len(raw) < min_categories:
        raise _fail(path, "top level", f"{len(raw)} categories; a correlation across categories needs "
                    f"at least {min_categories}")
    categories, descriptions, statements = [], [], []
    seen: dict[tuple[str, str], str] = {}
    first_use: dict[str, str] = {}
    pair_index = 0
    for name, body in raw.items():
        if not isinstance(name, str) or not name.strip():
            raise _fail(path, repr(name), "category names must be non-empty strings")
        problem = _text_problem(name)
        if problem:
            raise _fail(path, repr(name), f"category name {problem}")
        if not isinstance(body, dict):
            raise _fail(path, name, f"expected an object with 'description' and 'pairs', got {type(body).__name__}")
        _check_repeated(path, body, name)
        for key in ("description", "pairs"):
            if key not in body:
                raise _fail(path, name, f"missing key {key!r}; expected an object with 'description' (a string) "
                            "and 'pairs' (a list of [A, B] string pairs)")
        if not isinstance(body["description"], str):
            raise _fail(path, f"{name}.description", f"expected a string, got {type(body['description']).__name__}")
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
                problem = _text_problem(text)
                if problem:
                    raise _fail(path, f"{where}[{j}]", problem)
            a, b = pair
            if a.strip() == b.strip():
                raise _fail(path, where, "A and B are identical; a pair must contrast two statements")
            key = (a.strip(), b.strip())
            if key in seen:
                raise _fail(path, where, f"duplicates {seen[key]}; remove one of them")
            if key[::-1] in seen:
                raise _fail(path, where, f"is {seen[key[::-1]]} with A and B swapped; the two contradict each "
                            "other, keep one")
            seen[key] = where
            for j, text in enumerate(key):
                if text in first_use:
                    log.warning("%s: statement %s repeats %s; it is kept (repeated within one side of a category, it "
                                "counts twice in that side's uniformity)",
                                path, f"{where}[{j}]", first_use[text])
                else:
                    first_use[text] = f"{where}[{j}]"
            statements.append(Statement(a, name, pair_index, 0, i))
            statements.append(Statement(b, name, pair_index, 1, i))
            pair_index += 1
        categories.append(name)
        descriptions.append(body["description"])
    return Dataset(tuple(categories), tuple(descriptions), tuple(statements), sha256)


def load_dataset(path: str | Path) -> Dataset:
    """Read, decode and validate the dataset file."""
    path = Path(path)
    raw, sha256 = _read_json(path)
    return parse_dataset(raw, path=path, sha256=sha256)


def load_control(path: str | Path) -> Dataset:
    """Read a control set of pairs (``data/neutral_control.json``): its ``categories`` object has the
    layout of the dataset (at least one category); other top-level keys (source, published
    numbers) are kept in the file, not used."""
    path = Path(path)
    raw, sha256 = _read_json(path)
    if not isinstance(raw, dict) or "categories" not in raw:
        raise DatasetError(f"{path}: top level: missing key 'categories'; expected "
                           '{"categories": {"category": {"description": ..., "pairs": [[A, B], ...]}}}')
    _check_repeated(path, raw, "top level")
    return parse_dataset(raw["categories"], path=path, sha256=sha256, min_categories=1)


def _read_json(path: Path) -> tuple[Any, str]:
    """The decoded JSON document of a dataset-like file and the sha256 of its bytes."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"{path}: not found; check `dataset` in dvc.yaml or pass --dataset") from None
    except OSError as exc:
        raise DatasetError(unreadable(path, exc, "the dataset", "pass a readable JSON file with --dataset")) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: byte {exc.start} is not UTF-8; re-save the file as UTF-8") from None
    if text.startswith("\ufeff"):
        log.info("%s: skipping the UTF-8 byte-order mark at the start of the file", path)
        text = text[1:]
    try:
        raw = json.loads(text, object_pairs_hook=_object_hook)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except (RecursionError, ValueError) as exc:
        raise DatasetError(unusable(path, exc, "JSON dataset",
                                    'expected {"category": {"description": ..., "pairs": [[A, B], ...]}}')) from None
    return raw, hashlib.sha256(data).hexdigest()


def load_prompts(path: str | Path) -> list[str]:
    """The anisotropy prompts: one per non-empty line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").removeprefix("\ufeff").splitlines()
    except FileNotFoundError:
        raise DatasetError(f"{path}: not found; pass the prompts file with --prompts") from None
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: byte {exc.start} is not UTF-8; re-save the file as UTF-8") from None
    except OSError as exc:
        raise DatasetError(unreadable(path, exc, "the prompts", "pass a readable text file with --prompts")) from None
    prompts = [line.strip() for line in lines if line.strip()]
    for number, line in enumerate(lines, start=1):
        problem = _text_problem(line)
        if problem:
            raise DatasetError(f"{path}: line {number}: {problem}")
    if len(prompts) < 2:
        raise DatasetError(f"{path}: {len(prompts)} prompt(s); the anisotropy profile needs at least 2")
    return prompts
