"""The workflow passes `snakemake --lint` (default and paper configs), and its software
environment (workflows/envs/dpmmbench.yaml, used with --software-deployment-method conda)
pins what pyproject.toml pins, with the same bounds, and installs this package."""
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from conftest import needs_config

ROOT = Path(__file__).resolve().parents[1]
ENV_FILE = ROOT / "workflows" / "envs" / "dpmmbench.yaml"
# the default config is what a bare `snakemake --lint` reads
PAPER_CONFIGS = sorted(p for p in (ROOT / "workflows" / "config").glob("*.yaml") if p.name != "default.yaml")

#: a conda match spec of the form `name` or `name<bounds>` (bounds as PEP 440 specifiers)
CONDA_SPEC = re.compile(r"^(?P<name>[A-Za-z0-9_.\-]+)\s*(?P<bounds>.*)$")


def _conda_specs(dependencies):
    """Canonical name -> SpecifierSet of the env's conda dependencies (not its pip section)."""
    specs = {}
    for dep in dependencies:
        if isinstance(dep, str):
            match = CONDA_SPEC.match(dep)
            assert match, f"unparsed conda dependency {dep!r}"
            specs[canonicalize_name(match["name"])] = SpecifierSet(match["bounds"].replace(" ", ""))
    return specs


def _pip_lines(dependencies):
    return [line for dep in dependencies if isinstance(dep, dict) for line in dep.get("pip", [])]


# The rules' lint is the same whatever the config: the fast loop lints with the default config,
# and parses every paper config in its dry run (tests/test_workflow.py); the slow tests lint
# with each paper config too.
@pytest.mark.parametrize("config", [pytest.param(None, id="default"),
                                    *(pytest.param(c, id=c.name, marks=[needs_config(c), pytest.mark.slow])
                                      for c in PAPER_CONFIGS)])
def test_snakemake_lint_finds_nothing(config):
    """`snakemake --lint` at the repository root (the venv's Snakemake) exits 0 and prints no
    lint, with the default config and with each paper config (skipped where a config names
    an optional peer that is not installed: the workflow stops on it, by design)."""
    args = ["--configfile", str(config)] if config else []
    res = subprocess.run([sys.executable, "-m", "snakemake", "--lint", *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "Lints for" not in out and "Congratulations, your workflow is in a good condition!" in out, out[-3000:]


def test_env_pins_match_pyproject():
    """Every runtime dependency of pyproject.toml is in the env with the same bounds (an extra
    such as dask[distributed] as its own package, bounded like its parent), python as
    requires-python, and the env holds nothing pyproject does not ask for besides pip."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load(ENV_FILE.read_text())
    conda = _conda_specs(env["dependencies"])
    expected = {"python": SpecifierSet(project["requires-python"]), "pip": SpecifierSet()}
    for line in project["dependencies"]:
        req = Requirement(line)
        for name in [req.name, *sorted(req.extras)]:
            expected[canonicalize_name(name)] = req.specifier
    assert conda == expected


# Parses the workflow (no DAG, so no conda needed) with or without conda deployment and prints
# what its jobs would run with.
_PROBE = """
import json, os, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import DeploymentMethod, DeploymentSettings, OutputSettings, ResourceSettings

root = Path(sys.argv[1])
methods = {DeploymentMethod.CONDA} if sys.argv[2] == "conda" else set()
with SnakemakeApi(OutputSettings()) as api:
    wf = api.workflow(resource_settings=ResourceSettings(cores=1), snakefile=root / "Snakefile", workdir=root,
                      deployment_settings=DeploymentSettings(deployment_method=methods))
    wf.lint()
    rules = [r for r in wf._workflow.rules if r.shellcmd]
    print(json.dumps({"root": os.environ.get("DPMMBENCH_ROOT"),
                      "python": sorted({r.params.python for r in rules}),
                      "envs": sorted({str(Path(r.snakefile).parent / r.conda_env) for r in rules})}))
"""


def _probe(method):
    env = {k: v for k, v in os.environ.items() if k != "DPMMBENCH_ROOT"}
    res = subprocess.run([sys.executable, "-c", _PROBE, str(ROOT), method], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # a pip resolution in a subprocess (~4 s)
def test_env_installs_this_package():
    """The pip section installs this checkout, editable, from the folder the workflow exports
    as DPMMBENCH_ROOT under --software-deployment-method conda (Snakemake copies the env file
    into its conda prefix and conda runs pip there, so a path relative to the env file would
    not find the checkout); every job with a command declares the env and runs the env's
    `python`. Without conda deployment, jobs run in Snakemake's interpreter and nothing is
    exported."""
    lines = _pip_lines(yaml.safe_load(ENV_FILE.read_text())["dependencies"])
    assert lines == ["-e ${DPMMBENCH_ROOT}"]
    conda = _probe("conda")
    assert conda == {"root": str(ROOT), "python": ["python"], "envs": [str(ENV_FILE)]}
    assert tomllib.loads((Path(conda["root"]) / "pyproject.toml").read_text())["project"]["name"] == "dpmmbench"
    assert _probe("none") == {"root": None, "python": [sys.executable], "envs": [str(ENV_FILE)]}
