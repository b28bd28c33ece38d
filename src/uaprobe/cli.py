"""The ``uaprobe`` command: check a checkout's outputs against its ``dvc.lock``, show provenance.

    uaprobe verify [--repo DIR]        every byte of every output matches dvc.lock (re-hashed, not trusted),
                                       every extraction matches its inputs, every results file its params
    uaprobe verify --cache             ... and every cache object dvc.lock names
    uaprobe verify --remote NAME       ... and every object on the DVC remote NAME
    uaprobe verify --against REV|DIR   every number of the metrics/results/plots files within a tolerance
    uaprobe provenance FILE.h5         what an extraction file was made from
    uaprobe fingerprint                whether this machine computes the bytes the repository records
    uaprobe review                     the reviewer's whole check (pull, fingerprint, verify workspace, cache and
                                       remote, every stage recomputed in a scratch copy and its bytes compared),
                                       written to review.html and review.json; exit 0 if all agree
    uaprobe paper-diff REV [REV2]      every number of the paper compared between two revisions
                                       (REV2: the working tree), written to paper/_output/diff.html
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from uaprobe.repro import numdiff, numerics
from uaprobe.atomic import locked_by_another_process, locked_message, os_reason
from uaprobe.extraction.dataset import sha256_of
from uaprobe.errors import UAProbeError
from uaprobe.stage import stage_main
from uaprobe.repro.verify import check_repo, find_repo

log = logging.getLogger("uaprobe")


def _sha256_or_reason(path: Path) -> str:
    try:
        return sha256_of(path)
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"


def extraction_mismatches(repo: Path) -> list[str]:
    """Extraction files whose recorded dataset or prompt hashes differ from the files in the checkout,
    and extraction files that are unreadable or unfinished."""
    import h5py

    problems = []
    prompts = repo / "data" / "anisotropy_prompts.txt"
    for h5 in sorted((repo / "data" / "embeddings").glob("*.h5")):
        try:
            with h5py.File(h5, "r") as fh:
                attrs = dict(fh.attrs)
        except OSError as exc:
            problems.append(locked_message(h5, exc) if locked_by_another_process(exc)
                            else f"{h5}: not a readable HDF5 file ({os_reason(exc)})")
            continue
        # <model>.control.h5 holds the control pairs (the extract stage's --control)
        dataset = repo / "data" / ("neutral_control.json" if h5.name.endswith(".control.h5") else "dataset.json")
        for key, path in (("dataset_sha256", dataset), ("prompts_sha256", prompts)):
            recorded = attrs.get(key)
            if isinstance(recorded, bytes):
                recorded = recorded.decode()
            actual = _sha256_or_reason(path)
            if recorded != actual:
                problems.append(f"{h5}: {key} {recorded} does not match {path} ({actual})")
        if not attrs.get("complete"):
            problems.append(f"{h5}: not marked complete")
    return problems


def provenance(path: Path) -> int:
    import h5py

    fix = "give the path of an extraction file, data/embeddings/<model>.h5"
    if not path.exists():
        raise UAProbeError(f"{path}: not found; {fix}")
    if path.is_dir():
        raise UAProbeError(f"{path}: is a directory; {fix}")
    try:
        is_hdf5 = h5py.is_hdf5(path)
    except OSError as exc:
        raise UAProbeError(f"{path}: cannot be read ({os_reason(exc)}); {fix}") from None
    if not is_hdf5:
        raise UAProbeError(f"{path}: not an HDF5 file; {fix}")
    try:
        with h5py.File(path, "r") as fh:
            attrs = {key: fh.attrs[key] for key in sorted(fh.attrs)}
    except OSError as exc:
        if locked_by_another_process(exc):
            raise UAProbeError(locked_message(path, exc)) from None
        raise UAProbeError(f"{path}: not a readable HDF5 file ({os_reason(exc)}); {fix}") from None
    if not attrs:
        raise UAProbeError(f"{path}: an HDF5 file without provenance attributes, not an extraction file; {fix}")
    for key, value in attrs.items():
        print(f"{key}: {value.decode() if isinstance(value, bytes) else value}")
    return 0


def paper_diff(repo: Path, rev: str, rev2: str | None, out: Path) -> int:
    """Compare the values the paper shows at ``rev`` and ``rev2`` (default: the working tree); write the
    marked page to ``out``; print the summary, whose first line counts what differs and what could not be
    compared. Exit 0 either way: a difference is not a failure."""
    from uaprobe.atomic import check_writable, write_file
    from uaprobe.repro import paperdiff

    check_repo(repo)
    check_writable(out.parent, output=out, fix="point --out at a writable path (e.g. --out /tmp/diff.html): "
                   "nothing else is written")

    unavailable: dict[str, str] = {}  # "<file> at <side>" -> the command that fetches it

    old_tree = numdiff.Revision(repo, rev)
    new_tree = numdiff.Revision(repo, rev2) if rev2 else numdiff.Checkout(repo, label="working tree")
    read_old, read_new = numdiff.byte_reader(old_tree, unavailable), numdiff.byte_reader(new_tree, unavailable)
    labels = (rev, rev2 or "working tree")

    def unreadable(side: int, file: str) -> bool:
        return f"{file} at {labels[side]}" in unavailable

    data = read_new(paperdiff.PAGE)
    if data is None and not unavailable:
        raise UAProbeError(f"{paperdiff.PAGE} at {labels[1]}: no rendered paper; run `dvc repro` there first")
    if data is None:
        print(f"nothing compared: the rendered paper at {labels[1]} could not be read (below)")
    else:
        page = data.decode("utf-8")
        old_data = read_old(paperdiff.PAGE)
        changes = paperdiff.compare(page, read_old, read_new, labels=labels, unreadable=unreadable,
                                    old_page=None if old_data is None else old_data.decode("utf-8"))
        figures = paperdiff.changed_figures(read_old, read_new, unreadable=unreadable)
        write_file(out, paperdiff.diff_page(page, changes, figures, labels))
        print("\n".join(paperdiff.summary_lines(changes, figures, labels)))
        print(f"wrote {out}")
    for where, fetch in sorted(unavailable.items()):
        print(f"not compared: {where} is a DVC output not in the cache; fetch it with {fetch}")
    return 0


REPO_HELP = "the checkout, or any directory in it (default: the one the working directory is in)"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="uaprobe", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p_verify = sub.add_parser("verify", help="check outputs against dvc.lock and the extraction inputs")
    p_verify.add_argument("--repo", type=Path, default=None, help=REPO_HELP)
    p_verify.add_argument("--cache", action="store_true", help="also re-hash every cache object dvc.lock names")
    p_verify.add_argument("--remote", metavar="NAME", help="also re-hash every object dvc.lock names on this DVC "
                          "remote (`dvc remote list`)")
    p_verify.add_argument("--against", metavar="REV|DIR", help="compare every number of the metrics, results and "
                          "plots files with a git revision or another checkout, within --atol/--rtol")
    p_verify.add_argument("--atol", type=float, default=numdiff.DEFAULT_ATOL,
                          help=f"absolute tolerance (default {numdiff.DEFAULT_ATOL:g})")
    p_verify.add_argument("--rtol", type=float, default=numdiff.DEFAULT_RTOL,
                          help=f"relative tolerance, of the larger magnitude (default {numdiff.DEFAULT_RTOL:g})")
    p_review = sub.add_parser("review", help="the reviewer's whole check: pull, fingerprint, verify the workspace, "
                              "cache and remote, recompute every stage in a scratch copy and compare its bytes; "
                              "writes review.html and review.json")
    p_review.add_argument("--repo", type=Path, default=None, help=REPO_HELP)
    p_review.add_argument("--remote", metavar="NAME", help="the DVC remote to check (default: the default remote)")
    p_review.add_argument("--out", type=Path, default=None, help="the page (default: review.html in the checkout); "
                          "the certificate review.json goes beside it")
    p_review.add_argument("--no-extract", action="store_true", help="do not recompute the extractions from the "
                          "models (they are pulled and verified; every other stage is still recomputed)")
    p_review.add_argument("--keep", action="store_true", help="keep the scratch copy the stages ran in")
    p_review.add_argument("--jobs", type=int, default=None, help="stages run at once when they do not depend on "
                          "each other (default 1: each stage's analyses use every core already)")
    p_fp = sub.add_parser("fingerprint", help="check, in seconds, that this machine computes the recorded bytes")
    p_fp.add_argument("--update", action="store_true", help="record this machine's digests instead (after a "
                      "deliberate change of the numeric libraries)")
    p_prov = sub.add_parser("provenance", help="print an extraction file's provenance attributes")
    p_prov.add_argument("file", type=Path)
    p_diff = sub.add_parser("paper-diff", help="mark every number of the paper that differs between two revisions")
    p_diff.add_argument("rev", metavar="REV", help="a git revision or DVC experiment")
    p_diff.add_argument("rev2", metavar="REV2", nargs="?", help="another one (default: the working tree)")
    p_diff.add_argument("--repo", type=Path, default=None, help=REPO_HELP)
    p_diff.add_argument("--out", type=Path, default=None, help="the diff page (default: paper/_output/diff.html)")
    p_doc = sub.add_parser("schema-doc", help="rewrite the generated part of docs/results.md from the results schema")
    p_doc.add_argument("--doc", type=Path, default=None, help="default: docs/results.md of the repository")
    p_doc.add_argument("--check", action="store_true", help="only check that it is current (exit 1 if not)")
    return ap


def schema_doc(doc: Path, *, check: bool) -> int:
    """Rewrite (or with ``check`` compare) the part of ``doc`` generated from :mod:`uaprobe.schema`."""
    from uaprobe.schema import reference

    fix = "run `uaprobe schema-doc` from the repository root, or point --doc at docs/results.md"
    try:
        text = doc.read_text(encoding="utf-8")
    except OSError as exc:
        raise UAProbeError(f"{doc}: cannot be read ({os_reason(exc)}); {fix}") from None
    if reference.BEGIN not in text or reference.END not in text:
        raise UAProbeError(f"{doc}: the markers {reference.BEGIN.strip()} and {reference.END} are missing; put them "
                           "where the generated reference goes")
    if check:
        current = reference.generated_part(text) == reference.markdown()
        print(f"{doc}: {'current' if current else 'out of date; run `uaprobe schema-doc`'}")
        return 0 if current else 1
    print(f"{doc}: {'rewritten' if reference.rewrite(doc) else 'already current'}")
    return 0


def _verify_checks() -> dict[str, Any]:
    """What verify checks beyond the bytes: each extraction against its inputs, each results file's settings."""
    from uaprobe.analysis.run.documents import settings
    from uaprobe.config import analysis_from_mapping

    return {"extra": extraction_mismatches, "settings": lambda recorded: settings(analysis_from_mapping(recorded))}


def run(args: argparse.Namespace) -> int:
    if args.command in ("verify", "paper-diff", "review"):
        # from any directory of the checkout, as git and DVC do (--against also compares plain directories)
        args.repo = find_repo(args.repo, required=not (args.command == "verify" and args.against))
    if args.command == "verify" and args.against:
        return numdiff.verify_against(args.repo, args.against, atol=args.atol, rtol=args.rtol)
    if args.command == "verify":
        from uaprobe.repro import verify

        return verify.run(args.repo, cache=args.cache, remote=args.remote, **_verify_checks())
    if args.command == "review":
        from uaprobe.repro import review
        from uaprobe.repro.fingerprint import fingerprint

        return review.run(args.repo, remote=args.remote, out=args.out or args.repo / review.PAGE,
                          fingerprint=lambda: fingerprint(update=False), verify_kwargs=_verify_checks(),
                          extract=not args.no_extract, keep=args.keep, jobs=args.jobs)
    if args.command == "paper-diff":
        return paper_diff(args.repo, args.rev, args.rev2, args.out or args.repo / "paper/_output/diff.html")
    if args.command == "fingerprint":
        from uaprobe.repro.fingerprint import fingerprint

        return fingerprint(update=args.update)
    if args.command == "schema-doc":
        return schema_doc(args.doc or find_repo() / "docs" / "results.md", check=args.check)
    return provenance(args.file)


def main(argv: list[str] | None = None) -> int:
    """Bad arguments: argparse's usage message, exit 2. A failure: one message, exit 2 (see :mod:`uaprobe.stage`)."""
    args = parser().parse_args(argv)
    numerics.pin(strict=False)  # before the numeric imports of the subcommands
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(levelname)s: %(message)s")
    return stage_main(f"uaprobe {args.command}", lambda _argv: run(args), argv, log=log)


if __name__ == "__main__":
    sys.exit(main())
