"""Gunicorn settings FrameLab ships (gunicorn reads ``./gunicorn.conf.py`` by itself).

One setting: each worker, once it has loaded the app, moves everything it allocated while
importing and building it (about 114,000 objects: Flask, SQLAlchemy's mappers, WTForms and the
rest of what the app imports) out of the cyclic garbage collector's reach with
:func:`gc.freeze`. Those objects live as long as the worker; without the freeze every full
collection walks all of them again (57 ms each, six per 10,600 participant requests on the
benchmark machine: 1.7 % of the worker's CPU, issue 21). Objects are still freed when their
reference count drops; only cycles among the frozen ones would never be collected, and those
are the app's own long-lived structures. What is built on the first requests (compiled
templates, SQLAlchemy's statement cache, the study definitions) is made later and stays with
the collector. The load and peer benchmarks (``bench/loadtest.py``) start every gunicorn server
with this file, the peer benchmark's floor app included, so the comparison stays like for like.
"""

from __future__ import annotations

import gc
from typing import Any


def post_worker_init(worker: Any) -> None:
    """Freeze what the worker allocated while loading the app (gunicorn server hook)."""
    gc.collect()
    gc.freeze()
