"""An example dpmmbench plugin: the sampler ``mh-single-site`` and the dataset ``ring-blobs``.

Nothing here is imported by dpmmbench itself: the suite finds both through the entry points
declared in this package's ``pyproject.toml``.
"""
