"""Publishing on the Hugging Face Hub: the benchmarks as one dataset repository (`publish`:
`culture-probe push`) and the metric modules as Spaces that `evaluate.load` reads (`metric_spaces`,
through `culture-probe push-metrics`). A results board's Space is pushed by the board
(`culture_probe.board.command`), through `publish`'s upload.

Everything here uploads what a user chose to share: each file is read whole and checked first
(`culture_probe.sharing.check_upload`).
"""
