"""Subagents: the task tool's child sessions, their types, and remote A2A agents."""
