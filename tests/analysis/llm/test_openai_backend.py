"""The openai backend against an OpenAI-compatible server started on loopback by the test."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from analysis.llm.backends.base import GenerationSettings, Request
from analysis.llm.backends.openai_compat import OpenAIBackend
from analysis.llm.store import read_records
from analysis.llm.tasks import run_task

SECRET = "sk-test-do-not-log-4242"


class FakeServer:
    """State shared with the handler: attempts per prompt, concurrency, headers seen."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.attempts: Counter[str] = Counter()
        self.active = 0
        self.max_active = 0
        self.auth: set[str] = set()
        self.bodies: list[dict] = []


def _handler(state: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep test output clean
            pass

        def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            assert self.path == "/v1/chat/completions"
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompt = body["messages"][-1]["content"]
            with state.lock:
                state.attempts[prompt] += 1
                attempt = state.attempts[prompt]
                state.active += 1
                state.max_active = max(state.max_active, state.active)
                state.auth.add(self.headers.get("Authorization", ""))
                state.bodies.append(body)
            try:
                time.sleep(0.05)  # let requests overlap so concurrency is observable
                if "rate-limit-once" in prompt and attempt == 1:
                    error = {"error": {"message": "slow down", "type": "rate_limit"}}
                    return self._send(429, error, {"retry-after-ms": "10"})
                if "server-error-once" in prompt and attempt == 1:
                    return self._send(503, {"error": {"message": "busy"}}, {"retry-after-ms": "10"})
                if "always-500" in prompt:
                    return self._send(500, {"error": {"message": "boom"}}, {"retry-after-ms": "10"})
                if "slow-once" in prompt and attempt == 1:
                    time.sleep(1.0)  # longer than the client's timeout: it gives up and retries
                answer = "Positive" if "good" in prompt else f"echo {len(prompt)}"
                self._send(
                    200,
                    {
                        "id": "cmpl-1",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": answer},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": len(prompt.split()),
                            "completion_tokens": len(answer.split()),
                            "total_tokens": len(prompt.split()) + len(answer.split()),
                        },
                    },
                )
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and hung up
            finally:
                with state.lock:
                    state.active -= 1

    return Handler


@pytest.fixture
def server() -> Iterator[tuple[str, FakeServer]]:
    state = FakeServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", state
    finally:
        httpd.shutdown()
        httpd.server_close()


def _req(key: str, content: str) -> Request:
    return Request(key, ({"role": "user", "content": content},), content)


def _backend(url: str, **kw) -> OpenAIBackend:
    kw.setdefault("timeout", 0.5)
    kw.setdefault("max_retries", 3)
    return OpenAIBackend("served-model", GenerationSettings(max_new_tokens=7), base_url=url, **kw)


def test_chat_completions_with_bounded_concurrency(server, monkeypatch) -> None:
    url, state = server
    monkeypatch.setenv("FRAMELAB_TEST_KEY", SECRET)
    backend = _backend(url, concurrency=3, api_key_env="FRAMELAB_TEST_KEY")
    reqs = [_req(f"k{i}", f"prompt number {i}") for i in range(12)]
    results = dict(backend.generate(reqs))
    assert {r.key for r in results} == {f"k{i}" for i in range(12)}
    for req, completion in results.items():
        assert completion.error is None
        assert completion.text == f"echo {len(req.messages[0]['content'])}"
        assert completion.n_prompt_tokens == 3 and completion.n_output_tokens == 2
    assert 2 <= state.max_active <= 3
    assert state.auth == {f"Bearer {SECRET}"}
    body = state.bodies[0]
    assert body["max_tokens"] == 7 and body["temperature"] == 0.0 and body["seed"] == 0


def test_retries_on_429_503_and_timeouts(server) -> None:
    url, state = server
    backend = _backend(url, concurrency=4)
    reqs = [
        _req("a", "rate-limit-once"),
        _req("b", "server-error-once"),
        _req("c", "slow-once"),
        _req("d", "always-500"),
    ]
    results = {r.key: c for r, c in backend.generate(reqs)}
    assert results["a"].error is None and results["a"].text.startswith("echo")
    assert results["b"].error is None
    assert results["c"].error is None
    assert results["d"].error == "HTTP 500 after retries" and results["d"].text == ""
    assert state.attempts["rate-limit-once"] == 2
    assert state.attempts["server-error-once"] == 2
    assert state.attempts["slow-once"] == 2
    assert state.attempts["always-500"] == 4  # the first try and 3 retries


def test_run_task_over_server_resumes_and_never_logs_the_key(
    server, tmp_path: Path, monkeypatch, caplog
) -> None:
    url, state = server
    monkeypatch.setenv("FRAMELAB_TEST_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    backend = _backend(url, api_key_env="FRAMELAB_TEST_KEY")
    items = [
        {"item_id": "1", "text": "a good phone"},
        {"item_id": "2", "text": "always-500 here"},
    ]
    out = tmp_path / "j.jsonl"
    first = run_task("judge-framing", items, backend, out, progress=False)
    assert (first.n_generated, first.n_failed) == (1, 1)
    [record] = read_records(out)
    assert record["label"] == "positive" and record["backend"] == "openai"
    assert record["n_output_tokens"] == 1 and record["finish_reason"] == "stop"
    second = run_task("judge-framing", items, backend, out, progress=False)
    assert (second.n_done_before, second.n_generated, second.n_failed) == (1, 0, 1)
    manifest = (tmp_path / "j.jsonl.manifest.json").read_text()
    assert SECRET not in manifest and '"api_key_set": true' in manifest
    assert SECRET not in caplog.text
    assert SECRET not in out.read_text()


def test_openai_api_without_key_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="set the environment variable OPENAI_API_KEY"):
        OpenAIBackend("gpt-4o-mini")


def test_closing_early_stops_pending_requests(server) -> None:
    url, state = server
    backend = _backend(url, concurrency=1)
    gen = backend.generate([_req(f"k{i}", f"p{i}") for i in range(20)])
    next(gen)
    gen.close()
    assert sum(state.attempts.values()) < 20
