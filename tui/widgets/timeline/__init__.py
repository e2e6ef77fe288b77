"""The run timeline (`w`): a run's time line (`core.eval.timeline`) drawn on the Line API, with
a cursor in time that the rollout table follows."""
