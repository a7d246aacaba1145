"""Stage 4, server: the graph shared over HTTP.

Takes in a built store; hands on a read-only SPARQL endpoint behind a guarding proxy (``serve``),
or the whole graph sent to a SPARQL 1.1 server (``publish``).
"""
