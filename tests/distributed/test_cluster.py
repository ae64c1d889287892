"""Sweeps on real dask clusters on localhost -- a 2-worker LocalCluster, and a `dask scheduler` with 2
`dask worker` processes started here -- give results bit-identical to the serial run, whatever the batching;
a worker killed in the middle of a sweep costs nothing but time; the model reaches workers as bytes.

Each cluster is a fixture used by one test function (they are processes: seconds to start), so that however
pytest-xdist spreads the tests, no cluster is started twice."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

xr = pytest.importorskip("xarray", reason="xarray (the 'distributed' extra) is not installed")
distributed = pytest.importorskip("distributed", reason="dask.distributed (the 'distributed' extra) is not installed")

from stdops import limits  # noqa: E402
from stdops.distributed import SweepError, payload, sweep  # noqa: E402
from stdops.examples import demo_model_path  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DDM = ROOT / "examples" / "mdf" / "ddm_decision.yaml"
GRID = {"stimulus.coherence": [0.1, 0.3, 0.5], "stimulus.trials": [300]}
SEEDS = 4


def _bits(ds) -> dict[str, bytes]:
    return {name: ds[name].values.tobytes() for name in ds.variables}


def assert_bit_identical(a, b) -> None:
    xr.testing.assert_identical(a, b)
    assert _bits(a) == _bits(b)


@pytest.fixture(scope="module")
def serial():
    """The reference: every job alone, in this process (no replicas; the clusters' tasks of several seeds of
    one point run them as replicas of one simulation)."""
    return sweep(DDM, GRID, seeds=SEEDS, seed=5, serial=True, vectorize=False)


@pytest.fixture(scope="module")
def local_client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=40
    )
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def _dask_cli() -> str:
    beside = Path(sys.executable).with_name("dask")
    found = str(beside) if beside.exists() else shutil.which("dask")
    if found is None:
        pytest.skip("the dask command (dask.distributed's console script) is not installed")
    return found


@pytest.fixture(scope="module")
def external(tmp_path_factory):
    """`dask scheduler` and two `dask worker` processes; the workers run in another folder than this
    process, so a model path relative to here means nothing to them."""
    dask = _dask_cli()
    base = tmp_path_factory.mktemp("cluster")
    info = base / "scheduler.json"
    elsewhere = base / "workers"
    elsewhere.mkdir()
    env = {**os.environ, "DASK_DISTRIBUTED__LOGGING__DISTRIBUTED": "error"}
    procs = [
        subprocess.Popen(
            [dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", str(info)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
    ]
    try:
        deadline = time.monotonic() + 60
        while not info.exists() or not info.read_text().strip():
            if time.monotonic() > deadline or procs[0].poll() is not None:
                pytest.fail("dask scheduler did not start")
            time.sleep(0.1)
        time.sleep(0.2)
        address = json.loads(info.read_text())["address"]
        for _ in range(2):
            procs.append(
                subprocess.Popen(
                    [dask, "worker", address, "--nthreads", "1", "--no-dashboard", "--local-directory", str(elsewhere)],
                    cwd=elsewhere,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=env,
                )
            )
        client = distributed.Client(address, timeout=30)
        client.wait_for_workers(2, timeout=60)
        yield address, client
        client.close()
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_local_cluster_is_bit_identical_to_serial_whatever_the_batching(serial, local_client):
    tasks: list[int] = []  # progress is reported once per finished task
    one_per_task = sweep(
        DDM, GRID, seeds=SEEDS, seed=5, client=local_client, task_seconds=1e-9, progress=lambda d, t: tasks.append(d)
    )
    assert_bit_identical(one_per_task, serial)
    assert len(tasks) == 12
    tasks.clear()
    big_tasks = sweep(
        DDM, GRID, seeds=SEEDS, seed=5, client=local_client, task_seconds=60, progress=lambda d, t: tasks.append(d)
    )
    assert_bit_identical(big_tasks, serial)
    assert len(tasks) < 12  # after the first tasks measured the rate, jobs went out several to a task
    # ... and the seeds of one point in one task ran as replicas of one simulation
    sha = big_tasks.attrs["model_sha256"]
    assert sum(local_client.run(lambda: payload.REPLICA_JOBS.get(sha, 0)).values()) > 0
    # an ONNX batch too
    xs = np.random.default_rng(0).random((6, 1, 2)).astype(np.float32)
    here = sweep(demo_model_path(), inputs={"x": xs}, serial=True)
    there = sweep(demo_model_path(), inputs={"x": xs}, client=local_client, task_seconds=1e-9)
    assert_bit_identical(there, here)
    # the client's stdops.limits (the CLI's --max-* options) hold on the workers
    with limits.override(max_elements=100), pytest.raises(SweepError, match="300 elements, above the limit of 100"):
        sweep(DDM, GRID, client=local_client)


def test_external_scheduler_and_workers_bit_identical_and_a_worker_killed_mid_sweep(serial, external, monkeypatch):
    address, client = external
    monkeypatch.chdir(DDM.parent)  # a relative path: the workers, elsewhere, could not open it
    ds = sweep(
        DDM.name, GRID, seeds=SEEDS, seed=5, scheduler=address, task_seconds=1e-9, command=serial.attrs["command"]
    )
    assert_bit_identical(ds, serial)
    # each worker that ran a task loaded the model once, from the bytes it was sent
    sha = ds.attrs["model_sha256"]
    loads = client.run(lambda: payload.LOADS.get(sha, 0))
    assert sorted(loads.values()) == [1, 1], loads

    # a worker killed in the middle of a sweep: its tasks run again elsewhere, the results do not change
    killed = []

    def kill_a_busy_worker(done: int, total: int) -> None:
        if killed or done < 2:
            return
        busy = [w for w, keys in client.processing().items() if keys]
        if not busy:
            return
        pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
        os.kill(pid, signal.SIGKILL)  # its nanny starts a new worker, which gets the model too
        killed.append(pid)

    ds = sweep(DDM, GRID, seeds=SEEDS, seed=5, scheduler=address, task_seconds=1e-9, progress=kill_a_busy_worker)
    assert killed, "no worker was busy to kill"
    assert_bit_identical(ds, serial)
