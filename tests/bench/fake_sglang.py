"""A stand-in for SGLang's ``/generate`` (our own, for the load generator's tests).

    python fake_sglang.py PORT TOKEN_S

Answers ``input_ids`` requests with ``max_new_tokens`` tokens (last + 1, last + 2, ...), one
every TOKEN_S seconds per request, streamed as SGLang streams them (``data: {...}`` chunks at
the first token, every ``stream_interval``-th and the last, then ``data: [DONE]``) or whole.
``GET /stats`` tells the most requests it held at once (and the batch calls). A batch of
token-id prompts is answered at once, when its longest is done. ``POST /freeze_gc`` is answered
as SGLang answers it, and said on stdout with the requests served before it. Prints ``ready``
when listening.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATS = {"running": 0, "most": 0, "requests": 0}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else a 40 ms delayed ACK between headers and body
    token_s = 0.001

    def log_message(self, *args):
        pass

    def handle(self):
        try:
            super().handle()
        except ConnectionResetError:  # a cancelled request's connection, closed by the client
            pass

    def send(self, status, payload, kind="application/json"):
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        with LOCK:
            self.send(200, dict(STATS))

    def do_POST(self):
        if self.path == "/freeze_gc":  # SGLang's answer; said on stdout (the server's log)
            print(f"freeze_gc after {STATS['requests']} requests", flush=True)
            return self.send(200, b"Garbage collection frozen.\n", "text/plain")
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if req["input_ids"] and isinstance(req["input_ids"][0], list):  # a batch: all at once
            return self.batch(req["input_ids"], req["sampling_params"])
        params = req["sampling_params"]
        n, every = params["max_new_tokens"], params.get("stream_interval") or 1
        with LOCK:
            STATS["running"] += 1
            STATS["requests"] += 1
            STATS["most"] = max(STATS["most"], STATS["running"])
        try:
            self.answer(req["input_ids"][-1], n, every, req.get("stream"))
        except (BrokenPipeError, ConnectionResetError):  # the client cancelled it
            pass
        finally:
            with LOCK:
                STATS["running"] -= 1

    def batch(self, prompts, params):
        lengths = [p["max_new_tokens"] for p in params]
        with LOCK:
            STATS["requests"] += 1
            STATS["batches"] = STATS.get("batches", 0) + 1
        time.sleep(max(lengths) * self.token_s)  # decoded together, done with the longest
        meta = [{"completion_tokens": n, "spec_verify_ct": (n + 1) // 2} for n in lengths]
        ids = [
            [ids[-1] + i for i in range(1, n + 1)] for ids, n in zip(prompts, lengths, strict=True)
        ]
        self.send(200, [{"output_ids": o, "meta_info": m} for o, m in zip(ids, meta, strict=True)])

    def answer(self, last, n, every, stream):
        def chunk(k):
            ids = [last + i for i in range(1, k + 1)]
            meta = {"completion_tokens": k, "spec_verify_ct": (k + 1) // 2}
            return {"output_ids": ids, "meta_info": meta}

        if not stream:
            time.sleep(n * self.token_s)
            self.send(200, chunk(n))
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for k in range(1, n + 1):
            time.sleep(self.token_s)
            if k == n or k % every == 1 or every == 1:
                self.write_chunk(b"data: " + json.dumps(chunk(k)).encode() + b"\n\n")
        self.write_chunk(b"data: [DONE]\n\n")
        self.write_chunk(b"")

    def write_chunk(self, data):
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def main():
    port, Handler.token_s = int(sys.argv[1]), float(sys.argv[2])
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.request_queue_size = 512
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
