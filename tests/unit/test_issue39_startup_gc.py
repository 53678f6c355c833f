"""The cyclic garbage collector during a process's start (devagent/common/startup_gc.py, issue 39
item 7: start-up and turn CPU): off from the entry point until the process is settled, then on with
what was alive frozen; never off for long. Each case runs in a fresh interpreter: the collector's
state is the process's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, env: dict[str, str] | None = None) -> dict[str, object]:
    """`code` in a new interpreter (it prints one JSON line last); what it printed."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})},
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_issue39_item7_collector_off_until_settled_then_on_with_the_start_frozen() -> None:
    seen = _run(
        """
        import gc, json
        from devagent.common import startup_gc
        startup_gc.quiet()
        off = not gc.isenabled() and startup_gc.quieted()
        startup_gc.quiet()  # a second call changes nothing
        startup_gc.settled()
        frozen = gc.get_freeze_count()
        on = gc.isenabled() and not startup_gc.quieted()
        startup_gc.settled()  # nor a second settle: nothing is frozen again
        print(json.dumps({"off": off, "on": on, "frozen": frozen, "again": gc.get_freeze_count()}))
        """
    )
    assert seen["off"] is True and seen["on"] is True
    assert isinstance(seen["frozen"], int) and seen["frozen"] > 1000, seen
    assert seen["again"] == seen["frozen"]


def test_issue39_item7_a_process_never_settled_gets_its_collector_back_from_the_timer() -> None:
    seen = _run(
        """
        import gc, json, threading
        from devagent.common import startup_gc
        startup_gc.SETTLE_WITHIN = 0.05
        startup_gc.quiet()
        timer = next(t for t in threading.enumerate() if t.name == "devagent-gc-settle")
        timer.join(60)  # the timer's own end, not a sleep
        print(json.dumps({"on": gc.isenabled(), "quieted": startup_gc.quieted(),
                          "frozen": gc.get_freeze_count() > 0, "daemon": timer.daemon}))
        """
    )
    assert seen == {"on": True, "quieted": False, "frozen": True, "daemon": True}


def test_issue39_item7_a_collector_the_program_turned_off_is_left_off() -> None:
    seen = _run(
        """
        import gc, json
        from devagent.common import startup_gc
        gc.disable()
        startup_gc.quiet()
        startup_gc.settled()
        print(json.dumps({"on": gc.isenabled(), "frozen": gc.get_freeze_count()}))
        """
    )
    assert seen == {"on": False, "frozen": 0}


def test_issue39_item7_the_entry_point_quiets_the_collector() -> None:
    """`devagent` itself: a short command runs with the collector off (its timer pending)."""
    seen = _run(
        """
        import gc, json, sys
        sys.argv = ["devagent", "--version"]
        from devagent import cli
        from devagent.common import startup_gc
        try:
            cli.main()
        except SystemExit:
            pass
        print(json.dumps({"on": gc.isenabled(), "quieted": startup_gc.quieted()}))
        """
    )
    assert seen == {"on": False, "quieted": True}


def test_issue39_item7_the_a2a_server_settles_the_collector_once_loaded(tmp_path: Path) -> None:
    """The A2A server's start (its app built, then the model layer loaded off the loop) turns the
    collector on again itself: the timer is put out of reach, so only the server can."""
    seen = _run(
        f"""
        import asyncio, gc, json
        from devagent.common import startup_gc
        startup_gc.SETTLE_WITHIN = 3600.0
        startup_gc.quiet()
        from devagent.a2a.server import BootApp
        from devagent.a2a.settings import A2ASettings
        from devagent.agent.settings import CoreConfig

        async def main():
            cfg = CoreConfig(db_url="sqlite:///{tmp_path}/d.db", data_dir={str(tmp_path / "data")!r})
            boot = BootApp(cfg, A2ASettings(host="127.0.0.1", port=1234, tokens={{"t": "u"}}), "1")
            inbox = asyncio.Queue()
            await inbox.put({{"type": "lifespan.startup"}})
            outbox = asyncio.Queue()
            lifespan = asyncio.create_task(boot({{"type": "lifespan"}}, inbox.get, outbox.put))
            assert (await outbox.get())["type"] == "lifespan.startup.complete"
            await boot.loaded.wait()
            for _ in range(2400):  # the model layer loads in a thread after the app: up to 120 s
                if not startup_gc.quieted():
                    break
                await asyncio.sleep(0.05)
            seen = {{"failure": repr(boot.failure), "on": gc.isenabled(),
                    "frozen": gc.get_freeze_count() > 100_000}}
            await inbox.put({{"type": "lifespan.shutdown"}})
            await lifespan
            print(json.dumps(seen))

        asyncio.run(main())
        """
    )
    assert seen == {"failure": "None", "on": True, "frozen": True}
