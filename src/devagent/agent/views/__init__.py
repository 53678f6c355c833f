"""Read models built from the stored conversation, for doors that show a session (the console, MCP,
replays).
"""
