"""Writing a file or a folder all or nothing: on a local filesystem, and on a real S3 server."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from plait.utils.fs import (SUCCESS, atomic_folder, atomic_open, atomic_path, local_fs, publish_folder, resolve,
                            storage_options, write_json)


class Interrupted(Exception):
    """A failure in the middle of a write (a full disk, a Ctrl-C)."""


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# ---- a file on a local filesystem ---------------------------------------------------------------

@pytest.mark.parametrize("mode, content", [("wb", b"new bytes"), ("w", "new text: \u00e9")])
def test_a_file_is_written_whole_in_bytes_or_text(tmp_path, mode, content):
    with atomic_open(local_fs(), str(tmp_path / "out"), mode) as handle:
        handle.write(content)
    assert (tmp_path / "out").read_bytes() == (content if mode == "wb" else content.encode("utf-8"))
    assert names(tmp_path) == ["out"]


@pytest.mark.parametrize("mode", ["wb", "w"])
def test_a_failure_in_the_middle_of_writing_leaves_the_older_file_and_no_other(tmp_path, mode):
    (tmp_path / "out").write_bytes(b"older")
    with pytest.raises(Interrupted):
        with atomic_open(local_fs(), str(tmp_path / "out"), mode) as handle:
            handle.write(b"half" if mode == "wb" else "half")
            handle.flush()
            raise Interrupted
    assert (tmp_path / "out").read_bytes() == b"older"
    assert names(tmp_path) == ["out"]


def test_a_failed_first_write_leaves_no_file(tmp_path):
    with pytest.raises(Interrupted):
        with atomic_open(local_fs(), str(tmp_path / "out")) as handle:
            handle.write(b"half")
            raise Interrupted
    assert names(tmp_path) == []


def test_a_writer_that_takes_a_file_name_writes_through_a_temporary_one(tmp_path):
    target = tmp_path / "weights.bin"
    target.write_bytes(b"older")
    with pytest.raises(Interrupted):
        with atomic_path(target) as tmp:
            Path(tmp).write_bytes(b"half")
            assert Path(tmp).parent == tmp_path and target.read_bytes() == b"older"
            raise Interrupted
    assert names(tmp_path) == ["weights.bin"] and target.read_bytes() == b"older"
    with atomic_path(target) as tmp:
        Path(tmp).write_bytes(b"newer")
    assert names(tmp_path) == ["weights.bin"] and target.read_bytes() == b"newer"


def test_json_is_written_indented_with_sorted_keys(tmp_path):
    write_json(tmp_path / "stats.json", {"b": 1, "a": [1, 2]})
    assert (tmp_path / "stats.json").read_text() == json.dumps({"a": [1, 2], "b": 1}, indent=2) + "\n"


# ---- a folder on a local filesystem -------------------------------------------------------------

def build(folder: str, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = Path(folder) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_folder_is_published_with_its_success_marker(tmp_path):
    with atomic_folder(local_fs(), str(tmp_path / "out" / "predictions")) as tmp:
        assert Path(tmp).parent == tmp_path / "out"  # beside its final place: the rename stays in one filesystem
        build(tmp, {"part-0": "rows", "sub/part-1": "more rows"})
    final = tmp_path / "out" / "predictions"
    assert names(tmp_path / "out") == ["predictions"]
    assert names(final) == [SUCCESS, "part-0", "sub"] and (final / SUCCESS).read_text() == ""
    assert (final / "sub" / "part-1").read_text() == "more rows"


def test_a_folder_publish_replaces_an_older_folder(tmp_path):
    final = tmp_path / "model"
    build(str(final), {"weights": "old", "stale": "only in the old one", "done.json": "{}"})
    with atomic_folder(local_fs(), str(final), marker="done.json") as tmp:
        build(tmp, {"weights": "new", "done.json": '{"v": 2}'})
    assert names(tmp_path) == ["model"]  # the older folder, moved aside, is gone too
    assert names(final) == ["done.json", "weights"]  # the builder wrote its own marker: no _SUCCESS
    assert (final / "weights").read_text() == "new" and (final / "done.json").read_text() == '{"v": 2}'


def test_a_failed_folder_build_leaves_the_older_folder_and_no_temporary_one(tmp_path):
    final = tmp_path / "model"
    build(str(final), {"weights": "old"})
    with pytest.raises(Interrupted):
        with atomic_folder(local_fs(), str(final)) as tmp:
            build(tmp, {"weights": "half"})
            raise Interrupted
    assert names(tmp_path) == ["model"] and names(final) == ["weights"]
    assert (final / "weights").read_text() == "old"


def test_keep_leaves_a_complete_folder_another_process_published(tmp_path):
    final, tmp = tmp_path / "entry", tmp_path / ".entry.tmp"
    build(str(final), {"data": "theirs", SUCCESS: ""})
    build(str(tmp), {"data": "ours"})
    asked = []
    assert publish_folder(local_fs(), str(tmp), str(final), keep=lambda path: asked.append(path) or True) is False
    assert asked == [str(final)] and (final / "data").read_text() == "theirs"
    assert publish_folder(local_fs(), str(tmp), str(final), keep=lambda path: False) is True
    assert (final / "data").read_text() == "ours" and names(tmp_path) == ["entry"]


def _publish_repeatedly(final: str, writer: int, start) -> None:
    """Publish ``final`` 20 times, each folder's files all saying which writer and round."""
    start.wait()
    for round_ in range(20):
        with atomic_folder(local_fs(), final) as tmp:
            build(tmp, {name: f"{writer}-{round_}" for name in ("a", "b/c")})


def test_processes_publishing_the_same_folder_at_once_all_succeed_and_one_whole_folder_stays(tmp_path):
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(3)
    final = str(tmp_path / "out")
    workers = [context.Process(target=_publish_repeatedly, args=(final, i, start)) for i in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [w.exitcode for w in workers] == [0, 0, 0]
    assert names(tmp_path) == ["out"]
    contents = {(tmp_path / "out" / name).read_text() for name in ("a", "b/c")}
    assert len(contents) == 1  # every file from the same folder, never a mix
    assert names(tmp_path / "out") == [SUCCESS, "a", "b"]


# ---- an object store (a real S3 server on loopback) ---------------------------------------------

BLOCK = 5 << 20
"""The smallest part S3 takes: a file larger than this is uploaded in parts while it is written."""


@pytest.fixture
def s3(s3_bucket):
    """(filesystem, bucket) on the test S3 server, uploading in parts of BLOCK bytes."""
    bucket, credentials = s3_bucket
    fs, _ = resolve(f"s3://{bucket}", {**storage_options(credentials), "default_block_size": BLOCK})
    return fs, bucket


@pytest.mark.parametrize("size", [10, BLOCK + 1], ids=["one-shot upload", "multipart upload begun"])
def test_a_failed_upload_leaves_the_older_object_and_no_other(s3, size):
    fs, bucket = s3
    fs.pipe_file(f"{bucket}/out.bin", b"older")
    with pytest.raises(Interrupted):
        with atomic_open(fs, f"{bucket}/out.bin") as handle:
            handle.write(b"x" * size)
            uploads = fs.call_s3("list_multipart_uploads", Bucket=bucket).get("Uploads", [])
            assert len(uploads) == (size > BLOCK)
            raise Interrupted
    fs.invalidate_cache()
    assert fs.cat_file(f"{bucket}/out.bin") == b"older"
    assert fs.ls(bucket, detail=False) == [f"{bucket}/out.bin"]
    assert fs.call_s3("list_multipart_uploads", Bucket=bucket).get("Uploads", []) == []  # aborted, not left to bill
    with atomic_open(fs, f"{bucket}/out.bin", "w") as handle:
        handle.write("newer")
    assert fs.cat_file(f"{bucket}/out.bin") == b"newer"


def test_a_folder_on_an_object_store_replaces_the_older_one_marker_last(s3):
    fs, bucket = s3
    final = f"{bucket}/predictions.parquet"
    for name, data in {"part-0": b"old", "part-1": b"old, not in the new folder", SUCCESS: b""}.items():
        fs.pipe_file(f"{final}/{name}", data)
    with atomic_folder(fs, final) as tmp:
        fs.pipe_file(f"{tmp}/part-0", b"new")
    fs.invalidate_cache()
    assert sorted(fs.find(bucket)) == [f"{final}/{SUCCESS}", f"{final}/part-0"]  # no temporary keys stay
    assert fs.cat_file(f"{final}/part-0") == b"new"


def test_a_failed_folder_build_on_an_object_store_leaves_the_older_folder(s3):
    fs, bucket = s3
    final = f"{bucket}/entry"
    fs.pipe_file(f"{final}/data", b"old")
    fs.pipe_file(f"{final}/{SUCCESS}", b"")
    with pytest.raises(Interrupted):
        with atomic_folder(fs, final) as tmp:
            fs.pipe_file(f"{tmp}/data", b"half")
            raise Interrupted
    fs.invalidate_cache()
    assert sorted(fs.find(bucket)) == [f"{final}/{SUCCESS}", f"{final}/data"]
    assert fs.cat_file(f"{final}/data") == b"old"


# ---- storage endpoints -------------------------------------------------------------------------

def test_s3_options_bound_retries_unless_the_user_set_them():
    from plait.utils.fs import S3_RETRIES, bounded_options

    assert bounded_options("s3://b/x", {"key": "k"})["config_kwargs"] == {"retries": S3_RETRIES}
    mine = {"config_kwargs": {"retries": {"max_attempts": 10}, "connect_timeout": 1}}
    assert bounded_options("s3://b/x", mine) == mine
    assert bounded_options("/local/path", {"key": "k"}) == {"key": "k"}
    assert bounded_options("gs://b/x", None) == {}


def test_an_unreachable_endpoint_is_named_without_its_user_and_password():
    import botocore.exceptions

    from plait.utils.fs import unreachable_endpoint

    failure = botocore.exceptions.EndpointConnectionError(endpoint_url="http://user:pw@10.1.2.3:9000/b/k", error="x")
    wrapped = OSError("upload failed")
    wrapped.__cause__ = failure
    assert unreachable_endpoint(wrapped) == ("http://10.1.2.3:9000", "could not connect")
    assert unreachable_endpoint(ValueError("no")) is None
