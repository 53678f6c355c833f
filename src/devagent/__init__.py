"""devagent: an open, self-hostable coding agent driven through open protocols."""

__version__ = "0.1.0"
