"""The environment variables that stand in for keys given by flag (a key on the command line
is visible to every process on the machine)."""

from __future__ import annotations

#: The rollout servers' bearer: `serve --api-key`, `eval --server-api-key`.
SERVER_API_KEY_ENV = "OSMOSIS_ROLLOUT_SERVER_API_KEY"
#: The key of the `eval --chat-url` server.
LLM_API_KEY_ENV = "ROLLOUT_LLM_API_KEY"
