"""What a key does when it takes more than one step: ask (a modal screen), act through the
board or the source in a worker, and report the outcome in the event log. One module per
flow: cancel on the server, submit by hand (new, re-run), quit, steer the dispatch (pause,
max-in-flight, requeue), play a replay back."""
