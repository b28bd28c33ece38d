"""The objects of a DVC cache or remote that the outputs ``dvc.lock`` records need, each re-hashed.

A file output needs one object; a directory output needs its ``.dir`` listing and the object of every file the
listing names. :func:`check_store` streams each from the store's own DVC file system (a local cache, or any
remote DVC can read) and reports, through the caller's ``fix``, each that is missing or whose bytes hash to
something else. :func:`remote_odb` opens a remote by its name, or says in one line why it cannot.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from uaprobe.errors import UAProbeError
from uaprobe.repro.hashing import Progress, stream_md5
from uaprobe.repro.lockfile import Output

T = TypeVar("T")
Fix = Callable[[Output, str, str, str], T]
"""``fix(output, shown, location, what)``: the report of one bad object (``shown``: the workspace file it holds;
``location``: its path or URL in the store; ``what``: what is wrong)."""


class Unreachable(UAProbeError):
    """A remote that does not answer."""


@dataclass(frozen=True)
class StoreObject:
    """One object of a cache or remote that an output needs: where it is, what its bytes must hash to."""

    output: Output
    shown: str
    """The workspace file it holds (``<dir>/<file>`` for a file of a directory output)."""
    oid: str
    location: str


def recorded_entries(odb: Any, out: Output) -> dict[str, str] | None:
    """The files of a directory output as its listing in ``odb`` records them (None if unreadable)."""
    try:
        return {entry["relpath"]: entry["md5"] for entry in json.loads(odb.fs.read_bytes(odb.oid_to_path(out.md5)))}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _objects(odb: Any, out: Output, problems: list[T], fix: Fix[T]) -> Iterator[StoreObject]:
    """The objects ``out`` needs in ``odb``: the file's, or the directory's listing (checked here) and then
    each of its files'. A missing or damaged listing is added to ``problems``."""
    top = StoreObject(out, out.path, out.md5, odb.oid_to_path(out.md5))
    if not out.is_dir:
        yield top
        return
    try:
        data = odb.fs.read_bytes(top.location)
    except FileNotFoundError:
        problems.append(fix(out, out.path, top.location, "missing (the directory's listing)"))
        return
    from dvc_data.hashfile.hash import fobj_md5

    actual = fobj_md5(io.BytesIO(data))
    if actual != out.md5.removesuffix(".dir"):
        problems.append(fix(out, out.path, top.location, f"damaged listing (its bytes hash to {actual})"))
        return
    for entry in json.loads(data):
        yield StoreObject(out, f"{out.path}/{entry['relpath']}", entry["md5"], odb.oid_to_path(entry["md5"]))


def check_store(odb: Any, outs: Iterable[Output], fix: Fix[T], *, progress: Progress | None = None,
                jobs: int = 4) -> list[T]:
    """Every object ``outs`` need in ``odb`` (a cache or a remote), re-hashed: ``fix`` of each bad one.
    An error of the store itself (a network error, not a missing object) propagates."""
    problems: list[T] = []
    objects = [obj for out in outs for obj in _objects(odb, out, problems, fix)]

    def one(obj: StoreObject) -> T | None:
        try:
            actual = stream_md5(odb.fs, obj.location, progress)
        except FileNotFoundError:
            return fix(obj.output, obj.shown, obj.location, "missing")
        if actual != obj.oid:
            return fix(obj.output, obj.shown, obj.location, f"damaged (its bytes hash to {actual}, not {obj.oid})")
        return None

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        problems += [p for p in pool.map(one, objects) if p is not None]
    return problems


def store_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a store that cannot be reached raises: the system's (a refused connection, a timeout)
    and, for HTTP remotes, aiohttp's own (a server that hangs up)."""
    try:
        from aiohttp import ClientError
    except ImportError:  # no HTTP support installed
        return (OSError,)
    return (OSError, ClientError)


def unreachable(name: str, url: str, exc: BaseException) -> Unreachable:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return Unreachable(f"--remote {name}: {url} cannot be reached ({reason}); check that it is up and its URL "
                       f"(`dvc remote list`), or name another remote")


def remote_odb(repo: Any, name: str, hash_name: str) -> Any:
    """The object database of the DVC remote ``name`` (:class:`UAProbeError` if there is none by that name,
    :class:`Unreachable` if its directory is absent or it does not answer)."""
    from dvc.exceptions import DvcException

    try:
        odb = repo.cloud.get_remote_odb(name, "uaprobe verify --remote", hash_name=hash_name)
        if odb.fs.protocol in ("local", "file") and not odb.fs.exists(odb.path):
            raise Unreachable(f"--remote {name}: its directory {odb.path} does not exist: create it and fill it "
                               f"with `dvc push -r {name}`, or point the remote elsewhere (`dvc remote modify --local "
                               f"{name} url DIR`)")
    except DvcException as exc:
        raise UAProbeError(f"--remote {name}: {str(exc).strip().splitlines()[0]}; name one of `dvc remote list`") \
            from None
    except store_errors() as exc:
        raise unreachable(name, remote_url(repo, name), exc) from None
    return odb


def remote_url(repo: Any, name: str) -> str:
    """The URL ``dvc remote list`` shows for the remote ``name``."""
    return str(repo.config["remote"].get(name, {}).get("url", name))


__all__ = ["StoreObject", "Unreachable", "check_store", "recorded_entries", "remote_odb", "remote_url", "store_errors",
           "unreachable"]
