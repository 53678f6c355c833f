"""The agent core. It knows no protocol: see `devagent.agent.core` and `devagent.agent.events`."""
