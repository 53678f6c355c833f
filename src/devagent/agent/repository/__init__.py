"""Sessions whose workspace is cloned from a repository at a ref, and whose result is a patch or a
branch pushed to that repository: the operator's allow-list and credentials (remotes.py), the
clone (clone.py), the setup script (setup.py), the result (results.py), git run hermetic (git.py)."""
