"""Benchmark of ``plait serve`` with an LLM through OpenAI's API: generated tokens/s and the time
to the first token with concurrent streaming clients, batched against unbatched.

    .venv/bin/python benchmarks/serve_llm.py
    .venv/bin/python benchmarks/serve_llm.py --clients 8 --requests 4 --tokens 32 --layers 4 --hidden 256

The model is benchmarks/llm_lora.py's Llama of random weights (``--layers``, ``--hidden``,
``--vocab``; nothing is downloaded), saved as a plait model with ``trainer.type: none`` and
``generation: {min_new_tokens: T, max_new_tokens: T}`` (``--tokens``), so that every answer is
exactly T tokens long whatever the random weights prefer. It is saved twice: with the default
``serve.max_batch_size`` (64: requests that arrive together generate as one batch) and with 1 (each
request generates alone, the server without batching).

For each, ``python -m plait serve --model-path M --port 0`` runs as a subprocess (benchmarks/serve.py's
``Server``); after one warm-up request, ``--clients`` threads each send ``--requests`` streamed
``/v1/chat/completions`` requests one after another with OpenAI's Python client (a prompt of 16
made-up words each). Per request: the time to the first token (from sending to the first chunk
with text) and the tokens it received (the usage chunk). Tokens/s = all generated tokens / the
phase's wall time. Printed, and written as JSON (default ``benchmarks/out/serve_llm.json``) with
the command and the machine.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import llm_lora  # noqa: E402  (benchmarks/llm_lora.py: write_model, SPECIALS)
import preprocess  # noqa: E402  (benchmarks/preprocess.py: write_report, machine)
import serve as serve_bench  # noqa: E402  (benchmarks/serve.py: Server)

OUT_DIR = HERE / "out"
VARIANTS = {"batched": 64, "unbatched": 1}
"""serve.max_batch_size of each saved model."""


def save_model(base: Path, folder: Path, tokens: int, max_batch_size: int) -> None:
    from plait.api import Model

    config = {"model_type": "llm", "base_model": str(base),
              "input_features": [{"name": "prompt", "type": "text"}],
              "output_features": [{"name": "answer", "type": "text"}],
              "generation": {"min_new_tokens": tokens, "max_new_tokens": tokens},
              "trainer": {"type": "none", "eval_batch_size": 64},
              "serve": {"max_batch_size": max_batch_size, "batch_wait_ms": 5},
              "backend": {"type": "local", "cache_dir": str(folder.parent / "cache")}}
    rows = llm_lora.rows(8, 1000, 0).rename(columns={"target": "answer"})
    model = Model(config)
    model.train(rows, progress_bar=False)
    model.save(folder)


def one_request(client, prompt: str) -> tuple[float, float, int]:
    """(seconds to the first token, seconds in all, tokens received) of one streamed chat request."""
    started = time.perf_counter()
    first, tokens = None, 0
    stream = client.chat.completions.create(model=client.served_model, messages=[{"role": "user", "content": prompt}],
                                            stream=True, stream_options={"include_usage": True})
    for chunk in stream:
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter() - started
        if chunk.usage is not None:
            tokens = chunk.usage.completion_tokens
    return first if first is not None else float("nan"), time.perf_counter() - started, tokens


def load(url: str, name: str, clients: int, requests: int, vocab: int) -> dict:
    import openai

    rng = random.Random(0)
    words = [f"w{i}" for i in range(vocab - len(llm_lora.SPECIALS))]
    prompts = [" ".join(rng.choice(words) for _ in range(16)) for _ in range(clients * requests)]
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=600)
    client.served_model = name
    one_request(client, prompts[0])  # warm-up
    results: list[tuple[float, float, int]] = []
    lock = threading.Lock()

    def run(index: int) -> None:
        for prompt in prompts[index::clients]:
            measured = one_request(client, prompt)
            with lock:
                results.append(measured)

    started = time.perf_counter()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    firsts = sorted(r[0] for r in results)
    tokens = sum(r[2] for r in results)
    return {"requests": len(results), "tokens": tokens, "seconds": round(wall, 2),
            "tokens_per_s": round(tokens / wall, 1),
            "first_token_s_p50": round(statistics.median(firsts), 3),
            "first_token_s_p95": round(firsts[min(len(firsts) - 1, int(0.95 * len(firsts)))], 3),
            "request_s_p50": round(statistics.median(r[1] for r in results), 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=4, help="streamed requests per client, one after another")
    parser.add_argument("--tokens", type=int, default=32, help="tokens generated per request")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--out", type=Path, default=OUT_DIR / "serve_llm.json")
    args = parser.parse_args(argv)
    if min(args.clients, args.requests, args.tokens, args.layers, args.hidden) <= 0:
        parser.error("counts must be positive")
    work = Path(tempfile.mkdtemp(prefix="plait-serve-llm-"))
    results = {}
    try:
        llm_lora.write_model(work / "base", args.vocab, args.layers, args.hidden)
        for name in args.variants:
            folder = work / name / "llm"
            save_model(work / "base", folder, args.tokens, VARIANTS[name])
            server = serve_bench.Server(folder, "local", None)
            try:
                server.wait_ready(120)
                results[name] = load(server.url, "llm", args.clients, args.requests, args.vocab)
            finally:
                server.stop()
            r = results[name]
            print(f"{name:>9}: {r['tokens_per_s']:,} tokens/s, first token p50 {r['first_token_s_p50']} s, "
                  f"p95 {r['first_token_s_p95']} s ({r['requests']} requests of {args.tokens} tokens, "
                  f"{args.clients} clients)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = {"command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
              "clients": args.clients, "requests_per_client": args.requests, "tokens_per_request": args.tokens,
              "variants": results, "gpu": "not measured: no device lent to this session",
              "machine": preprocess.machine()}
    if {"batched", "unbatched"} <= set(results):
        report["batched_vs_unbatched_tokens_per_s"] = round(
            results["batched"]["tokens_per_s"] / results["unbatched"]["tokens_per_s"], 2)
        print("batched / unbatched tokens/s:", report["batched_vs_unbatched_tokens_per_s"])
    preprocess.write_report(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
