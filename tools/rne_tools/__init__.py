"""Tooling library of react-native-executorch.

The CLIs in ``tools/*.py`` are thin click wrappers over this package:

- ``registry``: the model registry (``model-registry/*.yaml``): load, validate, generate TypeScript.
"""
