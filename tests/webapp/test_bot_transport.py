"""The bots' HTTP transport against a server that closes a kept-alive connection unanswered.

A raw socket server stands in for gunicorn at the instant its keep-alive timer fires: the
first request on a connection is answered with keep-alive, the second on the same connection
is read and the connection closed without a byte sent (what the client sees when the server
closed it just before the request arrived). A browser sends the request again on a new
connection; so must the bots, or a loaded CI machine turns the race into a failed run
("Server disconnected without sending a response").
"""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from webapp.bots import HttpTransport


class _ClosingServer:
    """Answers ``answers_per_connection`` requests per connection; closes on the next."""

    def __init__(self, answers_per_connection: int, reset: bool = False) -> None:
        self.reset = reset  # close with a reset (RST), as a kernel does with unread data
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.per_connection = answers_per_connection
        self.seen: list[tuple[int, str]] = []  # (connection number, request line)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        n = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            n += 1
            # The reader holds the socket open: close both, or the client waits forever.
            with conn, conn.makefile("rb") as f:
                for answered in range(self.per_connection + 1):
                    line = f.readline().decode().strip()
                    if not line:
                        break
                    length = 0
                    while (header := f.readline().strip()) != b"":
                        name, _, value = header.decode().partition(":")
                        if name.lower() == "content-length":
                            length = int(value)
                    body = f.read(length).decode() if length else ""
                    self.seen.append((n, f"{line} {body}".strip()))
                    if answered == self.per_connection:
                        if self.reset:  # linger 0: close() sends RST, not FIN
                            conn.setsockopt(
                                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                            )
                        break  # closed without a response
                    text = f"ok {len(self.seen)}".encode()
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                        b"Connection: keep-alive\r\n\r\n%s" % (len(text), text)
                    )

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(params=[False, True], ids=["closed", "reset"])
def server(request):
    # "reset": the server's kernel answers the request that arrived as the server closed the
    # connection with RST ("Connection reset by peer", seen in CI in the sentiment
    # concurrency test), not FIN ("Server disconnected without sending a response").
    s = _ClosingServer(answers_per_connection=1, reset=request.param)
    yield s
    s.close()


def test_a_request_the_server_closed_unanswered_is_sent_again_on_a_new_connection(server):
    transport = HttpTransport(server.url)
    try:
        assert transport.request("GET", "/a", None) == (200, None, "ok 1")
        # Same kept-alive connection: the server reads the POST and closes it unanswered.
        status, _, text = transport.request("POST", "/b", {"choice": "left"})
    finally:
        transport.close()
    assert (status, text) == (200, "ok 3")
    assert server.seen == [
        (1, "GET /a HTTP/1.1"),
        (1, "POST /b HTTP/1.1 choice=left"),
        (2, "POST /b HTTP/1.1 choice=left"),  # once more, on a new connection
    ]


@pytest.mark.parametrize("reset", [False, True], ids=["closed", "reset"])
def test_a_server_that_never_answers_is_still_an_error(reset):
    import httpx

    s = _ClosingServer(answers_per_connection=0, reset=reset)
    transport = HttpTransport(s.url)
    try:
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
            transport.request("GET", "/a", None)
    finally:
        transport.close()
        s.close()
    assert [n for n, _ in s.seen] == [1, 2]  # one retry, not a loop
