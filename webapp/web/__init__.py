"""The web layer: REST routes, the chat page, the websocket and one tab's session on it, the protocol's frame
models, the Origin and token checks, and the waitress server with its websocket hand-off."""
