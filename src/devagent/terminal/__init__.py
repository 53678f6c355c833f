"""The interactive terminal (`devagent chat`): a prompt_toolkit REPL that renders core events with Rich.

One event model: the renderer and the REPL consume the core's own events
(`devagent.agent.events`), fed by a `Backend`: `LocalBackend` drives a core session in this
process, `RemoteBackend` (`remote.py`) is an A2A client of a `devagent serve` speaking the
development-tool extension and translates its updates back into those events. So local and
remote sessions look and answer alike.

prompt_toolkit is imported only by `repl.py`, which only `devagent chat` loads: other commands'
cold start does not pay for it.
"""
