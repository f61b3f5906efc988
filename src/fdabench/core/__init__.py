"""Foundations every layer may use: errors, the name -> class registries, atomic file I/O, where every file lives,
method families, device placement and plugins."""
