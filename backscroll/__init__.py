"""Backscroll: authorized search over the history of conversations between people and AI agents."""

__version__ = "0.1.0"
