"""The prompt: the system prompt's parts (per model family), the workspace's environment and guides,
and how tools are worded.
"""
