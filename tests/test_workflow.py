"""The Snakemake workflow: dry run of the default config, the smoke config end to end,
and rejection of a bad config before any job runs."""
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

import algorithms

ROOT = Path(__file__).resolve().parents[1]


def snakemake(tmp_path, *args):
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
           "--cores", "2", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def test_default_config_dry_run_covers_every_algorithm(tmp_path):
    res = snakemake(tmp_path, "-n", "--configfile", str(ROOT / "workflows/config/default.yaml"))
    assert res.returncode == 0, res.stderr
    config = yaml.safe_load((ROOT / "workflows/config/default.yaml").read_text())
    n_runs = len(config["datasets"]) * len(algorithms.available()) * len(config["seeds"])
    planned = re.search(r"^run_chain\s+(\d+)\s*$", res.stdout + res.stderr, re.MULTILINE)
    assert planned and int(planned.group(1)) == n_runs


def test_smoke_config_end_to_end(tmp_path):
    res = snakemake(tmp_path, "--configfile", str(ROOT / "workflows/config/smoke.yaml"))
    assert res.returncode == 0, res.stderr[-3000:]
    summary = pd.read_csv(tmp_path / "results/summary.csv")
    assert set(summary["algorithm"]) == set(algorithms.available())
    assert summary["final_log_joint"].notna().all()
    assert (summary["iterations"] == 5).all()


@pytest.mark.parametrize("edit, message", [
    ({"iteration": 5}, "iteration"),
    ({"iterations": 0}, "iterations"),
    ({"seeds": "zero"}, "seeds"),
])
def test_bad_config_stops_before_any_job(tmp_path, edit, message):
    config = yaml.safe_load((ROOT / "workflows/config/smoke.yaml").read_text())
    config.update(edit)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    res = snakemake(tmp_path, "--configfile", str(path))
    assert res.returncode != 0
    assert message in res.stdout + res.stderr
    assert not (tmp_path / "results").exists()


def test_unknown_algorithm_in_config_is_named(tmp_path):
    config = yaml.safe_load((ROOT / "workflows/config/smoke.yaml").read_text())
    config["algorithms"] = ["gibbs", "gibs"]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    res = snakemake(tmp_path, "-n", "--configfile", str(path))
    assert res.returncode != 0 and "gibs" in res.stdout + res.stderr
