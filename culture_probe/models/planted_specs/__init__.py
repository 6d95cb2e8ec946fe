"""Each benchmark's planted spec in its own module (`xfakt`, `camel`, `maps`, `dlama`, `fmlama`; `ranking` is what
DLAMA and FmLAMA share): a `build(config, data_dir, options)` that makes the `PlantedSpec` of `planted:<config>`.
`culture_probe.models.planted_benchmarks` lists them, one row per benchmark, with the kind of model each trains.
"""
