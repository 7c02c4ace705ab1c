"""The deployment recipes of docs/grading.md hold what they say: the dask-jobqueue script's batch job
runs `dask worker` from the checkout's environment (Slurm and PBS: its job script rendered, nothing
submitted, the scheduler on loopback), and the Kubernetes manifest's workers run the documented
command against the scheduler's Service, in sandbox mode uid, from the image the Dockerfile builds."""

import subprocess
import sys

import pytest
import yaml

from harness.kernel.paths import REPO

RECIPES = REPO / "docs" / "recipes"


@pytest.mark.parametrize("kind, directive", [("slurm", "#SBATCH"), ("pbs", "#PBS")])
def test_the_jobqueue_recipe_s_job_runs_a_dask_worker_from_the_checkout(kind, directive):
    r = subprocess.run([sys.executable, str(RECIPES / "jobqueue_cluster.py"), kind, "--print-job-script", "--interface", "lo",
                        "--cores", "6", "--memory", "24GB", "--queue", "compute"],
                       capture_output=True, text=True, timeout=120, cwd=REPO)
    assert r.returncode == 0, r.stderr[-2000:]
    script = r.stdout
    assert f"{directive} -N ol-grade" in script or f"{directive} -J ol-grade" in script, script
    assert f"cd {REPO}\nexport PYTHONPATH={REPO}\n" in script, script
    worker = next(line for line in script.splitlines() if "dask_worker" in line)
    assert worker.startswith(f"{REPO}/.venv/bin/python -m distributed.cli.dask_worker tcp://127.0.0.1:"), worker
    assert "--nthreads 6" in worker and "--nanny" in worker and "--no-dashboard" in worker, worker


def test_the_kubernetes_workers_run_the_documented_command_in_uid_mode():
    docs = {d["metadata"]["name"] + "/" + d["kind"]: d for d in yaml.safe_load_all((RECIPES / "kubernetes.yaml").read_text())}
    assert set(docs) == {"ol-dask-scheduler/Deployment", "ol-dask-scheduler/Service", "ol-dask-worker/Deployment"}
    worker = docs["ol-dask-worker/Deployment"]["spec"]["template"]["spec"]["containers"][0]
    scheduler = docs["ol-dask-scheduler/Deployment"]["spec"]["template"]["spec"]["containers"][0]
    port = docs["ol-dask-scheduler/Service"]["spec"]["ports"][0]["port"]
    assert worker["command"][:3] == ["/ol/.venv/bin/dask", "worker", f"tcp://ol-dask-scheduler:{port}"], worker["command"]
    assert scheduler["command"][:4] == ["/ol/.venv/bin/dask", "scheduler", "--port", str(port)]
    assert {"name": "OL_SANDBOX", "value": "uid"} in worker["env"] and worker["securityContext"]["runAsUser"] == 0
    assert worker["image"] == scheduler["image"]
    dockerfile = (RECIPES / "Dockerfile").read_text()
    assert "COPY . /ol" in dockerfile and "OL_EXTRAS=staff ./ol --help" in dockerfile and "chmod -R go-rwx chapters reference examples" in dockerfile
    assert "ENV PYTHONPATH=/ol" in dockerfile
