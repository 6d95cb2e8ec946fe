"""The data layer: one `datasets` builder per benchmark, found by `culture_probe.data.registry`."""
