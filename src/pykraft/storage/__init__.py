"""Storage formatting, pure: meta.properties (v0/v1/v2), the log-dir ensemble, format semantics (KIP-1262).

Text in, text out; the shell (``pykraft.io.meta_properties_files``) reads and writes the files.
"""
