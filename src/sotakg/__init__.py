"""sotakg: the ML engineering practices anthology as a knowledge graph."""

__version__ = "0.2.0"
