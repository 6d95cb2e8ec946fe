"""The package's small utilities, each used across the floors and knowing no benchmark: `typecheck`
(a JSON document checked against a type, one line naming the file and the field), `jsonl` (JSON
Lines read and written whole), `outfolder` (an output folder built beside its place and moved in
whole), `keyvalue` (`key=value,...` arguments) and `extras` (an optional dependency, or the line
that says how to install it).
"""
