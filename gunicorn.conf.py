"""Gunicorn settings FrameLab ships (gunicorn reads ``./gunicorn.conf.py`` by itself).

Serve it behind a reverse proxy that reads each request body whole before passing the request
on (nginx does by default: ``deploy/nginx/``). gunicorn's worker threads block while they read
a body, so clients that send theirs slowly, a byte a second, hold a bare gunicorn's threads
for as long as they like: with 40 of them a participant's page did not answer within 60 s,
and through nginx it answered in 39 ms at the 99th percentile (``bench/body_flood.py --slow
40 --nginx``; docs/security.md, "Slow bodies"). The Procfile's ``web`` process needs the same:
a platform router that reads bodies whole, or nginx on the dyno (docs/platform.md).

One setting: each worker, once it has loaded the app, moves everything it allocated while
importing and building it (about 114,000 objects: Flask, SQLAlchemy's mappers, WTForms and the
rest of what the app imports) out of the cyclic garbage collector's reach with
:func:`gc.freeze`. Those objects live as long as the worker; without the freeze every full
collection walks all of them again (57 ms each, six per 10,600 participant requests on the
benchmark machine: 1.7 % of the worker's CPU). Objects are still freed when their
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
