"""Trusting a search folder before ``--resume`` hands it to Ray Tune.

Ray Tune restores a search from state it pickled (``tuner.pkl``, the trials in its experiment
state, the searcher's state): restoring a folder runs whatever code those files hold. A search
folder is user input like a model folder (handed over, or shared on a bucket), so plait restores
only what it wrote itself, in this environment:

* when a search starts, its folder gets ``search_seal.json`` with a tag made with a key that
  only this environment holds (``~/.cache/plait/search.key``, created on first use, readable by
  its owner alone): a folder from anywhere else is refused;
* when a search session ends (finished, interrupted or failed), the seal also lists a digest of
  every file of Tune's state, under the same key: a file changed or added since is refused.

A session killed outright (no chance to seal) leaves its Tune state newer than the seal: it is
resumed on the strength of the environment's tag alone, with a warning saying so.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import posixpath
import secrets
import uuid
from pathlib import Path

from plait.errors import UsageError

log = logging.getLogger("plait")

SEAL = "search_seal.json"


def key_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "plait" / "search.key"


def _key() -> bytes:
    """This environment's key: made once, readable by its owner only."""
    path = key_path()
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # a racing process keeps its own
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_bytes(32))
    return path.read_bytes()


def _tag(*parts: str) -> str:
    return hmac.new(_key(), "\n".join(parts).encode(), hashlib.sha256).hexdigest()


def start(run) -> None:
    """Seal a new search's folder with this environment's tag."""
    search = uuid.uuid4().hex
    run.root.write_json(SEAL, {"search": search, "tag": _tag(search), "state": None})


def close(run) -> None:
    """Seal the Tune state as this session leaves it."""
    seal = _read(run)
    if seal is None:
        return
    files = _digests(run.tune_state)
    seal["state"] = {"files": files, "tag": _tag(seal["search"], json.dumps(files, sort_keys=True))}
    run.root.write_json(SEAL, seal)


def check(run, location: str) -> None:
    """Refuse to restore a search folder that plait did not write in this environment, or whose
    Tune state changed since plait sealed it."""
    seal = _read(run)
    if seal is None or not hmac.compare_digest(str(seal.get("tag", "")), _tag(str(seal.get("search", "")))):
        raise UsageError(
            f"--resume {location!r}: this search folder was not written by plait in this environment (its "
            f"{SEAL} {'is missing' if seal is None else 'does not match the key at ' + str(key_path())}). Ray Tune "
            "restores a search from pickled state, and unpickling a folder from elsewhere runs the code it holds; "
            "resume the search where it was started, or start a new one (plait hyperopt --config ...)")
    state = seal.get("state")
    if state is None or not hmac.compare_digest(str(state.get("tag", "")),
                                                _tag(seal["search"], json.dumps(state.get("files"), sort_keys=True))):
        log.warning("The last session of the search at %s ended without sealing Ray Tune's state (it was killed): "
                    "resuming it as a folder this environment wrote.", location)
        return
    changed = sorted(name for name, digest in _digests(run.tune_state).items() if state["files"].get(name) != digest)
    if changed:
        raise UsageError(
            f"--resume {location!r}: Ray Tune's saved state changed since plait sealed it ({', '.join(changed[:5])}"
            f"{' ...' if len(changed) > 5 else ''}); restoring it would unpickle files plait did not write. Start "
            "a new search (plait hyperopt --config ...)")


def _read(run) -> dict | None:
    if not run.root.is_file(SEAL):
        return None
    try:
        seal = json.loads(run.root.read_text(SEAL))
    except ValueError:
        return None
    return seal if isinstance(seal, dict) else None


def _digests(folder) -> dict[str, str]:
    """Every file of ``folder`` by its path inside: the SHA-256 of its bytes."""
    digests = {}
    with folder.errors():
        if not folder.exists():
            return {}
        folder.fs.invalidate_cache(folder.path)
        for path in folder.fs.find(folder.path):
            digest = hashlib.sha256()
            with folder.fs.open(path, "rb") as handle:
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)
            digests[posixpath.relpath(path, folder.path)] = digest.hexdigest()
    return digests
