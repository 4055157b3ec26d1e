"""A reader of W&B's offline transaction log (``run-<id>.wandb``), which wandb 0.31 writes but
no longer reads from Python: its own format, records of ``wandb_internal_pb2.Record`` in the
LevelDB log layout (32 KiB blocks, each piece behind a 7-byte header: checksum, length, type)
after a 7-byte file header (``:W&B``, a magic number, a version)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

BLOCK = 32 * 1024
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path):
    """Every record of the log, parsed."""
    from wandb.proto import wandb_internal_pb2

    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B transaction log"
    position, pieces = HEADER, b""
    while position + HEADER <= len(data):
        room = BLOCK - position % BLOCK
        if room < HEADER:  # the block's tail is padding
            position += room
            continue
        _checksum, length, kind = struct.unpack("<IHB", data[position:position + HEADER])
        if length == 0 and kind == 0:
            position += room
            continue
        piece = data[position + HEADER:position + HEADER + length]
        position += HEADER + length
        pieces = piece if kind in (FULL, FIRST) else pieces + piece
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pieces)
            yield record


def history(path: Path) -> list[dict]:
    """Each ``run.log`` row: ``{key: value}`` with ``_step``."""
    rows = []
    for record in records(path):
        if record.WhichOneof("record_type") == "history":
            rows.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                         for item in record.history.item})
    return rows


def config(path: Path) -> dict:
    """The run's config as its updates left it."""
    found = {}
    for record in records(path):
        if record.WhichOneof("record_type") == "config":
            found.update({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                          for item in record.config.update})
    return found
