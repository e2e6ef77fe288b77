"""Two runs side by side: what changed between them, work item by work item, and whether the
change is more than noise.

`outcomes` says what one finished work item came to and classes a pair of them (regressed,
improved, ...); `compared_run` reads what a run folder holds for a comparison (ours or the
official tool's); `comparison` pairs two runs' items by (source row, attempt), with the rows'
content checked, and counts them; `statistics` holds the paired interval and test;
`text_report` says it all in lines. Nothing here loads an HTTP stack, and only the
statistics load numpy and scipy.
"""
