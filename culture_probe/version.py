"""The library's version, in a module of its own: the front door (`culture_probe`) imports it, and
so does every module that records it, without importing the front door, whose typed names reach the
run layer.
"""

__version__ = "0.1.0"
