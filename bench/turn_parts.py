"""Where a tool turn's server CPU goes (issue 39 item 7): the same tool turn (the model asks for
`write_file`, then answers in text after the result) measured four ways in one run, CPU per turn:

- devagent serve on the fake OpenAI-compatible model (bench/provider_floor.py): the figure
  bench/a2a_overhead.py compares with the floor;
- devagent serve on a scripted model playing the same two steps: the same turn without the two
  model requests (no HTTP client, OpenAI SDK or pydantic-ai provider path);
- the core alone in this process (`AgentCore`, a session's `advance`, no A2A door), scripted model;
- the floor (a bare a2a-sdk agent, no model) emitting as many events as devagent's turn.

The differences say what each layer costs: the model requests (server, fake model - server,
scripted), the A2A door (server - core, on the scripted model), the core's own work (core,
scripted: the session, the tool run with its checkpoint, the store's writes). `--rounds` rounds,
servers measured in turn within a round; medians and ranges over the rounds.

    .venv/bin/python bench/turn_parts.py [--seq 40] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import provider_floor as pf

# the fake model's tool turn (provider_floor.serve_openai) as a script: a text, the call, then text
SCRIPT = {
    "steps": [
        {
            "items": [
                {"text": "Writing it."},
                # a new file each turn, as the fake model writes (the prompts differ): the same
                # path again would be refused, the new conversation not having read it
                {
                    "tool_call": {
                        "name": "write_file",
                        "args": {"path": "out/{last_user}.txt", "content": "x\n"},
                    }
                },
                {"usage": {"input_tokens": 40, "output_tokens": 9}},
            ]
        },
        {"items": [{"text": "The file is written."}, {"usage": {"input_tokens": 40, "output_tokens": 9}}]},
    ]
}


async def core_turns(run: pf.Run, model: str, turns: int) -> float:
    """CPU ms per tool turn of the core alone, in this process (each turn a new session): this
    process's CPU, which the idle client and the servers' pipes barely add to."""
    from devagent.agent.api import AgentCore, CoreConfig, TurnEnd, UserPrompt

    name = model.split(":")[0]
    cfg = CoreConfig(
        db_url=f"sqlite:///{run.tmp / f'core-{name}.db'}",
        default_model=model,
        approval_mode="yolo",
        data_dir=run.tmp / f"core-{name}-data",
    )
    core = await AgentCore.open(cfg)
    try:

        async def turn(i: int) -> None:
            session = await core.create_session([run.ws], approval_mode="yolo")
            prompt = f"tool core {i} {uuid.uuid4().hex[:6]}"  # a new file each turn (SCRIPT)
            events = [e async for e in session.advance(UserPrompt(prompt))]
            end = events[-1]
            if not (isinstance(end, TurnEnd) and end.reason == "finished"):
                raise RuntimeError(f"the core's turn ended with {end!r}")

        for i in range(5):
            await turn(i)
        t0 = time.process_time()
        for i in range(turns):
            await turn(i)
        return (time.process_time() - t0) / turns * 1000
    finally:
        await core.close()


async def main(args: argparse.Namespace) -> None:
    import httpx

    load = os.getloadavg()[0]
    async with pf.bench_run("") as run:
        script = run.tmp / "tool-turn.json"
        script.write_text(json.dumps(SCRIPT))
        fake = pf.Server(pf.devagent_command(run), run.env, run.tmp / "dev-fake.log")
        run.procs.append(fake)
        cmd = pf.devagent_command(run)
        cmd[cmd.index("--model") + 1] = f"scripted:{script}"
        cmd[cmd.index("--db") + 1] = f"sqlite:///{run.tmp / 'scripted.db'}"
        scripted = pf.Server(cmd, run.env, run.tmp / "dev-scripted.log")
        run.procs.append(scripted)
        await fake.ready()
        await scripted.ready()
        async with httpx.AsyncClient(timeout=600) as c:
            events = (await pf.sequential(c, fake, "tool", 2))["events"]
            floor = pf.bare_server(run.tmp, events, events)
            run.procs.append(floor)
            await floor.ready()
            servers = {"server, fake model": fake, "server, scripted model": scripted, "floor": floor}
            labels = [*servers, "core, scripted model"]
            cpu: dict[str, list[float]] = {k: [] for k in labels}
            for _ in range(args.rounds):
                for label, srv in servers.items():
                    cpu[label].append((await pf.sequential(c, srv, "tool", args.seq))["cpu"])
                cpu["core, scripted model"].append(await core_turns(run, f"scripted:{script}", args.seq))
    report(cpu, args, load)


def report(cpu: dict[str, list[float]], args: argparse.Namespace, load: float) -> None:
    med = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"tool turn, CPU ms per turn: {args.rounds} rounds of {args.seq} turns; load {load:.1f}")
    for label, values in cpu.items():
        spread = f"{min(values):.1f}-{max(values):.1f}"
        print(f"  {label:26}{med[label]:8.2f}  ({spread}; {med[label] / med['floor']:.2f}x the floor)")
    parts = {
        "two model requests (server: fake - scripted)": med["server, fake model"]
        - med["server, scripted model"],
        "A2A door (server - core, scripted)": med["server, scripted model"] - med["core, scripted model"],
        "the core's own work (core, scripted)": med["core, scripted model"],
    }
    print("what the devagent server's tool turn is made of (medians):")
    for label, ms in parts.items():
        print(f"  {label:46}{ms:8.2f} ms")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=40, help="sequential tool turns per server and round")
    ap.add_argument("--rounds", type=int, default=3)
    asyncio.run(main(ap.parse_args()))
