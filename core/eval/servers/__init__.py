"""The servers room: the rollout servers a run drives, and the ones it starts itself.

Its door is `ServerPool` (`pool`): every server's capacity and health, and which one gets the
next rollout. A workspace's own server is started by `launcher` (its environment prepared as a
uv project, `uv_project`) under the guard of `lifeline`, so it dies with the eval; `fd_budget`
says how many rollouts in flight this process has descriptors for. `embedded` is the one door
from the eval engine to `server_stub`: the zero-setup demo's server and stub model.
"""
