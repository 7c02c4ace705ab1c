"""A Dask cluster of Slurm or PBS jobs for `ol grade --scheduler`, through dask-jobqueue.

Run it on the login node, from the ol checkout, with the checkout's environment (it needs
`pip install dask-jobqueue`, which `./ol`'s dev extra installs):

    .venv/bin/python docs/recipes/jobqueue_cluster.py slurm --jobs 10 --cores 8 --memory 32GB \\
        --walltime 02:00:00 --queue compute --account course-staff
    # in another shell, on the same login node (or any machine that reaches it):
    ./ol grade L10.8 submissions/ --ref-deps --scheduler-file ol-scheduler.json

It starts the Dask scheduler here, submits --jobs batch jobs (each one `dask worker` with --cores
threads, one judge per thread), writes the scheduler's address to --scheduler-file, and keeps the
cluster up until the walltime has passed or it is interrupted (Ctrl-C), then cancels the jobs.
--print-job-script shows the batch script it would submit, and submits nothing.

Every worker job runs `dask worker` with the checkout's own .venv python and PYTHONPATH, so it runs
the client's harness (a job on a node with another checkout or another environment refuses its
tasks, naming what differs). The checkout must be at the same path on the compute nodes (a shared
home or project filesystem), or installed at --checkout on each. Each node must let the worker
confine submissions: unprivileged user namespaces for bubblewrap (check with
`srun .venv/bin/python -c 'from harness.sandbox.confine import choose; print(choose())'`), or the job must
run as root (uid mode); a node that can do neither refuses. Rust submissions need cargo on the nodes.
"""

import argparse
import json
import signal
import sys
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kind", choices=("slurm", "pbs"), help="the batch system")
    ap.add_argument("--jobs", type=int, default=4, help="batch jobs, each one Dask worker (default 4)")
    ap.add_argument("--cores", type=int, default=8, help="cores a job asks for: its worker's threads, one judge each")
    ap.add_argument("--memory", default="32GB", help="memory a job asks for (a judge's sandbox may use 4 GiB)")
    ap.add_argument("--walltime", default="02:00:00", help="each job's walltime, HH:MM:SS; the cluster lasts as long")
    ap.add_argument("--queue", default=None, help="the partition (Slurm) or queue (PBS)")
    ap.add_argument("--account", default=None, help="the account the jobs are charged to")
    ap.add_argument("--interface", default=None, help="the network interface the workers and scheduler use (e.g. ib0)")
    ap.add_argument("--checkout", type=Path, default=CHECKOUT, help=f"the ol checkout on the nodes (default {CHECKOUT})")
    ap.add_argument("--scheduler-file", type=Path, default=Path("ol-scheduler.json"), help="where the address goes")
    ap.add_argument("--print-job-script", action="store_true", help="print the batch script and exit")
    return ap.parse_args(argv)


def make_cluster(a: argparse.Namespace):
    from dask_jobqueue import PBSCluster, SLURMCluster

    checkout = a.checkout.resolve()
    cls = SLURMCluster if a.kind == "slurm" else PBSCluster
    return cls(cores=a.cores, processes=1, memory=a.memory, walltime=a.walltime, queue=a.queue, account=a.account,
               interface=a.interface, python=str(checkout / ".venv" / "bin" / "python"),
               job_script_prologue=[f"cd {checkout}", f"export PYTHONPATH={checkout}"],
               worker_extra_args=["--no-dashboard"], job_name="ol-grade")


def seconds(walltime: str) -> int:
    h, m, s = (int(x) for x in walltime.split(":"))
    return h * 3600 + m * 60 + s


def main(argv=None) -> int:
    a = parse_args(argv)
    cluster = make_cluster(a)
    try:
        if a.print_job_script:
            print(cluster.job_script())
            return 0
        cluster.scale(jobs=a.jobs)
        a.scheduler_file.write_text(json.dumps({"address": cluster.scheduler_address}) + "\n")
        print(f"scheduler {cluster.scheduler_address} (written to {a.scheduler_file}); {a.jobs} {a.kind} jobs submitted; "
              f"up for {a.walltime} or until Ctrl-C", flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        time.sleep(seconds(a.walltime))  # the jobs end with their walltime anyway
    except KeyboardInterrupt:
        pass
    finally:
        cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
