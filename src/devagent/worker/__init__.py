"""`devagent worker`: a process on any machine that connects out to a devagent server (HTTP(S),
no inbound port, no database), holds sessions' sandboxes under leases the server grants, and runs
their tool calls with its own backend (local bubblewrap or a container). It carries calls only:
the sandboxes are the core's (agent/sandbox/hosted.py), the protocol the server's
(a2a/worker_routes.py)."""
