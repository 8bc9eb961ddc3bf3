"""Shared pytest configuration.

Test helpers are importable as ``tests.<folder>.<module>`` (``pythonpath = ["."]``).
"""

from __future__ import annotations
