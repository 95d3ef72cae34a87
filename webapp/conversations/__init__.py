"""Conversations that outlive a dropped socket and a restart: the SQLite store, the context window, the reply
frames, and export and import."""
