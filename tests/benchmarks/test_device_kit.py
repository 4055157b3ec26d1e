"""The device kit (benchmarks/device): its CPU dry-run, so that the GPU check still runs when a
session is lent a device, and the carry's plan, checked without downloading anything."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT / "benchmarks" / "device"
DRY_RUN_STEPS = "env,probes,ecd.precision,strategies.zero3,llm.write_model,llm.lora_plain,llm.qlora_plain"
"""The dry-run's parts that CI runs (about 35 s on 2 cores): every GPU path's CPU twin that is
cheap; the Ray and scaling steps start clusters and take minutes (the README's full dry-run).
llm.qlora_plait trains plait's QLoRA since issue #39 (13 s here), which
tests/models/test_llm_quantization.py covers on the CPU."""
DEVICE_ENVIRONMENT = {**default_environment(), "python_version": "3.12", "python_full_version": "3.12.3",
                      "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
                      "implementation_name": "cpython", "platform_python_implementation": "CPython"}


def load(name: str):
    """A module of the kit, without leaving its folder on sys.path for the rest of the suite."""
    spec = importlib.util.spec_from_file_location(f"device_kit_{name}", KIT / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    path = list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = path
    return module


carry = load("carry")
check = load("check")


# ---- the dry-run ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("device-check")
    proc = subprocess.run([sys.executable, str(KIT / "check.py"), "--cpu", "--size", "tiny", "--steps", DRY_RUN_STEPS,
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    report = json.loads((out / "device_check.json").read_text())
    report["console"], report["exit_code"] = proc.stdout + proc.stderr, proc.returncode
    report["log"] = (out / "device_check.log").read_text()
    return report


def parts(report: dict, step: str) -> dict:
    return report["steps"][step]["parts"]


def test_the_dry_run_passes_every_step_it_runs_and_prints_their_table(dry_run):
    assert dry_run["exit_code"] == 0, dry_run["console"][-3000:] + dry_run["log"][-5000:]
    assert dry_run["mode"] == "cpu"
    assert {n: s["status"] for n, s in dry_run["steps"].items()} == dict.fromkeys(
        ["env", "probes", "ecd", "strategies", "llm"], "ok")
    for name in dry_run["steps"]:
        assert re.search(rf"^  {name} +ok ", dry_run["console"], re.M)


def test_the_installed_versions_and_apis_are_what_plait_needs(dry_run):
    env = parts(dry_run, "env")
    assert env["ranges"]["outside"] == []
    assert env["api"]["status"] == "ok"
    assert env["versions"]["imports"]["plait"] == "ok"
    assert env["gpu"]["available"] is False


def test_with_cuda_present_plait_would_pick_the_gpu_nccl_and_gpu_resources(dry_run):
    probes = parts(dry_run, "probes")
    declared = next(s for s in check.STEPS if s.name == "probes").parts
    assert {n: p["status"] for n, p in probes.items()} == dict.fromkeys(declared, "ok")
    assert probes["process_group"]["got"] == {"ddp": "nccl", "fsdp": "nccl"}
    assert probes["autocast"]["autocast"] == [["cpu", "bfloat16"]]
    assert isinstance(probes["fp16"]["plait_supports_fp16"], bool)


def test_the_hand_written_loop_does_plaits_work_in_every_precision(dry_run):
    precision = parts(dry_run, "ecd")["precision"]
    runs = precision["runs"]
    # Same weights, permutations and dropout: fp32's final loss is plait's to the last digit.
    assert runs["plait_fp32"]["final_loss"] == runs["hand_fp32"]["final_loss"]
    assert {"plait_bf16", "hand_bf16", "hand_fp16"} <= set(runs)
    assert precision["all_within_noise"]


def test_deepspeed_zero3_trains_in_a_torchrun_group_of_one_over_gloo(dry_run):
    zero3 = parts(dry_run, "strategies")["zero3"]
    assert (zero3["process_group"], zero3["device"]) == ("gloo", "cpu")
    assert set(parts(dry_run, "strategies")) == {"zero3"}  # --steps ran that part alone


def test_the_llm_parts_run_and_the_gpu_only_one_says_why_it_was_skipped(dry_run):
    llm = parts(dry_run, "llm")
    assert llm["lora_plain"]["tokens_per_s"] > 0 and llm["lora_plain"]["weights"] == "bfloat16"
    assert llm["qlora_plain"]["status"] == "skipped" and "GPU" in llm["qlora_plain"]["reason"]


def test_unknown_steps_and_parts_are_refused_with_the_names_there_are():
    with pytest.raises(SystemExit, match="the steps are env, probes, ecd"):
        check.selection("ecd,gpu")
    with pytest.raises(SystemExit, match="its parts are wine, synthetic, precision"):
        check.selection("ecd.fp8")
    assert check.selection("ray.serve,ecd") == {"ecd": None, "ray": frozenset({"serve"})}


# ---- the README and the device command -------------------------------------------------------------------

def test_the_readme_lists_every_step_with_its_budget_and_parts():
    readme = (KIT / "README.md").read_text()
    for step in check.STEPS:
        row = re.search(rf"^\| `{step.name}` \| (\d+) \| ([^|]+) \|", readme, re.M)
        assert row, f"README.md has no row for the step {step.name}"
        assert int(row[1]) == step.budget_s
        assert set(row[2].replace(",", " ").split()) == set(step.parts)
    assert sum(s.budget_s for s in check.STEPS if s.by_default) <= check.DEVICE_BUDGET_S  # one call
    assert all(s.budget_s <= check.DEVICE_BUDGET_S for s in check.STEPS if not s.by_default)  # a call of its own


def test_the_device_command_fits_the_device_tool_and_runs_the_check():
    readme = (KIT / "README.md").read_text()
    command = re.search(r"## There: the one command.*?```bash\n(.*?)\n```", readme, re.S)[1]
    assert len(command) < 2000 and "\n" not in command
    assert carry.ARCHIVE.relative_to(ROOT).as_posix() in command
    assert "benchmarks/device/check.py --out $OUT" in command
    timeout = int(re.search(r"timeout -k \d+ (\d+) ", command)[1])
    assert check.DEVICE_BUDGET_S + 30 < timeout <= 590  # the check, its kills' grace, inside the tool's 600 s


# ---- the carry's plan --------------------------------------------------------------------------------------

def carried() -> set[str]:
    return {carry.normalized(p.name) for p in carry.PACKAGES}


def device() -> set[str]:
    return {carry.normalized(n) for n in carry.DEVICE_PACKAGES}


def test_every_carried_package_has_one_pinned_version():
    planned = carry.plan()
    assert len({carry.normalized(p.name) for p, _ in planned}) == len(planned)
    assert all(re.fullmatch(r"\d+(\.\w+)+", version) for _, version in planned)


def test_a_carried_package_the_device_has_is_carried_for_its_version():
    shadowing = {carry.normalized(p.name) for p in carry.PACKAGES if p.shadows}
    assert carried() & device() == shadowing


def test_every_carried_package_finds_what_it_requires_on_the_device_or_in_the_carry():
    """Each carried package's requirements (no extras, markers of the device's Python 3.12 on
    Linux x86-64), read from this environment's copy of it."""
    lacking = {}
    for package in carry.PACKAGES:
        try:
            requires = metadata.requires(package.name) or []
        except metadata.PackageNotFoundError:
            continue  # not installed here (bitsandbytes): its needs (torch, numpy) are the device's
        for text in requires:
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate({**DEVICE_ENVIRONMENT, "extra": ""}):
                continue
            if carry.normalized(requirement.name) not in carried() | device():
                lacking.setdefault(package.name, []).append(requirement.name)
    assert lacking == {}


def third_party_imports() -> dict[str, set[str]]:
    """Top-level module -> the dotted names plait imports from it, over every file of plait/."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / "plait").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            for name in names:
                top = name.split(".")[0]
                if top != "plait" and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(name)
    return found


def test_every_package_plait_imports_is_on_the_device_carried_or_left_out_with_a_reason():
    distributions = metadata.packages_distributions()
    unplanned = set()
    for module in third_party_imports():
        names = {carry.normalized(d) for d in distributions.get(module, [module])}
        if not names & (carried() | device() | set(carry.NOT_CARRIED)):
            unplanned.add(module)
    assert unplanned == set()


def test_stripping_keeps_every_ray_module_plait_imports_and_bitsandbytes_cuda13_build():
    for name in third_party_imports()["ray"]:
        path = name.replace(".", "/")
        assert carry.stripped(f"{path}.py") is None and carry.stripped(f"{path}/__init__.py") is None, name
    assert carry.stripped("ray/jars/ray_dist.jar") and carry.stripped("ray/rllib/algorithms/ppo.py")
    assert carry.stripped("bitsandbytes/libbitsandbytes_cuda130.so") is None
    assert carry.stripped("bitsandbytes/libbitsandbytes_cpu.so") is None
    for other in ("cuda118", "cuda128", "cuda132", "rocm72", "xpu2026"):
        assert carry.stripped(f"bitsandbytes/libbitsandbytes_{other}.so"), other
    assert {p.split("/")[0] for p in carry.STRIP} <= carried() | {"*"}


def test_the_git_tree_leaves_the_carry_most_of_the_64_mib():
    assert carry.git_tree_bytes() < carry.LIMIT_BYTES // 4
