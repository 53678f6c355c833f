"""A session's conversation as stored: the transcript and the stored forms of its pieces."""
