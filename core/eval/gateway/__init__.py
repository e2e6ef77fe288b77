"""The gateway room: the model gateway a run's rollouts call the model through, and its upstreams.

Its door is `ModelGateway` (`model_gateway`): an OpenAI-compatible chat route on loopback,
behind the run's bearer, that forwards each call to the upstream the plan chose
(`upstream_choice`: an OpenAI-compatible URL, the stub model, or LiteLLM in
`litellm_upstream`), answers in the official shapes (`payloads`), keeps the reasoning a
provider attached to tool calls (`reasoning_memory`), and reports every call to the board and
to `calls.jsonl`. `asgi_app` is its HTTP side; `errors` its branch of the error tree.
"""
