"""What the tests drive specchat with: servers in a thread or a subprocess, protocol clients, fake peers and
hubs, the browser, and the one poll helper. The fixtures built on them are in tests/conftest.py."""
