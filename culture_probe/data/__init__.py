"""The data layer: one `datasets` builder per benchmark, found by `culture_probe.data.registry`."""

from pkgutil import extend_path

# Benchmarks of your own, outside this checkout: a folder on sys.path holding culture_probe/data/<bench>.py and
# culture_probe/tasks/<bench>.py extends these packages (docs/adding-a-benchmark.md).
__path__ = extend_path(__path__, __name__)
