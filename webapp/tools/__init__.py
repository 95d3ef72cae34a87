"""Tools a reply may call: the built-in ones (``calculator``, ``clock``) and those of MCP servers.

``ToolBox`` (toolbox.py) is the one object the routes and the engines' tool loop use. Importing this package
imports nothing of the MCP SDK: that happens only once a server is configured (mcp_client.py).
"""
