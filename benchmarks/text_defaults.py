"""Do plait's text defaults win over Ludwig's? Real English text, offline.

    .venv/bin/python benchmarks/text_defaults.py                   # every variant, 3 seeds
    .venv/bin/python benchmarks/text_defaults.py --seeds 5 --variants plait ludwig lowercase
    .venv/bin/python benchmarks/text_defaults.py --list            # the variants and what each changes

Data: the documentation that ships inside botocore (installed with plait's dependencies, no
download). Each AWS service's ``service-2.json`` documents every operation, shape and shape member
in a short HTML text. The dataset is those texts of ten services (``SERVICES``, the newest API
version of each), tags stripped, entities decoded, whitespace collapsed, cut to their first
``--max-words`` words (default 48: Ludwig's parallel_cnn takes minutes per seed on whole texts on
2 CPUs); texts of fewer than five words are dropped, so is every text found twice in one service
or in more than one service (no duplicate and no ambiguous label). The task: which service does a
text document? At most ``--rows-per-class`` texts per service (default 300, drawn with a fixed
seed, the same for every run), so the classes are balanced.

Protocol, per seed (the data is the same for every seed; the split and the training vary):

* ``train_test_split(test_size=0.2, random_state=seed)``, stratified by service: 80% of the rows
  for training, 20% held out for testing.
* scikit-learn baseline, for scale: ``TfidfVectorizer()`` + ``LogisticRegression(max_iter=2000)``,
  default settings otherwise, fitted on the whole 80%.
* plait gets the same 80%, of which it holds out a fifth (stratified, ``random_state=seed``) as
  ``validation_set=`` for early stopping and choosing the best epoch, as in ``sklearn_compare.py``.
  The config names only the text input and the category output; every other setting is a default.
  ``random_seed=seed``; torch on ``--threads`` threads (default 1).
* Every variant of the config (below) is trained on the same rows with the same seed, and scored
  on the same 20% test rows with ``accuracy_score``.

Variants: ``plait`` (plait's defaults); ``ludwig`` (Ludwig 0.17's default wherever plait's differs,
applied until nothing is left: the parallel_cnn encoder with Ludwig's parallel_cnn settings, no
lowercasing, the combiner's and trainer's); ``ludwig_text`` (the same, text input only, plait's
combiner and trainer); and one run per single text setting, on top of plait's defaults, so each
default's own effect shows: ``--list`` prints them. A setting of plait's embed encoder (width,
reduction, initializer) is measured with the encoder named in the config (``encoder: {type:
embed}``, the same model as the default), since ``plait validate`` reports the encoder type, not
its settings, while the type itself differs.

Mean and standard deviation of test accuracy over seeds, and the seconds spent training, are
printed as a table and written as JSON (default ``benchmarks/out/text_defaults.json``). Accuracy
does not depend on the machine's load; the seconds do.
"""

from __future__ import annotations

import argparse
import gzip
import html
import json
import logging
import os
import platform
import re
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

SERVICES = ("s3", "ec2", "iam", "lambda", "dynamodb", "kms", "route53", "cloudwatch", "logs", "ecs")
"""Ten services with at least 450 distinct texts each, on unrelated subjects."""
TEXT, TARGET = "text", "service"
MIN_WORDS = 5
TEXT_INPUT = "input_features[*]."
EMBED = {"type": "embed"}


# --- the dataset -----------------------------------------------------------------------------

def botocore_data_dir() -> Path:
    import botocore

    return Path(botocore.__file__).parent / "data"


def service_model(service: str) -> dict:
    """The newest API version's service-2.json of a service (gzipped in recent botocore)."""
    versions = sorted(p for p in (botocore_data_dir() / service).iterdir() if p.is_dir())
    newest = versions[-1]
    packed = newest / "service-2.json.gz"
    if packed.exists():
        return json.loads(gzip.decompress(packed.read_bytes()))
    return json.loads((newest / "service-2.json").read_text())


def raw_documentation(model: dict) -> list[str]:
    """The documentation of every operation, shape and shape member, in file order."""
    texts = [op.get("documentation", "") for op in model["operations"].values()]
    for shape in model["shapes"].values():
        texts.append(shape.get("documentation", ""))
        texts.extend(member.get("documentation", "") for member in shape.get("members", {}).values())
    return texts


def plain_text(documentation: str) -> str:
    """HTML to one line of text: tags become spaces (so <p>a</p><p>b</p> keeps the words apart)."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", documentation)).split())


def load_dataset(services: tuple[str, ...], rows_per_class: int, max_words: int) -> pd.DataFrame:
    rows = [(" ".join(plain_text(doc).split()[:max_words]), service)
            for service in services for doc in raw_documentation(service_model(service))]
    df = pd.DataFrame(rows, columns=[TEXT, TARGET])
    df = df[df[TEXT].str.split().str.len() >= MIN_WORDS].drop_duplicates()
    df = df[~df[TEXT].duplicated(keep=False)]  # a text documented in two services has no one label
    capped = [group.sample(min(len(group), rows_per_class), random_state=0) for _, group in df.groupby(TARGET)]
    return pd.concat(capped).sort_index().reset_index(drop=True)


# --- the variants --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Variant:
    name: str
    what: str
    ludwig: tuple[str, ...] | None = ()
    """Settings given Ludwig's default: paths as ``plait validate`` writes them, or prefixes ending
    in '.' for every setting under one; None: every setting."""
    encoder: dict | None = None
    """The text encoder named in the config (None: left to the default)."""


VARIANTS = (
    Variant("plait", "plait's defaults: embed encoder (64 wide, mean), lowercase, concat combiner with an fc layer"),
    Variant("ludwig", "Ludwig's default for every differing setting: text, combiner, trainer", ludwig=None),
    Variant("ludwig_text", "Ludwig's text defaults only (parallel_cnn as Ludwig sets it, lowercase false, "
                           "fill_value <UNK>); plait's combiner", ludwig=(TEXT_INPUT,)),
    Variant("encoder", "only the encoder type: parallel_cnn with plait's parallel_cnn settings",
            ludwig=(TEXT_INPUT + "encoder",)),
    Variant("encoder_ludwig", "only the encoder: parallel_cnn with Ludwig's settings (256 wide, 256 filters, "
                              "sum, fc 512+256)", ludwig=(TEXT_INPUT + "encoder", TEXT_INPUT + "encoder.")),
    Variant("lowercase", "only lowercase: false", ludwig=(TEXT_INPUT + "preprocessing.lowercase",)),
    Variant("fill_value", "only fill_value: <UNK> (no text is missing here: expect no effect)",
            ludwig=(TEXT_INPUT + "preprocessing.fill_value",)),
    Variant("embed.embedding_size", "embed encoder, only embedding_size: 256",
            ludwig=(TEXT_INPUT + "encoder.embedding_size",), encoder=EMBED),
    Variant("embed.reduce_output", "embed encoder, only reduce_output: sum",
            ludwig=(TEXT_INPUT + "encoder.reduce_output",), encoder=EMBED),
    Variant("embed.weights_initializer", "embed encoder, only weights_initializer: uniform",
            ludwig=(TEXT_INPUT + "encoder.weights_initializer",), encoder=EMBED),
)
BY_NAME = {v.name: v for v in VARIANTS}


def _pattern(path: str) -> str:
    return re.sub(r"\[\d+\]", "[*]", path)


def _selected(pattern: str, settings: tuple[str, ...] | None) -> bool:
    if settings is None:
        return True
    return any(pattern == s or (s.endswith(".") and pattern.startswith(s)) for s in settings)


def apply_ludwig_defaults(config, settings: tuple[str, ...] | None):
    """``config`` with Ludwig's defaults for ``settings``, and the lines of what changed. Applied
    until none is left: a section swapped in (Ludwig's parallel_cnn encoder) comes with plait's
    settings for it, which the next pass swaps for Ludwig's where ``settings`` selects them."""
    from plait.config.ludwig_defaults import differing_defaults, with_ludwig_defaults

    applied: list[str] = []
    for _ in range(5):  # each pass sets what it changes, so the next one cannot list it again
        chosen = [d for d in differing_defaults(config) if _selected(_pattern(d.path), settings)]
        if not chosen:
            return config, applied
        applied += [str(d) for d in chosen]
        config = with_ludwig_defaults(config, {_pattern(d.path) for d in chosen})
    raise RuntimeError(f"Ludwig's defaults for {settings} did not settle in 5 passes: {applied}")


def variant_config(variant: Variant, cache_dir: str):
    from plait.config import load_config

    text_input = {"name": TEXT, "type": "text"} | ({"encoder": variant.encoder} if variant.encoder else {})
    config = load_config({"input_features": [text_input],
                          "output_features": [{"name": TARGET, "type": "category"}],
                          "backend": {"cache_dir": cache_dir}})
    return apply_ludwig_defaults(config, variant.ludwig)


# --- one seed ------------------------------------------------------------------------------------

def split(df: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, ...]:
    """Train (80%), test (20%), and the 80% cut again into fit (64%) and validation (16%)."""
    from sklearn.model_selection import train_test_split

    train, test = train_test_split(df, test_size=0.2, random_state=seed, stratify=df[TARGET])
    fit, validation = train_test_split(train, test_size=0.2, random_state=seed, stratify=train[TARGET])
    return train, test, fit, validation


def tfidf_baseline(train: pd.DataFrame, test: pd.DataFrame) -> dict:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score
    from sklearn.pipeline import make_pipeline

    started = time.perf_counter()
    estimator = make_pipeline(TfidfVectorizer(), LogisticRegression(max_iter=2000))
    estimator.fit(train[TEXT], train[TARGET])
    return {"score": float(accuracy_score(test[TARGET], estimator.predict(test[TEXT]))),
            "seconds": time.perf_counter() - started}


def plait_run(variant: Variant, fit: pd.DataFrame, validation: pd.DataFrame, test: pd.DataFrame, seed: int,
              cache_dir: str) -> dict:
    from sklearn.metrics import accuracy_score

    from plait import Model

    config, _ = variant_config(variant, cache_dir)
    model = Model(config)
    started = time.perf_counter()
    trained = model.train(training_set=fit, validation_set=validation, random_seed=seed, progress_bar=False)
    seconds = time.perf_counter() - started
    predicted = model.predict(test[[TEXT]])[f"{TARGET}_predictions"].to_numpy()
    return {"score": float(accuracy_score(test[TARGET], predicted)), "seconds": seconds,
            "epochs": len(trained.training_statistics)}


# --- report --------------------------------------------------------------------------------------

def summarize(runs: list[dict]) -> dict:
    scores = [r["score"] for r in runs]
    return {"mean": statistics.fmean(scores), "std": statistics.stdev(scores) if len(scores) > 1 else 0.0,
            "scores": scores, "seconds": [r["seconds"] for r in runs],
            "epochs": [r["epochs"] for r in runs if "epochs" in r]}


def print_table(report: dict) -> None:
    plait_mean = report["variants"]["plait"]["mean"] if "plait" in report["variants"] else None
    print(f"{'variant':28} {'accuracy':>15} {'vs plait':>9} {'train s/seed':>13} {'epochs':>14}")
    for name, entry in [*report["variants"].items(), ("tfidf+logreg (sklearn)", report["tfidf_logreg"])]:
        delta = f"{entry['mean'] - plait_mean:+.3f}" if plait_mean is not None else ""
        epochs = ",".join(map(str, entry["epochs"]))
        print(f"{name:28} {entry['mean']:.3f} ± {entry['std']:.3f} {delta:>9} "
              f"{statistics.fmean(entry['seconds']):>13.1f} {epochs:>14}")
    print(f"{report['seeds']} seeds, {report['rows']} rows ({report['rows_per_class']} per service), "
          f"total {report['seconds']:.0f} s; load average {report['machine']['load_average_start']} at the start. "
          "Seconds depend on the machine's load, accuracy does not.")


def machine() -> dict:
    import botocore
    import sklearn
    import torch

    return {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
            "torch": torch.__version__, "sklearn": sklearn.__version__, "botocore": botocore.__version__,
            "load_average_start": [round(x, 1) for x in os.getloadavg()]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    parser.add_argument("--variants", nargs="+", choices=list(BY_NAME), default=list(BY_NAME))
    parser.add_argument("--rows-per-class", type=int, default=300, help="texts per service at most (default 300)")
    parser.add_argument("--max-words", type=int, default=48,
                        help="keep a text's first N words (default 48; Ludwig's parallel_cnn costs minutes per seed "
                             "on full texts)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--list", action="store_true", help="print the variants and the settings each changes")
    parser.add_argument("--out", default=str(HERE / "out" / "text_defaults.json"))
    args = parser.parse_args(argv)
    if args.list:
        return list_variants(args.variants)

    import torch

    torch.set_num_threads(args.threads)
    logging.getLogger("plait").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=UserWarning)

    started = time.perf_counter()
    df = load_dataset(SERVICES, args.rows_per_class, args.max_words)
    report: dict = {"seeds": args.seeds, "services": list(SERVICES), "rows": len(df),
                    "rows_per_class": args.rows_per_class, "max_words": args.max_words, "threads": args.threads,
                    "machine": machine(), "settings": {}, "variants": {}}
    runs: dict[str, list[dict]] = {name: [] for name in [*args.variants, "tfidf_logreg"]}
    with tempfile.TemporaryDirectory(prefix="plait-text-defaults-") as cache_dir:
        for name in args.variants:
            report["settings"][name] = variant_config(BY_NAME[name], cache_dir)[1]
        for seed in range(args.seeds):
            train, test, fit, validation = split(df, seed)
            runs["tfidf_logreg"].append(tfidf_baseline(train, test))
            for name in args.variants:
                runs[name].append(plait_run(BY_NAME[name], fit, validation, test, seed, cache_dir))
                print(f"seed {seed} {name}: {runs[name][-1]}", flush=True)
    report["variants"] = {name: summarize(runs[name]) for name in args.variants}
    report["tfidf_logreg"] = summarize(runs["tfidf_logreg"])
    report["seconds"] = time.perf_counter() - started
    report["machine"]["load_average_end"] = [round(x, 1) for x in os.getloadavg()]

    print_table(report)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"written to {out}")
    return 0


def list_variants(names: list[str]) -> int:
    with tempfile.TemporaryDirectory() as cache_dir:
        for name in names:
            variant = BY_NAME[name]
            print(f"{name}: {variant.what}")
            for line in variant_config(variant, cache_dir)[1]:
                print(f"    {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
