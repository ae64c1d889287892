"""Preloaded into the worker processes of the local cluster a sweep starts: Ctrl-C is for the sweep (it
saves what finished and closes the cluster), not for each worker to print a traceback."""

from __future__ import annotations

import signal
import threading


def dask_setup(worker) -> None:  # the preload hook dask calls in the worker process
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
