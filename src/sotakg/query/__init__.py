"""Stage 3, query: SPARQL over the graph, embedded or remote.

Takes in a store (or an endpoint URL) and query text; checks the text, runs it in a worker or on the
endpoint, and hands on typed results, their formats, the canned queries and ``why``'s provenance.
"""
