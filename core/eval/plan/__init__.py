"""The plan room: an eval's inputs (flags, config, dataset, secrets) turned into a checked plan.

Its door is `prepare` (`core.eval.plan.prepare`): everything the run needs is read and
checked there, and every problem is reported at once, before a results folder exists. The
modules behind it read one input each: the config (`config`, with `toml_source` for where a
value stands), the dataset (`dataset`, `dataset_files`) and the secrets (`secret_values`).
"""
