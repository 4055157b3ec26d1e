"""A stand-in for the device's Python, here: a virtual environment that holds only the packages
the device image has (``carry.DEVICE_PACKAGES``) and those the carry brings (``carry.PACKAGES``,
with ``carry.STRIP`` applied), taken from this checkout's ``.venv``. Running the CPU dry-run in
it shows a package the carry forgot, or a stripped file something needs, before a device call
is spent on finding out.

    .venv/bin/python benchmarks/device/standin.py /tmp/standin
    PYTHONPATH=$PWD /tmp/standin/bin/python benchmarks/device/check.py --cpu --out /tmp/standin-out

Differences that remain: this machine's Python (3.11, not 3.12), torch's CPU build and the
versions of the device's own packages (the stand-in has .venv's). Packages are linked, not
copied, except Ray's folder, which is hard-linked so that STRIP can remove files from it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import carry


PYTHON_311_ONLY = {"importlib-metadata", "lazy-importer"}
"""What dask needs on this machine's Python 3.11 only (``python_version < "3.12"``)."""


def wanted() -> set[str]:
    return ({carry.normalized(n) for n in carry.DEVICE_PACKAGES} | {carry.normalized(p.name) for p in carry.PACKAGES}
            | PYTHON_311_ONLY)


def device_needs(names: set[str]) -> set[str]:
    """What the device's packages, in .venv's versions, require that neither the device list nor
    the carry names (transformers 5.23 here needs httpx2; the device's 5.17 does not): the image's
    packages bring their own needs, so the stand-in adds these, and says which."""
    from packaging.requirements import Requirement

    device = {carry.normalized(n) for n in carry.DEVICE_PACKAGES}
    found, todo = set(), sorted(device)
    while todo:
        try:
            requires = metadata.requires(todo.pop()) or []
        except metadata.PackageNotFoundError:
            continue
        for requirement in map(Requirement, requires):
            name = carry.normalized(requirement.name)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            if name not in names and name not in found:
                found.add(name)
                todo.append(name)
    return found


def top_level_entries(dist: metadata.Distribution) -> set[str]:
    """The names a distribution installs directly in site-packages (modules, folders, its
    dist-info), from its RECORD."""
    return {Path(f).parts[0] for f in (dist.files or []) if not str(f).startswith("..")}


def build(target: Path) -> list[str]:
    """The stand-in at ``target``; returns the distributions it holds."""
    base = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base), "-m", "venv", "--without-pip", "--clear", str(target)], check=True)
    site = Path(sysconfig.get_paths(vars={"base": str(target), "platbase": str(target)})["purelib"])
    source = Path(sysconfig.get_paths()["purelib"])
    names = wanted()
    names |= device_needs(names)
    held = []
    for dist in metadata.distributions(path=[str(source)]):
        name = carry.normalized(dist.metadata["Name"])
        if name not in names:
            continue
        held.append(name)
        for entry in top_level_entries(dist):
            link = site / entry
            if (source / entry).exists() and not link.exists():
                if entry == "ray":
                    subprocess.run(["cp", "-al", str(source / entry), str(link)], check=True)
                else:
                    link.symlink_to(source / entry)
    for path in sorted((site / "ray").rglob("*"), key=lambda p: len(p.parts)):
        if path.exists() and carry.stripped(path.relative_to(site).as_posix()):
            subprocess.run(["rm", "-rf", str(path)], check=True)
    for script in ("ray", "serve"):  # the CLI strong_scaling.py starts nodes with
        text = (Path(sys.prefix) / "bin" / script).read_text().split("\n", 1)[1]
        (target / "bin" / script).write_text(f"#!{target / 'bin' / 'python3'}\n{text}")
        (target / "bin" / script).chmod(0o755)
    return sorted(held)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", type=Path, help="the folder of the virtual environment (replaced)")
    args = parser.parse_args(argv)
    held = build(args.target.resolve())
    missing = sorted(wanted() - set(held))
    print(f"stand-in at {args.target}: {len(held)} distributions; added for the device packages' own needs: "
          f"{', '.join(sorted(device_needs(wanted()))) or 'none'}; not in .venv (so not in the stand-in): "
          f"{', '.join(missing)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
