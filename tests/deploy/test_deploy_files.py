"""The cluster recipe in deploy/, checked as far as a machine without docker or Kubernetes can.

Every YAML parses; every command that runs plait parses with plait's own argument parser; the
example config validates; runs go to object storage and nothing mounts a shared volume; the
manifests mount what the commands and the config point at; the Dockerfiles install what
scripts/setup.sh installs, pinned the same way; the images the cluster files run are the ones the
README builds. Nothing here starts Ray, docker or training.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
from pathlib import Path, PurePosixPath

import pytest
import yaml

from plait.cli import build_parser
from plait.config import load_config

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
README = DEPLOY / "README.md"
SETUP = ROOT / "scripts" / "setup.sh"
CONSTRAINTS = ROOT / "constraints.txt"
DOCKERFILES = {"cpu": DEPLOY / "docker" / "Dockerfile.cpu", "gpu": DEPLOY / "docker" / "Dockerfile.gpu"}
CLUSTER_YAML = DEPLOY / "ray-cluster.yaml"
RAYCLUSTER = DEPLOY / "kuberay" / "raycluster.yaml"
RAYJOB = DEPLOY / "kuberay" / "rayjob.yaml"
EXAMPLE_CONFIG = DEPLOY / "example-config.yaml"

SEPARATORS = {"&&", "||", ";", "|", "&"}

# What a shared file system looks like in a recipe: none of it may come back.
SHARED_STORAGE = re.compile(r"/mnt/shared|ReadWriteMany|persistentVolumeClaim|\bnfs|\befs\b|fs-[0-9a-f]{8,}", re.I)

# The settings example-config.yaml uses for object storage and elastic training, each as the
# smallest ray backend section that has it. While one of them does not validate (the branch that
# adds them is not merged yet), the tests that validate the whole example config are expected to
# fail; once all validate they must pass.
# ---- parsing helpers -----------------------------------------------------------------------------

def shell_commands(text: str) -> list[list[str]]:
    """The simple commands in a shell line, as argv lists (split at && ; | and the like)."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands, current = [], []
    for token in lexer:
        if token in SEPARATORS:
            commands.append(current)
            current = []
        else:
            current.append(token)
    commands.append(current)
    return [c for c in commands if c]


def plait_argv(argv: list[str]) -> list[str] | None:
    """The arguments after ``plait`` when the command runs plait (directly, or after the ``--``
    of ``ray job submit``), else None."""
    if argv and argv[0] == "plait":
        return argv[1:]
    if argv[:3] == ["ray", "job", "submit"] and "--" in argv:
        rest = argv[argv.index("--") + 1:]
        return rest[1:] if rest and rest[0] == "plait" else None
    return None


def option(argv: list[str], *names: str) -> str | None:
    """The value of an option given as ``--name value`` or ``--name=value``."""
    for i, token in enumerate(argv):
        for name in names:
            if token == name and i + 1 < len(argv):
                return argv[i + 1]
            if token.startswith(name + "="):
                return token.split("=", 1)[1]
    return None


def parse_plait(args: list[str], where: str):
    try:
        return build_parser().parse_args(args)
    except SystemExit as exc:  # argparse exits 2 on an unknown command or flag
        pytest.fail(f"{where}: `plait {shlex.join(args)}` is not accepted by plait's CLI (exit {exc.code})")


def readme_code_lines() -> list[str]:
    """Lines of the README's fenced code blocks, continuation lines joined."""
    lines, inside = [], False
    for line in README.read_text().splitlines():
        if line.strip().startswith("```"):
            inside = not inside
            continue
        if inside:
            lines.append(line)
    return [line for line in "\n".join(lines).replace("\\\n", " ").splitlines() if line.strip()]


def readme_commands() -> list[list[str]]:
    return [argv for line in readme_code_lines() for argv in shell_commands(line)]


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    joined, current = [], ""
    for line in path.read_text().splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.lstrip().startswith("#"):  # a comment inside a continued instruction
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        joined.append(current + line)
        current = ""
    result = []
    for text in joined:
        keyword, _, rest = text.strip().partition(" ")
        result.append((keyword.upper(), rest.strip()))
    return result


def pip_install_args(argv: list[str]) -> list[str] | None:
    """The arguments of ``pip install`` / ``python -m pip install``, else None."""
    for i in range(len(argv) - 1):
        if argv[i] == "pip" and argv[i + 1] == "install":
            return argv[i + 2:]
        if argv[i].startswith("pip") and re.fullmatch(r"pip[0-9.]*", argv[i]) and argv[i + 1] == "install":
            return argv[i + 2:]
    return None


VALUE_OPTIONS = {"-c", "--constraint", "-r", "--requirement", "-e", "--editable", "-i", "--index-url",
                 "--extra-index-url", "-f", "--find-links"}


def split_pip_args(args: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Options (with their values) and requirements of one pip install. ``-e X`` counts as the
    requirement X."""
    options: dict[str, list[str]] = {}
    requirements: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        if token in VALUE_OPTIONS and i + 1 < len(args):
            options.setdefault(token, []).append(args[i + 1])
            if token in ("-e", "--editable"):
                requirements.append(args[i + 1])
            i += 2
            continue
        if token.startswith("--") and "=" in token:
            name, value = token.split("=", 1)
            options.setdefault(name, []).append(value)
        elif token.startswith("-"):
            options.setdefault(token, [])
        else:
            requirements.append(token)
        i += 1
    return options, requirements


def constraint_files(options: dict[str, list[str]]) -> list[str]:
    return options.get("-c", []) + options.get("--constraint", [])


def is_local(requirement: str) -> bool:
    return requirement.startswith((".", "/"))


def extras(requirement: str) -> set[str]:
    found = re.search(r"\[([^\]]*)\]$", requirement)
    return {e.strip() for e in found.group(1).split(",") if e.strip()} if found else set()


def only_pip(requirements: list[str]) -> bool:
    """An upgrade of pip itself (setup.sh does it without constraints too)."""
    return bool(requirements) and all(re.match(r"pip\b", r) and not r.startswith("pip-") for r in requirements)


def constraint_pins() -> dict[str, str]:
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[name.strip().lower().replace("_", "-")] = version.strip()
    return pins


def setup_installs() -> list[tuple[dict[str, list[str]], list[str]]]:
    """The pip installs of scripts/setup.sh: each ``pip_install ...`` call's options and
    requirements (the function's definition is not a call)."""
    installs = []
    for line in SETUP.read_text().replace("\\\n", " ").splitlines():
        if line.lstrip().startswith("#"):
            continue
        for argv in shell_commands(line):
            while argv and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", argv[0]):  # VAR=value before a command
                argv = argv[1:]
            if argv and argv[0] == "pip_install" and argv[1:2] != ["()"]:  # a call, not the definition
                installs.append(split_pip_args(argv[1:]))
    assert installs, "scripts/setup.sh: no pip_install call found; the parser here needs updating"
    return installs


def setup_torch_pin() -> str:
    found = re.findall(r"torch==([0-9][^\s\"']*)", SETUP.read_text())
    assert found, "scripts/setup.sh pins no torch==X"
    assert len(set(found)) == 1, f"scripts/setup.sh pins torch more than one way: {found}"
    return found[0]


def dockerfile_installs(path: Path) -> list[tuple[dict[str, list[str]], list[str]]]:
    installs = []
    for keyword, rest in dockerfile_instructions(path):
        if keyword != "RUN":
            continue
        for argv in shell_commands(rest):
            args = pip_install_args(argv)
            if args is not None:
                installs.append(split_pip_args(args))
    return installs


def dockerfile_args(path: Path) -> dict[str, str]:
    values = {}
    for keyword, rest in dockerfile_instructions(path):
        if keyword == "ARG" and "=" in rest:
            name, value = rest.split("=", 1)
            values[name.strip()] = value.strip().strip('"')
    return values


def load_all(path: Path) -> list:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def load_one(path: Path) -> dict:
    docs = load_all(path)
    assert len(docs) == 1, f"{path.name}: expected one YAML document, found {len(docs)}"
    return docs[0]


def example_backend() -> dict:
    """The example config's backend section as written (read without validating it, so that the
    manifests are checked against it whether or not this checkout's config knows every setting)."""
    return load_one(EXAMPLE_CONFIG)["backend"]


def most_workers() -> int:
    """backend.trainer.num_workers, or the top of its range ([min, max])."""
    workers = example_backend()["trainer"]["num_workers"]
    return max(workers) if isinstance(workers, list) else workers


def credential_files() -> dict[str, str]:
    """The example config's credentials given as a file's path: key -> path."""
    backend = example_backend()
    return {key: backend[key] for key in ("cache_credentials", "artifacts_credentials")
            if isinstance(backend.get(key), str)}


def is_object_storage(location: str) -> bool:
    return "://" in location and not location.startswith("file://")


def ray_cluster_specs() -> list[tuple[str, dict]]:
    """(where, RayCluster spec) for the RayCluster and the cluster the RayJob makes."""
    return [("raycluster.yaml", load_one(RAYCLUSTER)["spec"]),
            ("rayjob.yaml", load_one(RAYJOB)["spec"]["rayClusterSpec"])]


def pod_specs(spec: dict) -> list[tuple[str, dict]]:
    pods = [("head", spec["headGroupSpec"]["template"]["spec"])]
    pods += [(f"worker group {g['groupName']}", g["template"]["spec"]) for g in spec.get("workerGroupSpecs", [])]
    return pods


def mounts(pod: dict, container: dict) -> list[tuple[str, dict]]:
    """(mountPath, volume) for each of a container's volume mounts."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    result = []
    for mount in container.get("volumeMounts", []):
        assert mount["name"] in volumes, f"volumeMount {mount['name']!r} names no volume of the pod"
        result.append((mount["mountPath"], volumes[mount["name"]]))
    return result


def under(path: str, directory: str) -> bool:
    return PurePosixPath(directory) in (PurePosixPath(path), *PurePosixPath(path).parents)


def rayjob_plait_args() -> list[str]:
    entrypoint = load_one(RAYJOB)["spec"]["entrypoint"]
    commands = [plait_argv(argv) for argv in shell_commands(entrypoint)]
    commands = [c for c in commands if c is not None]
    assert len(commands) == 1, f"rayjob.yaml: the entrypoint should run plait once: {entrypoint!r}"
    return commands[0]


def readme_images() -> dict[str, Path]:
    """Image name -> the Dockerfile the README builds it from."""
    images = {}
    for argv in readme_commands():
        if argv[:2] == ["docker", "build"]:
            dockerfile, tag = option(argv, "-f", "--file"), option(argv, "-t", "--tag")
            assert dockerfile and tag, f"README: a docker build without -f or -t: {shlex.join(argv)}"
            images[tag] = ROOT / dockerfile
    return images


# ---- every file parses ------------------------------------------------------------------------

def test_the_recipe_is_complete():
    for path in (README, *DOCKERFILES.values(), CLUSTER_YAML, RAYCLUSTER, RAYJOB, EXAMPLE_CONFIG):
        assert path.is_file(), f"{path.relative_to(ROOT)} is missing"


@pytest.mark.parametrize("path", sorted(DEPLOY.rglob("*.y*ml")), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_yaml_parses(path):
    docs = load_all(path)
    assert docs, f"{path.relative_to(ROOT)} is empty"
    assert all(isinstance(doc, dict) for doc in docs)


# ---- commands that run plait ------------------------------------------------------------------

def plait_commands() -> list[tuple[str, list[str], list[str]]]:
    """(where, the whole command, plait's arguments) for every plait command in deploy/."""
    found = [("README.md", argv, args) for argv in readme_commands() if (args := plait_argv(argv)) is not None]
    found.append(("kuberay/rayjob.yaml", ["plait", *rayjob_plait_args()], rayjob_plait_args()))
    cluster = load_one(CLUSTER_YAML)
    for key, value in cluster.items():
        if key.endswith("_commands"):
            for line in value:
                found += [(f"ray-cluster.yaml {key}", argv, args)
                          for argv in shell_commands(line) if (args := plait_argv(argv)) is not None]
    return found


def test_the_readme_and_the_rayjob_run_plait_train_on_ray():
    commands = plait_commands()
    assert any(where == "README.md" and args[0] == "train" for where, _, args in commands)
    assert rayjob_plait_args()[0] == "train"


@pytest.mark.parametrize("where,argv,args", plait_commands(),
                         ids=[f"{where} {' '.join(args[:1])} {i}" for i, (where, _, args) in enumerate(plait_commands())])
def test_each_plait_command_parses_with_plaits_cli(where, argv, args):
    parsed = parse_plait(args, where)
    if parsed.command in ("train", "experiment", "preprocess"):
        assert parsed.backend == "ray", f"{where}: `plait {shlex.join(args)}` should say --backend ray"
        assert parsed.config or getattr(parsed, "resume", None), f"{where}: no --config"
    if parsed.command in ("train", "experiment"):
        # Run directories (checkpoints, the model, logs) go to object storage, not to a volume.
        run_dir = getattr(parsed, "resume", None) or parsed.output_directory
        assert is_object_storage(run_dir), f"{where}: run directory {run_dir!r} should be on object storage (s3://...)"
    if parsed.command in ("predict", "evaluate"):
        for location in (parsed.model_path, parsed.output_directory):
            assert is_object_storage(location), f"{where}: {location!r} should be on object storage (s3://...)"
    config_path = getattr(parsed, "config", None)  # predict and evaluate take none
    if config_path and argv[:3] == ["ray", "job", "submit"]:
        working_dir = option(argv, "--working-dir")
        assert working_dir, f"{where}: `ray job submit` with a relative --config needs --working-dir"
        config = ROOT / working_dir / config_path
        assert config.is_file(), f"{where}: --config {config_path} is not in --working-dir {working_dir}"
        if config.resolve() != EXAMPLE_CONFIG:  # the example config is validated by its own test
            load_config(config)


def run_directories_read() -> list[tuple[str, str]]:
    """(where, run directory) for each run the README reads back: --resume, --model-path
    <run>/model, and the runs it syncs down from the bucket."""
    found = []
    for argv in readme_commands():
        args = plait_argv(argv)
        if args and (resume := option(args, "--resume")):
            found.append((f"plait {args[0]} --resume", resume))
        if args and (model := option(args, "--model-path", "-m")):
            found.append((f"plait {args[0]} --model-path", model.rstrip("/").rsplit("/", 1)[0]))
        if argv[:3] == ["aws", "s3", "sync"]:
            found.append(("aws s3 sync", re.sub(r"(_run_\d+)/.*", r"\1", argv[3])))
    return found


def test_the_runs_the_readme_reads_back_are_where_its_train_commands_write():
    """Resume, predict, evaluate and TensorBoard read <output-directory>/<experiment>_run_<n> of
    a run the README's own train commands start."""
    roots = {(option(args, "--output-directory"), option(args, "--experiment-name"))
             for argv in readme_commands() if (args := plait_argv(argv)) and args[0] == "train"
             and option(args, "--output-directory")}
    read = run_directories_read()
    assert {where for where, _ in read} >= {"plait train --resume", "plait predict --model-path", "aws s3 sync"}
    for where, run_dir in read:
        assert is_object_storage(run_dir), f"README {where}: {run_dir} is not on object storage"
        parent, name = run_dir.rsplit("/", 1)
        assert any(parent == root and re.fullmatch(rf"{re.escape(experiment)}_run_\d+", name)
                   for root, experiment in roots), (
            f"README {where}: {run_dir} is not <output-directory>/<experiment>_run_<n> of a train command "
            f"({sorted(roots)})")


def test_a_wrong_flag_is_caught():
    """The check above is worth something: plait's parser refuses what it does not know."""
    with pytest.raises(pytest.fail.Exception):
        parse_plait(["train", "--config", "c.yaml", "--no-such-flag"], "here")
    with pytest.raises(pytest.fail.Exception):
        parse_plait(["fit", "--config", "c.yaml"], "here")


# ---- the example config -----------------------------------------------------------------------

def test_the_example_config_validates_and_runs_on_ray_gpus():
    config = load_config(EXAMPLE_CONFIG)
    backend = config.backend
    assert backend.type == "ray"
    assert is_object_storage(backend.cache_dir or ""), "the cache belongs on object storage (s3://...)"
    assert backend.trainer.use_gpu is True
    assert backend.trainer.strategy.type == "ddp"
    # Elastic: from one worker up to one per GPU worker pod, spread over the nodes.
    assert list(backend.trainer.num_workers) == [1, 2]
    assert backend.trainer.placement_strategy == "SPREAD"
    # The cache and the run directory read the same mounted file; neither is inline in the config.
    assert backend.cache_credentials == backend.artifacts_credentials == "/etc/plait/secrets/s3.json"


def test_the_example_config_keeps_credentials_out_of_the_file():
    backend = example_backend()
    for key in ("cache_credentials", "artifacts_credentials", "credentials"):
        assert not isinstance(backend.get(key), dict), (
            f"backend.{key}: credentials come from a mounted file, not the config")
    assert set(credential_files()) == {"cache_credentials", "artifacts_credentials"}


# ---- Kubernetes manifests ---------------------------------------------------------------------

def test_kuberay_kinds_and_ray_version():
    ray_pin = constraint_pins()["ray"]
    assert load_one(RAYCLUSTER)["apiVersion"] == "ray.io/v1" and load_one(RAYCLUSTER)["kind"] == "RayCluster"
    assert load_one(RAYJOB)["apiVersion"] == "ray.io/v1" and load_one(RAYJOB)["kind"] == "RayJob"
    for where, spec in ray_cluster_specs():
        assert str(spec["rayVersion"]) == ray_pin, f"{where}: rayVersion {spec['rayVersion']} != constraints.txt ray=={ray_pin}"
        for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
            params = group.get("rayStartParams", {})
            assert all(isinstance(v, str) for v in params.values()), f"{where}: rayStartParams values must be strings"


def test_the_head_is_cpu_only_and_the_workers_have_gpus():
    num_workers = most_workers()
    for where, spec in ray_cluster_specs():
        for container in spec["headGroupSpec"]["template"]["spec"]["containers"]:
            for kind in ("requests", "limits"):
                assert "nvidia.com/gpu" not in container.get("resources", {}).get(kind, {}), f"{where}: the head asks for a GPU"
        gpus = 0
        for group in spec["workerGroupSpecs"]:
            per_pod = sum(int(c["resources"]["limits"].get("nvidia.com/gpu", 0)) for c in group["template"]["spec"]["containers"])
            assert per_pod > 0, f"{where}: worker group {group['groupName']} has no nvidia.com/gpu limit"
            gpus += per_pod * int(group.get("maxReplicas", group.get("replicas", 1)))
        message = f"{where}: {gpus} GPUs for up to {num_workers} workers (backend.trainer.num_workers)"
        assert gpus >= num_workers, message
        if where == "rayjob.yaml":  # a cluster made for this run: no GPU it cannot use
            assert gpus == num_workers, message


def test_the_rayjob_mounts_its_config_where_the_entrypoint_reads_it():
    job = load_one(RAYJOB)["spec"]
    assert job["shutdownAfterJobFinishes"] is True
    config_path = option(rayjob_plait_args(), "--config", "-c")
    assert config_path, "the RayJob's entrypoint names no --config"
    pod = job["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]  # the entrypoint runs on the head
    served = {}
    for mount_path, volume in mounts(pod, pod["containers"][0]):
        if "configMap" in volume:
            items = volume["configMap"].get("items")
            for item in items or []:
                served[str(PurePosixPath(mount_path) / item["path"])] = (volume["configMap"]["name"], item["key"])
            if not items:
                served[mount_path] = (volume["configMap"]["name"], None)
    match = served.get(config_path) or served.get(str(PurePosixPath(config_path).parent))
    assert match, f"--config {config_path} is not on a ConfigMap the head mounts (mounted: {sorted(served)})"
    name, key = match
    key = key or PurePosixPath(config_path).name
    # The README makes that ConfigMap from the example config, under that key.
    made = [argv for argv in readme_commands() if argv[:4] == ["kubectl", "create", "configmap", name]]
    assert made, f"README: no `kubectl create configmap {name} ...`"
    source = option(made[0], "--from-file")
    assert source and source.split("=", 1)[0] == key, f"README: configmap {name} should hold the key {key}"
    assert (ROOT / source.split("=", 1)[-1]).resolve() == EXAMPLE_CONFIG


def test_the_rayjob_writes_its_run_to_object_storage():
    output = option(rayjob_plait_args(), "--output-directory")
    assert output and output.startswith("s3://"), f"rayjob.yaml: --output-directory {output!r} should be an s3:// URL"


def test_no_pod_mounts_a_shared_volume_and_every_pod_mounts_the_credentials():
    for where, spec in ray_cluster_specs():
        for pod_name, pod in pod_specs(spec):
            kinds = {kind for volume in pod.get("volumes", []) for kind in volume if kind != "name"}
            assert kinds <= {"secret", "configMap", "emptyDir"}, (
                f"{where} {pod_name}: volumes of kind {sorted(kinds - {'secret', 'configMap', 'emptyDir'})}; runs "
                "go to object storage, so no pod needs storage shared with another")
            secrets = [p for p, v in mounts(pod, pod["containers"][0]) if "secret" in v]
            for key, path in credential_files().items():
                assert any(under(path, p) for p in secrets), (
                    f"{where} {pod_name}: backend.{key} {path} is not on a mounted Secret")


def test_nothing_in_deploy_uses_a_shared_volume():
    assert not (DEPLOY / "kuberay" / "shared-storage.yaml").exists()
    for path in sorted(p for p in DEPLOY.rglob("*") if p.is_file()):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            assert not SHARED_STORAGE.search(line), f"{path.relative_to(ROOT)}:{number}: {line.strip()}"


def test_the_shared_volume_check_catches_one():
    """The check above is worth something: the old recipe's lines are caught."""
    for line in ("--volume /mnt/shared:/mnt/shared", "accessModes: [ReadWriteMany]",
                 "persistentVolumeClaim: {claimName: plait-shared}", "sudo mount -t nfs4 fs-0123456789abcdef0.efs"):
        assert SHARED_STORAGE.search(line), line


# ---- Ray cluster launcher ---------------------------------------------------------------------

def test_the_cluster_launcher_yaml_follows_rays_schema():
    spec = importlib.util.find_spec("ray")
    if spec is None:
        pytest.skip("ray is not installed (the ray extra)")
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(spec.origin).parent / "autoscaler" / "ray-schema.json").read_text())
    jsonschema.validate(load_one(CLUSTER_YAML), schema)


def test_the_cluster_launcher_starts_ray_with_flags_ray_knows():
    pytest.importorskip("ray")
    from ray.scripts.scripts import start

    cluster = load_one(CLUSTER_YAML)
    heads = 0
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        starts = [argv for line in cluster[key] for argv in shell_commands(line) if argv[:2] == ["ray", "start"]]
        assert len(starts) == 1, f"{key}: expected one `ray start`"
        ctx = start.make_context("start", starts[0][2:])  # raises on an unknown flag
        heads += bool(ctx.params["head"])
        assert ctx.params["head"] == (key == "head_start_ray_commands")
        assert ctx.params["head"] or ctx.params["address"]
    assert heads == 1


def test_the_cluster_launcher_has_a_cpu_head_and_gpu_workers():
    cluster = load_one(CLUSTER_YAML)
    types = cluster["available_node_types"]
    head = types[cluster["head_node_type"]]
    assert not head.get("resources", {}).get("GPU"), "the head should be CPU-only"
    gpu_types = {name: t for name, t in types.items() if t.get("resources", {}).get("GPU")}
    assert gpu_types, "no GPU worker node type"
    gpus = sum(t["resources"]["GPU"] * t.get("max_workers", 0) for t in gpu_types.values())
    assert gpus >= most_workers()
    for name, node in gpu_types.items():
        assert node.get("max_workers", 0) >= node.get("min_workers", 0)
    # No host folder is mounted into the containers (runs go to object storage); the
    # credentials file is, by file_mounts.
    run_options = " ".join(cluster["docker"].get("run_options", []))
    assert not re.search(r"(^|\s)(-v|--volume|--mount)[ =]", run_options), run_options
    for key, path in credential_files().items():
        assert any(under(path, target) for target in cluster.get("file_mounts", {})), (
            f"backend.{key} {path} is not among the launcher's file_mounts")


# ---- images -----------------------------------------------------------------------------------

def cluster_images() -> list[tuple[str, str, str]]:
    """(where, role, image): role is head or gpu."""
    found = []
    cluster = load_one(CLUSTER_YAML)
    docker = cluster["docker"]
    found.append(("ray-cluster.yaml", "head", docker.get("head_image") or docker["image"]))
    for name, node in cluster["available_node_types"].items():
        if name == cluster["head_node_type"]:
            continue
        image = node.get("docker", {}).get("worker_image") or docker.get("worker_image") or docker["image"]
        found.append((f"ray-cluster.yaml {name}", "gpu" if node.get("resources", {}).get("GPU") else "cpu", image))
    for where, spec in ray_cluster_specs():
        for pod_name, pod in pod_specs(spec):
            for container in pod["containers"]:
                gpu = int(container.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0)) > 0
                found.append((f"{where} {pod_name}", "head" if pod_name == "head" else ("gpu" if gpu else "cpu"),
                              container["image"]))
    return found


def test_the_cluster_files_run_the_images_the_readme_builds():
    images = readme_images()
    assert {path.name for path in images.values()} == {"Dockerfile.cpu", "Dockerfile.gpu"}
    for path in images.values():
        assert path.is_file(), f"README builds from {path}, which does not exist"
    pushed = {argv[2] for argv in readme_commands() if argv[:2] == ["docker", "push"]}
    assert pushed == set(images), "README should push every image it builds"
    for where, role, image in cluster_images():
        assert image in images, f"{where} runs {image}, which the README does not build"
        expected = "Dockerfile.gpu" if role == "gpu" else "Dockerfile.cpu"
        assert images[image].name == expected, f"{where} ({role}) runs {image}, built from {images[image].name}"


# ---- Dockerfiles ------------------------------------------------------------------------------

@pytest.mark.parametrize("flavour", sorted(DOCKERFILES))
def test_the_dockerfile_installs_what_setup_sh_installs(flavour):
    path = DOCKERFILES[flavour]
    installs = dockerfile_installs(path)
    assert installs, f"{path.name}: no pip install"
    copied = {}
    for keyword, rest in dockerfile_instructions(path):
        if keyword == "COPY":
            parts = [p for p in rest.split() if not p.startswith("--")]
            for source in parts[:-1]:
                copied[source] = parts[-1]
    assert "constraints.txt" in copied, f"{path.name}: constraints.txt is not copied into the image"
    constraints_in_image = copied["constraints.txt"]
    for options, requirements in installs:
        if only_pip(requirements):
            continue
        files = constraint_files(options)
        assert files, f"{path.name}: `pip install {' '.join(requirements)}` is not pinned with -c constraints.txt"
        assert all(f == constraints_in_image or f.endswith("/constraints.txt") or f == "constraints.txt" for f in files)
        assert constraints_in_image in files, f"{path.name}: -c {files} is not where constraints.txt was copied"

    requirements = [r for _, reqs in installs for r in reqs]
    # The torch pin of scripts/setup.sh, installed first and alone as setup.sh does.
    torch = [r for r in requirements if re.match(r"torch\b", r)]
    assert torch == [f"torch=={setup_torch_pin()}"], f"{path.name}: torch {torch}, setup.sh torch=={setup_torch_pin()}"
    torch_step = next(i for i, (_, reqs) in enumerate(installs) if any(re.match(r"torch\b", r) for r in reqs))
    assert installs[torch_step][1] == torch, f"{path.name}: torch should be installed alone"
    local = [i for i, (_, reqs) in enumerate(installs) if any(is_local(r) for r in reqs)]
    assert local and torch_step < local[0], f"{path.name}: install torch before plait, as setup.sh does"

    # Every other requirement setup.sh installs, and plait with its extras less `test`.
    for options, reqs in setup_installs():
        for requirement in reqs:
            if is_local(requirement):
                wanted = extras(requirement) - {"test"}
                found = [extras(r) for r in requirements if is_local(r)]
                assert found == [wanted], f"{path.name}: plait extras {found}, setup.sh {sorted(wanted)} (less test)"
            else:
                assert requirement in requirements, f"{path.name}: setup.sh installs {requirement}, the image does not"


@pytest.mark.parametrize("flavour", sorted(DOCKERFILES))
def test_the_dockerfile_runs_as_a_user_with_plait_on_path(flavour):
    path = DOCKERFILES[flavour]
    instructions = dockerfile_instructions(path)
    users = [rest.split(":")[0] for keyword, rest in instructions if keyword == "USER"]
    assert users and users[-1] not in ("root", "0"), f"{path.name}: the image should run as a non-root user"
    assert any(keyword == "WORKDIR" for keyword, _ in instructions), f"{path.name}: no WORKDIR"
    runs = [argv for keyword, rest in instructions if keyword == "RUN" for argv in shell_commands(rest)]
    assert ["plait", "--help"] in [argv[:2] for argv in runs], f"{path.name}: no `plait --help` smoke check"
    # DeepSpeed compiles its CUDA ops at install unless told not to: when setup.sh installs it,
    # the images must say DS_BUILD_OPS=0 as well.
    if re.search(r"deepspeed", SETUP.read_text(), re.I):
        assert re.search(r"\bDS_BUILD_OPS=0\b", path.read_text()), f"{path.name}: set DS_BUILD_OPS=0 as setup.sh does"


@pytest.mark.parametrize("flavour", sorted(DOCKERFILES))
def test_the_dockerfile_base_is_rays_image_at_the_pinned_ray(flavour):
    path = DOCKERFILES[flavour]
    args = dockerfile_args(path)
    assert args.get("RAY_VERSION") == constraint_pins()["ray"], f"{path.name}: RAY_VERSION != constraints.txt's ray pin"
    base = next(rest for keyword, rest in dockerfile_instructions(path) if keyword == "FROM").split()[0]
    base = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args[m.group(1) or m.group(2)], base)
    assert base.startswith(f"rayproject/ray:{constraint_pins()['ray']}-") and base.endswith(f"-{flavour}"), base
    other = DOCKERFILES["gpu" if flavour == "cpu" else "cpu"]
    assert dockerfile_args(other).get("PYTHON_TAG") == args.get("PYTHON_TAG"), "both images need the same Python"


@pytest.mark.parametrize("flavour", sorted(DOCKERFILES))
def test_the_build_context_sends_what_the_dockerfile_copies(flavour):
    path = DOCKERFILES[flavour]
    ignore = path.with_name(path.name + ".dockerignore")
    assert ignore.is_file(), f"{ignore.name}: without it the build sends .venv/ and everything else"
    kept = {line[1:].strip().rstrip("/") for line in ignore.read_text().splitlines() if line.startswith("!")}
    for keyword, rest in dockerfile_instructions(path):
        if keyword == "COPY" and "--from" not in rest:
            sources = [p for p in rest.split() if not p.startswith("--")][:-1]
            for source in sources:
                assert source.rstrip("/") in kept, f"{ignore.name} leaves out {source}, which {path.name} copies"
                assert (ROOT / source).exists(), f"{path.name} copies {source}, which the repository lacks"
