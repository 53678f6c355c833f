"""Fuzz soak (issue 12 items 2, 3 and 8): a few thousand malformed A2A requests against a real
`devagent serve`, checked from outside.

Requests are generated with hypothesis's strategies from tests/a2a/test_fuzz.py (A2A-shaped
requests with wrong types and values, any JSON, cut JSON, random bytes), plus big bodies (over
the body limit, and just under it with deep nesting) to see whether memory comes back after a
refusal. Printed:

- requests sent, and how many got HTTP 5xx;
- answers that are not a JSON-RPC response with a proper error object (or a result);
- answers whose error leaks internals (Traceback, pydantic, sqlalchemy, /src/, `SomethingError:`);
- whether the process is alive at the end (and answers a real request);
- the server's RSS at the start, after the big bodies, and at the end.

    .venv/bin/python bench/fuzz_soak.py [--requests 3000] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOKEN = "soak-token"
LEAK = re.compile(
    r"Traceback|pydantic|sqlalchemy|/src/|site-packages|\b[A-Z][A-Za-z]*(?:Error|Exception)\b:"
    r"|\b(?:KeyError|TypeError|ValueError|AttributeError|IndexError|RecursionError)\b"
)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def bodies(n: int, seed: int) -> list[bytes]:
    """`n` generated bodies (hypothesis strategies drawn with a fixed seed)."""
    import random

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from tests.a2a.test_fuzz import body

    out: list[bytes] = []

    @settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        phases=[__import__("hypothesis").Phase.generate],
    )
    @given(raw=body, r=st.randoms(use_true_random=False))
    def collect(raw: bytes, r: random.Random) -> None:
        out.append(raw)

    random.seed(seed)
    collect()
    return out


def classify(r: httpx.Response) -> tuple[bool, bool]:
    """(a proper JSON-RPC answer, no leak)."""
    ctype = r.headers.get("content-type", "")
    try:
        if ctype.startswith("text/event-stream"):
            frames = [json.loads(ln[5:]) for ln in r.text.splitlines() if ln.startswith("data:")]
        else:
            frames = [r.json()]
    except ValueError:
        return False, not LEAK.search(r.text)
    proper, clean = bool(frames), True
    for f in frames:
        if not isinstance(f, dict) or f.get("jsonrpc") != "2.0" or ("result" in f) == ("error" in f):
            proper = False
            continue
        if "error" in f:
            err = f["error"]
            if not (
                isinstance(err, dict)
                and isinstance(err.get("code"), int)
                and isinstance(err.get("message"), str)
            ):
                proper = False
            if LEAK.search(json.dumps(err)):
                clean = False
    return proper, clean


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="fuzz-soak-"))
    ws = tmp / "ws"
    ws.mkdir()
    script = tmp / "script.json"
    script.write_text(json.dumps({"steps": [{"items": [{"text": "ok"}]}] * 20000}))
    env = dict(os.environ, PYTHONUNBUFFERED="1", DEVAGENT_DATA_DIR=str(tmp / "data"))
    cmd = [
        sys.executable,
        "-m",
        "devagent",
        "serve",
        "--port",
        "0",
        "--db",
        f"sqlite+aiosqlite:///{tmp}/db.sqlite",
    ]
    cmd += [
        "--workspace-root",
        str(ws),
        "--token",
        TOKEN,
        "--model",
        f"scripted:{script}",
        "--approval",
        "yolo",
    ]
    log = tmp / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)  # noqa: ASYNC220
    url = ""
    deadline = time.monotonic() + 180
    while not url:
        m = re.search(r"listening on (http://\S+)", log.read_text(errors="replace"))
        if m:
            url = m.group(1).rstrip("/") + "/"
        elif proc.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"devagent serve did not start:\n{log.read_text(errors='replace')[-3000:]}")
        else:
            await asyncio.sleep(0.2)
    print(f"generating {args.requests} bodies ...", file=sys.stderr)
    generated = bodies(args.requests, args.seed)
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    counts = {"sent": 0, "5xx": 0, "non_jsonrpc": 0, "leaks": 0, "transport_errors": 0}
    samples: dict[str, list[str]] = {"5xx": [], "non_jsonrpc": [], "leaks": []}
    async with httpx.AsyncClient(timeout=120) as c:
        await c.post(url, content=b"{}", headers=auth)  # the SDK and the core are loaded
        rss_start = rss_mb(proc.pid)
        started = time.monotonic()
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        for raw in generated:
            queue.put_nowait(raw)

        async def worker(n: int) -> None:
            while not queue.empty():
                raw = queue.get_nowait()
                v1 = (counts["sent"] + n) % 2 == 1
                headers = dict(auth, **({"A2A-Version": "1.0"} if v1 else {}))
                counts["sent"] += 1
                try:
                    r = await c.post(url, content=raw, headers=headers)
                except httpx.HTTPError as e:
                    counts["transport_errors"] += 1
                    samples["5xx"].append(f"transport {e!r} for {raw[:200]!r}")
                    continue
                if r.status_code >= 500:
                    counts["5xx"] += 1
                    samples["5xx"].append(f"{r.status_code} {r.text[:200]} for {raw[:200]!r}")
                proper, clean = classify(r)
                if not proper:
                    counts["non_jsonrpc"] += 1
                    samples["non_jsonrpc"].append(f"{r.status_code} {r.text[:200]} for {raw[:200]!r}")
                if not clean:
                    counts["leaks"] += 1
                    samples["leaks"].append(f"{r.text[:300]} for {raw[:200]!r}")

        await asyncio.gather(*(worker(i) for i in range(args.concurrency)))
        fuzz_seconds = time.monotonic() - started
        rss_after_fuzz = rss_mb(proc.pid)

        # Big bodies: over the limit (refused unread), and 15 MiB of deep nesting (refused
        # before parsing); memory should come back.
        big_refusals = 0
        for _ in range(3):
            try:  # answered 413 before it is read; the server may close while we still send
                r = await c.post(url, content=b" " * (20 * 1024 * 1024), headers=auth)
                big_refusals += r.status_code == 413
            except httpx.HTTPError:
                big_refusals += 1
            n = 7 * 1024 * 1024
            r = await c.post(url, content=b"[" * n + b"]" * n, headers=auth)
            big_refusals += r.status_code == 200 and r.json()["error"]["code"] == -32600
            counts["sent"] += 2
        await asyncio.sleep(1)
        rss_after_big = rss_mb(proc.pid)
        alive = proc.poll() is None
        real_ok = False
        if alive:
            msg = {
                "kind": "message",
                "messageId": "m-alive",
                "role": "user",
                "parts": [{"kind": "text", "text": "hi"}],
            }
            r = await c.post(
                url,
                json={"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": msg}},
                headers=auth,
            )
            real_ok = r.json().get("result", {}).get("status", {}).get("state") == "completed"
        rss_end = rss_mb(proc.pid) if alive else 0.0
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
    log_text = log.read_text(errors="replace")
    refs = len(re.findall(r"reference [0-9a-f]{12}", log_text))
    print(f"requests sent:              {counts['sent']} (6 big; {args.requests} in {fuzz_seconds:.1f} s)")
    print(f"HTTP 5xx:                   {counts['5xx']}")
    print(f"transport errors:           {counts['transport_errors']}")
    print(f"non-JSON-RPC answers:       {counts['non_jsonrpc']}")
    print(f"answers leaking internals:  {counts['leaks']}")
    print(f"big bodies refused:         {big_refusals}/6")
    print(f"process alive:              {alive} (a real request afterwards completed: {real_ok})")
    rss = f"{rss_start:.0f} / {rss_after_fuzz:.0f} / {rss_after_big:.0f} / {rss_end:.0f} MB"
    print(f"RSS start / after fuzz / after big bodies / end: {rss}")
    print(f"RSS end / start:            {rss_end / rss_start:.2f}x" if rss_start else "")
    print(f"log lines naming a reference: {refs}")
    for kind, items in samples.items():
        for s in items[:3]:
            print(f"  sample {kind}: {s}")


if __name__ == "__main__":
    asyncio.run(main())
