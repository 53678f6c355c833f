"""The sandbox: where a session's commands run and how they see its files.

`base.py` is the interface (a session's `Sandbox`, the core's `SandboxProvider`); `local.py` the
bubblewrap backend on the server's own host, `container.py` one container per session through
Podman or Docker (`podman.py` the engine, `pool.py` the warm pool), `none.py` commands run directly
(`sandbox = off`) or refused (the sandbox is on but cannot run here). `choose.py` turns the settings
into a provider, `probe.py` finds out whether bubblewrap works here, `spawn.py` starts a process in
its own group with its standard streams wired, `groups.py` stops such a group, `files.py` the
host's file operations confined to the workspace roots; `childenv.py` the clean environment every
child gets, `gitguard.py` git's configuration neutralised under a grant. `AgentCore` owns the
provider and hands each session's sandbox to its tools, hooks, checkers, background processes and
prompt."""
