"""Benchmark of ``plait serve``: single-row and batch throughput, latency, and the server's memory.

    .venv/bin/python benchmarks/serve.py                                  # local backend, defaults
    .venv/bin/python benchmarks/serve.py --duration 5 --memory-requests 20000
    .venv/bin/python benchmarks/serve.py --backend ray --replicas 1 2

The model: 3 number, 2 category and 1 binary input, a binary output, 2 epochs, trained once with
``plait synthesize-dataset`` and ``plait train`` on ``--data-rows`` seeded rows (kept in
``benchmarks/data/serve-*``). Requests carry that data's rows (input columns only), cycled through.

Each run starts ``python -m plait serve --model-path M --port 0 --backend B`` (Ray: also
``--num-replicas N --cpus-per-replica 0.5``), waits for its "Serving ... on" line and for ``GET /``,
then:

1. warm-up: ``--warmup`` s of single-row load, one batch; the server's RSS is read ("warm");
2. single rows: ``--clients`` clients, closed loop (each sends its next ``/predict`` when its last
   answer is in), for ``--duration`` s. req/s = answers / the phase's wall time; latency per
   request from writing it to having read the whole answer (p50/p90/p99/max, nearest rank);
3. batches: ``--batches`` ``/batch_predict`` requests of ``--batch-rows`` rows as pandas "split"
   JSON, one after another; rows/s = rows / the requests' summed latency;
4. memory: single-row load until ``--memory-requests`` single-row requests were sent in all (the
   warm-up's included), then the RSS again ("end"); growth = end - warm. (RSS is read after
   phases 2 and 3 too, which shows where any growth came from.)

RSS is VmRSS from /proc, of the ``plait serve`` process ("server") and summed over it and all its
descendants ("tree"). With Ray the server process is the Ray driver and the tree holds what it
started (GCS, raylet, Serve controller, proxy, replicas; not those of a Ray instance that was
already running): the table shows the tree there. During
each phase the CPU time of the server (tree), of the load generator and of the whole machine is
taken too: "others" is the rest, work that was not ours (the figures are worth little if large).

Every answer is checked: HTTP 200 with the model's prediction columns (a batch: all its rows);
anything else, or a broken connection, is an error. The load generator is one spawned process
(no GIL shared with anyone): asyncio streams speaking HTTP/1.1 keep-alive, requests encoded
beforehand, one task per client, on uvloop when installed; on 2 cores it competes with the server,
as any same-machine load test does. Then SIGTERM stops the server; its exit status and "Stopped:"
line are reported. Results are printed and written as JSON (default ``benchmarks/out/serve.json``)
with the command line and the machine's details.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import json
import multiprocessing
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT_DIR, DATA_DIR = HERE / "out", HERE / "data"
INPUTS = {"age": "number", "income": "number", "score": "number", "city": "category", "plan": "category",
          "member": "binary"}
CASTS = {"number": float, "category": str, "binary": lambda text: text == "True"}  # CSV text -> JSON value
TARGET_RPS, TARGET_P99_MS, TARGET_ROWS_PER_S = 1_000, 20.0, 100_000
RSS_NOISE_MIB = 5.0  # "does not grow": some allocator noise is allowed; a leak over 100k requests is more


# Model and requests ---------------------------------------------------------------------------------

def ensure_model(rows: int, seed: int) -> tuple[Path, list[list]]:
    """Synthesize the data and train the model unless done before; returns the model and the data's input rows."""
    folder = DATA_DIR / f"serve-r{rows}-s{seed}"
    model, data = folder / "train" / "experiment_run_0" / "model", folder / "data.csv"
    if not (model / "plait_model.json").exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        config = {"input_features": [{"name": n, "type": t} for n, t in INPUTS.items()],
                  "output_features": [{"name": "churned", "type": "binary"}], "trainer": {"epochs": 2}}
        (folder / "config.yaml").write_text(json.dumps(config, indent=2))  # JSON is YAML
        for command in (["synthesize-dataset", "--rows", str(rows), "--seed", str(seed), "--output", "data.csv"],
                        ["train", "--dataset", "data.csv", "--output-directory", "train"]):
            subprocess.run([sys.executable, "-m", "plait", *command, "--config", "config.yaml"], cwd=folder,
                           check=True, capture_output=True)
    with data.open(newline="") as f:
        return model, [[CASTS[kind](row[name]) for name, kind in INPUTS.items()] for row in csv.DictReader(f)]


def post(host: str, port: int, path: str, payload) -> bytes:
    """A whole HTTP/1.1 request, encoded once: the load generator only writes bytes."""
    body = json.dumps(payload).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


# Load generator (in its own process) ----------------------------------------------------------------

def load(host: str, port: int, requests: list[bytes], clients: int, check: tuple, seconds=None, count=None) -> dict:
    """Closed-loop load for ``seconds`` or for ``count`` requests; returns the figures."""
    run = asyncio.run
    with contextlib.suppress(ImportError):
        from uvloop import run  # the server's loop too: a cheaper client leaves more of 2 cores to the server
    return run(_load(host, port, requests, clients, check, seconds, count))


async def _load(host, port, requests, clients, check, seconds, count) -> dict:
    deadline = time.perf_counter() + seconds if seconds else float("inf")
    left = [count if count is not None else float("inf")]
    latencies, problems = [], []

    async def client(index: int) -> None:
        reader, writer = await asyncio.open_connection(host, port)
        while time.perf_counter() < deadline and left[0] > 0:
            left[0] -= 1
            request, index = requests[index % len(requests)], index + clients
            began = time.perf_counter()
            try:
                writer.write(request)
                status, body = await read_response(reader)
            except (OSError, EOFError, ValueError, IndexError) as exc:
                problems.append(f"connection: {exc!r}")
                writer.close()
                reader, writer = await asyncio.open_connection(host, port)
                continue
            latencies.append(time.perf_counter() - began)
            if problem := problem_with(status, body, check):
                problems.append(problem)
        writer.close()

    began, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(client(k) for k in range(clients)))
    return summary(latencies, problems, time.perf_counter() - began) | {"client_cpu_s": time.process_time() - cpu}


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    status = int((await reader.readline()).split(b" ", 2)[1])  # b"" (connection closed): IndexError
    length = None
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if length is None:
        raise ValueError("an answer without Content-Length")  # this server always sends one
    return status, await reader.readexactly(length)


def problem_with(status: int, body: bytes, check: tuple) -> str | None:
    kind, columns, rows = check
    if status != 200:
        return f"HTTP {status}: {body[:300]!r}"
    answer = json.loads(body)
    if kind == "row" and set(answer) != columns:
        return f"keys {sorted(answer)}"
    if kind == "batch" and (set(answer.get("columns", ())) != columns or len(answer.get("data", ())) != rows):
        return f"a batch of {len(answer.get('data', ()))} rows with columns {answer.get('columns')}"
    return None


def summary(latencies: list[float], problems: list[str], seconds: float) -> dict:
    ms = sorted(x * 1000 for x in latencies)
    rank = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))] if ms else None  # noqa: E731
    return {"answered": len(ms), "requests": len(ms) + sum(p.startswith("connection") for p in problems),
            "errors": len(problems), "error_samples": problems[:5], "seconds": seconds,
            "requests_per_s": len(ms) / seconds, "sum_ms": sum(ms),
            "ms": {"p50": rank(0.5), "p90": rank(0.9), "p99": rank(0.99), "max": ms[-1] if ms else None}}


# The server -----------------------------------------------------------------------------------------

class Server:
    """``plait serve`` as a subprocess in a session of its own: its whole group is ours to end."""

    def __init__(self, model: Path, backend: str, replicas: int | None):
        ray = ["--num-replicas", str(replicas), "--cpus-per-replica", "0.5"] if backend == "ray" else []
        self.command = [sys.executable, "-m", "plait", "serve", "--model-path", str(model), "--port", "0",
                        "--backend", backend, *ray]
        self.proc = subprocess.Popen(self.command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.log, self.url = [], None
        self.reader = threading.Thread(target=self._read_log, daemon=True)  # a full pipe would block the server
        self.reader.start()

    def _read_log(self) -> None:
        for line in self.proc.stdout:
            self.log.append(line.rstrip())
            if self.url is None and (found := re.search(r"Serving .* on (http://[^\s/]+)", line)):
                self.url = found.group(1)

    def wait_ready(self, timeout: float) -> None:
        give_up = time.monotonic() + timeout
        while self.url is None or not alive(self.url):
            if self.proc.poll() is not None or time.monotonic() > give_up:
                state = "still silent" if self.proc.poll() is None else f"exit {self.proc.poll()}"
                raise SystemExit(f"the server did not start in {timeout:g} s ({state}):\n" + "\n".join(self.log[-30:]))
            time.sleep(0.2)
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        self.host, self.port = host, int(port)

    def pids(self) -> list[int]:
        parents = {int(p.name): proc_field(int(p.name), "stat", 1) for p in Path("/proc").iterdir() if p.name.isdigit()}
        found = [self.proc.pid]
        for pid in found:  # the list grows as it is walked: breadth first
            found += [child for child, parent in parents.items() if parent == pid]
        return found

    def rss_mib(self) -> dict:
        sizes = [proc_field(pid, "status", "VmRSS:") / 1024 for pid in self.pids()]
        return {"server": sizes[0], "tree": sum(sizes), "tree_processes": len(sizes)}

    def stop(self) -> dict:
        """SIGTERM and wait for the drain; whatever of the group outlives the server by 10 s is killed."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=120)
        give_up = time.monotonic() + 10
        while (left := group_alive(self.proc.pid)) and time.monotonic() < give_up:
            time.sleep(0.2)
        if left:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.reader.join(timeout=5)
        return {"exit_status": self.proc.returncode, "processes_left_after_exit": left,
                "stopped_line": next((line for line in self.log if "Stopped:" in line), None)}


def get(url: str, timeout: float = 30) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as answer:  # raises unless 2xx
        return answer.read()


def alive(url: str) -> bool:
    with contextlib.suppress(OSError):
        return get(url + "/", timeout=2) is not None
    return False


def group_alive(pgid: int) -> bool:
    with contextlib.suppress(ProcessLookupError):
        return os.killpg(pgid, 0) is None
    return False


def proc_field(pid: int, name: str, key: str | int) -> int:
    """A number of /proc/<pid>/status (by key) or /proc/<pid>/stat (by index after "(comm)"); 0 when gone."""
    with contextlib.suppress(OSError, IndexError, ValueError, StopIteration):
        text = Path(f"/proc/{pid}/{name}").read_text()
        if name == "stat":
            return int(text.rsplit(")", 1)[1].split()[key])
        return int(next(line for line in text.splitlines() if line.startswith(key)).split()[1])
    return 0


def cpu_seconds(pids: list[int]) -> dict:
    """CPU time so far of ``pids`` (utime + stime) and of the machine (all but idle and iowait)."""
    ticks, jiffies = os.sysconf("SC_CLK_TCK"), [int(x) for x in Path("/proc/stat").read_text().split()[1:9]]
    return {"server": sum(proc_field(pid, "stat", 11) + proc_field(pid, "stat", 12) for pid in pids) / ticks,
            "machine": (sum(jiffies) - jiffies[3] - jiffies[4]) / ticks}


# Measurements ----------------------------------------------------------------------------------------

def bench(args, model: Path, rows: list[list], pool, replicas: int | None) -> dict:
    server = Server(model, args.backend, replicas)
    try:
        server.wait_ready(args.start_timeout)
        figures = measure(args, server, rows, pool)
    finally:  # on any error too: no server is left behind
        stopped = server.stop()
    return {"backend": args.backend, "replicas": replicas, "server_command": shlex.join(server.command),
            **figures, **stopped}


def measure(args, server: Server, rows: list[list], pool) -> dict:
    host, port, names = server.host, server.port, list(INPUTS)
    info = json.loads(get(server.url + "/info"))
    columns = {c for output in info["output_features"] for c in output["prediction_columns"]}
    singles = [post(host, port, "/predict", dict(zip(names, row))) for row in rows]
    batch = [post(host, port, "/batch_predict", {"columns": names, "data": [rows[k % len(rows)] for k in range(args.batch_rows)]})]
    row, batches = (singles, args.clients, ("row", columns, 1)), (batch, 1, ("batch", columns, args.batch_rows))

    def run(requests, clients, check, **stop) -> dict:
        """One phase in the load process, with the CPU time everyone used meanwhile."""
        pids = server.pids()
        before = cpu_seconds(pids)
        figures = pool.apply(load, (host, port, requests, clients, check), stop)
        cpu = {k: v - before[k] for k, v in cpu_seconds(pids).items()} | {"load_generator": figures.pop("client_cpu_s")}
        cpu["others"] = cpu["machine"] - cpu["server"] - cpu["load_generator"]
        return {**figures, "cpu_s": cpu, "server_cpu_ms_per_request": 1000 * cpu["server"] / max(1, figures["answered"])}

    warmup = {"single_row": run(*row, seconds=args.warmup), "batch": run(*batches, count=1)}
    rss = {"warm": server.rss_mib()}
    single = run(*row, seconds=args.duration)
    rss["after_single_rows"] = server.rss_mib()  # the readings between say which phase any growth came in
    batch = run(*batches, count=args.batches)
    rss["after_batches"] = server.rss_mib()
    batch["rows_per_s"] = args.batch_rows * batch["answered"] / (batch["sum_ms"] / 1000)
    sent = warmup["single_row"]["requests"] + single["requests"]
    rest = run(*row, count=args.memory_requests - sent) if args.memory_requests > sent else None
    rss |= {"end": server.rss_mib(), "single_row_requests": sent + (rest["requests"] if rest else 0)}
    rss["growth"] = {k: rss["end"][k] - rss["warm"][k] for k in ("server", "tree")}
    rss["growth_in_memory_phase"] = {k: rss["end"][k] - rss["after_batches"][k] for k in ("server", "tree")}
    errors = sum(phase["errors"] for phase in (*warmup.values(), single, batch, rest) if phase)
    return {"prediction_columns": sorted(columns), "single_row": single, "batch": batch, "rss_mib": rss,
            "errors_total": errors, "mean_micro_batch_rows": mean_micro_batch(get(server.url + "/metrics")),
            "warmup": warmup, "memory_phase": rest}


def mean_micro_batch(metrics: bytes) -> float | None:
    """Single-row requests per forward pass, from the server's histogram (Ray: one replica's)."""
    found = {k: float(v) for k, v in re.findall(rb"^plait_micro_batch_rows_(sum|count) (\S+)$", metrics, re.M)}
    return found[b"sum"] / found[b"count"] if found.get(b"count") else None


# Report ----------------------------------------------------------------------------------------------

def print_table(results: list[dict]) -> None:
    print(f"\n{'backend':9} {'req/s':>6} {'p50':>5} {'p90':>5} {'p99':>5} {'max':>6} {'rows/s':>8} {'ms/batch':>8} "
          f"{'RSS warm':>8} {'end':>5} {'growth':>6} {'phase 4':>7} {'errors':>6}  CPU s during the single-row phase")
    for r in results:
        s, b, m, cpu = r["single_row"], r["batch"], r["rss_mib"], r["single_row"]["cpu_s"]
        rss, name = ("tree", f"ray x{r['replicas']}") if r["backend"] == "ray" else ("server", "local")
        print(f"{name:9} {s['requests_per_s']:>6,.0f} "
              + " ".join(f"{s['ms'][q]:>5.1f}" for q in ("p50", "p90", "p99")) + f" {s['ms']['max']:>6.1f} "
              f"{b['rows_per_s']:>8,.0f} {b['sum_ms'] / b['answered']:>8.1f} {m['warm'][rss]:>8,.0f} "
              f"{m['end'][rss]:>5,.0f} {m['growth'][rss]:>+6.1f} "
              f"{m['growth_in_memory_phase'][rss]:>+7.1f} {r['errors_total']:>6}  server {cpu['server']:.1f} "
              f"({s['server_cpu_ms_per_request']:.2f} ms/request), load generator {cpu['load_generator']:.1f}, "
              f"others {cpu['others']:.1f}")
    print("(single rows: req/s, latency in ms; batches: rows/s, ms per request; RSS in MiB, of the server "
          "process (Ray: its process tree); phase 4: growth in the memory phase alone (single rows only)")


def targets(r: dict) -> dict:
    growth = r["rss_mib"]["growth"]["tree" if r["backend"] == "ray" else "server"]
    return {f"single_row_rps>={TARGET_RPS}": r["single_row"]["requests_per_s"] >= TARGET_RPS,
            f"single_row_p99<{TARGET_P99_MS}ms": r["single_row"]["ms"]["p99"] < TARGET_P99_MS,
            f"batch_rows_per_s>={TARGET_ROWS_PER_S}": r["batch"]["rows_per_s"] >= TARGET_ROWS_PER_S,
            f"rss_growth<{RSS_NOISE_MIB}MiB": growth < RSS_NOISE_MIB, "no_errors": r["errors_total"] == 0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--backend", choices=("local", "ray"), default="local", help="the server's backend (default local)")
    add("--replicas", type=int, nargs="+", default=[1, 2], help="Ray: replica counts, a run each (default 1 2)")
    add("--clients", type=int, default=8, help="concurrent single-row clients (default 8)")
    add("--warmup", type=float, default=2.0, help="seconds of single-row warm-up (default 2)")
    add("--duration", type=float, default=10.0, help="seconds of measured single-row load (default 10)")
    add("--batch-rows", type=int, default=10_000, help="rows per /batch_predict request (default 10,000)")
    add("--batches", type=int, default=5, help="measured batch requests, after one of warm-up (default 5)")
    add("--memory-requests", type=int, default=100_000, help="single-row requests in all before the last RSS (default 100,000)")
    add("--data-rows", type=int, default=5_000, help="rows synthesized: the model's training data and the requests' rows")
    add("--seed", type=int, default=0, help="seed of the synthesized data (default 0)")
    add("--start-timeout", type=float, default=300.0, help="seconds to wait for the server to answer (default 300)")
    add("--out", type=Path, default=OUT_DIR / "serve.json", help="JSON results (default benchmarks/out/serve.json)")
    args = parser.parse_args(argv)
    if min(args.clients, args.batch_rows, args.batches, args.data_rows, *args.replicas) <= 0 or args.duration <= 0:
        parser.error("--clients, --duration, --batch-rows, --batches, --data-rows and --replicas must be positive")

    model, rows = ensure_model(args.data_rows, args.seed)
    load_before = os.getloadavg()  # other work on the machine skews the figures; say how much there was
    results = []
    with multiprocessing.get_context("spawn").Pool(1) as pool:  # the load generator: one process, reused
        for replicas in (args.replicas if args.backend == "ray" else [None]):
            results.append(r := bench(args, model, rows, pool, replicas))
            r["targets_met"] = targets(r)
            print(f"{args.backend} {replicas or ''}: targets {json.dumps(r['targets_met'])}; server exit "
                  f"{r['exit_status']}, {r['stopped_line'] or 'no Stopped line'}; errors: {r['single_row']['error_samples']}")
    print_table(results)
    sys.path.insert(0, str(HERE))
    import preprocess  # benchmarks/preprocess.py: the machine's details, as the other benchmarks give them

    report = {"benchmark": "serve", "command": shlex.join([sys.executable, *sys.argv]),
              "parameters": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
              "model": {"path": str(model.relative_to(ROOT)), "train_rows": args.data_rows, "epochs": 2},
              "results": results, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "load_average": {"before": load_before, "after": os.getloadavg()}, "machine": preprocess.machine()}
    preprocess.write_report(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
