"""The cost room: what a model call costs (`price`), and what the run has spent, will spend
and may spend (`spend`)."""
