"""The subcommands of `osmosis-tui`, a module or two each: their flags, and what they run.

The command line itself (the top-level parser, the output flags accepted anywhere, exit
statuses) is `tui.cli`; it registers each subcommand's parser from here.
"""
