"""The ``uaprobe`` command: check a checkout's outputs against its ``dvc.lock``, show provenance.

    uaprobe verify [--repo DIR]        every output matches dvc.lock, every extraction matches its inputs
    uaprobe provenance FILE.h5         what an extraction file was made from
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from uaprobe.dataset import sha256_of
from uaprobe.errors import UAProbeError

log = logging.getLogger("uaprobe")


def lock_mismatches(repo: Path) -> dict[str, Any]:
    """DVC's own comparison of the workspace with ``dvc.lock`` (outputs, deps, params): {} when all match."""
    from dvc.repo import Repo

    with Repo(str(repo)) as dvc_repo:
        return dvc_repo.status()


def extraction_mismatches(repo: Path) -> list[str]:
    """Extraction files whose recorded dataset or prompt hashes differ from the files in the checkout."""
    import h5py

    problems = []
    prompts = repo / "data" / "anisotropy_prompts.txt"
    for h5 in sorted((repo / "data" / "embeddings").glob("*.h5")):
        with h5py.File(h5, "r") as fh:
            attrs = dict(fh.attrs)
        # <model>.control.h5 holds the control pairs (the extract stage's --control)
        dataset = repo / "data" / ("neutral_control.json" if h5.name.endswith(".control.h5") else "dataset.json")
        for key, path in (("dataset_sha256", dataset), ("prompts_sha256", prompts)):
            recorded = attrs.get(key)
            if isinstance(recorded, bytes):
                recorded = recorded.decode()
            if recorded != sha256_of(path):
                problems.append(f"{h5}: {key} {recorded} does not match {path}")
        if not attrs.get("complete"):
            problems.append(f"{h5}: not marked complete")
    return problems


def verify(repo: Path) -> int:
    status = lock_mismatches(repo)
    problems = extraction_mismatches(repo)
    for stage, changes in sorted(status.items()):
        print(f"{stage}: {json.dumps(changes, sort_keys=True)}")
    for problem in problems:
        print(problem)
    if status or problems:
        print("outputs do NOT match dvc.lock and their inputs: `dvc pull` (reviewer) or `dvc repro` (author)")
        return 1
    print("every output matches dvc.lock; every extraction file matches the dataset and prompts it records")
    return 0


def provenance(path: Path) -> int:
    import h5py

    if not path.is_file():
        raise UAProbeError(f"{path}: not found")
    with h5py.File(path, "r") as fh:
        for key in sorted(fh.attrs):
            value = fh.attrs[key]
            print(f"{key}: {value.decode() if isinstance(value, bytes) else value}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="uaprobe", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_verify = sub.add_parser("verify", help="check outputs against dvc.lock and the extraction inputs")
    p_verify.add_argument("--repo", type=Path, default=Path("."))
    p_prov = sub.add_parser("provenance", help="print an extraction file's provenance attributes")
    p_prov.add_argument("file", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    try:
        if args.command == "verify":
            return verify(args.repo)
        return provenance(args.file)
    except UAProbeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
