"""specchat's OpenAI-compatible API (``/v1``): requests checked into typed objects, replies in OpenAI's shapes,
and the one model shared with the page's tabs in arrival order."""
