"""docs/deploy.md: its speed-up table is generated from the reproduction records (regenerated
here and compared, byte for byte), its workflow config snippets pass the workflow's own checks,
and its dask-jobqueue configuration, exactly as the page writes it, renders the SLURM and PBS
job scripts it promises (dask-jobqueue needs no batch system for that)."""
from __future__ import annotations

import json
import re
from importlib.util import find_spec
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dpmmbench.reports import deploy_doc
from dpmmbench.workflows.cluster import THREAD_VARIABLES, scheduler_file_address, thread_environment
from test_workflow import SMOKE, check_before_any_job

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / deploy_doc.DOC

needs_jobqueue = pytest.mark.skipif(find_spec("dask_jobqueue") is None,
                                    reason="dask-jobqueue is not installed: pip install -e '.[hpc]'")


def blocks(language: str) -> list[str]:
    """The fenced code blocks of docs/deploy.md in ``language``, in page order."""
    return re.findall(rf"^```{language}\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.M | re.S)


# ---- the generated speed-up table -------------------------------------------------------------

def test_the_speedup_table_is_what_the_records_give():
    """The block between the markers is what the generator makes of the committed records."""
    text = PAGE.read_text(encoding="utf-8")
    assert deploy_doc.render(text, deploy_doc.table(deploy_doc.speedup_rows(ROOT))) == text
    assert deploy_doc.main(["--root", str(ROOT), "--check"]) == 0
    rows = deploy_doc.speedup_rows(ROOT)
    assert len(rows) and set(rows["record"]) <= {p.name for p in (ROOT / deploy_doc.RECORDS).iterdir()}
    assert "MODELLED" in text.split(deploy_doc.BEGIN, 1)[1]


#: the data set of the small records below, as a record's tables name it
DATASET = "synth-chang2013?n=1000"


def record(root: Path, scaling: pd.DataFrame, test_fraction=0.2) -> Path:
    """A reproduction record of :data:`DATASET` under ``root``; the page to generate, stale."""
    config = root / "workflows" / "config" / "tiny.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(yaml.safe_dump({"datasets": {"tiny": DATASET}, "test_fraction": test_fraction}))
    folder = root / deploy_doc.RECORDS / "tiny"
    folder.mkdir(parents=True)
    (folder / "record.json").write_text(json.dumps({"config": "workflows/config/tiny.yaml"}))
    scaling.to_csv(folder / "scaling.csv", index=False)
    page = root / deploy_doc.DOC
    page.write_text(f"# page\n\nbefore\n\n{deploy_doc.BEGIN}\nstale\n{deploy_doc.END}\n\nafter\n")
    return page


def modelled(variant, times: dict) -> pd.DataFrame:
    return pd.DataFrame({"variant": variant, "workers": list(times), "iteration_s": list(times.values()),
                         "speedup": float("nan"), "dataset": DATASET, "source": "modelled"})


def test_rows_are_the_records_modelled_times(tmp_path):
    """A speed-up is the modelled one-worker time over the modelled W-worker time of the same
    algorithm; the size is the record's data set less its held-out part; option variants and
    runs measured at one worker count are left out; a missing worker count is named; and --check tells a stale page (exit 1) from an
    up-to-date one."""
    times = {1: 1.0, 2: 0.6, 4: 0.4, 8: 0.25, 16: 0.2, 30: 0.3, 32: 0.31, 64: 0.5}
    measured = pd.DataFrame({"variant": "subc", "workers": [1, 2], "iteration_s": [1.1, 0.7], "speedup": 1.0,
                             "dataset": DATASET, "source": "measured"})
    once = pd.DataFrame({"variant": "auxvar", "workers": [1], "iteration_s": [0.9], "speedup": 1.0,
                         "dataset": DATASET, "source": "measured"})  # one worker count: no prediction
    scaling = pd.concat([measured, once, modelled("subc", times), modelled("subc-k50", times),
                         modelled("auxvar", times)], ignore_index=True)
    page = record(tmp_path, scaling)
    rows = deploy_doc.speedup_rows(tmp_path)
    assert rows[["record", "dataset", "points", "dims", "algorithm", "measured_at"]].values.tolist() == [
        ["tiny", DATASET, 800, 2, "subc", "1, 2"]]
    assert [rows.iloc[0][f"speedup_{w}"] for w in deploy_doc.SHOWN] == [times[1] / times[w] for w in deploy_doc.SHOWN]
    assert rows.iloc[0]["iteration_s"] == times[1]

    assert deploy_doc.main(["--root", str(tmp_path), "--check"]) == 1
    assert deploy_doc.main(["--root", str(tmp_path)]) == 0
    text = page.read_text()
    assert text.startswith("# page\n\nbefore\n\n") and text.endswith(f"{deploy_doc.END}\n\nafter\n")
    assert f"| tiny | `{DATASET}` | 800 x 2 | `subc` | 1, 2 | 1 | 4.00 | 5.00 | 2.00 |" in text
    assert deploy_doc.main(["--root", str(tmp_path), "--check"]) == 0

    scaling.loc[(scaling["variant"] == "subc") & (scaling["workers"] == 16), "iteration_s"] = 0.1
    scaling.to_csv(tmp_path / deploy_doc.RECORDS / "tiny" / "scaling.csv", index=False)
    assert deploy_doc.main(["--root", str(tmp_path), "--check"]) == 1  # the records moved: the page is stale
    scaling[scaling["workers"] != 64].to_csv(tmp_path / deploy_doc.RECORDS / "tiny" / "scaling.csv", index=False)
    with pytest.raises(ValueError, match=r"subc on synth-chang2013\?n=1000 is not modelled at \[64\] workers"):
        deploy_doc.speedup_rows(tmp_path)


@pytest.mark.parametrize("text", ["no markers", f"{deploy_doc.END}\n{deploy_doc.BEGIN}\n",
                                  f"{deploy_doc.BEGIN}\n{deploy_doc.BEGIN}\n{deploy_doc.END}\n"])
def test_a_page_without_one_pair_of_markers_is_refused(text):
    with pytest.raises(ValueError, match="expected one"):
        deploy_doc.render(text, "table")


# ---- the workflow config snippets -------------------------------------------------------------

def snippets() -> list[dict]:
    """Every workflow ``dask`` setting the page shows: its YAML blocks with a ``dask`` key and
    its inline ``dask: {...}`` code (which may wrap across lines)."""
    found = [yaml.safe_load(b) for b in blocks("yaml")]
    found = [b for b in found if isinstance(b, dict) and "dask" in b]
    inline = re.findall(r"`(dask: \{[^`]*\})`", PAGE.read_text(encoding="utf-8"))
    return found + [yaml.safe_load(" ".join(code.split())) for code in inline]


def test_every_config_snippet_passes_the_workflows_checks():
    """Each snippet, put into the smoke config, passes the schema and the config check, as the
    workflow runs them before any job: its keys are the schema's."""
    found = snippets()
    assert len(found) >= 4
    schema = yaml.safe_load((ROOT / "workflows" / "schemas" / "config.schema.yaml").read_text())
    keys = set(schema["properties"]["dask"]["properties"])
    assert {"scheduler", "scheduler_file"} <= {key for s in found for key in s["dask"]}
    for snippet in found:
        assert set(snippet["dask"]) <= keys, snippet
        check_before_any_job({**yaml.safe_load(SMOKE.read_text()), **snippet})


def test_the_python_snippets_compile():
    assert len(blocks("python")) == 2
    for i, code in enumerate(blocks("python")):
        compile(code, f"docs/deploy.md python block {i}", "exec")


# ---- dask-jobqueue --------------------------------------------------------------------------------

def jobqueue_config() -> dict:
    """The page's dask-jobqueue configuration (its one YAML block under ``jobqueue:``)."""
    (config,) = [c for c in map(yaml.safe_load, blocks("yaml")) if isinstance(c, dict) and "jobqueue" in c]
    return config


@needs_jobqueue
@pytest.mark.parametrize("kind", ["slurm", "pbs"])
def test_the_jobqueue_configuration_renders_the_job_script(kind, tmp_path):
    """With the page's configuration, dask-jobqueue renders a job script with its cores,
    memory, walltime, queue and account, the thread exports of the workflow's own workers for
    that many threads, and one worker process of that many threads pointed at the launcher's
    scheduler, whose scheduler file names that scheduler."""
    import dask
    from dask.utils import parse_bytes
    from dask_jobqueue import PBSCluster, SLURMCluster

    settings = jobqueue_config()["jobqueue"][kind]
    cores, memory = settings["cores"], parse_bytes(settings["memory"])
    scheduler_file = tmp_path / "scheduler.json"
    with dask.config.set({f"jobqueue.{kind}": {**dask.config.get(f"jobqueue.{kind}"), **settings}}):
        cls = {"slurm": SLURMCluster, "pbs": PBSCluster}[kind]
        # as the page's launcher, plus the loopback interface: nothing here listens outside
        with cls(scheduler_options={"scheduler_file": str(scheduler_file), "host": "127.0.0.1"}) as cluster:
            script = cluster.job_script()
            address = cluster.scheduler_address
            assert scheduler_file_address(scheduler_file) == address
    lines = script.splitlines()
    directives = [line for line in lines if line.startswith("#SBATCH" if kind == "slurm" else "#PBS")]
    if kind == "slurm":
        expected = [f"#SBATCH -p {settings['queue']}", f"#SBATCH -A {settings['account']}",
                    f"#SBATCH --cpus-per-task={cores}", f"#SBATCH -t {settings['walltime']}"]
        (mem,) = [d for d in directives if d.startswith("#SBATCH --mem=")]
        granted = parse_bytes(mem.split("=", 1)[1].replace("G", "GiB"))
    else:
        expected = [f"#PBS -q {settings['queue']}", f"#PBS -A {settings['account']}",
                    f"#PBS -l walltime={settings['walltime']}"]
        (select,) = [d for d in directives if d.startswith("#PBS -l select=")]
        fields = dict(item.split("=") for item in select.split(" ", 2)[2].split(":")[1:])
        assert fields["ncpus"] == str(cores)
        granted = parse_bytes(fields["mem"].replace("GB", "GiB"))
    assert set(expected) <= set(directives), directives
    assert abs(granted - memory) < 0.1 * memory  # the job asks for the memory (in binary units)
    exports = [f"export {name}={value}" for name, value in thread_environment(cores).items()]
    assert [line for line in lines if line.startswith("export ")] == exports
    assert len(exports) == len(THREAD_VARIABLES)
    (command,) = [line for line in lines if "distributed.cli.dask_worker" in line]
    args = command.split()
    assert args[args.index("-m") + 1:args.index("-m") + 3] == ["distributed.cli.dask_worker", address]
    assert args[args.index("--nthreads") + 1] == str(cores) and "--nanny" in args
    limit = parse_bytes(args[args.index("--memory-limit") + 1])
    assert abs(limit - memory) < 0.01 * memory
