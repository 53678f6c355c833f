"""Where commands run: the sandbox, the clean environment every child gets, and git's neutralised
configuration.
"""
