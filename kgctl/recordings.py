"""Reading a recording (JSON-lines events from `--record` or `--output json`) from disk,
and reading an event from its JSON line (`event_of_line`: recordings, the trace topic,
a fleet's members' output).

A recording is often shared compressed (`gzip run.jsonl`): a file starting with gzip's
magic bytes is read through gzip whatever its name, so `kgctl report`, `kgctl explain
--recording` and `kgctl watch --replay` take `run.jsonl.gz` as they take `run.jsonl`.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from kgctl.errors import NotFoundError, UsageError
from kgctl.model.events import Event

GZIP_MAGIC = b"\x1f\x8b"


def recording_lines(path: Path, label: str = "") -> Iterator[str]:
    """The file's lines, decompressed when it is gzip. Undecodable bytes do not end the
    read (a damaged line is the caller's to skip or refuse). `label` prefixes the error
    lines (`--replay`, `--recording`): no such file is `NotFoundError` (exit 4), an
    unreadable or damaged file `UsageError` (exit 2)."""
    named = f"{label} {path}" if label else str(path)
    try:
        with path.open("rb") as probe:
            compressed = probe.read(2) == GZIP_MAGIC
        handle = (
            gzip.open(path, "rt", encoding="utf-8", errors="replace")
            if compressed
            else path.open(encoding="utf-8", errors="replace")
        )
    except FileNotFoundError:
        raise NotFoundError(f"{named}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{named}: a directory; pass a recording file") from None
    except OSError as exc:
        raise UsageError(f"{named}: cannot read it ({exc.strerror})") from None
    with handle:
        try:
            yield from handle
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise UsageError(
                f"{named}: a damaged gzip file ({exc or 'it ends early'}); "
                "decompress what is left with 'gzip -dc' and pass that"
            ) from None


def parse_json(line: str | bytes) -> Any:
    """One JSON document. orjson reads a member's event in about a third of the standard
    library's time, and the live watch of a 1,000-member group reads some 3,500 a second
    while it rebalances (docs/benchmarks.md). What orjson refuses and `json` reads (NaN,
    Infinity, integers over 64 bits) is read by `json`, which also words the error of a
    line that is not JSON."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)


def event_of_line(line: str | bytes) -> Event:
    """The event a JSON line holds (ValueError or TypeError when it holds none)."""
    return Event.from_dict(parse_json(line))
