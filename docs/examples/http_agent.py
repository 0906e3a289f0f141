#!/usr/bin/env python3
"""A triggerd HTTP agent in plain Python (standard library only).

triggerd POSTs each run here, signed the Standard Webhooks way. The agent
checks the signature on the raw body, skips runs it has already done, does
its work, and answers 200 with a result that triggerd records on the run.

    AGENT_SECRET=whsec_... PORT=8081 python3 docs/examples/http_agent.py

PORT=0 picks a free port. The first line on stdout names the URL.
"""

import base64
import hashlib
import hmac
import json
import os
import time
from datetime import datetime, timezone
from http.server import HTTPServer, BaseHTTPRequestHandler

SECRET = os.environ["AGENT_SECRET"]
KEY = base64.b64decode(SECRET.removeprefix("whsec_"))
TOLERANCE = 5 * 60  # seconds, as triggerd's own agent library
MAX_BODY = 16 << 20  # a run carries one event, under 8 MiB of payload

done = {}  # run id -> the answer already given; keep it in a store in production


def verify(headers, body):
    """Return the run id if the signature holds, else None."""
    msg_id = headers.get("webhook-id", "")
    ts = headers.get("webhook-timestamp", "")
    sigs = headers.get("webhook-signature", "")
    if not msg_id or not ts.isdigit() or abs(time.time() - int(ts)) > TOLERANCE:
        return None
    mac = hmac.new(KEY, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256)
    want = "v1," + base64.b64encode(mac.digest()).decode()
    if any(hmac.compare_digest(want, s) for s in sigs.split()):
        return msg_id
    return None


def work(run):
    """The agent's job. Return output (any JSON) or raise to be retried."""
    event = run["event"]
    return {"seen": event["kind"], "title": (event.get("resource") or {}).get("title")}


class Agent(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("content-length", 0))
        if length > MAX_BODY:
            return self.answer(413, {"error": "run too large"})
        body = self.rfile.read(length)
        run_id = verify(self.headers, body)
        if run_id is None:
            return self.answer(401, {"error": "bad signature"})  # 4xx: not retried
        run = json.loads(body)
        if run.get("id") != run_id:
            return self.answer(400, {"error": "run id does not match webhook-id"})
        if run_id in done:  # a redelivery: same run id, do not act twice
            return self.answer(200, done[run_id])
        try:
            output = work(run)
        except Exception as e:  # 5xx: triggerd sends the run again later
            return self.answer(500, {"error": str(e)})
        result = {
            "run_id": run_id,
            "agent": run["agent"],
            "status": "succeeded",  # or "failed", with "error": "why"
            "output": output,
            "finished_at": datetime.now(timezone.utc).isoformat(),
        }
        done[run_id] = result
        self.answer(200, result)

    def answer(self, status, doc):
        out = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, fmt, *args):  # never log bodies: they hold payloads
        pass


if __name__ == "__main__":
    server = HTTPServer(("127.0.0.1", int(os.environ.get("PORT", "8081"))), Agent)
    print(f"listening on http://127.0.0.1:{server.server_port}/", flush=True)
    server.serve_forever()
