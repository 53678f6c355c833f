"""The turn loop: a turn's admission and lease, its model steps and tool calls, checkpoints, limits,
compaction, and the driver doors run it through.
"""
