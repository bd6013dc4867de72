"""The openai backend against an OpenAI-compatible server started on loopback by the test."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
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
        self.not_found = 0
        # Set by a test: each request waits at it until as many are in flight as it expects.
        self.gate: threading.Barrier | None = None
        self.retried = threading.Event()


def _answer(prompt: str, attempt: int, model: str) -> tuple[int, dict, dict | None]:
    """The fake server's reply (status, JSON body, headers) to one attempt at a prompt."""
    if "rate-limit-once" in prompt and attempt == 1:
        return (
            429,
            {"error": {"message": "slow down", "type": "rate_limit"}},
            {"retry-after-ms": "10"},
        )
    if "server-error-once" in prompt and attempt == 1:
        return 503, {"error": {"message": "busy"}}, {"retry-after-ms": "10"}
    if "always-500" in prompt:
        return 500, {"error": {"message": "boom"}}, {"retry-after-ms": "10"}
    answer = "Positive" if "good" in prompt else f"echo {len(prompt)}"
    words_in, words_out = len(prompt.split()), len(answer.split())
    return (
        200,
        {
            "id": "cmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": words_in,
                "completion_tokens": words_out,
                "total_tokens": words_in + words_out,
            },
        },
        None,
    )


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
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path != "/v1/chat/completions":
                with state.lock:
                    state.not_found += 1
                return self._send(404, {"detail": "Not Found"})
            prompt = body["messages"][-1]["content"]
            with state.lock:
                state.attempts[prompt] += 1
                attempt = state.attempts[prompt]
                state.active += 1
                state.max_active = max(state.max_active, state.active)
                state.auth.add(self.headers.get("Authorization", ""))
                state.bodies.append(body)
            try:
                if state.gate is not None:
                    state.gate.wait(60)  # a bound only a client that sends too few reaches
                if "slow-once" in prompt and attempt == 1:
                    # No answer before the client has given up and asked again: it must time out.
                    state.retried.wait(60)  # a bound only a client that never retries reaches
                elif "slow-once" in prompt:
                    state.retried.set()
                time.sleep(0.05)  # answers take a while, so several are in flight at once
                status, payload, headers = _answer(prompt, attempt, body["model"])
            finally:
                # Done before the answer is written: a client that has read it may send its next
                # request before this thread runs again, which is not a fourth in flight.
                with state.lock:
                    state.active -= 1
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._send(status, payload, headers)  # unless the client timed out and hung up

    return Handler


@contextmanager
def _serve() -> Iterator[tuple[str, FakeServer]]:
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


@pytest.fixture
def server() -> Iterator[tuple[str, FakeServer]]:
    with _serve() as served:
        yield served


@pytest.fixture
def second_server() -> Iterator[tuple[str, FakeServer]]:
    with _serve() as served:
        yield served


@pytest.fixture
def refusing_url() -> Iterator[str]:
    """A loopback URL where nothing listens: every connection is refused. The port stays bound
    (not listening) for the whole test, so no other process can start listening on it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def _req(key: str, content: str) -> Request:
    return Request(key, ({"role": "user", "content": content},), content)


def _backend(url: str | list[str], **kw) -> OpenAIBackend:
    # The backend's own timeout (120 s): a short one would turn a slow answer on a loaded
    # machine into a retry the server also counts (an attempt too many, one more in flight).
    kw.setdefault("max_retries", 3)
    return OpenAIBackend("served-model", GenerationSettings(max_new_tokens=7), base_url=url, **kw)


def test_chat_completions_with_bounded_concurrency(server, monkeypatch) -> None:
    url, state = server
    state.gate = threading.Barrier(3)  # no answer until three are in flight
    monkeypatch.setenv("FRAMELAB_TEST_KEY", SECRET)
    backend = _backend(url, concurrency=3, api_key_env="FRAMELAB_TEST_KEY")
    reqs = [_req(f"k{i}", f"prompt number {i}") for i in range(12)]
    results = dict(backend.generate(reqs))
    assert {r.key for r in results} == {f"k{i}" for i in range(12)}
    for req, completion in results.items():
        assert completion.error is None
        assert completion.text == f"echo {len(req.messages[0]['content'])}"
        assert completion.n_prompt_tokens == 3 and completion.n_output_tokens == 2
    assert state.max_active == 3
    assert state.auth == {f"Bearer {SECRET}"}
    body = state.bodies[0]
    assert body["max_tokens"] == 7 and body["temperature"] == 0.0 and body["seed"] == 0


def test_retries_on_429_and_503(server) -> None:
    url, state = server
    backend = _backend(url, concurrency=3)
    reqs = [_req("a", "rate-limit-once"), _req("b", "server-error-once"), _req("d", "always-500")]
    results = {r.key: c for r, c in backend.generate(reqs)}
    assert results["a"].error is None and results["a"].text.startswith("echo")
    assert results["b"].error is None
    assert results["d"].text == ""
    assert results["d"].error.startswith("HTTP 500 Internal Server Error: ")
    assert f"from {url} after 4 of 4 attempts (4 x HTTP 500" in results["d"].error
    assert state.attempts["rate-limit-once"] == 2
    assert state.attempts["server-error-once"] == 2
    assert state.attempts["always-500"] == 4  # the first try and 3 retries


def test_a_request_without_an_answer_in_time_is_asked_again(server) -> None:
    url, state = server
    # The first attempt is answered only once the client has asked again, so the client must
    # have timed out; a retry that itself outlasts the 2 s on a loaded machine is asked again
    # too, which is the behaviour under test, so the count of attempts is a lower bound.
    backend = _backend(url, timeout=2.0)
    [(req, completion)] = backend.generate([_req("c", "slow-once")])
    assert completion.error is None and completion.text == "echo 9"
    assert state.attempts["slow-once"] >= 2


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


def test_requests_spread_over_two_replicas(server, second_server) -> None:
    (url_a, a), (url_b, b) = server, second_server
    # Neither server answers before all eight are in flight: each went to the replica with the
    # fewest in flight, so four to each, whatever the machine's load.
    a.gate = b.gate = threading.Barrier(8)
    backend = _backend([url_a, url_b], concurrency=8)
    reqs = [_req(f"k{i}", f"prompt number {i}") for i in range(8)]
    results = list(backend.generate(reqs))
    assert sorted(r.key for r, _ in results) == sorted(r.key for r in reqs)
    assert all(c.error is None for _, c in results)
    assert sum(a.attempts.values()) == 4 and sum(b.attempts.values()) == 4
    info = backend.info()
    assert info["base_urls"] == [url_a, url_b] and info["base_url"] is None
    assert [r["url"] for r in info["replicas"]] == [url_a, url_b]
    assert [r["succeeded"] for r in info["replicas"]] == [4, 4]


def test_a_refusing_replica_is_taken_out_and_tried_again_after_its_cooldown(
    server, refusing_url, tmp_path: Path
) -> None:
    url, state = server
    backend = _backend([refusing_url, url], concurrency=2, replica_cooldown=0.2)
    items = [{"item_id": str(i), "text": f"statement {i}"} for i in range(30)]
    out = tmp_path / "j.jsonl"
    summary = run_task("judge-framing", items, backend, out, progress=False)
    # Every item exactly once, all answered by the replica that is up.
    assert (summary.n_generated, summary.n_failed) == (30, 0)
    assert sorted(r["item_id"] for r in read_records(out)) == sorted(i["item_id"] for i in items)
    assert sum(state.attempts.values()) == 30
    run = json.loads((tmp_path / "j.jsonl.manifest.json").read_text())["runs"][-1]
    assert run["backend"]["base_urls"] == [refusing_url, url]
    refused, good = run["backend"]["replicas"]
    assert refused["url"] == refusing_url and refused["succeeded"] == 0
    assert refused["failures"] == {"connection refused": refused["attempts"]}
    assert refused["last_error"] == "connection refused"
    # 30 answers of 50 ms two at a time take 0.75 s: the replica was tried again after 0.2 s.
    assert refused["taken_out"] >= 2 and refused["attempts"] == refused["taken_out"]
    assert good == {**good, "succeeded": 30, "failed": 0, "taken_out": 0}


def test_a_refused_connection_names_the_url_the_cause_and_the_attempts(refusing_url) -> None:
    backend = _backend(refusing_url, max_retries=2)
    [(req, completion)] = backend.generate([_req("k", "hello")])
    assert completion.error == (
        f"connection refused from {refusing_url} after 3 of 3 attempts "
        f"(3 x connection refused at {refusing_url})"
    )


def test_a_404_is_not_retried_and_says_so(server) -> None:
    url, state = server
    wrong = url.removesuffix("/v1") + "/no-such-prefix"
    backend = _backend(wrong, max_retries=5)
    [(req, completion)] = backend.generate([_req("k", "hello")])
    assert completion.error.startswith("HTTP 404 Not Found: ")
    assert completion.error.endswith(f"from {wrong} (not retried)")
    assert "after" not in completion.error and state.not_found == 1


def test_a_500_on_one_replica_is_retried_with_every_attempt_named(server, second_server) -> None:
    (url_a, a), (url_b, b) = server, second_server
    backend = _backend([url_a, url_b], max_retries=3, concurrency=1)
    [(req, completion)] = backend.generate([_req("k", "always-500")])
    assert a.attempts["always-500"] + b.attempts["always-500"] == 4
    assert "after 4 of 4 attempts (" in completion.error
    assert "x HTTP 500 Internal Server Error: " in completion.error
    # The server answered: a 500 takes no replica out.
    assert all(r["taken_out"] == 0 for r in backend.info()["replicas"])


def test_a_comma_in_one_base_url_is_refused() -> None:
    with pytest.raises(ValueError, match="one URL per option.*repeat it"):
        OpenAIBackend("m", base_url="http://a:8000/v1,http://b:8000/v1")
    with pytest.raises(ValueError, match="given twice"):
        OpenAIBackend("m", base_url=["http://a:8000/v1", "http://a:8000/v1/"])
    with pytest.raises(ValueError, match="not an http"):
        OpenAIBackend("m", base_url=["a:8000"])


def test_the_cli_refuses_a_comma_with_a_clear_message(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from analysis.cli.generate import generate

    src = tmp_path / "in.jsonl"
    src.write_text('{"item_id": "1", "text": "fine"}\n')
    result = CliRunner().invoke(
        generate,
        ["judge-framing", "--backend", "openai", "--model", "m", "--input", str(src),
         "--out", str(tmp_path / "o.jsonl"), "--base-url", "http://a:1/v1,http://b:1/v1"],
    )  # fmt: skip
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "--base-url takes one URL per option" in result.output
    assert not (tmp_path / "o.jsonl.manifest.json").exists()


def test_input_is_read_only_as_far_as_the_requests_in_flight(server) -> None:
    """Requests are taken from the input as workers free up, not made all at once."""
    url, state = server
    concurrency, n = 3, 200
    read = 0

    def requests() -> Iterator[Request]:
        nonlocal read
        for i in range(n):
            read += 1
            yield _req(f"k{i}", f"p{i}")

    backend = _backend(url, concurrency=concurrency)
    ahead = []
    for got, _ in enumerate(backend.generate(requests()), start=1):
        ahead.append(read - got)
        time.sleep(0.001)  # a caller that stores each result
    assert got == n and read == n
    # In flight or answered and not yet taken (2 x concurrency), and the one the caller holds.
    assert max(ahead) <= 2 * concurrency + 1
    assert state.max_active <= concurrency
