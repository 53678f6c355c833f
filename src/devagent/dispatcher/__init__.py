"""`devagent dispatcher`: gives each session of a worker pool that waits for a sandbox a pod of its
own through kubernetes-sigs/agent-sandbox (a SandboxClaim on a SandboxWarmPool), whose
`devagent worker` serves that one session and connects back to the server like any worker. It
holds the only long-lived credentials of the path (its dispatcher's token and its service account);
each pod gets a token for its session alone. It talks to the server over the workers' protocol
(a2a/dispatch_routes.py) and to the Kubernetes API over HTTPS (kube.py); it reads no database."""
