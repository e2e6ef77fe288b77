"""Two runs side by side: what changed between them, work item by work item, and whether the
change is more than noise.

`outcomes` says what one finished work item came to and classes a pair of them (regressed,
improved, ...); `compared_run` reads what a run folder holds for a comparison (ours or the
official tool's); `comparison` pairs two runs' items by (source row, attempt), with the rows'
content checked, and counts them; `statistics` holds the paired interval and test;
`text_report` says it all in lines; `baseline` is what a live run (`eval --baseline`) keeps
of the run it is compared with, and its tally against it. Nothing here loads an HTTP stack,
and only the statistics load numpy.
"""
