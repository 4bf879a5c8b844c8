"""The package's version (also `placement_gym.__version__`); a module of its own so that any layer
can read it without importing the package's facade, which imports every layer."""

__version__ = "0.1.0"
