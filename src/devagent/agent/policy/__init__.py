"""Approval policy: which calls run, which ask, and what an answer grants."""
