"""A local HTTP server standing in for a provider: the real SDKs reach it via base_url."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx2

Handler = Callable[[httpx2.Request], httpx2.Response]


@contextmanager
def serve(handler: Handler) -> Iterator[str]:
    """Serve `handler` on 127.0.0.1; yields the base URL."""

    class Bridge(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            request = httpx2.Request("POST", f"http://fake{self.path}", content=body)
            response = handler(request)
            payload = response.content
            self.send_response(response.status_code)
            for key, value in response.headers.items():
                if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(key, value)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            return  # keep test output quiet

    server = ThreadingHTTPServer(("127.0.0.1", 0), Bridge)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def anthropic_reply(turn: int, content: list[dict[str, Any]], stop: str) -> httpx2.Response:
    """A Messages API response."""
    return httpx2.Response(
        200,
        json={
            "id": f"msg_{turn}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-fake",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 2000, "output_tokens": 400},
        },
    )


def proposals_json(texts: list[str]) -> str:
    """A researcher/inspector answer in the requested format."""
    return json.dumps(
        {
            "proposals": [
                {"text": t, "rationale": "seen", "judgments": [4, 4, 3, 5, 4]} for t in texts
            ]
        }
    )
